"""Hand-written fakes of kafka-python's consumer for the Kafka edge's unit tests: records,
topic partitions and a consumer that serves them as read_topic and the control reader use it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class TopicPartitionFake:
    """A topic partition, as the keys of a poll result."""

    topic: str
    partition: int


@dataclass
class Rec:
    """A consumer record: where it was read, its key, value and timestamp (ms)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int


@dataclass
class FakeConsumer:
    """kafka-python's consumer as read_topic uses it: partitions, assign, seek, poll, close."""

    polls: list[dict[TopicPartitionFake, list[Rec]]]
    partitions: set[int] = field(default_factory=lambda: {0, 1})
    seeks: list[tuple[int, int | None]] = field(default_factory=list)
    closed: int = 0

    def partitions_for_topic(self, topic: str) -> set[int]:
        return self.partitions

    def assign(self, tps: list[Any]) -> None:
        self.assigned = tps

    def seek(self, tp: Any, offset: int) -> None:
        self.seeks.append((tp.partition, offset))

    def seek_to_beginning(self, *tps: Any) -> None:
        self.seeks += [(tp.partition, None) for tp in tps]

    def poll(self, timeout_ms: int) -> dict[TopicPartitionFake, list[Rec]]:
        return self.polls.pop(0) if self.polls else {}

    def close(self) -> None:
        self.closed += 1


def poll_result(*recs: Rec) -> dict[TopicPartitionFake, list[Rec]]:
    """What one poll returns for these records: grouped by topic partition."""
    out: dict[TopicPartitionFake, list[Rec]] = {}
    for r in recs:
        out.setdefault(TopicPartitionFake(r.topic, r.partition), []).append(r)
    return out


class SlicedSource:
    """A record source as the audit sink and the coverage service poll it: hands out its records
    in slices of at most max_records, then nothing."""

    def __init__(self, records: list[Any]) -> None:
        self.records = records

    def poll(self, *, timeout_ms: int, max_records: int) -> list[Any]:
        out, self.records = self.records[:max_records], self.records[max_records:]
        return out
