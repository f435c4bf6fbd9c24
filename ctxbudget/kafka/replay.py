"""Where ``ctxbudget replay`` writes on Kafka: the shadow lane only, never the live pack topic.

A replayed pack goes to the shadow topic and its traces to the audit topic, keyed by the
request id. :func:`replay_topics` refuses a destination that is a live topic, however it is
configured, and :func:`replay_records` refuses any pack that is not a shadow pack of a replay run,
so nothing replay makes can reach the live pack topic, whatever topic the traffic came from.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ctxbudget.codec import encode
from ctxbudget.schemas import Pack, TraceEvent

if TYPE_CHECKING:
    from ctxbudget.kafka.settings import TopicNames
    from ctxbudget.kafka.topics import TopicSpec

__all__ = ["OutRecord", "ReplayTopics", "replay_records", "replay_topics"]


@dataclass(frozen=True)
class OutRecord:
    """One record to write: its topic, key and value."""

    topic: str
    key: bytes
    value: bytes


@dataclass(frozen=True)
class ReplayTopics:
    """The topics replay writes: packs to ``shadow``, traces to ``audit``."""

    shadow: str
    audit: str


def replay_topics(
    topics: TopicNames, specs: Sequence[TopicSpec] = (), *, shadow: str | None = None
) -> ReplayTopics:
    """The topics replay writes to: ``shadow`` (default: the shadow topic setting) and the
    audit topic. A :class:`~ctxbudget.kafka.lanes.LaneError` (a ConfigError) when either is a live
    topic (:func:`ctxbudget.kafka.lanes.check_destination`: the configured packs topic,
    ``ctx.packs.v1``,
    or a spec declaring ``lane: live``), or the shadow one has a spec not declaring
    ``lane: shadow``."""
    from ctxbudget.kafka.lanes import check_destination

    destination = check_destination(
        topics.shadow if shadow is None else shadow, topics, specs, writer="replay"
    )
    audit = check_destination(topics.audit, topics, specs, writer="replay", role="audit")
    return ReplayTopics(shadow=destination.strip(), audit=audit)


def replay_records(
    pack: Pack, traces: Sequence[TraceEvent], topics: ReplayTopics
) -> list[OutRecord]:
    """The records of one replayed request: the pack first, then its traces in order.

    A pack outside the shadow lane, or without the replay marker, is a ValueError: replay
    never writes one.
    """
    if pack.lane != "shadow" or pack.replay is None:
        raise ValueError(
            f"replay writes shadow packs of a replay run only; got a {pack.lane} pack"
            + ("" if pack.replay is not None else " without a replay run id")
        )
    key = pack.request_id.encode()
    return [
        OutRecord(topics.shadow, key, encode(pack)),
        *(OutRecord(topics.audit, key, encode(t)) for t in traces),
    ]
