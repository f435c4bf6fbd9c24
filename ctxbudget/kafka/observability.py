"""Prometheus metrics and health endpoints of a worker.

Each worker serves, on ``CTXBUDGET_METRICS_PORT`` (0 = off):

* ``/metrics``: the Prometheus exposition of the worker's own registry (records in and out
  and handling latency per stage, candidates dropped by reason, evidence tokens and budget
  use per lane, dead letters by error type, consumer lag per partition, the control state:
  rollout percent, kill switch, shadow, version);
* ``/healthz``: liveness, 200 while the event loop has ticked within ``stale_after_s``. It
  never depends on the broker: restarting a worker does not mend a broker outage;
* ``/readyz``: readiness, 200 while the worker is connected and consuming: a broker has
  answered a metadata request within ``broker_window_s`` (:mod:`ctxbudget.kafka.probe` asks every
  few seconds), the consumer group is joined (partitions assigned) and the control state has
  been read; else 503 with what is missing. ``ctxbudget_worker_ready`` is the same answer.

Every counter series whose labels are known up front (records and dead letters per stage,
dead letters per error type, drops per lane and reason, skips) is exported at 0 from the
start (:meth:`Observability.expect`), so ``increase()`` and ``rate()`` see the first event.
Dead-letter error types outside :data:`DEAD_LETTER_TYPES` are counted as ``other`` (the
dead letter itself names the real type), which keeps that label's values known and few.
While no broker answers, the consumer lag is not exported (a stale 0 would say "caught up").

The registry belongs to the worker (never the process-global default), so two workers in
one process or a test do not share counters. Nothing here imports faust: the app calls
:meth:`Observability.observe`, :meth:`set_lag`, :meth:`set_control`, :meth:`tick`,
:meth:`joined`, :meth:`control_read`, :meth:`broker_answered` and :meth:`broker_failed`.
"""

from __future__ import annotations

import errno
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, get_args

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from ctxbudget.errors import KafkaEdgeError
from ctxbudget.schemas import DropReason

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0)
_TOKEN_BUCKETS = (0, 100, 250, 500, 750, 1000, 1500, 2000, 3000, 4000, 6000, 8000)
_RATIO_BUCKETS = (0.1, 0.25, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0)

#: The error types a dead letter can name that get their own series; any other is ``other``.
#: The handlers dead-letter the project's errors; the delivery path ``OutputRefused``.
DEAD_LETTER_TYPES = (
    "InputError",
    "LimitError",
    "TokenizerError",
    "ConfigError",
    "CtxBudgetError",
    "OutputRefused",
    "other",
)
#: Why a candidate may be left out of a pack (the DropReason values of the wire contract).
DROP_REASONS: tuple[str, ...] = get_args(DropReason)
#: The lanes a pack can be in.
LANES = ("live", "shadow")
#: How long readiness survives without an answer from a broker (seconds).
BROKER_WINDOW_S = 15.0


class MetricsPortInUseError(KafkaEdgeError):
    """The metrics port asked for is taken by another process."""


def _port_taken(port: int) -> MetricsPortInUseError:
    return MetricsPortInUseError(
        f"metrics port {port} is in use by another process "
        "(set CTXBUDGET_METRICS_PORT to a free port, or 0 to serve no metrics)"
    )


