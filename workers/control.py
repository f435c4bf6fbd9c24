"""Following the control topic: every worker reads all of it, and keeps the newest state.

The control topic is compacted and keyed by setting name ("rollout"). Each worker reads it
from the start with its own group-less consumer (every worker needs every record, so no
consumer group may split it), keeps the state with the highest version, and goes on
following it: a change is applied within one poll interval (0.1 s) of its arrival. Each
application is logged with its lag and reported to the audit topic.

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
from pydantic import ValidationError

from ctxbudget.models import describe_validation
from ctxbudget.rollout import ControlState, load_rollout
from workers import clients

if TYPE_CHECKING:
    from workers.settings import WorkerSettings

log = structlog.get_logger("ctxbudget.control")

ROLLOUT_KEY = b"rollout"
Applied = Callable[[ControlState, float], None]


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


def baseline_only(state: ControlState) -> ControlState:
    """The safe fallback: the baseline, live, for everyone; no candidate, no shadow."""
    return state.model_copy(
        update={
            "candidate": None,
            "percent": 0.0,
            "shadow": False,
            "note": "control topic unreadable: baseline only",
        }
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

    def offer(self, state: ControlState) -> bool:
        """Apply ``state`` if it is newer than the one in force."""
        with self._lock:
            if state.version < self._state.version:
                return False
            changed = state != self._state
            self._state = state
            return changed

    def force(self, state: ControlState) -> None:
        """Put ``state`` in force whatever its version (the baseline-only fallback at start)."""
        with self._lock:
            self._state = state


class ControlFollower(threading.Thread):
    """A daemon thread that reads the control topic from the start and keeps following it."""

    def __init__(
        self,
        *,
        bootstrap: list[str],
        topic: str,
        holder: ControlHolder,
        on_apply: Applied | None = None,
        poll_ms: int = 100,
        settings: WorkerSettings | None = None,
        client_options: dict[str, object] | None = None,
    ) -> None:
        super().__init__(name="ctxbudget-control", daemon=True)
        self.bootstrap = bootstrap
        self.settings = settings
        self.topic = topic
        self.holder = holder
        self.on_apply = on_apply
        self.poll_ms = poll_ms
        self.client_options = dict(client_options or {})
        self.caught_up = threading.Event()
        self.failed = threading.Event()
        self._stop = threading.Event()

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
            consumer.seek_to_beginning(*tps)
            while not self._stop.is_set():
                batches = consumer.poll(timeout_ms=self.poll_ms)
                records = [r for recs in batches.values() for r in recs]
                for record in records:
                    self._apply(record.key, record.value, record.timestamp)
                if not records and not self.caught_up.is_set():
                    self.failed.clear()
                    self.caught_up.set()
        finally:
            consumer.close()

    def _apply(self, key: bytes | None, value: bytes | None, timestamp_ms: int) -> None:
        if key != ROLLOUT_KEY or value is None:
            return
        try:
            state = ControlState.model_validate_json(value)
        except ValidationError as e:
            log.error("bad control record ignored", error=describe_validation(e, root="(message)"))
            return
        if self.holder.offer(state) and self.caught_up.is_set():
            lag_ms = max(0.0, time.time() * 1000 - timestamp_ms)
            log.info(
                "control applied",
                version=state.version,
                killed=state.killed,
                percent=state.percent,
                shadow=state.shadow,
                lag_ms=round(lag_ms, 1),
            )
            if self.on_apply is not None:
                self.on_apply(state, lag_ms)
