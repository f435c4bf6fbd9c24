"""On the embedded broker: replay and the shadow worker pointed at the live topic write nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.lab import Lab, batches, produce
from tests.paths import REPO

pytestmark = [pytest.mark.broker, pytest.mark.slow]


def _run(lab: Lab, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "ctxbudget", *args],
        env={**lab.env(), **env},
        cwd=REPO,
        capture_output=True,
        timeout=120,
        check=False,
    )


def _records(lab: Lab, topic: str) -> int:
    consumer = lab.consumer(topic)
    n = sum(1 for _ in consumer)
    consumer.close()
    return n


@pytest.mark.parametrize(
    "env",
    [
        # the shadow setting given the live topic's name, the live setting moved to a decoy
        {"CTXBUDGET_TOPICS__SHADOW": "{packs}", "CTXBUDGET_TOPICS__PACKS": "{decoy}"},
        {"CTXBUDGET_TOPICS__SHADOW": "{packs}"},
    ],
    ids=["decoy", "same"],
)
def test_no_shadow_or_replay_pack_reaches_the_live_topic(
    lab: Lab, env: dict[str, str], tmp_path: Path
) -> None:
    """Both refuse at once with one Error line (exit 2); the live topic stays empty."""
    lab.env_overrides["CTXBUDGET_TOPIC_SPECS"] = str(tmp_path / "specs")
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / f"{lab.topics.packs}.yaml").write_text(
        f"name: {lab.topics.packs}\ndescription: live packs\npartitions: 4\n"
        "replication_factor: 1\nlane: live\n"
    )
    values = {k: v.format(packs=lab.topics.packs, decoy=lab.topics.routed) for k, v in env.items()}
    items = batches(10, seed=90)
    produce(lab, items)
    replay = _run(
        lab, "replay", "--from-topic", lab.topics.candidates, "--policy", "lean@1",
        "--run-id", "leak", "--no-progress", env=values,
    )  # fmt: skip
    worker = _run(lab, "worker", "shadow", env=values)
    for proc in (replay, worker):
        lines = proc.stderr.decode().strip().splitlines()
        assert proc.returncode == 2, proc.stderr.decode()[-2000:]
        assert lines[-1].startswith("Error: ") and "live pack topic" in lines[-1]
    assert _records(lab, lab.topics.packs) == 0
