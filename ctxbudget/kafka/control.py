"""The control topic from a command: the rollout state in force, and a change to it.

The rules are the library's: :func:`ctxbudget.rollout.next_state` (the version one higher,
known policies only, a percentage needs a candidate) and the workers' starting state
(:func:`workers.control.starting_state`, the state in force while the topic holds none).
This module reads the topic, asks those rules, and writes the new state with its audit event;
it supplies the clock and the identity of who changed it, which the rules never read.
"""

from __future__ import annotations

import getpass
import logging
import os
import socket
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from ctxbudget.codec import encode
from ctxbudget.errors import KafkaEdgeError
from ctxbudget.kafka.io import TopicNotFoundError, client, read_topic
from ctxbudget.models import describe_validation
from ctxbudget.rollout import ControlEvent, ControlState, next_state
from workers.control import ROLLOUT_KEY, starting_state

if TYPE_CHECKING:
    from workers.settings import WorkerSettings

__all__ = [
    "ControlTopicError",
    "change_state",
    "current_state",
    "operator",
    "read_state",
    "starting_state",
    "write_state",
]


#: The standard-library logger (the workers route it through their format; a command that
#: configures no logging shows a warning on stderr, never on the stdout it prints the state to).
log = logging.getLogger("ctxbudget.control")


class ControlTopicError(KafkaEdgeError):
    """The control topic could not be read (the message says why)."""


def read_state(
    bootstrap: Sequence[str],
    topic: str,
    default: ControlState,
    *,
    idle_ms: int = 500,
    timeout_s: float = 15.0,
    settings: WorkerSettings | None = None,
) -> ControlState:
    """The newest state on the control topic (read from the start until it goes quiet).

    The memory broker's end offsets are not reliable, so the end is where a poll of
    ``idle_ms`` brings nothing new. No record yet: ``default``. A record that is not a valid
    state is passed over with a warning (logger ``ctxbudget.control``: where it is and
    :func:`~ctxbudget.models.describe_validation` of it).
    """
    from pydantic import ValidationError

    consumer = client(
        "consumer",
        settings,
        brokers=list(bootstrap),
        client_id="ctxbudget-control",
        group_id=None,
        enable_auto_commit=False,
        request_timeout_ms=10000,
    )
    state = default
    try:
        for r in read_topic(consumer, topic, idle_ms=idle_ms, timeout_s=timeout_s):
            if r.key != ROLLOUT_KEY or r.value is None:
                continue
            try:
                candidate = ControlState.model_validate_json(r.value)
            except ValidationError as e:
                log.warning(
                    "bad control record passed over at %s: %s",
                    r.where,
                    describe_validation(e, root="(message)"),
                )
                continue
            if candidate.version >= state.version:
                state = candidate
    except TopicNotFoundError as e:
        raise TopicNotFoundError(
            f"control topic {topic} does not exist (run `ctxbudget topics apply`)"
        ) from e
    finally:
        consumer.close()
    return state


def write_state(
    bootstrap: Sequence[str],
    *,
    control_topic: str,
    audit_topic: str,
    action: str,
    before: ControlState | None,
    after: ControlState,
    settings: WorkerSettings | None = None,
) -> None:
    """Write the new state (compacted topic, key "rollout") and its audit event, each
    acknowledged by the broker before the next."""
    producer = client(
        "producer", settings, brokers=list(bootstrap), client_id="ctxbudget-control", acks="all"
    )
    try:
        producer.send(control_topic, key=ROLLOUT_KEY, value=encode(after)).get(timeout=15)
        event = ControlEvent(action=action, before=before, after=after)
        producer.send(audit_topic, key=b"control", value=encode(event)).get(timeout=15)
    finally:
        producer.close(timeout=5)


def current_state(settings: WorkerSettings, brokers: str, policies: Path) -> ControlState:
    """The state in force: the newest on the control topic, else the workers' starting state
    (``<policies>/rollout.yaml``, ``CTXBUDGET_POLICY``). Any failure to find it is a
    :class:`ControlTopicError` ("cannot read the control topic: ...")."""
    try:
        return read_state(
            brokers.split(","),
            settings.topics.control,
            starting_state(settings, policies),
            settings=settings,
        )
    except Exception as e:
        raise ControlTopicError(f"cannot read the control topic: {e}") from e


def operator() -> str:
    """Who makes a change: ``user@host:pid`` of this process."""
    return f"{getpass.getuser()}@{socket.gethostname()}:{os.getpid()}"


def change_state(
    settings: WorkerSettings,
    brokers: str,
    action: str,
    update: Mapping[str, object],
    *,
    policies: Path,
    known_policy: Callable[[str], object],
) -> ControlState:
    """Apply one change to the state in force and write it; return the new state.

    The state in force is :func:`current_state` (a :class:`ControlTopicError` when it cannot
    be read); the new one is :func:`~ctxbudget.rollout.next_state` of it, stamped with the
    time now and :func:`operator` (a ConfigError when a rule refuses the change); the write
    is :func:`write_state`, with ``action`` in the audit event.
    """
    before = current_state(settings, brokers, policies)
    after = next_state(
        before,
        dict(update),
        known_policy=known_policy,
        at=datetime.now(UTC).isoformat(timespec="milliseconds"),
        by=operator(),
    )
    write_state(
        brokers.split(","),
        control_topic=settings.topics.control,
        audit_topic=settings.topics.audit,
        action=action,
        before=before,
        after=after,
        settings=settings,
    )
    return after
