"""Reading and writing topics: kafka-python clients from the one client-config factory.

- :func:`client` builds a producer, consumer or admin client (``ctxbudget.kafka.clients``:
  the bootstrap servers and the security settings of
  :class:`~ctxbudget.kafka.settings.WorkerSettings`); inside
  :func:`reaching`, a broker that cannot be reached is a :class:`BrokerUnreachableError`.
- :func:`read_topic` reads every partition of a topic from the start (or an offset) until it
  goes quiet: ``ctxbudget replay --from-topic``, ``compare`` and the control state read;
  :func:`assign_all` positions a group-less consumer on every partition of some topics.
- :func:`follow` yields what a subscribed consumer brings until it stays quiet (the demo).
- :class:`KafkaSource` reads every partition of some topics from positions kept elsewhere
  (the audit sink keeps them in its database).
- :class:`TopicWriter` sends records and reports each acknowledgement; :func:`writer_for`
  makes one once the broker answers and the topic exists (``ctxbudget produce``).

Every record read is a :class:`TopicRecord`, whatever client read it. kafka-python is imported
when a client is made, never at import time: this module imports without the ``kafka`` extra.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from ctxbudget.errors import KafkaEdgeError, one_line
from ctxbudget.kafka import clients
from ctxbudget.kafka.probe import BOOTSTRAP_TIMEOUT_MS

if TYPE_CHECKING:
    from ctxbudget.kafka.settings import WorkerSettings

__all__ = [
    "BrokerUnreachableError",
    "KafkaSource",
    "TopicNotFoundError",
    "TopicRecord",
    "TopicWriter",
    "assign_all",
    "client",
    "consumer_config",
    "follow",
    "missing_client_library",
    "reaching",
    "read_topic",
    "writer_for",
]

ClientKind = Literal["producer", "consumer", "admin"]
#: What a send reports when the broker answers: the error (None when acknowledged), and the
#: partition and offset the record was written at (None when it was not).
Acknowledged = Callable[[BaseException | None, int | None, int | None], None]


class BrokerUnreachableError(KafkaEdgeError):
    """The broker could not be reached or did not answer; the message says where and why.

    ``cause`` is the client's own error (kafka-python's, or the operating system's).
    """

    def __init__(self, message: str, cause: BaseException) -> None:
        super().__init__(message)
        self.cause = cause


class TopicNotFoundError(KafkaEdgeError):
    """A topic to read or write does not exist on the broker."""


@dataclass(frozen=True)
class TopicRecord:
    """One record read: where it is, its key and value (None for a tombstone), its timestamp."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    #: The record's timestamp (ms since the epoch), None when the broker gave none.
    timestamp: int | None = None

    @property
    def where(self) -> str:
        """``<topic>[<partition>]@<offset>``, for messages."""
        return f"{self.topic}[{self.partition}]@{self.offset}"

    @classmethod
    def of(cls, record: Any) -> TopicRecord:
        """The record of a kafka-python ``ConsumerRecord``."""
        return cls(
            record.topic,
            record.partition,
            record.offset,
            record.key,
            record.value,
            record.timestamp,
        )


def missing_client_library() -> str | None:
    """The name of the missing module when the Kafka client cannot be imported (the ``kafka``
    extra is not installed); None when it can."""
    try:
        import kafka.errors  # noqa: F401
    except ModuleNotFoundError as e:
        return e.name or "kafka"
    return None


def client(
    kind: ClientKind,
    settings: WorkerSettings | None,
    *topics: str,
    brokers: str | Sequence[str] | None = None,
    client_id: str = "ctxbudget",
    **options: Any,
) -> Any:
    """A kafka-python producer, consumer (subscribed to ``topics``) or admin client, configured
    by the client-config factory from ``settings`` (None: plaintext, no credentials). It waits
    at most :data:`BOOTSTRAP_TIMEOUT_MS` for the broker's first answer unless told otherwise."""
    options.setdefault("bootstrap_timeout_ms", BOOTSTRAP_TIMEOUT_MS)
    if kind == "consumer":
        return clients.consumer(settings, *topics, brokers=brokers, client_id=client_id, **options)
    if topics:
        raise ValueError(f"a {kind} subscribes to no topic; got {topics}")
    if kind == "producer":
        return clients.producer(settings, brokers=brokers, client_id=client_id, **options)
    return clients.admin_client(settings, brokers=brokers, client_id=client_id, **options)


