"""The live coverage monitor: candidates and labels from Kafka, coverage and drift as metrics.

``ctxbudget monitor --follow`` reads the candidates topic and the labels topic (every
partition, from the start, no consumer group: the monitor keeps no offsets and rebuilds its
state by reading again), joins each label with its batch (:class:`~ctxbudget.conformal.monitor.
LabelJoin`), feeds the coverage monitor and exports what it finds on a Prometheus endpoint:

- ``ctxbudget_coverage_relevant_total`` / ``ctxbudget_coverage_kept_total`` per query class:
  relevant passages labelled and those the threshold in force kept (rolling coverage in PromQL:
  ``increase(kept[1h]) / increase(relevant[1h])``);
- ``ctxbudget_coverage_lower_bound`` (95% Wilson bound over the last ``alert_passages``) and
  ``ctxbudget_coverage_target`` (1 - alpha), for the coverage alert;
- ``ctxbudget_drift_statistic``, ``ctxbudget_drift_alarms_total``,
  ``ctxbudget_recalibrations_total``;
- ``ctxbudget_labels_total`` (labels received) per source, ``ctxbudget_monitor_dropped_total``
  per reason.

Every series with a label is exported at 0 from the start, so ``increase()`` sees the first event.
The monitor changes nothing a worker serves: a recalibration is written as a file
(``--write-calibration``) for the operator to roll out.
"""

from __future__ import annotations

import contextlib
import datetime
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from ctxbudget.codec import decode_batch
from ctxbudget.conformal import CalibrationFile, recalibrate, save_calibration
from ctxbudget.conformal.monitor import CoverageMonitor, LabelJoin, RequestOutcome, wilson_interval
from ctxbudget.errors import one_line
from ctxbudget.labels import LABEL_SOURCES, Label
from ctxbudget.schemas import QUERY_CLASSES

__all__ = ["CoverageMetrics", "CoverageService", "RecordSource"]

#: Reasons a record or a join is dropped (each a series of ``ctxbudget_monitor_dropped_total``).
DROP_REASONS = ("bad_batch", "bad_label", "batch_expired", "label_expired")


class _Record(Protocol):
    @property
    def topic(self) -> str: ...
    @property
    def value(self) -> bytes | None: ...


class RecordSource(Protocol):
    """What the loop reads from (``ctxbudget.kafka.io.KafkaSource`` or a fake)."""

    def poll(self, *, timeout_ms: int, max_records: int) -> Sequence[_Record]:
        """The next records; empty after ``timeout_ms`` without one."""
        ...


class CoverageMetrics:
    """The monitor's Prometheus series, on their own registry."""

    def __init__(self, target: float) -> None:
        r = self.registry = CollectorRegistry()
        self.relevant = Counter(
            "ctxbudget_coverage_relevant", "relevant passages labelled", ["query_class"], registry=r
        )
        self.kept = Counter(
            "ctxbudget_coverage_kept",
            "labelled relevant passages the threshold in force kept",
            ["query_class"],
            registry=r,
        )
        for cls in (*QUERY_CLASSES, "none"):
            self.relevant.labels(cls)
            self.kept.labels(cls)
        self.lower = Gauge(
            "ctxbudget_coverage_lower_bound",
            "95% Wilson lower bound of coverage over the recent relevant passages",
            registry=r,
        )
        self.lower.set(1.0)
        self.target = Gauge("ctxbudget_coverage_target", "1 - alpha", registry=r)
        self.target.set(target)
        self.statistic = Gauge(
            "ctxbudget_drift_statistic", "Shiryaev-Roberts statistic of the drift test", registry=r
        )
        self.alarms = Counter("ctxbudget_drift_alarms", "drift declared", registry=r)
        self.recalibrations = Counter(
            "ctxbudget_recalibrations", "recalibrations completed", registry=r
        )
        self.labels = Counter(
            "ctxbudget_labels", "labels joined with their batch", ["source"], registry=r
        )
        for source in LABEL_SOURCES:
            self.labels.labels(source)
        self.dropped = Counter(
            "ctxbudget_monitor_dropped", "records or joins dropped", ["reason"], registry=r
        )
        for reason in DROP_REASONS:
            self.dropped.labels(reason)

    def exposition(self) -> bytes:
        """The text exposition format of every series."""
        return generate_latest(self.registry)


