"""The control topic from a command: the rollout state in force, and a change to it.

The rules are the library's: :func:`ctxbudget.rollout.next_state` (the version one higher,
known policies only, a percentage needs a candidate), :func:`ctxbudget.signing.judge` (which
records count: signed by a trusted key, each version above the last) and the workers' starting
state (:func:`ctxbudget.kafka.control_follower.starting_state`, the state in force while
the topic holds none).
This module reads the topic, asks those rules, and writes the new state, signed with the
operator's key (``CTXBUDGET_CONTROL_KEY``), with its audit event; it supplies the clock and
the identity of who changed it, which the rules never read.

The state in force is the newest *valid* signed state, never merely the newest record: a
record anyone could write (unsigned, signed by another key, stale, oversize) is passed over
and listed in :attr:`ControlView.refused`.
"""

from __future__ import annotations

import getpass
import logging
import os
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from ctxbudget.codec import encode
from ctxbudget.errors import ConfigError, KafkaEdgeError
from ctxbudget.kafka.control_follower import ROLLOUT_KEY, starting_state
from ctxbudget.kafka.io import TopicNotFoundError, client, read_topic
from ctxbudget.rollout import ControlEvent, ControlState, next_state
from ctxbudget.signing import (
    KeyRing,
    Verdict,
    judge,
    load_private_key,
    load_trusted_keys,
    sign_state,
)

if TYPE_CHECKING:
    from ctxbudget.kafka.settings import WorkerSettings

__all__ = [
    "ControlKeyError",
    "ControlTopicError",
    "ControlView",
    "change_state",
    "current_state",
    "operator",
    "operator_keys",
    "read_control",
    "read_state",
    "starting_state",
    "write_state",
]


#: The standard-library logger (the workers route it through their format; a command that
#: configures no logging shows a warning on stderr, never on the stdout it prints the state to).
log = logging.getLogger("ctxbudget.control")


class ControlTopicError(KafkaEdgeError):
    """The control topic could not be read (the message says why)."""


class ControlKeyError(ConfigError):
    """The operator's key (or the keys to verify with) is missing or unreadable."""


@dataclass(frozen=True)
class RefusedRecord:
    """A control record that does not count, where it is and why."""

    where: str
    verdict: Verdict


@dataclass(frozen=True)
class ControlView:
    """The state in force and the records on the topic that were passed over."""

    state: ControlState
    refused: tuple[RefusedRecord, ...] = field(default=())


def operator_keys(settings: WorkerSettings) -> KeyRing:
    """The keys a command verifies states with: the trusted keys
    (``CTXBUDGET_CONTROL_TRUSTED_KEYS``) and the public half of ``CTXBUDGET_CONTROL_KEY``.
    A :class:`ControlKeyError` when neither is set or one cannot be read."""
    try:
        ring = (
            load_trusted_keys(settings.control_trusted_keys)
            if settings.control_trusted_keys is not None
            else KeyRing()
        )
        if settings.control_key is not None:
            ring = ring.with_key(load_private_key(settings.control_key).public_key())
    except ConfigError as e:
        raise ControlKeyError(str(e)) from e
    if not len(ring):
        raise ControlKeyError(
            "no key to verify the control states with: set CTXBUDGET_CONTROL_KEY (the "
            "operator's private key) or CTXBUDGET_CONTROL_TRUSTED_KEYS (the workers' public keys)"
        )
    return ring


def _always_known(ref: str) -> bool:
    return True


def read_control(
    bootstrap: Sequence[str],
    topic: str,
    default: ControlState,
    *,
    keys: KeyRing,
    known_policy: Callable[[str], bool] = _always_known,
    idle_ms: int = 500,
    timeout_s: float = 15.0,
    settings: WorkerSettings | None = None,
) -> ControlView:
    """The newest valid signed state on the control topic (read from the start until it goes
    quiet), as a worker that had read the whole topic would hold it, and the records passed
    over.

    The memory broker's end offsets are not reliable, so the end is where a poll of
    ``idle_ms`` brings nothing new. No valid record yet: ``default``. Every record is judged
    by :func:`ctxbudget.signing.judge` against the state held so far (``known_policy`` says
    which policies count as loaded; the commands pass their policies folder's); a refused one
    is logged as a warning (logger ``ctxbudget.control``) and listed.
    """
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
    refused: list[RefusedRecord] = []
    try:
        for r in read_topic(consumer, topic, idle_ms=idle_ms, timeout_s=timeout_s):
            if r.key != ROLLOUT_KEY or r.value is None:
                continue
            verdict = judge(r.value, keys=keys, held=state, known_policy=known_policy)
            if verdict.state is not None:
                state = verdict.state
            elif verdict.reason is not None:
                log.warning(
                    "control record passed over at %s: %s: %s",
                    r.where,
                    verdict.reason,
                    verdict.detail[:300],
                )
                refused.append(RefusedRecord(where=r.where, verdict=verdict))
    except TopicNotFoundError as e:
        raise TopicNotFoundError(
            f"control topic {topic} does not exist (run `ctxbudget topics apply`)"
        ) from e
    finally:
        consumer.close()
    return ControlView(state=state, refused=tuple(refused))


def read_state(
    bootstrap: Sequence[str],
    topic: str,
    default: ControlState,
    *,
    keys: KeyRing,
    known_policy: Callable[[str], bool] = _always_known,
    idle_ms: int = 500,
    timeout_s: float = 15.0,
    settings: WorkerSettings | None = None,
) -> ControlState:
    """The state of :func:`read_control` alone."""
    return read_control(
        bootstrap,
        topic,
        default,
        keys=keys,
        known_policy=known_policy,
        idle_ms=idle_ms,
        timeout_s=timeout_s,
        settings=settings,
    ).state


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


def current_state(
    settings: WorkerSettings,
    brokers: str,
    policies: Path,
    *,
    keys: KeyRing | None = None,
    known_policy: Callable[[str], bool] = _always_known,
) -> ControlView:
    """The state in force: the newest valid signed state on the control topic, else the
    workers' starting state (``<policies>/rollout.yaml``, ``CTXBUDGET_POLICY``), with the
    records passed over. ``keys`` default to :func:`operator_keys` (a
    :class:`ControlKeyError` when there are none). Any failure to read the topic is a
    :class:`ControlTopicError` ("cannot read the control topic: ...")."""
    ring = keys if keys is not None else operator_keys(settings)
    try:
        return read_control(
            brokers.split(","),
            settings.topics.control,
            starting_state(settings, policies),
            keys=ring,
            known_policy=known_policy,
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
    time now and :func:`operator` (a ConfigError when a rule refuses the change), signed with
    ``CTXBUDGET_CONTROL_KEY`` (a :class:`ControlKeyError` when it is not set or unreadable);
    the write is :func:`write_state`, with ``action`` in the audit event.
    """
    if settings.control_key is None:
        raise ControlKeyError(
            "CTXBUDGET_CONTROL_KEY is not set: every control state is signed with the "
            "operator's private key (make a pair with `ctxbudget control keygen DIR`)"
        )
    try:
        key = load_private_key(settings.control_key)
    except ConfigError as e:
        raise ControlKeyError(str(e)) from e

    def loaded(ref: str) -> bool:
        try:
            known_policy(ref)
        except ConfigError:
            return False
        return True

    before = current_state(settings, brokers, policies, known_policy=loaded).state
    unsigned = next_state(
        before,
        dict(update),
        known_policy=known_policy,
        at=datetime.now(UTC).isoformat(timespec="milliseconds"),
        by=operator(),
    )
    after = sign_state(unsigned, key)
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
