"""Workers against the real embedded broker: identity, dead letters, failover, restart."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import orjson
import pytest

from bench.traffic import synthetic
from ctxbudget.codec import encode
from ctxbudget.pipeline import Pipeline
from ctxbudget.policy import PolicyStore
from tests.integration.lab import Lab
from tests.integration.lab import batches as _batches
from tests.integration.lab import collect as _collect
from tests.integration.lab import produce as _produce
from tests.paths import REPO

pytestmark = [pytest.mark.broker, pytest.mark.slow]

PIPE = Pipeline.from_store(PolicyStore.load(REPO / "policies"), "default@1")


def test_four_stage_workers_make_the_in_process_packs(lab: Lab, tmp_path: Path) -> None:
    """300 batches through route → consolidate → select → compress, each its own process."""
    for stage in ("route", "consolidate", "select", "compress"):
        lab.start(stage, log_dir=tmp_path)
    items = _batches(300, seed=11)
    poison = [("bad-json", b"{nope"), ("bad-schema", b'{"request_id": "bad-schema"}')]
    _produce(lab, poison + items)
    got, dead = _collect(lab, lab.topics.packs, {rid for rid, _ in items}, timeout_s=180)
    expected = {
        rid: encode(PIPE.run(g.batch).pack)
        for rid, g in zip((r for r, _ in items), synthetic(300, seed=11), strict=True)
    }
    assert set(got) == set(expected)
    assert all(got[rid][0] == expected[rid] for rid in expected)
    assert {d["stage"] for d in dead} == {"route"} and len(dead) == 2
    assert {d.get("request_id") for d in dead} == {None, "bad-schema"}
    audit = lab.consumer(lab.topics.audit)
    stages = {}
    for msg in audit:
        ev = orjson.loads(msg.value)
        stages.setdefault(ev["request_id"], set()).add(ev["stage"])
    assert all(
        stages.get(rid) == {"route", "consolidate", "select", "compress"} for rid in expected
    )


def test_a_killed_worker_hands_its_partitions_to_its_peer(lab: Lab, tmp_path: Path) -> None:
    """SIGKILL one of two fused workers mid-stream: every request still gets its pack."""
    first = lab.start("fused", log_dir=tmp_path)
    lab.start("fused", log_dir=tmp_path)
    items = _batches(240, seed=12)
    _produce(lab, items[:40])
    got, _ = _collect(lab, lab.topics.packs, {rid for rid, _ in items[:40]}, timeout_s=120)
    assert len(got) == 40
    killed_at = time.monotonic()
    first.send_signal(signal.SIGKILL)
    _produce(lab, items[40:], pace_s=0.01)
    got, _ = _collect(lab, lab.topics.packs, {rid for rid, _ in items}, timeout_s=180)
    recovered_s = time.monotonic() - killed_at
    assert set(got) == {rid for rid, _ in items}
    print(
        f"failover: all {len(items)} packs {recovered_s:.1f} s after SIGKILL; "
        f"duplicates {sum(len(v) - 1 for v in got.values())}"
    )


def test_a_restarted_worker_resumes_from_committed_offsets(lab: Lab, tmp_path: Path) -> None:
    """SIGTERM commits and leaves; the next worker starts after the last committed record."""
    worker = lab.start("fused", log_dir=tmp_path)
    items = _batches(120, seed=13)
    _produce(lab, items[:60])
    got, _ = _collect(lab, lab.topics.packs, {rid for rid, _ in items[:60]}, timeout_s=120)
    assert len(got) == 60
    time.sleep(1.5)  # past one commit interval
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(60) == 0
    log = lab.logs[0].read_bytes()
    assert b"\x1b[" not in log, "terminal escape codes in a worker's log"
    _produce(lab, items[60:])
    lab.start("fused", log_dir=tmp_path)
    got, _ = _collect(lab, lab.topics.packs, {rid for rid, _ in items}, timeout_s=120)
    assert set(got) == {rid for rid, _ in items}
    redone = [rid for rid, _ in items[:60] if len(got[rid]) > 1]
    assert redone == [], f"re-processed after a graceful stop: {redone[:5]}"
