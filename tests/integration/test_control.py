"""Rollout on the real broker: kill switch propagation, restart, shadow lane, replay safety."""

from __future__ import annotations

import shutil
import time
from datetime import datetime
from pathlib import Path

import orjson
import pytest

from tests.integration.control_checks import audit_events, policies_of, run_cli, wait_applied, warm
from tests.integration.lab import Lab, batches, collect, produce
from tests.paths import REPO

pytestmark = [pytest.mark.broker, pytest.mark.slow]


def test_kill_switch_reaches_two_workers(lab: Lab, tmp_path: Path) -> None:
    """Rollout to 100%, then kill/unkill cycles: both workers apply every change."""
    lab.start("fused", log_dir=tmp_path)
    lab.start("fused", log_dir=tmp_path)
    warm(lab, seed=20)
    proc = run_cli(lab, "control", "set-rollout", "--percent", "100", "--candidate", "lean@1")
    assert proc.returncode == 0, proc.stderr.decode()
    wait_applied(lab, 1, workers=2)
    items = batches(20, seed=21)
    produce(lab, items)
    got, _ = collect(lab, lab.topics.packs, {r for r, _ in items}, timeout_s=60)
    assert policies_of({r: got[r] for r, _ in items}) == {"lean@1"}
    lags = []
    for cycle in range(4):
        action = "kill" if cycle % 2 == 0 else "unkill"
        proc = run_cli(lab, "control", action, "--note", f"cycle {cycle}")
        assert proc.returncode == 0, proc.stderr.decode()
        lags += [float(e["lag_ms"]) for e in wait_applied(lab, 2 + cycle, workers=2)]  # type: ignore[arg-type]
    assert audit_events(lab, "ctx.control_event.v1")[-1]["action"] == "unkill"
    proc = run_cli(lab, "control", "kill")
    assert proc.returncode == 0
    wait_applied(lab, 6, workers=2)
    items = batches(20, seed=22)
    produce(lab, items)
    got, _ = collect(lab, lab.topics.packs, {r for r, _ in items}, timeout_s=60)
    assert policies_of({r: got[r] for r, _ in items}) == {"default@1"}
    lags.sort()
    print(
        f"control propagation over {len(lags)} applications: max {lags[-1]:.0f} ms, "
        f"median {lags[len(lags) // 2]:.0f} ms"
    )


def test_a_restarted_worker_keeps_the_control_state(lab: Lab, tmp_path: Path) -> None:
    """The state set before a worker starts is read from the start of the topic."""
    lab.start("fused", log_dir=tmp_path)
    warm(lab, seed=30)
    assert run_cli(lab, "control", "set-rollout", "--percent", "100").returncode == 0
    lab.stop_all()
    lab.start("fused", log_dir=tmp_path)
    items = batches(10, seed=31)
    produce(lab, items)
    got, _ = collect(lab, lab.topics.packs, {r for r, _ in items}, timeout_s=90)
    assert policies_of({r: got[r] for r, _ in items}) == {"lean@1"}
    shown = run_cli(lab, "control", "show")
    assert orjson.loads(shown.stdout)["percent"] == 100.0


def test_shadow_packs_go_to_the_shadow_topic_only(lab: Lab, tmp_path: Path) -> None:
    """With shadow on, the other policy's pack is written to ctx.shadow.v1, never to packs."""
    assert run_cli(lab, "control", "shadow", "on").returncode == 0
    lab.start("fused", log_dir=tmp_path)
    lab.start("shadow", log_dir=tmp_path)
    items = batches(30, seed=40)
    produce(lab, items)
    want = {r for r, _ in items}
    live, _ = collect(lab, lab.topics.packs, want, timeout_s=90)
    shadow, _ = collect(lab, lab.topics.shadow, want, timeout_s=90)
    assert set(live) == set(shadow) == want
    assert policies_of(live) == {"default@1"} and policies_of(shadow) == {"lean@1"}
    assert {orjson.loads(v[0])["lane"] for v in shadow.values()} == {"shadow"}


def test_replay_pointed_at_the_live_input_topic_writes_no_live_pack(lab: Lab) -> None:
    """Replay reads the live input topic and writes only shadow packs and traces."""
    items = batches(25, seed=50)
    produce(lab, items)
    proc = run_cli(
        lab,
        "replay",
        "--from-topic",
        lab.topics.candidates,
        "--policy",
        "lean@1",
        "--run-id",
        "replay-it",
        "--no-progress",
    )
    assert proc.returncode == 0, proc.stderr.decode()
    assert b"25 shadow packs" in proc.stderr
    shadow, _ = collect(lab, lab.topics.shadow, {r for r, _ in items}, timeout_s=30)
    assert len(shadow) == 25
    assert all(orjson.loads(v[0])["replay"] == {"run_id": "replay-it"} for v in shadow.values())
    live = lab.consumer(lab.topics.packs)
    assert list(live) == []
    live.close()


def test_an_unreadable_control_topic_means_baseline_only(lab: Lab, tmp_path: Path) -> None:
    """The file says 100% candidate, the topic is missing: the worker packs the baseline."""
    policies = tmp_path / "policies"
    shutil.copytree(REPO / "policies", policies)
    rollout = policies / "rollout.yaml"
    rollout.write_text(rollout.read_text().replace("percent: 0 ", "percent: 100 "))
    lab.env_overrides = {
        "CTXBUDGET_POLICIES": str(policies),
        "CTXBUDGET_TOPICS__CONTROL": f"missing.{lab.suffix}",
    }
    lab.start("fused", log_dir=tmp_path)
    items = batches(5, seed=60)
    produce(lab, items)
    got, _ = collect(lab, lab.topics.packs, {r for r, _ in items}, timeout_s=90)
    assert policies_of(got) == {"default@1"}
    assert "CONTROL TOPIC UNREADABLE" in lab.logs[-1].read_text(errors="replace")


def test_replay_by_offsets_and_by_time_window(lab: Lab) -> None:
    """Offsets bound every partition; a time window filters on record timestamps."""
    first = batches(12, seed=70)
    produce(lab, first)
    time.sleep(1.2)
    middle = time.time()
    time.sleep(1.2)
    second = batches(8, seed=71)
    produce(lab, second)
    proc = run_cli(
        lab,
        "replay",
        "--from-topic",
        lab.topics.candidates,
        "--from-offset",
        "0",
        "--to-offset",
        "0",
        "--policy",
        "default@1",
        "--run-id",
        "offsets",
        "--no-progress",
        "--out",
        "/dev/null",
    )
    assert proc.returncode == 0, proc.stderr.decode()
    # offset 0 of each of the 4 partitions: one batch per partition that has records
    assert b"replay offsets: 4 batches" in proc.stderr
    iso = datetime.fromtimestamp(middle).isoformat()
    proc = run_cli(
        lab,
        "replay",
        "--from-topic",
        lab.topics.candidates,
        "--since",
        iso,
        "--policy",
        "default@1",
        "--run-id",
        "window",
        "--no-progress",
        "--out",
        "/dev/null",
    )
    assert proc.returncode == 0, proc.stderr.decode()
    assert b"replay window: 8 batches" in proc.stderr
    cmp = run_cli(lab, "compare", "--run-id", "window", "--since", iso)
    assert cmp.returncode == 0, cmp.stderr.decode()