@dataclass
class CoverageService:
    """The loop: records in, the join and the monitor updated, metrics and events out."""

    monitor: CoverageMonitor
    join: LabelJoin
    metrics: CoverageMetrics
    candidates_topic: str
    labels_topic: str
    calibration: CalibrationFile
    write_calibration: Path | None = None
    #: one line per event (drift, recalibration, file written); stderr in the command
    emit: Callable[[str], None] = print
    stopping: bool = False
    _recalibrations_seen: int = 0
    _expired: tuple[int, int] = (0, 0)

    def handle(self, topic: str, value: bytes | None) -> RequestOutcome | None:
        """One record; the outcome when it completed a join."""
        if value is None:
            return None
        outcome: RequestOutcome | None = None
        if topic == self.candidates_topic:
            try:
                batch = decode_batch(value)
            except Exception:  # a bad batch is the workers' dead letter; here it is counted
                self.metrics.dropped.labels("bad_batch").inc()
                return None
            outcome = self.join.batch(batch)
        elif topic == self.labels_topic:
            try:
                label = Label.model_validate_json(value)
            except Exception:
                self.metrics.dropped.labels("bad_label").inc()
                return None
            self.metrics.labels.labels(label.source).inc()
            outcome = self.join.label(label.request_id, label.relevant_chunk_ids)
        self._count_expired()
        if outcome is not None:
            self._observed(outcome)
        return outcome

    def _count_expired(self) -> None:
        now = (self.join.expired_batches, self.join.expired_labels)
        if now[0] > self._expired[0]:
            self.metrics.dropped.labels("batch_expired").inc(now[0] - self._expired[0])
        if now[1] > self._expired[1]:
            self.metrics.dropped.labels("label_expired").inc(now[1] - self._expired[1])
        self._expired = now

    def _observed(self, o: RequestOutcome) -> None:
        m = self.metrics
        cls = o.query_class or "none"
        m.relevant.labels(cls).inc(o.n_relevant)
        m.kept.labels(cls).inc(o.n_kept)
        m.statistic.set(self.monitor.statistic)
        kept, n = self.monitor.recent_coverage()
        if n:
            m.lower.set(wilson_interval(kept, n)[0])
        if o.alarm:
            m.alarms.inc()
            self.emit(
                f"monitor: drift declared at labelled request {o.index} ({o.request_id}); "
                f"threshold {o.threshold:g}"
            )
        recals = self.monitor.recalibrations
        if len(recals) > self._recalibrations_seen:
            self._recalibrations_seen = len(recals)
            m.recalibrations.inc()
            self.emit(f"monitor: recalibrated at labelled request {recals[-1]}")
            self._write()

    def _write(self) -> None:
        scores = self.monitor.recalibrated_scores
        if self.write_calibration is None or scores is None:
            return
        version = self.calibration.version
        n = self._recalibrations_seen
        new_version = f"{int(version) + n}" if version.isdigit() else f"{version}.{n}"
        new = recalibrate(
            self.calibration,
            scores,
            version=new_version,
            created=datetime.date.today().isoformat(),
            n_queries=0,
        )
        path = self.write_calibration / f"{new.name}@{new.version}.json"
        try:
            save_calibration(new, path)
        except OSError as e:
            self.emit(f"monitor: cannot write {path}: {one_line(e)}")
            return
        self.emit(f"monitor: wrote {path}")

    def run(self, source: RecordSource, *, until_idle: float | None = None) -> None:
        """Poll until stopped (SIGTERM, Ctrl-C) or ``until_idle`` seconds without a record."""
        last = time.monotonic()

        def stop(signum: int, frame: FrameType | None) -> None:
            self.stopping = True

        old: dict[signal.Signals, Any] = {}
        for sig in (signal.SIGTERM, signal.SIGINT):
            # outside the main thread signals cannot be caught: the caller stops the loop
            with contextlib.suppress(ValueError):
                old[sig] = signal.signal(sig, stop)
        try:
            while not self.stopping:
                records = source.poll(timeout_ms=500, max_records=500)
                for r in records:
                    self.handle(r.topic, r.value)
                if records:
                    last = time.monotonic()
                elif until_idle is not None and time.monotonic() - last >= until_idle:
                    return
        finally:
            for sig, h in old.items():
                signal.signal(sig, h)
