"""`ctxbudget worker verify`: answers from Kafka checked against their packs, into verdicts.

One loop, three clients: a consumer in the group ``<prefix>-verify`` reads the answers topic
(offsets committed by hand); a second consumer, outside any group, follows every partition
of the pack topics (live and shadow) and of the audit topic from the start into the join's
bounded tables (:mod:`ctxbudget.kafka.verify_join`); a producer writes the verdicts, the audit
records and the dead letters with ``acks=all``. An answer's offset is committed only after
the broker has acknowledged everything made from it and every earlier answer of its
partition, so a worker killed at any point loses nothing; a redelivered answer gets the same
verdict, byte for byte (at-least-once, idempotent by request id). A broker that cannot take
the outputs ends the process without committing.

Configuration: the worker's CTXBUDGET_* settings (brokers, security, topic names, group
prefix) and the CTXBUDGET_VERIFY_* variables of :class:`VerifySettings`.
"""

from __future__ import annotations

import signal
import time
from types import FrameType
from typing import Any

import orjson
import structlog
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from ctxbudget.kafka import clients
from ctxbudget.kafka.limits import PRODUCER_HEADROOM
from ctxbudget.kafka.logs import configure as configure_logs
from ctxbudget.kafka.observability import Observability
from ctxbudget.kafka.probe import BrokerProbe
from ctxbudget.kafka.settings import WorkerSettings
from ctxbudget.kafka.verify_join import STAGE, JoinTopics, VerifyJoin
from ctxbudget.limit_settings import LimitSettings

log = structlog.get_logger("ctxbudget.verify")

#: Exit status when the broker cannot take the outputs (EX_SOFTWARE, as the stage workers).
EXIT_UNDELIVERED = 70
_METRICS_EVERY_S = 10.0


class VerifySettings(BaseSettings):
    """The verify worker's own settings, from CTXBUDGET_VERIFY_* variables."""

    model_config = SettingsConfigDict(env_prefix="CTXBUDGET_VERIFY_", frozen=True, extra="ignore")

    answers_topic: str = "ctx.answers.v1"
    verdicts_topic: str = "ctx.verdicts.v1"
    #: Seconds an answer waits for its pack (and the pack's traces) before its dead letter.
    window_s: float = Field(default=60.0, gt=0)
    #: Packs (and trace sets) kept in memory, the oldest forgotten first.
    packs_kept: int = Field(default=100_000, ge=1)
    #: Wait for the four stage traces too (they give the diagnosis of labelled requests).
    traces: bool = True
    #: Write a ``verify`` label (the chunks supported claims cite) to the labels topic for
    #: each live answer that has one; its principal then needs Write on the labels topic.
    labels: bool = False
    poll_ms: int = Field(default=100, ge=1, le=5000)


class _Stop:
    requested = False

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.requested = True


def _follow_all(consumer: Any, topics: list[str], timeout_s: float = 30.0) -> None:
    """Assign every partition of ``topics`` to ``consumer`` and seek to their beginnings."""
    from kafka import TopicPartition

    deadline = time.monotonic() + timeout_s
    parts: list[Any] = []
    for topic in topics:
        found = consumer.partitions_for_topic(topic)
        while not found and time.monotonic() < deadline:
            time.sleep(0.2)
            found = consumer.partitions_for_topic(topic)
        if not found:
            raise SystemExit(f"topic {topic!r} not found: create the topics first")
        parts += [TopicPartition(topic, p) for p in sorted(found)]
    consumer.assign(parts)
    consumer.seek_to_beginning(*parts)


