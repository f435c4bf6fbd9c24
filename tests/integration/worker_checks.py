"""The worker checks both brokers run: identity, dead letters, failover and restart on a lab.

The embedded-broker tests (``test_workers.py``) and the real-Kafka ones (``test_real_kafka.py``)
run the same checks on their own lab; each check asserts what it proves.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import orjson

from ctxbudget.codec import encode
from ctxbudget.pipeline import Pipeline
from ctxbudget.policy import PolicyStore
from ctxbudget.testing.traffic import synthetic
from tests.integration.lab import Lab, batches, collect, produce
from tests.paths import REPO

PIPE = Pipeline.from_store(PolicyStore.load(REPO / "policies"), "default@1")
STAGES = ("route", "consolidate", "select", "compress")


def check_four_stage_workers_make_the_in_process_packs(lab: Lab, log_dir: Path) -> None:
    """300 batches through one process a stage: the in-process packs, two dead letters, audits."""
    for stage in STAGES:
        lab.start(stage, log_dir=log_dir)
    items = batches(300, seed=11)
    poison = [("bad-json", b"{nope"), ("bad-schema", b'{"request_id": "bad-schema"}')]
    produce(lab, poison + items)
    got, dead = collect(lab, lab.topics.packs, {rid for rid, _ in items}, timeout_s=180)
    expected = {
        rid: encode(PIPE.run(g.batch).pack)
        for rid, g in zip((r for r, _ in items), synthetic(300, seed=11), strict=True)
    }
    assert set(got) == set(expected)
    assert all(got[rid][0] == expected[rid] for rid in expected)
    assert {d["stage"] for d in dead} == {"route"} and len(dead) == 2
    assert {d.get("request_id") for d in dead} == {None, "bad-schema"}
    audit = lab.consumer(lab.topics.audit)
    stages: dict[str, set[str]] = {}
    for msg in audit:
        ev = orjson.loads(msg.value)
        stages.setdefault(ev["request_id"], set()).add(ev["stage"])
    assert all(stages.get(rid) == set(STAGES) for rid in expected)


def check_a_killed_worker_hands_its_partitions_to_its_peer(lab: Lab, log_dir: Path) -> None:
    """SIGKILL one of two fused workers mid-stream: every request still gets its pack."""
    first = lab.start("fused", log_dir=log_dir)
    lab.start("fused", log_dir=log_dir)
    items = batches(240, seed=12)
    produce(lab, items[:40])
    got, _ = collect(lab, lab.topics.packs, {rid for rid, _ in items[:40]}, timeout_s=120)
    assert len(got) == 40
    killed_at = time.monotonic()
    first.send_signal(signal.SIGKILL)
    produce(lab, items[40:], pace_s=0.01)
    got, _ = collect(lab, lab.topics.packs, {rid for rid, _ in items}, timeout_s=180)
    recovered_s = time.monotonic() - killed_at
    assert set(got) == {rid for rid, _ in items}
    print(
        f"failover: all {len(items)} packs {recovered_s:.1f} s after SIGKILL; "
        f"duplicates {sum(len(v) - 1 for v in got.values())}"
    )


def check_a_restarted_worker_resumes_from_committed_offsets(lab: Lab, log_dir: Path) -> None:
    """SIGTERM commits and leaves; the next worker starts after the last committed record."""
    worker = lab.start("fused", log_dir=log_dir)
    items = batches(120, seed=13)
    produce(lab, items[:60])
    got, _ = collect(lab, lab.topics.packs, {rid for rid, _ in items[:60]}, timeout_s=120)
    assert len(got) == 60
    time.sleep(1.5)  # past one commit interval
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(60) == 0
    log = lab.logs[0].read_bytes()
    assert b"\x1b[" not in log, "terminal escape codes in a worker's log"
    produce(lab, items[60:])
    lab.start("fused", log_dir=log_dir)
    got, _ = collect(lab, lab.topics.packs, {rid for rid, _ in items}, timeout_s=120)
    assert set(got) == {rid for rid, _ in items}
    redone = [rid for rid, _ in items[:60] if len(got[rid]) > 1]
    assert redone == [], f"re-processed after a graceful stop: {redone[:5]}"
