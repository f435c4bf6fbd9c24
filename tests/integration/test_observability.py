"""A worker's Prometheus endpoint and probes, scraped on the embedded broker."""

from __future__ import annotations

import time
from pathlib import Path

import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from ctxbudget.codec import encode
from ctxbudget.testing.traffic import synthetic
from tests.integration.endpoints import (
    READINESS_BACK_BOUND_S,
    READINESS_LOSS_BOUND_S,
    free_port,
    http_get,
    seconds_until,
    wait_for,
)
from tests.integration.lab import Lab, PrivateBroker, batches, collect, produce


def test_a_worker_serves_metrics_health_and_readiness(lab: Lab, tmp_path: Path) -> None:
    """The endpoints answer and /metrics counts what the worker did; the log is JSON lines."""
    port = free_port()
    lab.env_overrides["CTXBUDGET_METRICS_PORT"] = str(port)
    lab.env_overrides["CTXBUDGET_LOG_FORMAT"] = "json"
    lab.start("fused", log_dir=tmp_path)
    wait_for(port, "/healthz", 200, 60)
    wait_for(port, "/readyz", 200, 60)
    items = batches(40, seed=21)
    produce(lab, [("bad-json", b"{nope"), *items])
    got, dead = collect(lab, lab.topics.packs, {rid for rid, _ in items}, timeout_s=120)
    assert set(got) == {rid for rid, _ in items} and len(dead) == 1
    deadline = time.monotonic() + 30
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    while time.monotonic() < deadline:
        body = wait_for(port, "/metrics", 200, 10)
        samples = {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(body.decode())
            for s in fam.samples
        }
        lag_seen = any(name == "ctxbudget_consumer_lag" for name, _ in samples)
        if samples.get(("ctxbudget_records_in_total", (("stage", "fused"),)), 0) >= 41 and lag_seen:
            break
        time.sleep(1)
    assert samples[("ctxbudget_records_in_total", (("stage", "fused"),))] >= 41
    assert samples[("ctxbudget_pack_evidence_tokens_count", (("lane", "live"),))] >= 40
    assert samples[("ctxbudget_handle_seconds_count", (("stage", "fused"),))] >= 41
    dead_keys = [k for k in samples if k[0] == "ctxbudget_dead_letters_total"]
    assert sum(samples[k] for k in dead_keys) >= 1
    assert any(k[0] == "ctxbudget_consumer_lag" for k in samples)
    assert samples[("ctxbudget_worker_ready", ())] == 1
    assert ("ctxbudget_control_version", ()) in samples
    # the worker's log is JSON lines and carries no evidence text
    lab.stop_all()
    lines = [ln for ln in lab.logs[-1].read_bytes().splitlines() if ln.startswith(b"{")]
    assert lines and all("event" in orjson.loads(ln) for ln in lines)


def test_readiness_follows_the_broker_away_and_back(
    private_lab: tuple[Lab, PrivateBroker], tmp_path: Path
) -> None:
    """Broker stopped: /readyz 503 within 30 s (liveness stays 200); back: 200 again."""
    lab, own = private_lab
    port = free_port()
    lab.env_overrides.update(CTXBUDGET_METRICS_PORT=str(port), CTXBUDGET_LOG_FORMAT="json")
    lab.start("fused", log_dir=tmp_path)
    wait_for(port, "/readyz", 200, 90)
    own.stop()
    lost = seconds_until(port, "/readyz", 503, READINESS_LOSS_BOUND_S)
    code, body = http_get(port, "/readyz")
    assert code == 503 and b"no answer from the broker" in body
    assert http_get(port, "/healthz")[0] == 200
    metrics = wait_for(port, "/metrics", 200, 10).decode()
    assert "ctxbudget_broker_reachable 0.0" in metrics and "ctxbudget_worker_ready 0.0" in metrics
    assert "ctxbudget_consumer_lag{" not in metrics  # no stale "caught up"
    lab.broker = own.start()
    back = seconds_until(port, "/readyz", 200, READINESS_BACK_BOUND_S)
    print(
        f"readiness false {lost:.1f}s after the broker stopped, true {back:.1f}s after it returned"
    )


@pytest.mark.parametrize("evidence", [False, True], ids=["default", "CTXBUDGET_LOG_EVIDENCE"])
def test_no_evidence_reaches_the_log_even_at_debug(
    lab: Lab, tmp_path: Path, evidence: bool
) -> None:
    """At DEBUG (faust, aiokafka, kafka-python included) no passage text or query is logged,
    unless CTXBUDGET_LOG_EVIDENCE (the libraries then log whole packs: the check is real)."""
    marker = "zqxj-marker-passage"
    source = synthetic(1, seed=5)[0].batch
    rid = source.request_id
    candidates = tuple(
        c.model_copy(update={"text": f"{c.text} {marker} {i}."})
        for i, c in enumerate(source.candidates)
    )
    query = source.query.model_copy(update={"text": f"{marker}: {source.query.text}"})
    marked = source.model_copy(update={"candidates": candidates, "query": query})
    lab.env_overrides.update(
        CTXBUDGET_LOG_LEVEL="DEBUG",
        CTXBUDGET_LOG_FORMAT="json",
        CTXBUDGET_LOG_EVIDENCE=str(evidence).lower(),
    )
    lab.start("fused", log_dir=tmp_path)
    produce(lab, [(rid, encode(marked))])
    got, _ = collect(lab, lab.topics.packs, {rid}, timeout_s=120)
    assert rid in got
    lab.stop_all()
    log = lab.logs[-1].read_bytes()
    assert log.count(b"\n") > 100  # DEBUG was on, libraries included
    assert b'"level": "debug", "logger": "aiokafka' in log or b'"logger": "kafka' in log
    assert (marker.encode() in log) is evidence
