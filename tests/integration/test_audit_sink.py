"""`ctxbudget audit-sink` against the real embedded broker: tables, rejects, restarts."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest
from kafka import KafkaProducer

from ctxbudget.codec import encode
from ctxbudget.kafka.broker import EmbeddedBroker
from ctxbudget.kafka.settings import TopicNames
from ctxbudget.kafka.topic_admin import apply_topics
from ctxbudget.kafka.topics import TopicSpec
from ctxbudget.pipeline import Pipeline
from ctxbudget.policy import PolicyStore
from ctxbudget.rollout import ControlApplied, ControlEvent, ControlState
from ctxbudget.testing.traffic import synthetic
from tests.paths import REPO

pytestmark = [pytest.mark.broker, pytest.mark.slow]

STORE = PolicyStore.load(REPO / "policies")
LIVE = Pipeline.from_store(STORE, "default@1")
SHADOW = Pipeline.from_store(STORE, "lean@1")
CLI = (sys.executable, "-m", "ctxbudget")
PROGRESS = re.compile(rb"audit-sink: (\d+) records")


@dataclass
class Stream:
    """Private audit / packs / shadow topics and the records produced to them."""

    broker: EmbeddedBroker
    topics: TopicNames
    produced: int = 0

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["CTXBUDGET_BROKERS"] = self.broker.bootstrap
        for name, value in self.topics.model_dump().items():
            env[f"CTXBUDGET_TOPICS__{name.upper()}"] = value
        return env

    def produce(self, records: list[tuple[str, str, bytes]]) -> None:
        """(topic field, key, value) triples, sent and flushed."""
        producer = KafkaProducer(bootstrap_servers=self.broker.bootstrap, acks="all", linger_ms=5)
        for field, key, value in records:
            producer.send(getattr(self.topics, field), key=key.encode(), value=value)
        producer.flush()
        producer.close()
        self.produced += len(records)

    def sink(self, db: Path, log: Path, *args: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [*CLI, "audit-sink", "--to", str(db), *args],
            env=self.env(),
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=log.open("wb"),
        )


@pytest.fixture
def stream(broker: EmbeddedBroker) -> Iterator[Stream]:
    suffix = uuid.uuid4().hex[:8]
    topics = TopicNames(**{k: f"{v}.{suffix}" for k, v in TopicNames().model_dump().items()})
    specs = [
        TopicSpec(name=name, description="test", partitions=parts, replication_factor=1, config={})
        for name, parts in ((topics.audit, 4), (topics.packs, 2), (topics.shadow, 2))
    ]
    apply_topics(broker.bootstrap, specs)
    yield Stream(broker, topics)


def _requests(n: int, seed: int, *, shadow_every: int = 2) -> list[tuple[str, str, bytes]]:
    """Trace events and packs of ``n`` requests; every other one also packed in shadow."""
    out: list[tuple[str, str, bytes]] = []
    for i, g in enumerate(synthetic(n, seed=seed)):
        runs = [(LIVE.run(g.batch), "packs")]
        if i % shadow_every == 0:
            runs.append((SHADOW.run(g.batch, lane="shadow", cohort="lean"), "shadow"))
        for result, pack_topic in runs:
            rid = g.batch.request_id
            out.extend(("audit", rid, encode(t)) for t in result.traces)
            out.append((pack_topic, rid, encode(result.pack)))
    return out


def _wait_for_progress(log: Path, at_least: int, proc: subprocess.Popen[bytes]) -> int:
    """The record count of the last progress line once it reaches ``at_least``."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        found = [int(m) for m in PROGRESS.findall(log.read_bytes())]
        if found and found[-1] >= at_least:
            return found[-1]
        assert proc.poll() is None, log.read_text()
        time.sleep(0.05)
    raise AssertionError(f"no progress to {at_least}: {log.read_text()}")


def _count(db: Path, sql: str) -> int:
    con = duckdb.connect(str(db), read_only=True)
    try:
        row = con.execute(sql).fetchone()
    finally:
        con.close()
    assert row is not None
    return int(row[0])


BAD = [
    ("audit", "bad-json", b"{nope"),
    ("audit", "bad-version", b'{"schema": "ctx.trace_event.v2", "request_id": "bad-version"}'),
    ("audit", "bad-fields", b'{"schema": "ctx.trace_event.v1", "request_id": "bad-fields"}'),
]


