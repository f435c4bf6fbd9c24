"""docker-compose.yml: real Kafka (KRaft) and one service per stage, checked as data."""

from __future__ import annotations

import shutil
import subprocess

import pytest
import yaml

from tests.conftest import REPO

COMPOSE = yaml.safe_load((REPO / "docker-compose.yml").read_text())
STAGES = ("route", "consolidate", "select", "compress")


def test_kafka_runs_in_kraft_mode_from_the_official_image() -> None:
    """Production-like means Apache Kafka itself, without ZooKeeper."""
    kafka = COMPOSE["services"]["kafka"]
    assert kafka["image"].startswith("apache/kafka:")
    env = kafka["environment"]
    assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"
    assert env["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] == "false"


def test_every_stage_is_its_own_scalable_service() -> None:
    """Each stage runs `ctxbudget worker STAGE`, with replicas configurable."""
    services = COMPOSE["services"]
    for stage in STAGES:
        svc = services[stage]
        assert svc["command"] == ["worker", stage]
        assert "${" in str(svc["deploy"]["replicas"])
        assert svc["environment"]["CTXBUDGET_BROKERS"] == "kafka:9092"
        assert svc["depends_on"]["topics"]["condition"] == "service_completed_successfully"


def test_topics_are_created_from_the_specs_before_the_workers_start() -> None:
    """The topics service applies topics/*.yaml once Kafka is healthy."""
    topics = COMPOSE["services"]["topics"]
    assert topics["command"][:2] == ["topics", "apply"]
    assert topics["depends_on"]["kafka"]["condition"] == "service_healthy"


def test_the_image_ships_policies_and_topic_specs() -> None:
    """The Dockerfile copies what the workers read at start."""
    text = (REPO / "Dockerfile").read_text()
    assert "COPY policies" in text and "COPY topics" in text and ".[kafka]" in text


def test_docker_compose_config_accepts_the_file() -> None:
    """Where the compose client exists, it must parse the file."""
    docker = shutil.which("docker")
    if docker is None:
        pytest.skip("no docker client on this machine")
    probe = subprocess.run([docker, "compose", "version"], capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip("the docker client has no compose plugin here")
    proc = subprocess.run(
        [docker, "compose", "-f", str(REPO / "docker-compose.yml"), "config", "--quiet"],
        capture_output=True,
        check=False,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr.decode()
