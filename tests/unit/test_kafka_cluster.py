"""The loopback Kafka cluster's configuration (ctxbudget.kafka.kafka_cluster), no JVM started."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from ctxbudget.kafka.kafka_cluster import (
    ADMIN_USER,
    KAFKA_VERSION,
    POM,
    KafkaCluster,
    kafka_cache_dir,
)


def _prepared(tmp_path: Path, nodes: int) -> KafkaCluster:
    cluster = KafkaCluster(nodes=nodes, users=["ctxbudget-route"], data_dir=tmp_path)
    cluster._prepare()
    return cluster


def _props(path: Path) -> dict[str, str]:
    return dict(
        line.split("=", 1) for line in path.read_text().splitlines() if line and "=" in line
    )


def test_three_nodes_are_combined_kraft_nodes_with_scram_and_the_standard_authorizer(
    tmp_path: Path,
) -> None:
    """Each node: broker+controller, SCRAM-SHA-512 clients, deny by default, RF 3, ISR 2."""
    _prepared(tmp_path, 3)
    voters = set()
    for n in (1, 2, 3):
        p = _props(tmp_path / f"node-{n}" / "server.properties")
        assert p["process.roles"] == "broker,controller" and p["node.id"] == str(n)
        assert p["listener.name.client.sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
        assert p["listener.security.protocol.map"].startswith("CLIENT:SASL_PLAINTEXT")
        assert p["authorizer.class.name"].endswith("metadata.authorizer.StandardAuthorizer")
        assert p["allow.everyone.if.no.acl.found"] == "false"
        assert p["super.users"] == f"User:{ADMIN_USER}"
        assert p["default.replication.factor"] == "3" and p["min.insync.replicas"] == "2"
        assert "127.0.0.1" in p["listeners"] and p["auto.create.topics.enable"] == "false"
        voters.add(p["controller.quorum.voters"])
    assert len(voters) == 1 and next(iter(voters)).count("@127.0.0.1:") == 3


def test_one_node_keeps_single_replicas(tmp_path: Path) -> None:
    """A single node cannot hold 3 replicas: RF 1, ISR 1."""
    _prepared(tmp_path, 1)
    p = _props(tmp_path / "node-1" / "server.properties")
    assert p["default.replication.factor"] == "1" and p["min.insync.replicas"] == "1"


def test_credentials_are_private_files_with_one_user_per_name(tmp_path: Path) -> None:
    """credentials.json and every password file are readable by the owner only."""
    cluster = _prepared(tmp_path, 1)
    creds = json.loads(cluster.credentials_file.read_text())
    assert set(creds["users"]) == {ADMIN_USER, "ctxbudget-route"}
    assert creds["sasl_mechanism"] == "SCRAM-SHA-512"
    for path in (cluster.credentials_file, cluster.password_file("ctxbudget-route")):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    env = cluster.env("ctxbudget-route")
    assert env["CTXBUDGET_SASL_USERNAME"] == "ctxbudget-route"
    assert "CTXBUDGET_SASL_PASSWORD" not in env  # a file, never the secret itself
    settings = cluster.settings("ctxbudget-route")
    assert settings.password() == creds["users"]["ctxbudget-route"]


@pytest.mark.parametrize("bad", [{"nodes": 2}, {"users": ["admin"]}, {"users": ["a b"]}])
def test_bad_arguments_are_refused(bad: dict[str, object]) -> None:
    """Only 1 or 3 nodes; user names plain and not the super user's."""
    with pytest.raises(ValueError):
        KafkaCluster(**bad)  # type: ignore[arg-type]


def test_the_pom_names_the_version_the_code_expects(monkeypatch: pytest.MonkeyPatch) -> None:
    """ops/kafka/pom.xml and KAFKA_VERSION agree; the cache folder carries the version."""
    assert f"<kafka.version>{KAFKA_VERSION}</kafka.version>" in POM.read_text()
    monkeypatch.delenv("CTXBUDGET_KAFKA_CACHE", raising=False)
    assert kafka_cache_dir().name == f"kafka-{KAFKA_VERSION}"