def test_the_sink_stores_every_record_and_keeps_the_bad_ones(
    stream: Stream, tmp_path: Path
) -> None:
    """Events, decisions, packs from three topics; a redelivery is one row; rejects are kept."""
    good = _requests(30, seed=21)
    redelivered = next(r for r in good if r[0] == "audit")
    state = ControlState(baseline="default@1", candidate="default@2", percent=5.0, version=1)
    control = [
        ("audit", "control", encode(ControlEvent(action="set", before=None, after=state))),
        ("audit", "control", encode(ControlApplied(worker="w", version=1, lag_ms=3, killed=False))),
    ]
    stream.produce([*good, redelivered, *control, *BAD])
    db, log = tmp_path / "audit.duckdb", tmp_path / "sink.log"
    proc = stream.sink(db, log, "--until-idle", "3", "--progress-every", "0")
    assert proc.wait(120) == 0, log.read_text()
    events = sum(1 for r in good if r[0] == "audit")
    assert _count(db, "SELECT count(*) FROM events") == events
    assert _count(db, "SELECT count(*) FROM packs") == len(good) - events
    assert _count(db, "SELECT count(*) FROM packs WHERE lane = 'shadow'") == 15
    assert _count(db, "SELECT count(*) FROM rejects") == 3
    assert _count(db, "SELECT count(*) FROM control_events WHERE percent = 5.0") == 1
    assert _count(db, "SELECT count(*) FROM control_applied") == 1
    # ts is the Kafka record timestamp: within the test's run, never NULL
    assert (
        _count(
            db,
            "SELECT count(*) FROM events WHERE ts < (now() AT TIME ZONE 'UTC') - INTERVAL 1 HOUR",
        )
        == 0
    )
    kinds = "SELECT count(DISTINCT kind) FROM rejects WHERE kind IN ('not_json', 'unknown_schema'"
    assert _count(db, kinds + ", 'invalid')") == 3
    assert _count(db, "SELECT sum(records) FROM sink_offsets") == stream.produced
    # The same traces loaded from a file give the same decisions, row for row.
    trace = tmp_path / "trace.jsonl"
    trace.write_bytes(b"\n".join(v for f, _, v in good if f == "audit") + b"\n")
    from_file = tmp_path / "file.duckdb"
    done = subprocess.run(
        [*CLI, "audit-sink", "--to", str(from_file), "--from-file", str(trace)],
        cwd=REPO,
        capture_output=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    con = duckdb.connect(str(db), read_only=True)
    con.execute(f"ATTACH '{from_file}' AS f (READ_ONLY)")
    diff = con.execute(
        "SELECT count(*) FROM (SELECT * EXCLUDE (ts) FROM decisions "
        "EXCEPT ALL SELECT * EXCLUDE (ts) FROM f.decisions)"
    ).fetchone()
    con.close()
    assert diff == (0,)


def test_sigterm_stops_the_sink_cleanly(stream: Stream, tmp_path: Path) -> None:
    """A continuously running sink exits 0 on SIGTERM with everything it read committed."""
    records = _requests(10, seed=22)
    stream.produce(records)
    db, log = tmp_path / "audit.duckdb", tmp_path / "sink.log"
    proc = stream.sink(db, log, "--progress-every", "0")
    _wait_for_progress(log, len(records), proc)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(60) == 0, log.read_text()
    assert b"stopped by SIGTERM" in log.read_bytes()
    assert _count(db, "SELECT sum(records) FROM sink_offsets") == len(records)


def test_a_sink_killed_mid_way_resumes_without_loss_or_duplicates(
    stream: Stream, tmp_path: Path
) -> None:
    """SIGKILL between transactions or inside one: the restart reads each record once."""
    first = _requests(120, seed=23)
    stream.produce(first)
    db, log = tmp_path / "audit.duckdb", tmp_path / "sink-1.log"
    proc = stream.sink(db, log, "--batch-size", "25", "--progress-every", "0")
    seen = _wait_for_progress(log, 100, proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    print(f"killed after {seen} of {len(first)} records were reported committed")
    second = _requests(30, seed=24)
    stream.produce(second)
    log2 = tmp_path / "sink-2.log"
    proc = stream.sink(db, log2, "--until-idle", "3", "--batch-size", "25")
    assert proc.wait(120) == 0, log2.read_text()
    every = first + second
    events = sum(1 for r in every if r[0] == "audit")
    assert _count(db, "SELECT count(*) FROM events") == events
    assert _count(db, "SELECT count(*) FROM packs") == len(every) - events
    # Consumed exactly once: the offsets' record counts add up to what was produced.
    assert _count(db, "SELECT sum(records) FROM sink_offsets") == stream.produced
    assert _count(db, "SELECT count(*) FROM rejects") == 0
    # The restart resumed from the stored offsets instead of reading from the beginning.
    resumed = [int(m) for m in PROGRESS.findall(log2.read_bytes())][-1]
    assert seen <= stream.produced - resumed < stream.produced
