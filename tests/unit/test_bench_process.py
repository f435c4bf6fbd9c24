"""The whole-process benchmark's arithmetic and its child roles (nothing is timed here)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from bench import process
from tests.paths import REPO


def _run(cpu: float, one: float) -> tuple[dict[str, float], dict[str, float]]:
    full = {"wall_s": cpu, "cpu_s": cpu, "rss_mib": 100.0}
    first = {"wall_s": one, "cpu_s": one, "rss_mib": 90.0}
    return full, first


def test_per_batch_cpu_leaves_out_the_one_line_run_and_ratios_are_per_round(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """CPU per batch is (run - one-line run) / (n - 1); ratios pair the same round."""
    costs = {"ctxbudget": (3.0, 1.0), "ctxbudget-python": (5.0, 1.0), "naive": (1.2, 1.0)}
    costs["floor"] = (0.6, 0.5)
    full = {name: [_run(*c)[0]] for name, c in costs.items()}
    first = {name: [_run(*c)[1]] for name, c in costs.items()}
    args = argparse.Namespace(file=[Path("x.jsonl")], rounds=1)
    report = process._report(args, 101, full, first)
    assert report["rows"]["ctxbudget"]["cpu_ms_per_batch"] == pytest.approx(20.0)
    assert report["rows"]["floor"]["cpu_ms_per_batch"] == pytest.approx(1.0)
    assert report["ratios"]["ctxbudget_to_floor"] == pytest.approx(20.0)
    assert report["ratios"]["ctxbudget_to_naive"] == pytest.approx(10.0)
    assert report["ratios"]["python_to_native"] == pytest.approx(2.0)
    assert "ctxbudget / floor = 20.00x" in capsys.readouterr().out


def test_the_floor_role_counts_each_rendered_block(tmp_path: Path) -> None:
    """The floor child reads each batch and the block ctxbudget rendered for it."""
    batches = REPO / "examples" / "batches.jsonl"
    lines = batches.read_bytes().splitlines()
    blocks = tmp_path / "blocks"
    blocks.write_bytes(b"".join(orjson.dumps(f"block {i}") + b"\n" for i in range(len(lines))))
    done = subprocess.run(
        [sys.executable, "-m", "bench.process", "--role=floor", str(batches), str(blocks)],
        cwd=REPO,
        capture_output=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()


def test_the_naive_role_writes_one_line_per_batch(tmp_path: Path) -> None:
    """The naive child admits by score and writes what it admitted, one line a batch."""
    batches = REPO / "examples" / "batches.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "bench.process", "--role=naive", str(batches), "unused"],
        cwd=REPO,
        capture_output=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.count(b"\n") == len(batches.read_bytes().splitlines())


def test_python_m_bench_reaches_every_tool_with_its_own_options() -> None:
    """`python -m bench TOOL --help` prints each tool's own usage, so one entry point reaches
    every benchmark and converter."""
    import subprocess
    import sys

    from bench.__main__ import TOOLS

    for name in TOOLS:
        proc = subprocess.run(
            [sys.executable, "-m", "bench", name, "--help"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, (name, proc.stderr[-500:])
        assert proc.stdout.startswith("usage:"), name