class VerifyWorker:
    """The loop: follow packs and traces, take answers, settle them, deliver, commit."""

    def __init__(self, settings: WorkerSettings, verify: VerifySettings) -> None:
        self.settings = settings
        self.verify = verify
        t = settings.topics
        self.join = VerifyJoin(
            topics=JoinTopics(
                answers=verify.answers_topic,
                verdicts=verify.verdicts_topic,
                audit=t.audit,
                deadletter=t.deadletter,
                labels=t.labels if verify.labels else None,
            ),
            window_s=verify.window_s,
            packs_kept=verify.packs_kept,
            with_traces=verify.traces,
        )
        self.followed = [t.packs, t.shadow] + ([t.audit] if verify.traces else [])
        self.counts = {
            "answers": 0,
            "verdicts": 0,
            "labels": 0,
            "dead_letters": 0,
            "packs": 0,
            "traces": 0,
        }
        self._committed: dict[int, int] = {}
        self.obs = Observability(worker="verify")
        j = self.join.topics
        outputs = [j.verdicts, j.deadletter] + ([j.labels] if j.labels else [])
        self.obs.expect([STAGE], outputs={STAGE: outputs})
        self.obs.control_read()  # the verifier follows no control state: nothing to wait for

    def _clients(self) -> tuple[Any, Any, Any]:
        from kafka import ConsumerRebalanceListener

        s = self.settings
        session_ms = int(s.session_timeout_s * 1000)
        answers = clients.consumer(
            s,
            client_id="ctxbudget-verify",
            group_id=f"{s.group_prefix}-verify",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=session_ms,
            heartbeat_interval_ms=int(s.heartbeat_interval_s * 1000),
            max_poll_records=500,
        )
        worker = self

        class Revoked(ConsumerRebalanceListener):  # type: ignore[misc]
            def on_partitions_revoked(self, revoked: Any) -> None:
                worker._commit(answers)
                worker.join.forget({tp.partition for tp in revoked})
                for tp in revoked:
                    worker._committed.pop(tp.partition, None)

            def on_partitions_assigned(self, assigned: Any) -> None:
                worker.obs.joined()

        answers.subscribe([self.verify.answers_topic], listener=Revoked())
        follower = clients.consumer(
            s, client_id="ctxbudget-verify-follow", group_id=None, enable_auto_commit=False
        )
        _follow_all(follower, self.followed)
        producer = clients.producer(
            s,
            client_id="ctxbudget-verify",
            acks="all",
            linger_ms=5,
            max_request_size=LimitSettings().max_message_bytes + PRODUCER_HEADROOM,
        )
        return answers, follower, producer

    def _commit(self, answers: Any) -> None:
        from kafka import TopicPartition
        from kafka.structs import OffsetAndMetadata

        points = {p: o for p, o in self.join.commit_points().items() if self._committed.get(p) != o}
        if not points:
            return
        topic = self.verify.answers_topic
        answers.commit(
            {TopicPartition(topic, p): OffsetAndMetadata(o, "", -1) for p, o in points.items()}
        )
        self._committed.update(points)

    def _follow(self, follower: Any) -> None:
        t = self.settings.topics
        for tp, records in follower.poll(timeout_ms=0, max_records=5000).items():
            for r in records:
                if r.value is None:
                    continue
                if tp.topic == t.audit:
                    self.join.add_trace(r.value)
                    self.counts["traces"] += 1
                else:
                    self.join.add_pack(r.value)
                    self.counts["packs"] += 1

    def step(self, answers: Any, follower: Any, producer: Any) -> None:
        """One round: follow, take answers, settle, deliver (or exit), commit."""
        self._follow(follower)
        polled = answers.poll(timeout_ms=self.verify.poll_ms, max_records=500)
        now = time.monotonic()
        for tp, records in polled.items():
            for r in records:
                self.counts["answers"] += 1
                self.join.add_answer(
                    r.value or b"", partition=tp.partition, offset=r.offset, now=now
                )
        futures = []
        for _, _, outputs in self.join.resolve(now):
            self._observe(outputs, time.monotonic() - now)
            for out in outputs:
                futures.append(producer.send(out.topic, key=out.key, value=out.value))
                if out.topic == self.join.topics.verdicts:
                    self.counts["verdicts"] += 1
                elif out.topic == self.join.topics.deadletter:
                    self.counts["dead_letters"] += 1
                elif out.topic == self.join.topics.labels:
                    self.counts["labels"] += 1
        if futures:
            try:
                producer.flush(timeout=30)
                for f in futures:
                    f.get(timeout=30)
            except Exception as e:  # the broker cannot take them: stop before committing
                log.critical("outputs not acknowledged; exiting without commit", error=repr(e))
                raise SystemExit(EXIT_UNDELIVERED) from e
        self._commit(answers)

    def _observe(self, outputs: list[Any], seconds: float) -> None:
        """One answer settled: what it produced, and the dead letter's error type if any."""
        dead = self.join.topics.deadletter
        types = [
            str(orjson.loads(o.value).get("error_type", "")) for o in outputs if o.topic == dead
        ]
        self.obs.observe(STAGE, seconds, [o.topic for o in outputs], dead_letter_types=types)

    def run(self) -> None:
        """Run until SIGTERM or SIGINT (the round in hand is finished and committed).

        With ``CTXBUDGET_METRICS_PORT`` it serves /metrics, /healthz and /readyz as the stage
        workers do (ready while a broker answers and the answers group is joined)."""
        configure_logs(
            level=self.settings.log_level,
            fmt=None if self.settings.log_format == "auto" else self.settings.log_format,
            evidence=False,
        )
        stop = _Stop()
        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        log.info(
            "verify worker starting",
            answers=self.verify.answers_topic,
            verdicts=self.verify.verdicts_topic,
            follows=self.followed,
            window_s=self.verify.window_s,
            labels=self.join.topics.labels,
        )
        port = self.obs.serve(self.settings.metrics_port) if self.settings.metrics_port else 0
        if port:
            log.info("metrics and health served", port=port, paths="/metrics /healthz /readyz")
        probe = BrokerProbe.of(self.settings, self.obs)
        probe.start()
        answers, follower, producer = self._clients()
        last = time.monotonic()
        try:
            while not stop.requested:
                self.obs.tick()
                self.step(answers, follower, producer)
                if time.monotonic() - last > _METRICS_EVERY_S:
                    last = time.monotonic()
                    log.info("metrics", waiting=self.join.waiting, **self.counts)
        finally:
            log.info("final metrics", waiting=self.join.waiting, **self.counts)
            producer.close(timeout=5)
            follower.close()
            answers.close()
            probe.stop()
            self.obs.close()


def run_verify_worker(settings: WorkerSettings) -> None:
    """Build the verify worker from the settings and the CTXBUDGET_VERIFY_* variables; run it."""
    VerifyWorker(settings, VerifySettings()).run()