@contextlib.contextmanager
def reaching(
    brokers: str | Sequence[str], *, doing: str = "reach the broker at", value_errors: bool = True
) -> Iterator[None]:
    """Turn a client's failure to reach ``brokers`` inside the block into a
    :class:`BrokerUnreachableError`: "cannot <doing> <brokers>: <the client's error>".

    Client errors and OS errors always; a ValueError (a bad bootstrap list) too unless
    ``value_errors`` is false.
    """
    from kafka.errors import KafkaError

    caught: tuple[type[BaseException], ...] = (KafkaError, OSError)
    if value_errors:
        caught += (ValueError,)
    try:
        yield
    except caught as e:
        where = brokers if isinstance(brokers, str) else ",".join(brokers)
        raise BrokerUnreachableError(f"cannot {doing} {where}: {one_line(e)}", e) from e


def _partitions(consumer: Any, topic: str) -> list[Any]:
    from kafka import TopicPartition

    return [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]


def assign_all(
    consumer: Any,
    topics: Sequence[str],
    *,
    from_offset: int | None = None,
    wait_s: float = 0.0,
) -> list[Any]:
    """Assign ``consumer`` (no group) every partition of ``topics`` and seek each to
    ``from_offset``, else to the beginning; return the partitions, in topic and partition
    order (none for topics that do not exist).

    With ``wait_s`` every topic must be found: a metadata request that reaches no node
    answers as if the topic were absent, so the look-up is repeated until each topic has
    partitions, and :class:`TimeoutError` names the missing ones after ``wait_s``."""
    deadline = time.monotonic() + wait_s
    found = {topic: _partitions(consumer, topic) for topic in topics}
    while wait_s > 0 and not all(found.values()):
        if time.monotonic() > deadline:
            missing = sorted(t for t, tps in found.items() if not tps)
            raise TimeoutError(f"no partitions for {missing} after {wait_s:.0f} s")
        time.sleep(0.5)
        found = {t: tps or _partitions(consumer, t) for t, tps in found.items()}
    tps = [tp for topic in topics for tp in found[topic]]
    if not tps:
        return []
    consumer.assign(tps)
    for tp in tps:
        if from_offset is not None:
            consumer.seek(tp, from_offset)
        else:
            consumer.seek_to_beginning(tp)
    return tps


def read_topic(
    consumer: Any,
    topic: str,
    *,
    from_offset: int | None = None,
    to_offset: int | None = None,
    since: float | None = None,
    until: float | None = None,
    idle_ms: int = 1000,
    timeout_s: float | None = None,
) -> Generator[TopicRecord, None, None]:
    """Every partition of ``topic`` from the start (or ``from_offset``) until a poll of
    ``idle_ms`` brings nothing (or ``timeout_s`` has passed); the consumer is closed at the end.

    ``to_offset`` (inclusive) applies to every partition, as ``from_offset`` does; ``since``
    and ``until`` (seconds since the epoch, inclusive) filter on the record timestamps while
    reading: the memory broker's end offsets and offset-for-time answers are not reliable, so
    they are never asked. The records of one poll come partition by partition. A topic that
    does not exist is a :class:`TopicNotFoundError`.
    """
    try:
        if not assign_all(consumer, [topic], from_offset=from_offset):
            raise TopicNotFoundError(f"topic {topic} does not exist")
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while deadline is None or time.monotonic() < deadline:
            batches = consumer.poll(timeout_ms=idle_ms)
            if not any(batches.values()):
                return
            for _, recs in sorted(batches.items(), key=lambda kv: kv[0].partition):
                for r in recs:
                    if to_offset is not None and r.offset > to_offset:
                        continue
                    ts = r.timestamp / 1000
                    if (since is not None and ts < since) or (until is not None and ts > until):
                        continue
                    yield TopicRecord.of(r)
    finally:
        consumer.close()


def follow(consumer: Any) -> Iterator[TopicRecord]:
    """What a subscribed consumer brings, until it has brought nothing for its
    ``consumer_timeout_ms`` (the consumer stays open: follow it again, then close it)."""
    for r in consumer:
        yield TopicRecord.of(r)


