"""The worker suite against real Apache Kafka, where a Docker engine runs (testcontainers)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.integration import test_workers
from tests.integration.lab import Lab, make_lab

pytestmark = [pytest.mark.slow]


@dataclass(frozen=True)
class _External:
    bootstrap: str


def _docker_engine_available() -> str | None:
    """None when a Docker engine answers, else why not."""
    try:
        import docker
    except ImportError:
        return "the docker package is not installed"
    try:
        docker.from_env().ping()
    except Exception as e:
        return f"no Docker engine answers here ({type(e).__name__})"
    return None


@pytest.fixture(scope="module")
def real_kafka() -> Iterator[_External]:
    why = _docker_engine_available()
    if why is not None:
        pytest.skip(f"real-Kafka suite skipped: {why}; it runs where Docker does")
    from testcontainers.community.kafka import KafkaContainer

    with KafkaContainer("confluentinc/cp-kafka:7.6.1").with_kraft() as kafka:
        yield _External(kafka.get_bootstrap_server())


@pytest.fixture
def kafka_lab(real_kafka: _External) -> Iterator[Lab]:
    yield from make_lab(real_kafka)  # type: ignore[arg-type]


def test_four_stage_workers_on_real_kafka(kafka_lab: Lab, tmp_path: Path) -> None:
    """The same identity and dead-letter checks as on the embedded broker."""
    test_workers.test_four_stage_workers_make_the_in_process_packs(kafka_lab, tmp_path)


def test_failover_on_real_kafka(kafka_lab: Lab, tmp_path: Path) -> None:
    """SIGKILL one of two workers: nothing lost on real Kafka either."""
    test_workers.test_a_killed_worker_hands_its_partitions_to_its_peer(kafka_lab, tmp_path)


def test_restart_on_real_kafka(kafka_lab: Lab, tmp_path: Path) -> None:
    """Committed offsets are honoured by real Kafka."""
    test_workers.test_a_restarted_worker_resumes_from_committed_offsets(kafka_lab, tmp_path)
