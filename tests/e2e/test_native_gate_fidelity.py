"""The gate's verdicts on every development unit are the same on the compiled path and on the
pure-Python one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import REPO, data_dir

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _verdicts(native: str, out: Path) -> bytes:
    env = dict(os.environ, CTXBUDGET_NATIVE=native)
    env.setdefault("CTXBUDGET_DATA_DIR", str(data_dir()))
    done = subprocess.run(
        [sys.executable, "-m", "bench.gate_fidelity", "-o", str(out)],
        capture_output=True,
        cwd=REPO,
        env=env,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    path = "native" if native == "1" else "python"
    assert done.stderr.decode().startswith(f"{path} path:"), done.stderr.decode()
    return out.read_bytes()


def test_every_development_verdict_is_the_same_on_both_paths(tmp_path: Path) -> None:
    """Findings, explain() scores and rules, logits, weak probabilities and scan_batch joins of
    every development unit are the same bytes with and without the extension."""
    if not (data_dir() / "injection_bipia_train").exists():
        pytest.fail(f"the development data sets are missing from {data_dir()}")
    native = _verdicts("1", tmp_path / "native.jsonl")
    python = _verdicts("0", tmp_path / "python.jsonl")
    assert native.count(b"\n") > 10_000
    assert native == python
