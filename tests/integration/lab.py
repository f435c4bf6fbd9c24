"""A private set of topics on the session broker, worker processes, and helpers.

The broker is the embedded one (plaintext) or a real Apache Kafka cluster
(:class:`ctxbudget.kafka.kafka_cluster.KafkaCluster`): then the lab's own clients and its workers
connect with SASL/SCRAM as the cluster's ``user`` (its super user unless said otherwise).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import orjson
from kafka import KafkaConsumer, KafkaProducer

from ctxbudget.codec import encode
from ctxbudget.kafka import clients
from ctxbudget.kafka.broker import EmbeddedBroker
from ctxbudget.kafka.processes import spawn, stop_all
from ctxbudget.kafka.settings import TopicNames, WorkerSettings
from ctxbudget.kafka.topic_admin import apply_topics
from ctxbudget.kafka.topics import TopicSpec
from ctxbudget.signing import generate_key_pair
from ctxbudget.testing.traffic import synthetic
from tests.paths import REPO


class Broker(Protocol):
    """The embedded broker or a real cluster: what the lab needs of either."""

    @property
    def bootstrap(self) -> str: ...


@dataclass
class Lab:
    """A private set of topics on the session broker, and the workers started on them."""

    broker: Broker
    suffix: str
    topics: TopicNames
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)
    env_overrides: dict[str, str] = field(default_factory=dict)
    #: The operator's key pair: the commands sign with the private key, workers trust the
    #: public one.
    private_key: Path | None = None
    public_key: Path | None = None
    #: The lab's clients' settings (None: plaintext, no credentials).
    settings: WorkerSettings | None = None
    #: The CTXBUDGET_* variables that give the workers the same credentials.
    credentials: dict[str, str] = field(default_factory=dict)
    #: How long the lab's consumers wait for a record before they call a topic read out
    #: (a replicated cluster on a busy machine answers slower than the embedded broker).
    idle_ms: int = 500

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CTXBUDGET_SASL_")}
        env.update(self.credentials)
        env.update(
            {
                "CTXBUDGET_BROKERS": self.broker.bootstrap,
                "CTXBUDGET_GROUP_PREFIX": f"test-{self.suffix}",
                "CTXBUDGET_POLICIES": str(REPO / "policies"),
                "CTXBUDGET_SESSION_TIMEOUT_S": "6",
                "CTXBUDGET_COMMIT_INTERVAL_S": "0.5",
            }
        )
        if self.private_key is not None and self.public_key is not None:
            env["CTXBUDGET_CONTROL_KEY"] = str(self.private_key)
            env["CTXBUDGET_CONTROL_TRUSTED_KEYS"] = str(self.public_key)
        for name, value in self.topics.model_dump().items():
            env[f"CTXBUDGET_TOPICS__{name.upper()}"] = value
        env.update(self.env_overrides)
        return env

    def start(self, *stages: str, log_dir: Path) -> subprocess.Popen[bytes]:
        log = log_dir / f"worker-{len(self.procs)}-{'-'.join(stages)}.log"
        proc = spawn(
            [sys.executable, "-m", "ctxbudget", "worker", *stages], self.env(), log, cwd=REPO
        )
        self.procs.append(proc)
        self.logs.append(log)
        return proc

    def stop_all(self) -> None:
        stop_all(self.procs)

    def producer(self, **options: Any) -> KafkaProducer:
        config = {"acks": "all", "linger_ms": 2, **options}
        return clients.producer(self.settings, brokers=self.broker.bootstrap, **config)

    def consumer(self, *topics: str) -> KafkaConsumer:
        return clients.consumer(
            self.settings,
            *topics,
            brokers=self.broker.bootstrap,
            group_id=None,
            auto_offset_reset="earliest",
            consumer_timeout_ms=self.idle_ms,
        )


def lab_specs(
    topics: TopicNames,
    *,
    replication_factor: int = 1,
    topic_config: Mapping[str, Mapping[str, str]] | None = None,
) -> list[TopicSpec]:
    """The specs of a lab's topics (the control topic has one partition, the others four;
    ``topic_config``: extra configs by role, e.g. ``{"packs": {...}}``)."""
    extra = topic_config or {}
    return [
        TopicSpec(
            name=n,
            description="test",
            partitions=1 if k == "control" else 4,
            replication_factor=replication_factor,
            config=dict(extra.get(k, {})),
        )
        for k, n in topics.model_dump().items()
    ]


def make_lab(
    broker: Broker,
    *,
    settings: WorkerSettings | None = None,
    credentials: Mapping[str, str] | None = None,
    replication_factor: int = 1,
    topic_config: Mapping[str, Mapping[str, str]] | None = None,
    idle_ms: int = 500,
) -> Iterator[Lab]:
    """Private topics on ``broker`` and an operator key pair the lab's commands sign with."""
    suffix = uuid.uuid4().hex[:8]
    names = {k: f"{v}.{suffix}" for k, v in TopicNames().model_dump().items()}
    topics = TopicNames(**names)
    specs = lab_specs(topics, replication_factor=replication_factor, topic_config=topic_config)
    apply_topics(broker.bootstrap, specs, settings=settings)
    keys = Path(tempfile.mkdtemp(prefix="ctxbudget-lab-keys-"))
    private, public = generate_key_pair(keys)
    lab = Lab(
        broker=broker,
        suffix=suffix,
        topics=topics,
        settings=settings,
        credentials=dict(credentials or {}),
        idle_ms=idle_ms,
        private_key=private,
        public_key=public,
    )
    yield lab
    lab.stop_all()
    shutil.rmtree(keys, ignore_errors=True)
    if os.environ.get("CTXBUDGET_KEEP_LOGS"):
        for log in lab.logs:
            print(log.read_text(errors="replace")[-3000:])


