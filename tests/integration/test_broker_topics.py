"""The embedded broker and the topic specs, against a real (embedded) Kafka-compatible broker."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition

from ctxbudget.kafka import broker as broker_module
from ctxbudget.kafka.broker import (
    BrokerNotRunningError,
    BrokerPortInUseError,
    BrokerStartError,
    EmbeddedBroker,
)
from ctxbudget.kafka.topic_admin import ApplyReport, apply_topics, verify_topics
from ctxbudget.kafka.topics import TopicSpec

pytestmark = pytest.mark.broker

REPO = Path(__file__).resolve().parents[2]


def _spec(name: str, *, partitions: int = 1, config: dict[str, str] | None = None) -> TopicSpec:
    return TopicSpec(
        name=name,
        description="a test topic",
        partitions=partitions,
        replication_factor=1,
        config=config or {},
    )


def _partition_counts(bootstrap: str, names: list[str]) -> dict[str, int]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        return {t["name"]: len(t["partitions"]) for t in admin.describe_topics(names)}
    finally:
        admin.close()


def _accepts_connections(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


# -- the broker ---------------------------------------------------------------------------------


def test_broker_bootstrap_is_an_ipv4_loopback_address(broker: EmbeddedBroker) -> None:
    """Tansu listens on IPv4 only, so the address must never be 'localhost' (may resolve to ::1)."""
    host, _, port = broker.bootstrap.partition(":")
    assert host == "127.0.0.1"
    assert int(port) == broker.port


def test_broker_process_is_gone_after_the_context_exits() -> None:
    """A test run must not leak broker processes."""
    with EmbeddedBroker() as broker:
        pid, port = broker.pid, broker.port
        assert pid is not None
    assert not broker.is_running()
    assert not _accepts_connections(port)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_broker_address_is_refused_once_stopped() -> None:
    """Asking a stopped broker for its address is a bug in the caller, said plainly."""
    broker = EmbeddedBroker().start()
    broker.stop()
    with pytest.raises(BrokerNotRunningError):
        _ = broker.bootstrap


def test_a_taken_port_is_named_before_the_broker_is_spawned() -> None:
    """A port in use is one clear error (no broker output, no Rust panic to read)."""
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        with pytest.raises(BrokerPortInUseError, match=f"port {port} on 127.0.0.1 is already"):
            EmbeddedBroker(port=port, startup_timeout_s=10).start()


def test_broker_start_failure_shows_the_broker_output(monkeypatch: pytest.MonkeyPatch) -> None:
    """Losing the port to another process after the check: the broker's own explanation
    travels with the error (its cause)."""
    monkeypatch.setattr(broker_module, "_port_in_use", lambda host, port: False)
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        with pytest.raises(BrokerPortInUseError) as caught:
            EmbeddedBroker(port=port, startup_timeout_s=10).start()
    assert isinstance(caught.value.__cause__, BrokerStartError)
    assert "Address in use" in str(caught.value.__cause__)


def test_run_forever_prints_the_address_and_stops_on_sigterm() -> None:
    """`ctxbudget broker` relies on it: the first line is the address; SIGTERM is a clean stop."""
    code = "from ctxbudget.kafka.broker import run_forever; raise SystemExit(run_forever())"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    process = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert process.stdout is not None
        bootstrap = process.stdout.readline().strip()
        port = int(bootstrap.rpartition(":")[2])
        assert _accepts_connections(port)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
        assert not _accepts_connections(port)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


# -- topics -------------------------------------------------------------------------------------


def test_apply_creates_every_shipped_topic_with_its_partition_count(
    broker: EmbeddedBroker, topic_specs: list[TopicSpec], topics_applied: ApplyReport
) -> None:
    """The broker auto-creates unknown topics with 4 partitions; ours must have the spec's."""
    names = [spec.name for spec in topic_specs]
    assert set(topics_applied.created) | set(topics_applied.existing) == set(names)
    expected = {spec.name: spec.partitions for spec in topic_specs}
    assert _partition_counts(broker.bootstrap, names) == expected


def test_apply_is_idempotent(
    broker: EmbeddedBroker, topic_specs: list[TopicSpec], topics_applied: ApplyReport
) -> None:
    """Every worker may run apply at start; a second run creates nothing and fails nothing."""
    again = apply_topics(broker.bootstrap, topic_specs)
    assert again.created == ()
    assert set(again.existing) == {spec.name for spec in topic_specs}


