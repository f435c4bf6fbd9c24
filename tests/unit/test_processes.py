"""The process helpers the broker benches, the guarantee checkers and the integration tests
share (:mod:`ctxbudget.kafka.processes`): launch into a log, read /proc, stop, scan logs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from ctxbudget.kafka.processes import (
    cpu_seconds,
    ctxbudget_command,
    rss_mb,
    spawn,
    stop_all,
    trouble_in_logs,
)

#: Prints a line, says it is ready through a file, then waits to be stopped.
_CHILD = (
    "import sys, time, pathlib\n"
    "print('child started', flush=True)\n"
    "print('Traceback (most recent call last): not really', file=sys.stderr, flush=True)\n"
    "pathlib.Path(sys.argv[1]).write_text('ready')\n"
    "time.sleep(600)\n"
)


def _wait_for(path: Path, proc: subprocess.Popen[bytes]) -> None:
    """Block until the child has written ``path``; it must not have exited first (no
    deadline: the suite's timeout bounds it)."""
    while not path.exists():
        assert proc.poll() is None, f"the child exited with {proc.returncode}"
        time.sleep(0.01)


def test_a_spawned_process_logs_both_streams_is_read_and_stops_on_sigterm(tmp_path: Path) -> None:
    """spawn runs in the given folder with both streams in the log; /proc gives its memory;
    stop_all ends it with SIGTERM and returns its status; the log scan finds the traceback."""
    ready = tmp_path / "ready"
    log = tmp_path / "child.log"
    proc = spawn([sys.executable, "-c", _CHILD, str(ready)], dict(os.environ), log, cwd=tmp_path)
    _wait_for(ready, proc)
    rss = rss_mb(proc.pid)
    assert rss_mb(proc.pid, "VmHWM") >= rss > 0  # the peak, read later, is never below it
    assert cpu_seconds(proc.pid) >= 0
    assert stop_all([proc]) == [-signal.SIGTERM]
    text = log.read_text()
    assert "child started" in text and "Traceback" in text
    found = trouble_in_logs(tmp_path)
    assert list(found) == ["child.log"] and found["child.log"][0].startswith("Traceback")


def test_a_process_that_is_gone_reads_as_zero() -> None:
    """The readers answer 0 for a pid with no /proc entry instead of raising."""
    gone = 2**22 + 12345  # above the kernel's pid limit
    assert rss_mb(gone) == 0.0
    assert cpu_seconds(gone) == 0.0


def test_the_command_is_the_console_script_or_the_module() -> None:
    """Workers are started with the ctxbudget script beside this interpreter, else -m."""
    command = ctxbudget_command()
    assert Path(command[0]).name == "ctxbudget" or command[1:] == ["-m", "ctxbudget"]
