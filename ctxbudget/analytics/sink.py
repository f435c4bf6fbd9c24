"""The audit sink: trace events and packs, from files or Kafka, into the audit database.

One batch of records is one transaction (rows, rejects and, for Kafka, the consumed offsets),
so a sink killed at any point restarts where its last transaction ended. The loop stops
cleanly on SIGTERM or Ctrl-C (after the batch in hand is written), or after ``until_idle``
seconds without a record.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import FrameType
from typing import IO, Protocol

from ctxbudget.analytics.records import Position, Rows, kafka_time
from ctxbudget.analytics.store import AuditStore, Counts
from ctxbudget.jsonl import read_lines


class Records(Protocol):
    """What the Kafka loop needs from a source (``ctxbudget.kafka.io.KafkaSource`` or a fake)."""

    def poll(self, *, timeout_ms: int, max_records: int) -> Sequence[_Record]:
        """The next records, at most ``max_records``; empty after ``timeout_ms`` without one."""
        ...


class _Record(Protocol):
    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def value(self) -> bytes | None: ...


@dataclass
class Stop:
    """Set by SIGTERM / SIGINT; the loop checks it between batches."""

    requested: bool = False
    signal_name: str | None = None

    @contextmanager
    def on_signals(self) -> Iterator[Stop]:
        """While the block runs, SIGTERM and SIGINT set ``requested`` instead of
        stopping the process; the previous handlers are restored after it (main thread
        only, as for any signal handler)."""

        def handler(signum: int, frame: FrameType | None) -> None:
            self.requested = True
            self.signal_name = signal.Signals(signum).name

        old = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            yield self
        finally:
            for s, h in old.items():
                signal.signal(s, h)


@dataclass
class Progress:
    """A progress line on stderr: rewritten in place on a terminal, else one line per period."""

    every_s: float = 2.0
    stream: IO[str] = field(default_factory=lambda: sys.stderr)
    started: float = field(default_factory=time.monotonic)
    records: int = 0
    written: Counts = field(default_factory=Counts)
    _last: float = 0.0
    _shown: tuple[int, ...] = ()

    def update(self, records: int, written: Counts, *, force: bool = False) -> None:
        """Add ``records`` read and ``written`` rows, and show the line when due: at most once
        per ``every_s``, and to a log file only when something moved. ``force`` shows it at once,
        unless the last line shown already says it all (a terminal line is then only ended)."""
        self.records += records
        self.written.add(written)
        now = time.monotonic()
        w = self.written
        state = (self.records, w.events, w.packs, w.rejects, w.controls, w.applied)
        tty = self.stream.isatty()
        if force and state == self._shown:  # the last line printed already says it all
            if tty:
                self.stream.write("\n")
            return
        changed = state != self._shown or tty  # a log file gets no line while nothing moves
        if force or (changed and now - self._last >= self.every_s):
            self._last, self._shown = now, state
            end = "" if tty and not force else "\n"
            self.stream.write(("\r" if tty else "") + self.line() + end)
            self.stream.flush()

    def rate(self) -> float:
        """Records per second since ``started``."""
        return self.records / max(time.monotonic() - self.started, 1e-9)

    def line(self) -> str:
        """The progress line: records read, their rate, and rows written per table."""
        w = self.written
        return (
            f"audit-sink: {self.records} records ({self.rate():.0f}/s): {w.events} events, "
            f"{w.decisions} decisions, {w.packs} packs, {w.rejects} rejects"
            + (f", {w.controls + w.applied} control events" if w.controls + w.applied else "")
        )


@dataclass
class Sink:
    """Feeds an :class:`AuditStore` in batches of ``batch_size`` records."""

    store: AuditStore
    batch_size: int = 1000
    progress: Progress = field(default_factory=Progress)
    stop: Stop = field(default_factory=Stop)

    def run_files(self, paths: Iterable[str]) -> Progress:
        """Load JSONL files ('-' is stdin) to their end; a record's position is its line."""
        rows, n = Rows(), 0
        for path in paths:
            origin = path if path == "-" else os.path.abspath(path)
            for line_no, raw in read_lines(path):
                rows.add(raw, Position(origin, -1, line_no))
                n += 1
                if n >= self.batch_size:
                    self.progress.update(n, self.store.write(rows))
                    rows, n = Rows(), 0
                    if self.stop.requested:
                        break
            if self.stop.requested:
                break
        if n:
            self.progress.update(n, self.store.write(rows))
        self.progress.update(0, Counts(), force=True)
        return self.progress

    def run_kafka(self, source: Records, *, until_idle: float | None = None) -> Progress:
        """Consume until stopped (or ``until_idle`` seconds pass without a record)."""
        quiet_since = time.monotonic()
        while not self.stop.requested:
            records = source.poll(timeout_ms=500, max_records=self.batch_size)
            if not records:
                self.progress.update(0, Counts())
                if until_idle is not None and time.monotonic() - quiet_since >= until_idle:
                    break
                continue
            quiet_since = time.monotonic()
            rows = Rows()
            consumed: dict[tuple[str, int], tuple[int, int]] = {}
            for r in records:
                # A fake source may carry no timestamp: the row then gets the read time.
                ts = kafka_time(getattr(r, "timestamp", None))
                rows.add(r.value, Position(r.topic, r.partition, r.offset, ts))
                _, seen = consumed.get((r.topic, r.partition), (0, 0))
                consumed[(r.topic, r.partition)] = (r.offset + 1, seen + 1)
            self.progress.update(len(records), self.store.write(rows, consumed))
        self.progress.update(0, Counts(), force=True)
        return self.progress
