"""Workers against the real embedded broker: identity, dead letters, failover, restart."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import pytest
from kafka import KafkaConsumer, KafkaProducer

from bench.traffic import synthetic
from ctxbudget.codec import encode
from ctxbudget.pipeline import Pipeline
from ctxbudget.policy import PolicyStore
from tests.conftest import REPO
from workers.broker import EmbeddedBroker
from workers.settings import TopicNames
from workers.topics import TopicSpec, apply_topics

pytestmark = [pytest.mark.broker, pytest.mark.slow]

PIPE = Pipeline.from_store(PolicyStore.load(REPO / "policies"), "default@1")


@dataclass
class Lab:
    """A private set of topics on the session broker, and the workers started on them."""

    broker: EmbeddedBroker
    suffix: str
    topics: TopicNames
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            {
                "CTXBUDGET_BROKERS": self.broker.bootstrap,
                "CTXBUDGET_GROUP_PREFIX": f"test-{self.suffix}",
                "CTXBUDGET_POLICIES": str(REPO / "policies"),
                "CTXBUDGET_SESSION_TIMEOUT_S": "6",
                "CTXBUDGET_COMMIT_INTERVAL_S": "0.5",
            }
        )
        for name, value in self.topics.model_dump().items():
            env[f"CTXBUDGET_TOPICS__{name.upper()}"] = value
        return env

    def start(self, *stages: str, log_dir: Path) -> subprocess.Popen[bytes]:
        log = log_dir / f"worker-{len(self.procs)}-{'-'.join(stages)}.log"
        proc = subprocess.Popen(
            [sys.executable, "-m", "ctxbudget", "worker", *stages],
            env=self.env(),
            cwd=REPO,
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
        )
        self.procs.append(proc)
        self.logs.append(log)
        return proc

    def stop_all(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()

    def producer(self) -> KafkaProducer:
        return KafkaProducer(bootstrap_servers=self.broker.bootstrap, acks="all", linger_ms=2)

    def consumer(self, *topics: str) -> KafkaConsumer:
        return KafkaConsumer(
            *topics,
            bootstrap_servers=self.broker.bootstrap,
            group_id=None,
            auto_offset_reset="earliest",
            consumer_timeout_ms=500,
        )


@pytest.fixture
def lab(broker: EmbeddedBroker, tmp_path: Path) -> Iterator[Lab]:
    suffix = uuid.uuid4().hex[:8]
    names = {k: f"{v}.{suffix}" for k, v in TopicNames().model_dump().items()}
    topics = TopicNames(**names)
    specs = [
        TopicSpec(
            name=n,
            description="test",
            partitions=1 if k == "control" else 4,
            replication_factor=1,
            config={},
        )
        for k, n in names.items()
    ]
    apply_topics(broker.bootstrap, specs)
    lab = Lab(broker=broker, suffix=suffix, topics=topics)
    yield lab
    lab.stop_all()
    if os.environ.get("CTXBUDGET_KEEP_LOGS"):
        for log in lab.logs:
            print(log.read_text(errors="replace")[-3000:])


def _batches(n: int, seed: int) -> list[tuple[str, bytes]]:
    return [(g.batch.request_id, encode(g.batch)) for g in synthetic(n, seed=seed)]


def _collect(
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


def _produce(lab: Lab, items: list[tuple[str, bytes]], *, pace_s: float = 0.0) -> None:
    producer = lab.producer()
    for rid, raw in items:
        producer.send(lab.topics.candidates, key=rid.encode(), value=raw)
        if pace_s:
            time.sleep(pace_s)
    producer.flush()
    producer.close()


def test_four_stage_workers_make_the_in_process_packs(lab: Lab, tmp_path: Path) -> None:
    """300 batches through route → consolidate → select → compress, each its own process."""
    for stage in ("route", "consolidate", "select", "compress"):
        lab.start(stage, log_dir=tmp_path)
    items = _batches(300, seed=11)
    poison = [("bad-json", b"{nope"), ("bad-schema", b'{"request_id": "bad-schema"}')]
    _produce(lab, poison + items)
    got, dead = _collect(lab, lab.topics.packs, {rid for rid, _ in items}, timeout_s=180)
    expected = {
        rid: encode(PIPE.run(g.batch).pack)
        for rid, g in zip((r for r, _ in items), synthetic(300, seed=11), strict=True)
    }
    assert set(got) == set(expected)
    assert all(got[rid][0] == expected[rid] for rid in expected)
    assert {d["stage"] for d in dead} == {"route"} and len(dead) == 2
    assert {d.get("request_id") for d in dead} == {None, "bad-schema"}
    audit = lab.consumer(lab.topics.audit)
    stages = {}
    for msg in audit:
        ev = orjson.loads(msg.value)
        stages.setdefault(ev["request_id"], set()).add(ev["stage"])
    assert all(
        stages.get(rid) == {"route", "consolidate", "select", "compress"} for rid in expected
    )


def test_a_killed_worker_hands_its_partitions_to_its_peer(lab: Lab, tmp_path: Path) -> None:
    """SIGKILL one of two fused workers mid-stream: every request still gets its pack."""
    first = lab.start("fused", log_dir=tmp_path)
    lab.start("fused", log_dir=tmp_path)
    items = _batches(240, seed=12)
    _produce(lab, items[:40])
    got, _ = _collect(lab, lab.topics.packs, {rid for rid, _ in items[:40]}, timeout_s=120)
    assert len(got) == 40
    killed_at = time.monotonic()
    first.send_signal(signal.SIGKILL)
    _produce(lab, items[40:], pace_s=0.01)
    got, _ = _collect(lab, lab.topics.packs, {rid for rid, _ in items}, timeout_s=180)
    recovered_s = time.monotonic() - killed_at
    assert set(got) == {rid for rid, _ in items}
    print(
        f"failover: all {len(items)} packs {recovered_s:.1f} s after SIGKILL; "
        f"duplicates {sum(len(v) - 1 for v in got.values())}"
    )


def test_a_restarted_worker_resumes_from_committed_offsets(lab: Lab, tmp_path: Path) -> None:
    """SIGTERM commits and leaves; the next worker starts after the last committed record."""
    worker = lab.start("fused", log_dir=tmp_path)
    items = _batches(120, seed=13)
    _produce(lab, items[:60])
    got, _ = _collect(lab, lab.topics.packs, {rid for rid, _ in items[:60]}, timeout_s=120)
    assert len(got) == 60
    time.sleep(1.5)  # past one commit interval
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(60) == 0
    _produce(lab, items[60:])
    lab.start("fused", log_dir=tmp_path)
    got, _ = _collect(lab, lab.topics.packs, {rid for rid, _ in items}, timeout_s=120)
    assert set(got) == {rid for rid, _ in items}
    redone = [rid for rid, _ in items[:60] if len(got[rid]) > 1]
    assert redone == [], f"re-processed after a graceful stop: {redone[:5]}"
