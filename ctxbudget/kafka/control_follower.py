"""Following the control topic: every worker reads all of it, and keeps the newest valid state.

The control topic is compacted and keyed by setting name ("rollout"). Each worker reads it
from the start with its own group-less consumer (every worker needs every record, so no
consumer group may split it) and goes on following it: a change is applied within one poll
interval (0.1 s) of its arrival.

Only a record :func:`ctxbudget.signing.judge` accepts is applied: signed by a key in
``CTXBUDGET_CONTROL_TRUSTED_KEYS``, a version strictly above the one held, policies this
worker has loaded, at most 16 KiB. Any other record is refused: counted
(``ctxbudget_control_refused_total{reason}``), logged once per reason (then at most once a
minute), reported to the audit topic, and the state held keeps serving. Each application is
logged with its signer and lag and reported to the audit topic with the states before and
after. A worker with no trusted key ignores the topic and packs with the baseline only.

If the topic cannot be read at start, the worker runs the baseline policy only and says so
loudly; it keeps trying in the background and applies the state once it can read it.

Reading the state once and writing a change (``ctxbudget control``) is
:mod:`ctxbudget.kafka.control`, which starts from :func:`starting_state` too.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from ctxbudget.kafka import clients
from ctxbudget.rollout import ControlState, load_rollout
from ctxbudget.signing import (
    MAX_CONTROL_RECORD_BYTES,
    REFUSAL_REASONS,
    KeyRing,
    Verdict,
    judge,
    load_trusted_keys,
)

if TYPE_CHECKING:
    from ctxbudget.kafka.settings import WorkerSettings

log = structlog.get_logger("ctxbudget.control")

ROLLOUT_KEY = b"rollout"
#: Told of each state applied: the state before, the state after, the lag in ms.
Applied = Callable[[ControlState, ControlState, float], None]
#: Told of each record refused: the verdict, where it was read, its size in bytes.
Refused = Callable[[Verdict, str, int], None]


def trusted_keys(settings: WorkerSettings) -> KeyRing | None:
    """The keys control states must be signed by (``CTXBUDGET_CONTROL_TRUSTED_KEYS``, a file
    or a folder); None when none is configured. A ConfigError when they cannot be loaded."""
    if settings.control_trusted_keys is None:
        return None
    return load_trusted_keys(settings.control_trusted_keys)


def starting_state(settings: WorkerSettings, policies: Path) -> ControlState:
    """The state a worker starts from, before the control topic is read.

    ``<policies>/rollout.yaml`` when present, else the baseline ``CTXBUDGET_POLICY``
    (``default@1``). A ``CTXBUDGET_POLICY`` that is set (not empty) replaces the file's
    baseline, so a deployment chooses its baseline without editing the policies folder.
    The control topic overrides either once it holds a state.
    """
    chosen = settings.policy if "policy" in settings.model_fields_set else None
    path = Path(policies) / "rollout.yaml"
    if not path.exists():
        return ControlState(baseline=chosen or "default@1")
    state = load_rollout(path)
    if chosen and chosen != state.baseline:
        log.info("baseline from CTXBUDGET_POLICY", file_baseline=state.baseline, baseline=chosen)
        state = state.model_copy(update={"baseline": chosen})
    return state


def baseline_only(
    state: ControlState, note: str = "control topic unreadable: baseline only"
) -> ControlState:
    """The safe fallback: the baseline, live, for everyone; no candidate, no shadow."""
    return state.model_copy(
        update={"candidate": None, "percent": 0.0, "shadow": False, "note": note}
    )


class ControlHolder:
    """The state in force in this process (thread-safe; the newest version wins)."""

    def __init__(self, initial: ControlState) -> None:
        self._state = initial
        self._lock = threading.Lock()

    def get(self) -> ControlState:
        """The state in force."""
        with self._lock:
            return self._state

    def offer(self, state: ControlState) -> ControlState | None:
        """Put ``state`` in force if its version is strictly greater than the one in force;
        return the state it replaced (None when it is not applied)."""
        with self._lock:
            if state.version <= self._state.version:
                return None
            before, self._state = self._state, state
            return before

    def force(self, state: ControlState) -> None:
        """Put ``state`` in force whatever its version (the baseline-only fallback at start)."""
        with self._lock:
            self._state = state


class RefusalLog:
    """Refused control records: counted by reason, logged once per reason (then at most once
    every ``every_s`` with how many more there were), and handed to ``report``."""

    def __init__(
        self,
        *,
        counter: Any | None = None,
        report: Refused | None = None,
        every_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.counter = counter
        self.report = report
        self.every_s = every_s
        self.clock = clock
        self._logged: dict[str, float] = {}
        self._since: dict[str, int] = {}

    def refused(self, verdict: Verdict, where: str, size: int) -> None:
        """Count, log (rate-limited) and report one refused record."""
        reason = verdict.reason or "malformed"
        if self.counter is not None:
            self.counter.labels(reason).inc()
        now = self.clock()
        last = self._logged.get(reason)
        if last is None or now - last >= self.every_s:
            log.error(
                "control record refused; the state in force stays",
                reason=reason,
                detail=verdict.detail[:300],
                claimed_key_id=verdict.key_id,
                claimed_version=verdict.version,
                where=where,
                size=size,
                **({"more_since_last_line": self._since[reason]} if last is not None else {}),
            )
            self._logged[reason] = now
            self._since[reason] = 0
        else:
            self._since[reason] = self._since.get(reason, 0) + 1
        if self.report is not None:
            self.report(verdict, where, size)


def refusal_counter(registry: Any) -> Any:
    """The counter of refused control records by reason, in ``registry``, every reason
    exported at 0 from the start (so the first refusal shows in ``increase()``)."""
    from prometheus_client import Counter

    counter = Counter(
        "ctxbudget_control_refused",
        "Control records refused (unsigned, untrusted, stale, unknown policy, ...), by reason",
        ["reason"],
        registry=registry,
    )
    for reason in REFUSAL_REASONS:
        counter.labels(reason)
    return counter


def _never_known(ref: str) -> bool:
    return False


class ControlFollower(threading.Thread):
    """A daemon thread that reads the control topic from the start and keeps following it,
    applying only the records :func:`ctxbudget.signing.judge` accepts."""

    def __init__(
        self,
        *,
        bootstrap: list[str],
        topic: str,
        holder: ControlHolder,
        keys: KeyRing | None = None,
        known_policy: Callable[[str], bool] = _never_known,
        on_apply: Applied | None = None,
        refusals: RefusalLog | None = None,
        poll_ms: int = 100,
        max_bytes: int = MAX_CONTROL_RECORD_BYTES,
        settings: WorkerSettings | None = None,
        client_options: dict[str, object] | None = None,
    ) -> None:
        super().__init__(name="ctxbudget-control", daemon=True)
        self.bootstrap = bootstrap
        self.settings = settings
        self.topic = topic
        self.holder = holder
        self.keys = keys if keys is not None else KeyRing()
        self.known_policy = known_policy
        self.on_apply = on_apply
        self.refusals = refusals if refusals is not None else RefusalLog()
        self.poll_ms = poll_ms
        self.max_bytes = max_bytes
        self.client_options = dict(client_options or {})
        self.caught_up = threading.Event()
        self.failed = threading.Event()
        self._stop = threading.Event()
        #: The next offset to read of each partition: after a reconnection the follower goes on
        #: from there (reading the history again would refuse it all as stale).
        self._next: dict[int, int] = {}

    def stop(self) -> None:
        """Ask the thread to stop; it ends after the poll (or the retry wait) in progress."""
        self._stop.set()

    def wait_caught_up(self, timeout_s: float) -> bool:
        """True once the topic has been read to its end (no record left in a poll)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.caught_up.wait(0.05):
                return True
            if self.failed.is_set():
                return False
        return self.caught_up.is_set()

    def run(self) -> None:
        """Follow the topic until stopped. An error (broker down, topic missing) sets ``failed``,
        is logged and is retried every 2 s: the thread never dies."""
        while not self._stop.is_set():
            try:
                self._follow()
            except Exception as e:  # broker down, topic missing: retry, never die
                self.failed.set()
                log.error("control topic unreadable", topic=self.topic, error=str(e))
                self._stop.wait(2.0)

    def _consumer(self) -> Any:
        """The group-less consumer, configured by the client factory (security included)."""
        return clients.consumer(
            self.settings,
            brokers=self.bootstrap,
            client_id="ctxbudget-control-follower",
            group_id=None,
            enable_auto_commit=False,
            fetch_max_wait_ms=50,  # a change must not wait for a long fetch to time out
            request_timeout_ms=10000,
            **self.client_options,
        )

    def _follow(self) -> None:
        from kafka import TopicPartition

        consumer = self._consumer()
        try:
            parts = consumer.partitions_for_topic(self.topic)
            if not parts:
                raise RuntimeError(f"topic {self.topic} does not exist")
            tps = [TopicPartition(self.topic, p) for p in sorted(parts)]
            consumer.assign(tps)
            for tp in tps:
                if tp.partition in self._next:
                    consumer.seek(tp, self._next[tp.partition])
                else:
                    consumer.seek_to_beginning(tp)
            while not self._stop.is_set():
                batches = consumer.poll(timeout_ms=self.poll_ms)
                records = [r for recs in batches.values() for r in recs]
                for record in records:
                    where = f"{record.topic}[{record.partition}]@{record.offset}"
                    self._apply(record.key, record.value, record.timestamp, where)
                    self._next[record.partition] = record.offset + 1
                if not records and not self.caught_up.is_set():
                    self.failed.clear()
                    self.caught_up.set()
        finally:
            consumer.close()

    def _apply(
        self, key: bytes | None, value: bytes | None, timestamp_ms: int, where: str = "-"
    ) -> None:
        if key != ROLLOUT_KEY or value is None:
            return
        held = self.holder.get()
        verdict = judge(
            value,
            keys=self.keys,
            held=held,
            known_policy=self.known_policy,
            max_bytes=self.max_bytes,
        )
        if verdict.state is None:
            if verdict.reason is not None:
                self.refusals.refused(verdict, where, len(value))
            return
        state = verdict.state
        before = self.holder.offer(state)
        if before is None:
            return
        if self.caught_up.is_set():
            lag_ms = max(0.0, time.time() * 1000 - timestamp_ms)
            log.info(
                "control applied",
                version=state.version,
                key_id=state.key_id,
                killed=state.killed,
                percent=state.percent,
                shadow=state.shadow,
                lag_ms=round(lag_ms, 1),
            )
            if self.on_apply is not None:
                self.on_apply(before, state, lag_ms)
