"""A wrong broker address and a taken metrics port: one clear line, within seconds."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest

from tests.paths import REPO

#: The broker question gives up after 4 s (ctxbudget.kafka.probe.ASK_TIMEOUT_S) and an idle machine
#: answers in 6-9 s all told; a loaded 2-core CI machine adds seconds of interpreter start-up
#: (`ctxbudget --help` alone took 6 s at a load average of 58). kafka-python's own default
#: made it 30 s.
WRONG_ADDRESS_BOUND_S = 20.0


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(args: list[str], env: dict[str, str]) -> tuple[int, list[str], float]:
    t0 = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "ctxbudget", *args],
        env={**os.environ, **env},
        cwd=REPO,
        capture_output=True,
        timeout=120,
    )
    took = time.monotonic() - t0
    text = (done.stdout + done.stderr).decode(errors="replace")
    return done.returncode, [line for line in text.splitlines() if line.strip()], took


@pytest.mark.parametrize(
    "args",
    [
        ["worker", "fused"],
        ["topics", "verify"],
        ["topics", "apply"],
        ["produce", "examples/batches.jsonl"],
    ],
    ids=lambda a: " ".join(a[:2]),
)
def test_a_wrong_broker_address_is_one_error_line_within_seconds(args: list[str]) -> None:
    """Nothing listens at CTXBUDGET_BROKERS: one `Error: cannot reach the broker at` line."""
    where = f"127.0.0.1:{_closed_port()}"
    code, lines, took = _run(args, {"CTXBUDGET_BROKERS": where, "CTXBUDGET_LOG_FORMAT": "json"})
    assert code != 0
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"Error: cannot reach the broker at {where}"), lines
    assert took <= WRONG_ADDRESS_BOUND_S, f"took {took:.1f}s"


def test_a_taken_metrics_port_is_one_error_line_and_exit_status_2() -> None:
    """CTXBUDGET_METRICS_PORT held by another process: exit 2, one `Error:` line, no traceback."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        code, lines, _ = _run(
            ["worker", "fused"],
            {"CTXBUDGET_METRICS_PORT": str(port), "CTXBUDGET_BROKERS": "127.0.0.1:1"},
        )
    assert code == 2
    assert lines == [
        f"Error: metrics port {port} is in use by another process (set CTXBUDGET_METRICS_PORT "
        "to a free port, or 0 to serve no metrics)"
    ]
