"""Calibrate on labelled traffic, then pack with the conformal filter the policy names."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from ctxbudget.conformal import CalibrationError
from ctxbudget.filters import filter_for
from ctxbudget.policy import load_policy
from ctxbudget.testing.traffic import synthetic, write_traffic
from tests.paths import REPO

pytestmark = pytest.mark.e2e


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "ctxbudget", *args],
        cwd=cwd,
        capture_output=True,
        timeout=300,
        check=False,
    )


def _policies_with(tmp: Path, calibration: str | None, alpha: str) -> Path:
    root = tmp / "policies"
    shutil.copytree(REPO / "policies", root)
    path = root / "packing" / "default@1.yaml"
    text = path.read_text()
    if calibration is not None:
        text = text.replace("calibration: null", f"calibration: {calibration}")
    text = text.replace("    compression: true\n", f"    compression: true\n    alpha: {alpha}\n")
    path.write_text(text)
    return root


def test_calibrate_then_pack_carries_coverage(tmp_path: Path) -> None:
    """The filter runs before admission and every pack states its coverage."""
    generated = synthetic(120, seed=7)
    train, test = generated[:80], generated[80:]
    write_traffic(train, tmp_path / "train.jsonl")
    write_traffic(test, tmp_path / "test.jsonl")
    cal = tmp_path / "cal.json"
    proc = _run(
        "calibrate",
        str(tmp_path / "train.jsonl"),
        "--alpha",
        "0.1",
        "--alpha",
        "0.2",
        "-o",
        str(cal),
        "--created",
        "2026-01-01",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    root = _policies_with(tmp_path, str(cal), "0.2")
    out = tmp_path / "packs.jsonl"
    proc = _run(
        "pack", str(tmp_path / "test.jsonl"), "--policies", str(root), "-o", str(out), cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr.decode()
    packs = [orjson.loads(x) for x in out.read_bytes().splitlines()]
    assert len(packs) == 40
    assert all(p["coverage"]["alpha"] == 0.2 for p in packs)
    assert all(p["coverage"]["threshold"] is not None for p in packs)
    assert sum(p["dropped"].get("conformal", 0) for p in packs) > 0
    # Tight budgets force out passages the filter kept: the guarantee is then not claimed.
    forced = [p for p in packs if p["dropped"].get("budget")]
    assert forced and all(not p["coverage"]["guaranteed"] for p in forced)


def test_a_missing_calibration_is_an_error_at_load(tmp_path: Path) -> None:
    """Never a silent pass-through: the policy names a file that is not there."""
    root = _policies_with(tmp_path, "calibration/missing.json", "0.2")
    policy = load_policy(root / "packing" / "default@1.yaml")
    with pytest.raises(CalibrationError, match=r"missing\.json"):
        filter_for(policy, root)
    proc = _run(
        "pack", str(REPO / "examples" / "batches.jsonl"), "--policies", str(root), cwd=tmp_path
    )
    assert proc.returncode != 0 and b"missing.json" in proc.stderr


def test_alpha_without_a_calibration_is_refused(tmp_path: Path) -> None:
    """An alpha with nothing to calibrate it is a configuration error."""
    root = _policies_with(tmp_path, None, "0.2")
    with pytest.raises(CalibrationError, match="names no calibration"):
        filter_for(load_policy(root / "packing" / "default@1.yaml"), root)
