"""Which topics are live, and the guard every non-live writer puts before its first record.

A topic is **live** when it is the live pack topic as configured (``CTXBUDGET_TOPICS__PACKS``),
the v1 name of the live pack topic (:data:`LIVE_PACK_TOPIC`, whatever the settings say), or a
topic whose spec in ``topics/`` declares ``lane: live``. Names are compared as Kafka compares
them for collisions: blanks trimmed, ``.`` and ``_`` alike.

A non-live writer (the shadow worker, replay, ``ctxbudget produce``) refuses every
destination that is live; a live worker refuses a live topic in any role but ``packs`` (its
shadow packs, traces and dead letters never go there). A shadow destination with a spec of
its own must be declared ``lane: shadow`` in it. Pure: no broker, no environment.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from ctxbudget.errors import ConfigError
from ctxbudget.kafka.settings import TopicNames

if TYPE_CHECKING:
    from ctxbudget.kafka.topics import TopicSpec

__all__ = [
    "LIVE_PACK_TOPIC",
    "LaneError",
    "check_destination",
    "check_roles",
    "is_live",
    "live_topics",
]

#: The live pack topic of the v1 contract: live whatever name the settings give the role.
LIVE_PACK_TOPIC = TopicNames().packs


class LaneError(ConfigError):
    """A non-live writer is configured to write to a live topic (the message says which)."""


def _norm(name: str) -> str:
    return name.strip().replace("_", ".")


def live_topics(topics: TopicNames, specs: Sequence[TopicSpec] = ()) -> frozenset[str]:
    """The live topic names: the configured packs topic, the v1 name, and every spec's
    ``lane: live`` topic."""
    names = {topics.packs, LIVE_PACK_TOPIC, *(s.name for s in specs if s.lane == "live")}
    return frozenset(names)


def is_live(name: str, topics: TopicNames, specs: Sequence[TopicSpec] = ()) -> bool:
    """Whether ``name`` is a live topic (or a name Kafka would take for one)."""
    return _norm(name) in {_norm(n) for n in live_topics(topics, specs)}


def _setting(role: str) -> str:
    return f"CTXBUDGET_TOPICS__{role.upper()}"


def check_destination(
    name: str,
    topics: TopicNames,
    specs: Sequence[TopicSpec] = (),
    *,
    writer: str,
    role: str = "shadow",
) -> str:
    """``name`` when ``writer`` may write its non-live records there; a :class:`LaneError`
    when it is live, or when ``role`` is ``shadow`` and ``name`` has a spec of its own that
    does not declare ``lane: shadow``."""
    if is_live(name, topics, specs):
        raise LaneError(
            f"{writer}: the {role} destination {name.strip()!r} is the live pack topic "
            f"(live: {', '.join(sorted(live_topics(topics, specs)))}); {writer} never writes "
            f"there: set {_setting(role)} to a shadow topic"
        )
    own = next((s for s in specs if _norm(s.name) == _norm(name)), None)
    if role == "shadow" and own is not None and own.lane != "shadow":
        raise LaneError(
            f"{writer}: the shadow destination {name.strip()!r} is not a shadow lane "
            f"(its spec declares lane: {own.lane}); set {_setting(role)} to a shadow topic"
        )
    return name


def check_roles(
    topics: TopicNames, roles: Iterable[str], specs: Sequence[TopicSpec] = (), *, writer: str
) -> None:
    """Refuse (:class:`LaneError`) when any of ``roles`` (fields of :class:`TopicNames` other
    than ``packs``) names a live topic."""
    for role in roles:
        if role != "packs":
            check_destination(getattr(topics, role), topics, specs, writer=writer, role=role)


#: The roles (fields of TopicNames) each stage writes its records to, beside audit and dead
#: letters.
WRITES: dict[str, tuple[str, ...]] = {
    "route": ("routed",),
    "consolidate": ("consolidated",),
    "select": ("packed",),
    "compress": ("packs", "shadow"),
    "fused": ("packs", "shadow"),
    "shadow": ("shadow",),
}


def written_roles(stages: Iterable[str], *, write_intermediate: bool) -> list[str]:
    """The roles of the topics a worker running ``stages`` writes records to."""
    roles = ["audit", "deadletter"]
    for stage in stages:
        roles += WRITES[stage]
        if stage in ("fused", "shadow") and write_intermediate:
            roles += ["routed", "consolidated", "packed"]
    return list(dict.fromkeys(roles))
