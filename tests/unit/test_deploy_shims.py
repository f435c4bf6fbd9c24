"""The top-level workers/ entry points a container runs reach the package's workers."""

from __future__ import annotations

import subprocess
import sys

from tests.paths import REPO


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=REPO, capture_output=True, text=True, timeout=120
    )


def test_python_m_workers_is_the_worker_command() -> None:
    """`python -m workers --help` prints the `ctxbudget worker` help, stages and all."""
    proc = _run("workers", "--help")
    assert proc.returncode == 0, proc.stderr
    assert "python -m workers" in proc.stdout
    assert "route" in proc.stdout and "CTXBUDGET_" in proc.stdout


def test_python_m_workers_healthcheck_checks_a_process() -> None:
    """`python -m workers.healthcheck` runs the package's check: a pid that is not a worker
    is unhealthy, with the reason on one line."""
    proc = _run("workers.healthcheck", "--pid", str(2**22 + 1), "--port", "1")
    assert proc.returncode == 1
    assert proc.stderr.startswith("unhealthy: ")
