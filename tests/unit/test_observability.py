"""A worker's metrics and health endpoints, scraped over HTTP and parsed."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ctxbudget.kafka.observability import (
    DEAD_LETTER_TYPES,
    DROP_REASONS,
    MetricsPortInUseError,
    Observability,
    PackFacts,
    check_port_free,
)


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
def obs() -> Iterator[Observability]:
    """An Observability on a hand-set clock (``obs.now[0]``), its server closed after."""
    now = [100.0]
    o = Observability(worker="test", clock=lambda: now[0], stale_after_s=30)
    o.now = now  # type: ignore[attr-defined]
    yield o
    o.close()


def test_metrics_are_scraped_and_parse(obs: Observability) -> None:
    """Every kind of series a worker reports reaches /metrics and parses."""
    port = obs.serve(0, host="127.0.0.1")
    obs.observe(
        "fused",
        0.012,
        ["ctx.packs.v1", "ctx.audit.v1"],
        packs=[PackFacts("live", 600, 700, {"budget": 3, "duplicate": 1}, withheld=1)],
    )
    obs.observe("fused", 0.002, ["ctx.deadletter.v1"], dead_letter_types=["InputError"])
    obs.broker_answered()  # lag is exported only while a broker answers
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
    """Readiness waits for the broker, the group and the control state; liveness for the loop."""
    port = obs.serve(0, host="127.0.0.1")
    assert _get(port, "/healthz")[0] == 200
    code, body = _get(port, "/readyz")
    assert code == 503 and b"consumer group not joined" in body and b"control state" in body
    assert b"no answer from the broker" in body
    obs.joined()
    obs.control_read()
    obs.broker_answered()
    assert _get(port, "/readyz") == (200, b"ok\n")
    obs.now[0] += 31  # type: ignore[attr-defined]
    code, body = _get(port, "/healthz")
    assert code == 503 and b"silent" in body
    obs.tick()
    assert _get(port, "/healthz")[0] == 200
    assert _get(port, "/nope")[0] == 404


def test_readiness_falls_once_the_broker_is_silent_for_its_window(obs: Observability) -> None:
    """No broker answer for longer than the window: not ready (gauges too); an answer mends it."""
    obs.joined()
    obs.control_read()
    obs.broker_answered()
    assert obs.ready() == (True, "ok")
    obs.now[0] += obs.broker_window_s  # type: ignore[attr-defined]
    obs.broker_failed("KafkaConnectionError: 111 ECONNREFUSED")
    assert obs.ready()[0]  # still within the window: one failed question is not an outage
    obs.now[0] += 1  # type: ignore[attr-defined]
    ok, why = obs.ready()
    assert not ok and "no answer from the broker for 16s (KafkaConnectionError" in why
    assert obs.alive() == (True, "ok")  # liveness never depends on the broker
    s = _samples(obs.exposition())
    assert s[("ctxbudget_worker_ready", ())] == 0 and s[("ctxbudget_broker_reachable", ())] == 0
    obs.broker_answered()
    s = _samples(obs.exposition())
    assert obs.ready() == (True, "ok")
    assert s[("ctxbudget_worker_ready", ())] == 1 and s[("ctxbudget_broker_reachable", ())] == 1


def test_every_known_counter_series_starts_at_zero(obs: Observability) -> None:
    """expect() exports the counters at 0, so increase() sees the first event."""
    obs.expect(
        ["fused"],
        outputs={"fused": ["ctx.packs.v1", "ctx.deadletter.v1"]},
        lanes=("live", "shadow"),
        skip_label="fused",
    )
    s = _samples(obs.exposition())
    for error_type in DEAD_LETTER_TYPES:
        key = (("error_type", error_type), ("stage", "fused"))
        assert s[("ctxbudget_dead_letters_total", key)] == 0
    for lane in ("live", "shadow"):
        for reason in DROP_REASONS:
            assert (
                s[("ctxbudget_candidates_dropped_total", (("lane", lane), ("reason", reason)))] == 0
            )
        assert s[("ctxbudget_passages_withheld_total", (("lane", lane),))] == 0
    assert s[("ctxbudget_records_skipped_total", (("stage", "fused"),))] == 0
    assert s[("ctxbudget_records_in_total", (("stage", "fused"),))] == 0
    topic = (("stage", "fused"), ("topic", "ctx.deadletter.v1"))
    assert s[("ctxbudget_records_out_total", topic)] == 0


def test_an_unknown_dead_letter_type_is_counted_as_other(obs: Observability) -> None:
    """The error_type label keeps to known values: anything else is "other"."""
    obs.observe("route", 0.001, [], dead_letter_types=["KeyError", "LimitError"])
    s = _samples(obs.exposition())
    assert s[("ctxbudget_dead_letters_total", (("error_type", "other"), ("stage", "route")))] == 1
    limit = (("error_type", "LimitError"), ("stage", "route"))
    assert s[("ctxbudget_dead_letters_total", limit)] == 1
    assert not any(labels == (("error_type", "KeyError"), ("stage", "route")) for _, labels in s)


def test_stale_lag_is_forgotten(obs: Observability) -> None:
    """Lag figures are not exported once no broker answers, nor after forget_lag()."""
    obs.broker_answered()
    obs.set_lag("ctx.candidates.v1", 0, 0)
    assert b"ctxbudget_consumer_lag{" in obs.exposition()
    obs.forget_lag()
    assert b"ctxbudget_consumer_lag{" not in obs.exposition()
    obs.set_lag("ctx.candidates.v1", 0, 3)
    obs.now[0] += obs.broker_window_s + 1  # type: ignore[attr-defined]
    assert b"ctxbudget_consumer_lag{" not in obs.exposition()


def test_a_taken_metrics_port_is_one_clear_error() -> None:
    """Serving on, or checking, a port another process holds raises MetricsPortInUseError."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        with pytest.raises(MetricsPortInUseError, match=f"metrics port {port} is in use"):
            check_port_free(port)
        taken = Observability(worker="t")
        with pytest.raises(MetricsPortInUseError, match="CTXBUDGET_METRICS_PORT"):
            taken.serve(port)
    check_port_free(port)  # released: free again


def test_registries_are_per_worker() -> None:
    """Two workers in one process do not share counters."""
    a, b = Observability(worker="a"), Observability(worker="b")
    a.observe("route", 0.001, [])
    assert b'ctxbudget_records_in_total{stage="route"} 1.0' in a.exposition()
    assert b'stage="route"' not in b.exposition()


def test_the_container_healthcheck_asks_the_probes(
    obs: Observability, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The container healthcheck answers with the worker's own probes."""
    from ctxbudget.kafka import healthcheck

    port = obs.serve(0, host="127.0.0.1")
    monkeypatch.setenv("CTXBUDGET_METRICS_PORT", str(port))
    assert healthcheck.main([]) == 1  # not ready yet
    assert healthcheck.main(["--live"]) == 0
    obs.joined()
    obs.control_read()
    obs.broker_answered()
    assert healthcheck.main([]) == 0


def test_skipped_records_are_counted(obs: Observability) -> None:
    """skip() adds to the stage's skipped counter."""
    obs.skip("route", 3)
    assert b'ctxbudget_records_skipped_total{stage="route"} 3.0' in obs.exposition()
