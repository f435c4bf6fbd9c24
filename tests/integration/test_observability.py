"""A worker's Prometheus endpoint and probes, scraped on the embedded broker."""

from __future__ import annotations

import socket
import time
import urllib.error
import urllib.request
from pathlib import Path

import orjson
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.lab import Lab, batches, collect, produce


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(port: int, path: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except OSError:
        return 0, b""


def _wait(port: int, path: str, code: int, timeout_s: float) -> bytes:
    deadline = time.monotonic() + timeout_s
    got = (0, b"")
    while time.monotonic() < deadline:
        got = _get(port, path)
        if got[0] == code:
            return got[1]
        time.sleep(0.5)
    raise AssertionError(f"{path} answered {got} instead of {code}")


def test_a_worker_serves_metrics_health_and_readiness(lab: Lab, tmp_path: Path) -> None:
    port = _free_port()
    lab.env_overrides["CTXBUDGET_METRICS_PORT"] = str(port)
    lab.env_overrides["CTXBUDGET_LOG_FORMAT"] = "json"
    lab.start("fused", log_dir=tmp_path)
    _wait(port, "/healthz", 200, 60)
    _wait(port, "/readyz", 200, 60)
    items = batches(40, seed=21)
    produce(lab, [("bad-json", b"{nope"), *items])
    got, dead = collect(lab, lab.topics.packs, {rid for rid, _ in items}, timeout_s=120)
    assert set(got) == {rid for rid, _ in items} and len(dead) == 1
    deadline = time.monotonic() + 30
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    while time.monotonic() < deadline:
        body = _wait(port, "/metrics", 200, 10)
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