def batches(n: int, seed: int) -> list[tuple[str, bytes]]:
    return [(g.batch.request_id, encode(g.batch)) for g in synthetic(n, seed=seed)]


def collect(
    lab: Lab, topic: str, want: set[str], timeout_s: float
) -> tuple[dict[str, list[bytes]], list[dict[str, object]]]:
    """Read ``topic`` (and the dead letters) until every id in ``want`` has a record."""
    consumer = lab.consumer(topic, lab.topics.deadletter)
    got: dict[str, list[bytes]] = {}
    dead: list[dict[str, object]] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not want <= set(got):
        for msg in consumer:
            if msg.topic == lab.topics.deadletter:
                dead.append(orjson.loads(msg.value))
            else:
                got.setdefault(msg.key.decode(), []).append(msg.value)
    consumer.close()
    return got, dead


def produce(lab: Lab, items: list[tuple[str, bytes]], *, pace_s: float = 0.0) -> None:
    producer = lab.producer()
    for rid, raw in items:
        producer.send(lab.topics.candidates, key=rid.encode(), value=raw)
        if pace_s:
            time.sleep(pace_s)
    producer.flush()
    producer.close()


class PrivateBroker:
    """An embedded broker of one test's own, on a fixed port, that the test may stop and start
    again (memory storage: the topics are made again at each start)."""

    def __init__(self, topics: list[TopicSpec] | None = None) -> None:
        self.running: EmbeddedBroker | None = EmbeddedBroker().start()
        self.port = self.running.port
        self.specs = list(topics or [])
        if self.specs:
            apply_topics(self.running.bootstrap, self.specs)

    @property
    def bootstrap(self) -> str:
        """``127.0.0.1:PORT``, whether or not the broker runs now."""
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        """Stop the broker (SIGTERM, then SIGKILL)."""
        if self.running is not None:
            self.running.stop()
            self.running = None

    def start(self) -> EmbeddedBroker:
        """Start it again on the same port, with the topics made again."""
        self.running = EmbeddedBroker(port=self.port).start()
        if self.specs:
            apply_topics(self.running.bootstrap, self.specs)
        return self.running
