"""Reading the audit, packs and shadow topics with kafka-python, from offsets we keep ourselves.

No consumer group: the sink assigns itself every partition of its topics and seeks each to
the next offset stored in the audit database (or to the beginning). The broker's committed
offsets and its latest-offset answers are never used: the embedded broker answers the latter
wrongly (ops/notes/broker-findings.md), and the database is the one place where "written"
and "consumed" can be recorded in the same transaction. Topics that do not exist yet are
looked up again every few seconds, so the sink may start before the workers.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kafka import TopicPartition

from workers import clients
from workers.settings import WorkerSettings


@dataclass(frozen=True)
class Record:
    """One record read: its topic, partition and offset, and its value (None for a tombstone)."""

    topic: str
    partition: int
    offset: int
    value: bytes | None
    #: The record's timestamp (ms since the epoch), None when the broker gave none.
    timestamp: int | None = None


def consumer_config(settings: WorkerSettings, brokers: str | None = None) -> dict[str, Any]:
    """kafka-python settings from the client factory: no group, no auto commit, security
    from the CTXBUDGET_* settings."""
    return clients.client_config(
        settings,
        brokers=brokers,
        client_id="ctxbudget-audit-sink",
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        allow_auto_create_topics=False,
        max_partition_fetch_bytes=settings.max_message_bytes + 1024 * 1024,
        fetch_max_bytes=max(52_428_800, settings.max_message_bytes * 2),
        metadata_max_age_ms=30_000,
    )


class KafkaSource:
    """Every partition of ``topics``, read from ``positions`` onwards."""

    def __init__(
        self,
        config: Mapping[str, Any],
        topics: Sequence[str],
        positions: Mapping[tuple[str, int], int],
        *,
        refresh_s: float = 5.0,
    ) -> None:
        self.topics = tuple(dict.fromkeys(topics))
        self.positions: dict[tuple[str, int], int] = dict(positions)
        self.refresh_s = refresh_s
        self.consumer = clients.build("consumer", config)
        self.assigned: set[TopicPartition] = set()
        self._next_refresh = 0.0

    def close(self) -> None:
        """Close the consumer; nothing is committed to the broker (the positions
        live in the audit database)."""
        self.consumer.close()

    def missing_topics(self) -> list[str]:
        """The topics with no partition assigned: absent at the last metadata look (every topic,
        before the first :meth:`poll`)."""
        have = {tp.topic for tp in self.assigned}
        return [t for t in self.topics if t not in have]

    def _refresh(self) -> None:
        now = time.monotonic()
        if now < self._next_refresh:
            return
        self._next_refresh = now + self.refresh_s
        wanted = {
            TopicPartition(topic, p)
            for topic in self.topics
            for p in self.consumer.partitions_for_topic(topic)
        }
        if wanted == self.assigned:
            return
        self.consumer.assign(sorted(wanted))
        fresh = []
        for tp in sorted(wanted):
            stored = self.positions.get((tp.topic, tp.partition))
            if stored is not None:
                self.consumer.seek(tp, stored)
            else:
                fresh.append(tp)
        if fresh:
            self.consumer.seek_to_beginning(*fresh)
        self.assigned = wanted

    def poll(self, *, timeout_ms: int, max_records: int) -> list[Record]:
        """The next records, at most ``max_records``; empty after ``timeout_ms`` of quiet."""
        self._refresh()
        if not self.assigned:
            time.sleep(timeout_ms / 1000)
            return []
        got = self.consumer.poll(timeout_ms=timeout_ms, max_records=max_records)
        records = [
            Record(tp.topic, tp.partition, msg.offset, msg.value, msg.timestamp)
            for tp, msgs in sorted(got.items())
            for msg in msgs
        ]
        for r in records:
            self.positions[(r.topic, r.partition)] = r.offset + 1
        return records