def consumer_config(
    settings: WorkerSettings, brokers: str | None = None, *, max_message_bytes: int | None = None
) -> dict[str, Any]:
    """The audit sink's consumer settings, from the client-config factory: no group, no auto
    commit, security from the CTXBUDGET_* settings; fetches sized for records of
    ``max_message_bytes`` (default: ``CTXBUDGET_MAX_MESSAGE_BYTES``)."""
    if max_message_bytes is None:
        from ctxbudget.limit_settings import LimitSettings

        max_message_bytes = LimitSettings().max_message_bytes
    return clients.client_config(
        settings,
        brokers=brokers,
        client_id="ctxbudget-audit-sink",
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        allow_auto_create_topics=False,
        max_partition_fetch_bytes=max_message_bytes + 1024 * 1024,
        fetch_max_bytes=max(52_428_800, max_message_bytes * 2),
        metadata_max_age_ms=30_000,
        bootstrap_timeout_ms=BOOTSTRAP_TIMEOUT_MS,
    )


class KafkaSource:
    """Every partition of ``topics``, read from ``positions`` onwards, with no consumer group.

    The source assigns itself every partition of its topics and seeks each to the next offset
    in ``positions`` (or to the beginning). The broker's committed offsets and its
    latest-offset answers are never used: the embedded broker answers the latter wrongly
    (ops/notes/broker-findings.md), and the audit database is the one place where "written"
    and "consumed" can be recorded in the same transaction. Topics that do not exist yet are
    looked up again every ``refresh_s``, so the sink may start before the workers.
    """

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
        self.assigned: set[Any] = set()
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
        wanted = {tp for topic in self.topics for tp in _partitions(self.consumer, topic)}
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

    def poll(self, *, timeout_ms: int, max_records: int) -> list[TopicRecord]:
        """The next records, at most ``max_records``; empty after ``timeout_ms`` of quiet."""
        self._refresh()
        if not self.assigned:
            time.sleep(timeout_ms / 1000)
            return []
        got = self.consumer.poll(timeout_ms=timeout_ms, max_records=max_records)
        records = [TopicRecord.of(msg) for _, msgs in sorted(got.items()) for msg in msgs]
        for r in records:
            self.positions[(r.topic, r.partition)] = r.offset + 1
        return records


class TopicWriter:
    """A kafka-python producer behind three calls: send, flush, close."""

    def __init__(self, producer: Any) -> None:
        self.producer = producer

    def send(
        self, topic: str, *, key: bytes, value: bytes, on_done: Acknowledged | None = None
    ) -> None:
        """Send one record; ``on_done`` is called (from the client's thread) when the broker
        answers. A record the client refuses at once (too large, no metadata) raises here."""
        future = self.producer.send(topic, key=key, value=value)
        if on_done is not None:
            future.add_callback(lambda m: on_done(None, m.partition, m.offset))
            future.add_errback(lambda e: on_done(e, None, None))

    def flush(self, timeout_s: float | None = None) -> bool:
        """Wait until every record sent is answered; False when ``timeout_s`` ran out first."""
        from kafka.errors import KafkaTimeoutError

        try:
            self.producer.flush(timeout=timeout_s)
        except KafkaTimeoutError:
            return False
        return True

    def close(self, timeout_s: float | None = None) -> None:
        """Close the producer (waiting at most ``timeout_s`` for what is still queued)."""
        if timeout_s is None:
            self.producer.close()
        else:
            self.producer.close(timeout=timeout_s)


def writer_for(
    settings: WorkerSettings,
    *,
    brokers: str,
    topic: str,
    timeout_s: float,
    client_id: str,
    **options: Any,
) -> TopicWriter:
    """A writer, once the broker answers and ``topic`` exists.

    The topic is looked up with the admin client, which never creates it (a producer's
    metadata request would make some brokers auto-create it with the wrong partitions).
    A broker that cannot be reached or asked is a :class:`BrokerUnreachableError`, a missing
    topic a :class:`TopicNotFoundError`.
    """
    timeout_ms = int(timeout_s * 1000)
    with reaching(brokers):
        admin = client(
            "admin",
            settings,
            brokers=brokers,
            client_id=client_id,
            bootstrap_timeout_ms=min(timeout_ms, BOOTSTRAP_TIMEOUT_MS),
            request_timeout_ms=timeout_ms,
        )
    try:
        with reaching(brokers, doing="list the topics of", value_errors=False):
            topics = set(admin.list_topics())
    finally:
        admin.close()
    if topic not in topics:
        raise TopicNotFoundError(
            f"topic {topic} does not exist on {brokers}: create it with `ctxbudget topics apply`"
        )
    with reaching(brokers, value_errors=False):
        producer = client(
            "producer",
            settings,
            brokers=brokers,
            client_id=client_id,
            request_timeout_ms=timeout_ms,
            max_block_ms=timeout_ms,
            **options,
        )
    return TopicWriter(producer)
