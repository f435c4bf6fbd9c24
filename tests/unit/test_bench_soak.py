"""The record-path soak: its verdicts, and one short real run of its child process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from bench.soak_records import summarise
from tests.paths import REPO


def _samples(rss: list[float], step_s: float = 60.0) -> list[dict[str, float]]:
    return [
        {
            "t_s": step_s * (i + 1),
            "records": 6000 * (i + 1),
            "worker_rss_mb": mb,
            "worker_cpu_pct": 30.0,
            "handle_p50_ms": 2.5,
            "handle_p99_ms": 5.0,
            "behind_schedule_ms_max": 0.0,
            "dead_letters": 0,
        }
        for i, mb in enumerate(rss)
    ]


ARGS = SimpleNamespace(rate=100.0, minutes=12.0)


def test_growth_while_caches_fill_then_flat_is_reported_both_ways() -> None:
    """RSS growing 13% while caches fill, then flat, is not flat overall but 0% after 10 minutes."""
    rss = [100.0, 105.0, 110.0, 112.0] + [113.0] * 8
    m = summarise(_samples(rss), ARGS, 10)["memory"]["worker_rss_mb"]
    assert m["first_after_1min_mb"] == 100.0
    assert m["change_pct"] == 13.0
    assert not m["flat_within_10pct"]
    assert m["at_10min_mb"] == 113.0
    assert m["change_after_10min_pct"] == 0.0
    assert m["peak_mb"] == 113.0


def test_a_steady_leak_is_not_flat() -> None:
    """RSS growing 2 MB a minute throughout is not flat, and still grows after 10 minutes."""
    rss = [100.0 + 2 * i for i in range(12)]
    m = summarise(_samples(rss), ARGS, 10)["memory"]["worker_rss_mb"]
    assert not m["flat_within_10pct"]
    assert m["change_after_10min_pct"] > 0


def test_the_child_runs_the_fused_record_path(tmp_path: Path) -> None:
    """A few seconds of the real child: every record handled, none dead-lettered."""
    lines = (REPO / "examples" / "batches.jsonl").read_bytes().splitlines()
    good = [x for x in lines if b'"candidates"' in x]
    traffic = tmp_path / "t.jsonl"
    traffic.write_bytes(b"\n".join(good) + b"\n")
    out = subprocess.run(
        [sys.executable, "-m", "bench.soak_records", str(traffic), "50", "0.05", "1", "default@1"],
        cwd=REPO,
        capture_output=True,
        check=True,
        timeout=120,
    )
    samples = [json.loads(x) for x in out.stdout.splitlines()]
    assert samples[-1]["records"] == 150
    assert samples[-1]["worker_rss_mb"] > 0
    assert samples[-1]["dead_letters"] == 0
