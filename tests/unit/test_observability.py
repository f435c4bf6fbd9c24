"""A worker's metrics and health endpoints, scraped over HTTP and parsed."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from workers.observability import Observability, PackFacts


def _get(port: int, path: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def _samples(body: bytes) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(body.decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


@pytest.fixture
def obs() -> Observability:
    now = [100.0]
    o = Observability(worker="test", clock=lambda: now[0], stale_after_s=30)
    o.now = now  # type: ignore[attr-defined]
    yield o
    o.close()


def test_metrics_are_scraped_and_parse(obs: Observability) -> None:
    port = obs.serve(0, host="127.0.0.1")
    obs.observe(
        "fused",
        0.012,
        ["ctx.packs.v1", "ctx.audit.v1"],
        packs=[PackFacts("live", 600, 700, {"budget": 3, "duplicate": 1}, withheld=1)],
    )
    obs.observe("fused", 0.002, ["ctx.deadletter.v1"], dead_letter_types=["InputError"])
    obs.set_lag("ctx.candidates.v1", 2, 17)
    obs.set_control(percent=5.0, killed=True, shadow=False, version=7)
    code, body = _get(port, "/metrics")
    assert code == 200
    s = _samples(body)
    assert s[("ctxbudget_records_in_total", (("stage", "fused"),))] == 2
    assert s[("ctxbudget_records_out_total", (("stage", "fused"), ("topic", "ctx.packs.v1")))] == 1
    assert s[("ctxbudget_handle_seconds_count", (("stage", "fused"),))] == 2
    assert s[("ctxbudget_candidates_dropped_total", (("lane", "live"), ("reason", "budget")))] == 3
    assert s[("ctxbudget_passages_withheld_total", (("lane", "live"),))] == 1
    assert s[("ctxbudget_pack_evidence_tokens_sum", (("lane", "live"),))] == 600
    assert (
        s[("ctxbudget_dead_letters_total", (("error_type", "InputError"), ("stage", "fused")))] == 1
    )
    assert s[("ctxbudget_consumer_lag", (("partition", "2"), ("topic", "ctx.candidates.v1")))] == 17
    assert s[("ctxbudget_control_killed", ())] == 1 and s[("ctxbudget_control_version", ())] == 7


def test_health_and_readiness(obs: Observability) -> None:
    port = obs.serve(0, host="127.0.0.1")
    assert _get(port, "/healthz")[0] == 200
    code, body = _get(port, "/readyz")
    assert code == 503 and b"consumer group not joined" in body and b"control state" in body
    obs.joined()
    obs.control_read()
    assert _get(port, "/readyz") == (200, b"ok\n")
    obs.now[0] += 31  # type: ignore[attr-defined]
    code, body = _get(port, "/healthz")
    assert code == 503 and b"silent" in body
    obs.tick()
    assert _get(port, "/healthz")[0] == 200
    assert _get(port, "/nope")[0] == 404


def test_registries_are_per_worker() -> None:
    a, b = Observability(worker="a"), Observability(worker="b")
    a.observe("route", 0.001, [])
    assert b'ctxbudget_records_in_total{stage="route"} 1.0' in a.exposition()
    assert b'stage="route"' not in b.exposition()


def test_the_container_healthcheck_asks_the_probes(
    obs: Observability, monkeypatch: pytest.MonkeyPatch
) -> None:
    from workers import healthcheck

    port = obs.serve(0, host="127.0.0.1")
    monkeypatch.setenv("CTXBUDGET_METRICS_PORT", str(port))
    assert healthcheck.main([]) == 1  # not ready yet
    assert healthcheck.main(["--live"]) == 0
    obs.joined()
    obs.control_read()
    assert healthcheck.main([]) == 0


def test_skipped_records_are_counted(obs: Observability) -> None:
    obs.skip("route", 3)
    assert b'ctxbudget_records_skipped_total{stage="route"} 3.0' in obs.exposition()