def test_apply_leaves_an_existing_topic_untouched(broker: EmbeddedBroker) -> None:
    """Apply never alters a live topic; differences are for verify to report."""
    name = f"test.existing.{uuid.uuid4().hex[:8]}"
    apply_topics(broker.bootstrap, [_spec(name, partitions=1)])
    report = apply_topics(broker.bootstrap, [_spec(name, partitions=3)])
    assert report == ApplyReport(created=(), existing=(name,))
    assert _partition_counts(broker.bootstrap, [name]) == {name: 1}


def test_verify_finds_no_drift_after_apply(
    broker: EmbeddedBroker, topic_specs: list[TopicSpec], topics_applied: ApplyReport
) -> None:
    """Freshly applied topics match their specs, configs included."""
    assert verify_topics(broker.bootstrap, topic_specs) == []


def test_verify_reports_a_missing_topic(broker: EmbeddedBroker) -> None:
    """A topic nobody created is drift, not an error."""
    name = f"test.missing.{uuid.uuid4().hex[:8]}"
    findings = verify_topics(broker.bootstrap, [_spec(name)])
    assert [(f.topic, f.kind) for f in findings] == [(name, "missing")]


def test_verify_reports_a_wrong_partition_count(
    broker: EmbeddedBroker, topic_factory: Callable[..., str]
) -> None:
    """A topic made by hand (or auto-created) with the wrong partition count must show up."""
    name = topic_factory(partitions=4)
    findings = verify_topics(broker.bootstrap, [_spec(name, partitions=6)])
    assert [(f.kind, f.expected, f.actual) for f in findings] == [("partitions", "6", "4")]


def test_verify_reports_a_config_value_that_differs(
    broker: EmbeddedBroker, topic_factory: Callable[..., str]
) -> None:
    """The control topic must be compacted; a 'delete' topic under its name is drift."""
    name = topic_factory(config={"cleanup.policy": "delete"})
    findings = verify_topics(broker.bootstrap, [_spec(name, config={"cleanup.policy": "compact"})])
    assert [(f.kind, f.key, f.expected, f.actual) for f in findings] == [
        ("config", "cleanup.policy", "compact", "delete")
    ]


def test_verify_reports_a_config_the_broker_does_not_report(
    broker: EmbeddedBroker, topic_factory: Callable[..., str]
) -> None:
    """Tansu reports only configs set at creation; an unset one is flagged, not assumed to match."""
    name = topic_factory()
    findings = verify_topics(broker.bootstrap, [_spec(name, config={"retention.ms": "86400000"})])
    assert len(findings) == 1
    # Tansu: not reported at all; Apache Kafka: reported with its default (604800000).
    assert findings[0].kind in {"config_unreported", "config"}
    assert findings[0].key == "retention.ms"


# -- produce and consume ------------------------------------------------------------------------


def test_kafka_python_round_trips_a_keyed_json_record(
    broker: EmbeddedBroker, topics_applied: ApplyReport
) -> None:
    """Workers depend on keyed JSON records coming back byte for byte, on the shipped topics."""
    request_id = f"req-{uuid.uuid4().hex}"
    value = orjson.dumps({"schema": "ctx.candidate_batch.v1", "request_id": request_id})
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    try:
        meta = producer.send("ctx.candidates.v1", key=request_id.encode(), value=value).get(30)
    finally:
        producer.close()
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        enable_auto_commit=False,
        consumer_timeout_ms=5000,
    )
    try:
        partition = TopicPartition("ctx.candidates.v1", meta.partition)
        consumer.assign([partition])
        consumer.seek(partition, meta.offset)
        record = next(iter(consumer))
    finally:
        consumer.close()
    assert (record.key, record.value) == (request_id.encode(), value)


def test_kafka_python_idempotent_producer_works(
    broker: EmbeddedBroker, topic_factory: Callable[..., str]
) -> None:
    """The design relies on kafka-python's idempotent producer (aiokafka's fails on this broker)."""
    name = topic_factory()
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=True)
    try:
        futures = [producer.send(name, value=str(i).encode()) for i in range(50)]
        producer.flush()
        offsets = sorted(future.get(30).offset for future in futures)
    finally:
        producer.close()
    assert offsets == list(range(50))
