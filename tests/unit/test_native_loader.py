"""The compiled path's loader: the switch, and a missing extension logged once, never fatal."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.paths import REPO

#: Runs `ctxbudget pack` with the extension made unimportable (as after a failed build).
_WITHOUT_EXTENSION = (
    "import sys; sys.modules['ctxbudget_native'] = None\n"
    "import ctxbudget.native as n; print(n.native_path(), n.NATIVE_STATUS, file=sys.stderr)\n"
    "from ctxbudget.cli import main\n"
    "sys.argv = ['ctxbudget', 'pack', sys.argv[1], '-o', sys.argv[2], '--no-progress']\n"
    "main()\n"
)


def _python(code: str, *args: str, native: str | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop("CTXBUDGET_NATIVE", None)
    if native is not None:
        env["CTXBUDGET_NATIVE"] = native
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_switch_forces_the_pure_python_path_quietly() -> None:
    """CTXBUDGET_NATIVE=0 chooses the fallback on purpose: no warning is logged."""
    done = _python("from ctxbudget.native import native_path; print(native_path())", native="0")
    assert done.stdout.strip() == "python"
    assert "WARNING" not in done.stderr and "not installed" not in done.stderr


def test_a_missing_extension_warns_once_and_packs_the_golden_bytes(tmp_path: Path) -> None:
    """Without the extension packing goes on in pure Python, one warning says so, and the
    packs are the reviewed golden packs."""
    out = tmp_path / "packs.jsonl"
    done = _python(_WITHOUT_EXTENSION, str(REPO / "examples" / "batches.jsonl"), str(out))
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("is not installed") == 1
    assert "python not installed" in done.stderr
    assert out.read_bytes() == (REPO / "tests" / "golden" / "examples.packs.jsonl").read_bytes()
