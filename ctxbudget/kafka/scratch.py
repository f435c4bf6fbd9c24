"""Scratch folders of worker processes (faust's data directory), removed even after a kill.

A worker removes its folder when it stops, but a process killed with SIGKILL (or ended by
``os._exit``) cannot. So each folder records its owner (pid and the process's start time,
which tells a reused pid apart), and every worker that starts first removes the folders whose
owner is gone. Folders without an owner file are never touched (one may be in the making).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

PREFIX = "ctxbudget-worker-"
OWNER_FILE = "owner"


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux), "" elsewhere, None when
    there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return None
    except OSError:
        return _exists(pid)
    return stat.rsplit(")", 1)[1].split()[19]


def _exists(pid: int) -> str | None:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        return ""
    return ""


def _owner_alive(folder: Path) -> bool:
    try:
        pid_text, _, started = (folder / OWNER_FILE).read_text().partition(" ")
        pid = int(pid_text)
    except (OSError, ValueError):
        return True  # unknown owner: leave it alone
    now = _start_time(pid)
    return now is not None and (not started or not now or now == started.strip())


def sweep(root: Path | None = None) -> list[Path]:
    """Remove the scratch folders under ``root`` (the system's temp folder) whose owner
    process is gone; return them."""
    base = root or Path(tempfile.gettempdir())
    removed = []
    for folder in sorted(base.glob(f"{PREFIX}*")):
        if folder.is_dir() and not _owner_alive(folder):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


def make(name: str, root: Path | None = None) -> tuple[Path, list[Path]]:
    """A new scratch folder owned by this process, and the abandoned ones removed first."""
    removed = sweep(root)
    folder = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{name}-", dir=root))
    pid = os.getpid()
    (folder / OWNER_FILE).write_text(f"{pid} {_start_time(pid) or ''}")
    return folder, removed
