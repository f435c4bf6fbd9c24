"""Worker processes as a supervisor runs them, and what is read of them: ``/proc`` readers
(CPU time, resident memory), a launcher that ties a process to its parent and a stopper,
and a collector that reads the packs and dead-letter topics from the start.

Written once for the broker benchmarks, the guarantee checkers (``bench/``) and the
integration tests (``tests/integration/lab.py``), so that a fix to how a worker is started
(its environment, its log, dying with its parent) or how packs are read back reaches every
one of them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from ctxbudget.kafka.broker import _die_with_parent

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process (0 when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    """A process's resident memory in MB (``field="VmHWM"``: its peak so far), 0 when it is
    gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def ctxbudget_command() -> list[str]:
    """The ``ctxbudget`` console script beside this interpreter (else ``python -m ctxbudget``)."""
    script = Path(sys.executable).parent / "ctxbudget"
    return [str(script)] if script.exists() else [sys.executable, "-m", "ctxbudget"]


def spawn(
    args: Sequence[str], env: Mapping[str, str], log: Path, *, cwd: Path | None = None
) -> subprocess.Popen[bytes]:
    """Start ``args`` in ``cwd`` (default: this process's) with its output (both streams)
    in ``log``; the process is killed when this one dies, so a bench stopped half-way leaves
    no orphan worker."""
    with log.open("wb") as fh:
        return subprocess.Popen(
            list(args),
            env=dict(env),
            cwd=cwd,
            stdout=fh,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent,
        )


def stop_all(procs: Sequence[subprocess.Popen[bytes]], timeout_s: float = 30.0) -> list[int]:
    """SIGTERM every running process, wait up to ``timeout_s`` for each, SIGKILL the ones
    that do not stop; their exit statuses, in order."""
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    codes = []
    for p in procs:
        try:
            codes.append(p.wait(timeout_s))
        except subprocess.TimeoutExpired:
            p.kill()
            codes.append(p.wait(5))
    return codes


class PackCollector(threading.Thread):
    """Reads the packs and dead-letter topics from the start: when each request's first pack
    came and, with ``keep_values``, every pack record's bytes (duplicates included)."""

    def __init__(
        self,
        bootstrap: str,
        packs: str,
        deadletter: str,
        settings: Any = None,
        *,
        keep_values: bool = True,
        fetch_wait_ms: int = 50,
    ) -> None:
        super().__init__(daemon=True, name="pack-collector")
        from ctxbudget.kafka import io

        self.packs_topic, self.dead_topic = packs, deadletter
        self.keep_values = keep_values
        self.consumer = io.client(
            "consumer",
            settings,
            brokers=bootstrap,
            client_id="ctxbudget-bench",
            group_id=None,
            enable_auto_commit=False,
            fetch_max_wait_ms=fetch_wait_ms,
            max_partition_fetch_bytes=32 * 1024 * 1024,
            fetch_max_bytes=64 * 1024 * 1024,
            consumer_timeout_ms=1000,
        )
        io.assign_all(self.consumer, (packs, deadletter), wait_s=60.0)
        self.packs: dict[str, list[bytes]] = {}
        self.first_at: dict[str, float] = {}
        self.dead: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            polled = self.consumer.poll(timeout_ms=100, max_records=5000)
            now = time.monotonic()
            with self.lock:
                for tp, records in polled.items():
                    for r in records:
                        if tp.topic == self.dead_topic:
                            self.dead.append(orjson.loads(r.value))
                        elif r.key is not None:
                            key = r.key.decode("utf-8", "replace")
                            self.first_at.setdefault(key, now)
                            if self.keep_values:
                                self.packs.setdefault(key, []).append(r.value)

    def have(self, keys: set[str]) -> int:
        """How many of ``keys`` have a pack."""
        with self.lock:
            return sum(1 for k in keys if k in self.first_at)

    def count(self, prefix: str) -> int:
        """How many requests whose id starts with ``prefix`` have a pack."""
        with self.lock:
            return sum(1 for k in self.first_at if k.startswith(prefix))

    def times(self, prefix: str) -> dict[str, float]:
        """When the first pack of each request whose id starts with ``prefix`` came."""
        with self.lock:
            return {k: v for k, v in self.first_at.items() if k.startswith(prefix)}

    @property
    def dead_letters(self) -> int:
        """Dead letters read so far."""
        with self.lock:
            return len(self.dead)

    def stop(self) -> None:
        """Stop reading and close the consumer."""
        self.stopping.set()
        self.join(10)
        self.consumer.close()


#: What a log line says when something went wrong in a worker.
TROUBLE = ("Traceback", "CRITICAL", "critical", "not acknowledged", "Error:")


def trouble_in_logs(logdir: Path, pattern: str = "*.log", most: int = 8) -> dict[str, list[str]]:
    """Lines of the logs in ``logdir`` that tell of trouble (tracebacks, critical, exits)."""
    out: dict[str, list[str]] = {}
    for log in sorted(logdir.glob(pattern)):
        bad = [
            line.strip()[:300]
            for line in log.read_text(errors="replace").splitlines()
            if any(w in line for w in TROUBLE)
        ]
        if bad:
            out[log.name] = bad[:most]
    return out
