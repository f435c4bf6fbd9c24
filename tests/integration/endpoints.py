"""A worker's HTTP endpoints seen from a test: a free port, a status read, a wait for a
status, and the readiness bounds the probes must meet."""

from __future__ import annotations

import socket
import time
import urllib.error
import urllib.request

#: Readiness must be false this soon after the broker is lost (seconds).
READINESS_LOSS_BOUND_S = 30.0
#: And true again this soon after it is back (a rejoin of the group included).
READINESS_BACK_BOUND_S = 60.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http_get(port: int, path: str) -> tuple[int, bytes]:
    """Status and body of ``path``; status 0 when nothing answers."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except OSError:
        return 0, b""


def wait_for(port: int, path: str, code: int, timeout_s: float) -> bytes:
    """The body once ``path`` answers ``code``; fails after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    got = (0, b"")
    while time.monotonic() < deadline:
        got = http_get(port, path)
        if got[0] == code:
            return got[1]
        time.sleep(0.5)
    raise AssertionError(f"{path} answered {got} instead of {code}")


def seconds_until(port: int, path: str, code: int, timeout_s: float) -> float:
    """Seconds until ``path`` answers ``code``; fails after ``timeout_s``."""
    t0 = time.monotonic()
    wait_for(port, path, code, timeout_s)
    return time.monotonic() - t0