def check_port_free(port: int, host: str = "0.0.0.0") -> None:
    """Raise :class:`MetricsPortInUseError` when ``port`` cannot be bound now (a check made
    before the slow part of a start; :meth:`Observability.serve` binds it for good)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as e:
            if e.errno != errno.EADDRINUSE:
                raise
            raise _port_taken(port) from e


def dead_letter_label(error_type: str) -> str:
    """The ``error_type`` label of a dead letter: its type when known, else ``other``."""
    return error_type if error_type in DEAD_LETTER_TYPES else "other"


@dataclass(frozen=True, slots=True)
class PackFacts:
    """What a worker learns about one pack it produced (no text)."""

    lane: str
    evidence_tokens: int
    evidence_budget: int
    dropped: Mapping[str, int]
    withheld: int = 0


class Observability:
    """A worker's metrics registry, health state and (optionally) its HTTP endpoints."""

    def __init__(
        self,
        *,
        worker: str,
        clock: Callable[[], float] = time.monotonic,
        stale_after_s: float = 30.0,
        broker_window_s: float = BROKER_WINDOW_S,
    ) -> None:
        self.worker = worker
        self.clock = clock
        self.stale_after_s = stale_after_s
        self.broker_window_s = broker_window_s
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.records_in = Counter(
            "ctxbudget_records_in", "Input records handled", ["stage"], registry=r
        )
        self.records_out = Counter(
            "ctxbudget_records_out", "Records produced, by topic", ["stage", "topic"], registry=r
        )
        self.latency = Histogram(
            "ctxbudget_handle_seconds",
            "Time to handle one input record (decode, stage, encode)",
            ["stage"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.dropped = Counter(
            "ctxbudget_candidates_dropped",
            "Candidates not admitted to a pack, by reason",
            ["lane", "reason"],
            registry=r,
        )
        self.withheld = Counter(
            "ctxbudget_passages_withheld",
            "Passages the injection gate withheld from packs",
            ["lane"],
            registry=r,
        )
        self.evidence_tokens = Histogram(
            "ctxbudget_pack_evidence_tokens",
            "Evidence tokens of each pack, by lane (shadow minus live: compare the lanes)",
            ["lane"],
            buckets=_TOKEN_BUCKETS,
            registry=r,
        )
        self.budget_use = Histogram(
            "ctxbudget_pack_budget_use_ratio",
            "Evidence tokens over the evidence budget, by lane",
            ["lane"],
            buckets=_RATIO_BUCKETS,
            registry=r,
        )
        self.dead_letters = Counter(
            "ctxbudget_dead_letters", "Dead letters produced", ["stage", "error_type"], registry=r
        )
        self.skipped = Counter(
            "ctxbudget_records_skipped",
            "Records that could be neither processed nor dead-lettered",
            ["stage"],
            registry=r,
        )
        self.lag = Gauge(
            "ctxbudget_consumer_lag",
            "Records behind the end of the partition (log end minus position)",
            ["topic", "partition"],
            registry=r,
        )
        self.control_percent = Gauge(
            "ctxbudget_control_rollout_percent", "Share of cohort keys on the candidate", registry=r
        )
        self.control_killed = Gauge(
            "ctxbudget_control_killed", "1 while the kill switch is on", registry=r
        )
        self.control_shadow = Gauge("ctxbudget_control_shadow", "1 while shadow is on", registry=r)
        self.control_version = Gauge(
            "ctxbudget_control_version", "Version of the control state applied", registry=r
        )
        self.up = Gauge(
            "ctxbudget_worker_ready", "1 while the worker is ready (its /readyz)", registry=r
        )
        self.up.set_function(lambda: 1.0 if self.ready()[0] else 0.0)
        self.broker_up = Gauge(
            "ctxbudget_broker_reachable",
            "1 while a broker has answered a metadata request within the readiness window",
            registry=r,
        )
        self.broker_up.set_function(lambda: 1.0 if self.broker_answering() else 0.0)
        self._last_tick = clock()
        self._joined = False
        self._control_read = False
        self._broker_seen: float | None = None
        self._broker_error = "no broker has answered yet"
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- what the app reports

    def expect(
        self,
        stages: Iterable[str],
        *,
        outputs: Mapping[str, Iterable[str]] | None = None,
        lanes: Iterable[str] = (),
        skip_label: str | None = None,
    ) -> None:
        """Export at 0 every counter series these stages can move: records in, records out to
        each of ``outputs[stage]``, dead letters per known error type, handling latency; for
        each of ``lanes``, drops per reason and withheld passages; skips under ``skip_label``."""
        for stage in stages:
            self.records_in.labels(stage)
            self.latency.labels(stage)
            for topic in (outputs or {}).get(stage, ()):
                self.records_out.labels(stage, topic)
            for error_type in DEAD_LETTER_TYPES:
                self.dead_letters.labels(stage, error_type)
        for lane in lanes:
            self.withheld.labels(lane)
            self.evidence_tokens.labels(lane)
            self.budget_use.labels(lane)
            for reason in DROP_REASONS:
                self.dropped.labels(lane, reason)
        if skip_label is not None:
            self.skipped.labels(skip_label)

    def observe(
        self,
        stage: str,
        seconds: float,
        topics: list[str],
        *,
        dead_letter_types: list[str] | None = None,
        packs: list[PackFacts] | None = None,
    ) -> None:
        """One input record handled: its latency, what it produced."""
        self.records_in.labels(stage).inc()
        self.latency.labels(stage).observe(seconds)
        for topic in topics:
            self.records_out.labels(stage, topic).inc()
        for error_type in dead_letter_types or ():
            self.dead_letters.labels(stage, dead_letter_label(error_type)).inc()
        for p in packs or ():
            self.evidence_tokens.labels(p.lane).observe(p.evidence_tokens)
            if p.evidence_budget > 0:
                self.budget_use.labels(p.lane).observe(p.evidence_tokens / p.evidence_budget)
            for reason, n in p.dropped.items():
                self.dropped.labels(p.lane, reason).inc(n)
            if p.withheld:
                self.withheld.labels(p.lane).inc(p.withheld)

    def skip(self, stage: str, n: int = 1) -> None:
        """One record of ``stage`` could be neither processed nor dead-lettered."""
        self.skipped.labels(stage).inc(n)

    def set_lag(self, topic: str, partition: int, lag: int) -> None:
        """``partition`` of ``topic`` is ``lag`` records behind the log end (floored at 0)."""
        self.lag.labels(topic, str(partition)).set(max(0, lag))

    def forget_lag(self) -> None:
        """Stop exporting the lag (no broker answers: the last figures are no longer true)."""
        self.lag.clear()

    def set_control(self, *, percent: float, killed: bool, shadow: bool, version: int) -> None:
        """The control state in force: rollout percent, kill switch, shadow and version."""
        self.control_percent.set(percent)
        self.control_killed.set(1 if killed else 0)
        self.control_shadow.set(1 if shadow else 0)
        self.control_version.set(version)

    def tick(self) -> None:
        """The event loop is alive (call it from a periodic task)."""
        self._last_tick = self.clock()

    def joined(self, value: bool = True) -> None:
        """The consumer group is joined (partitions assigned), or no longer with ``value=False``."""
        self._joined = value

    def control_read(self, value: bool = True) -> None:
        """The control state has been read, or not with ``value=False``."""
        self._control_read = value

    def broker_answered(self) -> None:
        """A broker answered a metadata request just now."""
        self._broker_seen = self.clock()

    def broker_failed(self, reason: str) -> None:
        """A metadata request failed (``reason``: the client's error, one line)."""
        self._broker_error = reason

    def broker_answering(self) -> bool:
        """Whether a broker has answered within ``broker_window_s``."""
        seen = self._broker_seen
        return seen is not None and self.clock() - seen <= self.broker_window_s

    # -- what the endpoints answer

    def alive(self) -> tuple[bool, str]:
        """Liveness and why: false once the event loop has not ticked for ``stale_after_s``."""
        age = self.clock() - self._last_tick
        if age > self.stale_after_s:
            return False, f"event loop silent for {age:.1f}s"
        return True, "ok"

    def ready(self) -> tuple[bool, str]:
        """Readiness and why: true while a broker answers, the group is joined and the control
        state has been read, else what is missing."""
        waiting = []
        if not self.broker_answering():
            seen = self._broker_seen
            since = "" if seen is None else f" for {self.clock() - seen:.0f}s"
            waiting.append(f"no answer from the broker{since} ({self._broker_error})")
        if not self._joined:
            waiting.append("consumer group not joined")
        if not self._control_read:
            waiting.append("control state not read")
        return (not waiting, "ok" if not waiting else "; ".join(waiting))

    def exposition(self) -> bytes:
        """The worker's registry in the Prometheus text format (the body of ``/metrics``); no
        lag figures while no broker answers (they would be stale)."""
        if not self.broker_answering():
            self.forget_lag()
        return generate_latest(self.registry)

    # -- the HTTP server

    def serve(self, port: int, host: str = "0.0.0.0") -> int:
        """Serve /metrics, /healthz and /readyz in a daemon thread; returns the port.

        A port taken by another process is a :class:`MetricsPortInUseError`."""
        obs = self

        class _Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._send(200, obs.exposition(), CONTENT_TYPE_LATEST)
                elif path in ("/healthz", "/livez"):
                    ok, why = obs.alive()
                    self._send(200 if ok else 503, (why + "\n").encode(), "text/plain")
                elif path == "/readyz":
                    ok, why = obs.ready()
                    self._send(200 if ok else 503, (why + "\n").encode(), "text/plain")
                else:
                    self._send(404, b"not found\n", "text/plain")

            def _send(self, code: int, body: bytes, ctype: str) -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return  # probes every few seconds would flood the log

        try:
            server = ThreadingHTTPServer((host, port), _Handler)
        except OSError as e:
            if e.errno != errno.EADDRINUSE:
                raise
            raise _port_taken(port) from e
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, name=f"metrics-{self.worker}", daemon=True
        )
        self._thread.start()
        return int(server.server_address[1])

    def close(self) -> None:
        """Stop the HTTP server, if one runs."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
