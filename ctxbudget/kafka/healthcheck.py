"""``python -m ctxbudget.kafka.healthcheck``: is this container's worker alive and talking to Kafka?

The container healthcheck of docker-compose.yml. When the worker serves its probes
(``CTXBUDGET_METRICS_PORT`` set), the answer is its ``/readyz`` (``--live``: ``/healthz``):
a broker answering, its group joined and the control state read. Otherwise healthy when

- the worker process (PID 1 of its container, or ``--pid``) is alive: not a zombie, not
  stopped, and its command line is a ``ctxbudget worker``;
- and it holds at least one established TCP connection to a broker port (the ports of
  ``CTXBUDGET_BROKERS``, or ``--port``), read from ``/proc/net/tcp`` and ``/proc/net/tcp6``
  of the container's network namespace.

A worker that lost every broker connection (faust keeps retrying) is reported unhealthy; a
process that died ends the container anyway. Exit status 0 healthy, 1 not, with one line
saying why. Linux only (it reads /proc).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable
from pathlib import Path

_ESTABLISHED = "01"
_DEAD_STATES = frozenset({"Z", "X", "x", "T", "t"})


def broker_ports(brokers: str) -> set[int]:
    """The ports of ``host:port[,host:port]`` (9092 where a port is not given)."""
    ports = set()
    for item in brokers.split(","):
        item = item.strip()
        if not item:
            continue
        _, sep, port = item.rpartition(":")
        ports.add(int(port) if sep and port.isdigit() else 9092)
    return ports


def process_problem(proc: Path, pid: int) -> str | None:
    """None when ``pid`` is a live ``ctxbudget worker``; else what is wrong."""
    try:
        stat = (proc / str(pid) / "stat").read_text()
        cmdline = (proc / str(pid) / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return f"process {pid} does not exist"
    state = stat.rsplit(")", 1)[-1].split()[0]
    if state in _DEAD_STATES:
        return f"process {pid} is in state {state!r}"
    words = [w.decode(errors="replace") for w in cmdline if w]
    if "worker" not in words:
        return f"process {pid} is not a ctxbudget worker: {' '.join(words)[:200]}"
    return None


def established_ports(tables: Iterable[str]) -> set[int]:
    """Remote ports of the established TCP connections in /proc/net/tcp-style tables."""
    ports = set()
    for table in tables:
        for row in table.splitlines()[1:]:
            fields = row.split()
            if len(fields) < 4 or fields[3] != _ESTABLISHED:
                continue
            ports.add(int(fields[2].rsplit(":", 1)[1], 16))
    return ports


def check(proc: Path, pid: int, ports: set[int]) -> str | None:
    """None when healthy; else one line saying why not."""
    problem = process_problem(proc, pid)
    if problem:
        return problem
    tables = []
    for name in ("tcp", "tcp6"):
        try:
            tables.append((proc / "net" / name).read_text())
        except OSError:
            continue
    if not established_ports(tables) & ports:
        wanted = ", ".join(str(p) for p in sorted(ports))
        return f"no established connection to a broker port ({wanted})"
    return None


def probe(port: int, path: str) -> int:
    """Ask the worker's own endpoint; 0 when it answers 200."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=3) as r:
            print(f"healthy: {path} {r.status}")
            return 0
    except urllib.error.HTTPError as e:
        print(
            f"unhealthy: {path} {e.code} {e.read().decode(errors='replace').strip()}",
            file=sys.stderr,
        )
    except OSError as e:
        print(f"unhealthy: {path} unreachable ({e})", file=sys.stderr)
    return 1


def main(argv: list[str] | None = None) -> int:
    """Check once and print the verdict; returns the exit status, 0 healthy, 1 not. ``argv`` is
    the command line without the program name (None: ``sys.argv``)."""
    parser = argparse.ArgumentParser(
        prog="python -m ctxbudget.kafka.healthcheck", description=__doc__
    )
    parser.add_argument("--pid", type=int, default=1, help="the worker's process id (1)")
    parser.add_argument(
        "--port", type=int, action="append", help="broker port (default: CTXBUDGET_BROKERS')"
    )
    parser.add_argument("--proc", default="/proc", help=argparse.SUPPRESS)
    parser.add_argument("--live", action="store_true", help="liveness (/healthz), not readiness")
    args = parser.parse_args(argv)
    metrics_port = os.environ.get("CTXBUDGET_METRICS_PORT", "0")
    if metrics_port.isdigit() and int(metrics_port) > 0:
        return probe(int(metrics_port), "/healthz" if args.live else "/readyz")
    ports = set(args.port or broker_ports(os.environ.get("CTXBUDGET_BROKERS", "127.0.0.1:9092")))
    problem = check(Path(args.proc), args.pid, ports)
    if problem:
        print(f"unhealthy: {problem}", file=sys.stderr)
        return 1
    print("healthy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
