"""Asking the brokers whether they answer: once when a worker starts, then every few seconds.

:func:`ask_brokers` makes one metadata request (a kafka-python admin client from the one
client-config factory, so a secured cluster's credentials apply) and gives up after
``timeout_s``: a wrong address or a broker that is down is a
:class:`BrokerNotAnsweringError` saying "cannot reach the broker at HOST:PORT". A worker asks
it before it starts anything (``ctxbudget worker`` then fails in seconds with one line).

:class:`BrokerProbe` asks again every ``interval_s`` in a daemon thread, on one client kept
between rounds (made again after a failure), and reports each answer or failure to the
worker's :class:`~ctxbudget.kafka.observability.Observability`: readiness is false once no
broker has answered for its window.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ctxbudget.errors import KafkaEdgeError, one_line
from ctxbudget.kafka import clients

if TYPE_CHECKING:
    from ctxbudget.kafka.settings import WorkerSettings

__all__ = ["BOOTSTRAP_TIMEOUT_MS", "BrokerNotAnsweringError", "BrokerProbe", "ask_brokers"]

#: How long one start-up or readiness question waits for a broker (seconds).
ASK_TIMEOUT_S = 4.0
#: The same bound for the clients of the commands and the topic admin (milliseconds): a wrong
#: address is an error within seconds rather than after kafka-python's 30 s default.
BOOTSTRAP_TIMEOUT_MS = int(ASK_TIMEOUT_S * 1000)
#: How often the readiness probe asks (seconds).
PROBE_INTERVAL_S = 5.0


class BrokerNotAnsweringError(KafkaEdgeError):
    """No broker of the bootstrap list answered a metadata request in time."""


class Reporter(Protocol):
    """Where the probe reports (an Observability)."""

    def broker_answered(self) -> None: ...

    def broker_failed(self, reason: str) -> None: ...


def _where(brokers: str | Sequence[str] | None, settings: WorkerSettings | None) -> str:
    servers = clients.bootstrap_servers(brokers, settings)
    return ",".join(servers)


def _connect(
    settings: WorkerSettings | None, brokers: str | Sequence[str] | None, timeout_s: float
) -> Any:
    """An admin client that has bootstrapped (one metadata answer), or the client's error."""
    timeout_ms = int(timeout_s * 1000)
    return clients.admin_client(
        settings,
        brokers=brokers,
        client_id="ctxbudget-probe",
        bootstrap_timeout_ms=timeout_ms,
        request_timeout_ms=timeout_ms,
    )


@contextlib.contextmanager
def _client_quiet() -> Iterator[None]:
    """kafka-python's own lines held back (the failure is told once, by the caller)."""
    lib = logging.getLogger("kafka")
    level = lib.level
    lib.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        lib.setLevel(level)


def ask_brokers(
    settings: WorkerSettings | None,
    *,
    brokers: str | Sequence[str] | None = None,
    timeout_s: float = ASK_TIMEOUT_S,
) -> None:
    """Return once a broker answers a metadata request; else raise
    :class:`BrokerNotAnsweringError` after at most about ``timeout_s``. Meant for a start,
    before other clients run: kafka-python's lines are held back meanwhile."""
    where = _where(brokers, settings)
    try:
        with _client_quiet():
            admin = _connect(settings, brokers, timeout_s)
    except Exception as e:  # kafka-python's errors, the OS's, a bad address
        raise BrokerNotAnsweringError(
            f"cannot reach the broker at {where} within {timeout_s:g}s ({one_line(e)}); "
            "check CTXBUDGET_BROKERS (or --brokers) and that the broker is up"
        ) from e
    admin.close()


class BrokerProbe:
    """Asks for the cluster's metadata every ``interval_s`` and reports to ``reporter``."""

    def __init__(
        self,
        *,
        reporter: Reporter,
        connect: Callable[[], Any],
        interval_s: float = PROBE_INTERVAL_S,
    ) -> None:
        """``connect`` makes a bootstrapped admin client (it raises when no broker answers);
        the probe then asks that client for the cluster's metadata each round."""
        if interval_s <= 0:
            raise ValueError(f"interval_s must be > 0, got {interval_s!r}")
        self.reporter = reporter
        self.connect = connect
        self.interval_s = interval_s
        self._client: Any = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @classmethod
    def of(
        cls, settings: WorkerSettings, reporter: Reporter, *, interval_s: float = PROBE_INTERVAL_S
    ) -> BrokerProbe:
        """A probe of the brokers of ``settings`` (their credentials), each question bounded
        by :data:`ASK_TIMEOUT_S`."""
        return cls(
            reporter=reporter,
            connect=lambda: _connect(settings, None, ASK_TIMEOUT_S),
            interval_s=interval_s,
        )

    def ask_once(self) -> bool:
        """One round: True when a broker answered (reported either way)."""
        try:
            if self._client is None:
                self._client = self.connect()  # bootstrapping is a metadata answer
            else:
                self._client.describe_cluster()
        except Exception as e:  # any failure means: no answer this round
            self._drop_client()
            self.reporter.broker_failed(one_line(e))
            return False
        self.reporter.broker_answered()
        return True

    def start(self) -> None:
        """Ask now and then every ``interval_s`` in a daemon thread, until :meth:`stop`."""
        self._thread = threading.Thread(target=self._run, name="ctxbudget-probe", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.ask_once()
            self._stop.wait(self.interval_s)

    def stop(self) -> None:
        """Stop asking and close the client."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2 * ASK_TIMEOUT_S)
        self._drop_client()

    def _drop_client(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            try:
                client.close()
            except Exception:  # closing a broken client is best effort
                return
