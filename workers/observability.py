"""Prometheus metrics and health endpoints of a worker.

Each worker serves, on ``CTXBUDGET_METRICS_PORT`` (0 = off):

* ``/metrics``: the Prometheus exposition of the worker's own registry (records in and out
  and handling latency per stage, candidates dropped by reason, evidence tokens and budget
  use per lane, dead letters by error type, consumer lag per partition, the control state:
  rollout percent, kill switch, shadow, version);
* ``/healthz``: liveness, 200 while the event loop has ticked within ``stale_after_s``;
* ``/readyz``: readiness, 200 once the worker has joined its consumer group (partitions
  assigned) and has read the control state, else 503 with what it is waiting for.

The registry belongs to the worker (never the process-global default), so two workers in
one process or a test do not share counters. Nothing here imports faust: the app calls
:meth:`Observability.observe`, :meth:`set_lag`, :meth:`set_control`, :meth:`tick`,
:meth:`joined` and :meth:`control_read`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0)
_TOKEN_BUCKETS = (0, 100, 250, 500, 750, 1000, 1500, 2000, 3000, 4000, 6000, 8000)
_RATIO_BUCKETS = (0.1, 0.25, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0)


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
    ) -> None:
        self.worker = worker
        self.clock = clock
        self.stale_after_s = stale_after_s
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
        self.up = Gauge("ctxbudget_worker_ready", "1 once the worker is ready", registry=r)
        self._last_tick = clock()
        self._joined = False
        self._control_read = False
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- what the app reports

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
            self.dead_letters.labels(stage, error_type).inc()
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
        self._update_up()

    def control_read(self, value: bool = True) -> None:
        """The control state has been read, or not with ``value=False``."""
        self._control_read = value
        self._update_up()

    def _update_up(self) -> None:
        self.up.set(1 if self.ready()[0] else 0)

    # -- what the endpoints answer

    def alive(self) -> tuple[bool, str]:
        """Liveness and why: false once the event loop has not ticked for ``stale_after_s``."""
        age = self.clock() - self._last_tick
        if age > self.stale_after_s:
            return False, f"event loop silent for {age:.1f}s"
        return True, "ok"

    def ready(self) -> tuple[bool, str]:
        """Readiness and why: true once the group is joined and the control state read,
        else what is still awaited."""
        waiting = []
        if not self._joined:
            waiting.append("consumer group not joined")
        if not self._control_read:
            waiting.append("control state not read")
        return (not waiting, "ok" if not waiting else "; ".join(waiting))

    def exposition(self) -> bytes:
        """The worker's registry in the Prometheus text format (the body of ``/metrics``)."""
        return generate_latest(self.registry)

    # -- the HTTP server

    def serve(self, port: int, host: str = "0.0.0.0") -> int:
        """Serve /metrics, /healthz and /readyz in a daemon thread; returns the port."""
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

        server = ThreadingHTTPServer((host, port), _Handler)
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
