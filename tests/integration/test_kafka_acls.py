"""The ACL plan on a real Apache Kafka cluster: each role may do exactly what it is granted.

Private topics and a private group prefix per module; the plan of :mod:`ctxbudget.kafka.acls` is
applied for them, then every role's principal tries to write and read every topic and to
join every stage's consumer group. The broker's answers must be the plan, to the binding.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from kafka import TopicPartition
from kafka.errors import (
    GroupAuthorizationFailedError,
    KafkaError,
    TopicAuthorizationFailedError,
)

from ctxbudget.codec import decode_batch, encode
from ctxbudget.kafka import clients
from ctxbudget.kafka.acls import ROLES, AclBinding, acl_plan, apply_acls, principals
from ctxbudget.kafka.kafka_cluster import KafkaCluster
from ctxbudget.pipeline import Pipeline
from ctxbudget.policy import PolicyStore
from tests.integration.lab import Lab, batches, make_lab
from tests.paths import REPO

pytestmark = [pytest.mark.slow]

NAMES = principals()
STAGE_ROLES = ("route", "consolidate", "select", "compress", "fused", "shadow")


@pytest.fixture(scope="module")
def acl_lab(kafka_cluster: KafkaCluster) -> Iterator[tuple[Lab, list[AclBinding]]]:
    """Private topics on the cluster and the applied plan for them."""
    gen = make_lab(
        kafka_cluster,
        settings=kafka_cluster.settings(),
        credentials=kafka_cluster.env(),
        replication_factor=3,
        idle_ms=3000,
    )
    lab = next(gen)
    plan = acl_plan(kafka_cluster.settings(topics=lab.topics, group_prefix=f"test-{lab.suffix}"))
    admin = kafka_cluster.admin()
    try:
        apply_acls(admin, plan)
    finally:
        admin.close()
    yield lab, plan
    next(gen, None)


def _can_write(cluster: KafkaCluster, user: str, topic: str) -> bool:
    producer = clients.producer(
        cluster.settings(user), acks="all", max_block_ms=20000, retries=0, request_timeout_ms=15000
    )
    try:
        producer.send(topic, key=b"acl-probe", value=b"{}").get(timeout=20)
    except TopicAuthorizationFailedError:
        return False
    finally:
        producer.close(timeout=5)
    return True


def _can_read(cluster: KafkaCluster, user: str, topic: str) -> bool:
    consumer = clients.consumer(
        cluster.settings(user), group_id=None, enable_auto_commit=False, request_timeout_ms=15000
    )
    tp = TopicPartition(topic, 0)
    try:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        consumer.position(tp)  # ListOffsets: refused without Read on the topic
        consumer.poll(timeout_ms=200)
    except TopicAuthorizationFailedError:
        return False
    finally:
        consumer.close()
    return True


def _can_join(cluster: KafkaCluster, user: str, topic: str, group: str) -> bool:
    """Join ``group`` (subscribing to a topic the user may read) and fetch its offsets."""
    consumer = clients.consumer(
        cluster.settings(user),
        topic,
        group_id=group,
        enable_auto_commit=False,
        session_timeout_ms=6000,
        request_timeout_ms=15000,
    )
    try:
        deadline = time.monotonic() + 20
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(timeout_ms=500)
    except GroupAuthorizationFailedError:
        return False
    finally:
        consumer.close()
    return True


def _granted(plan: list[AclBinding], user: str, operation: str, resource: str) -> bool:
    return any(
        b.principal == f"User:{user}" and b.operation == operation and b.resource == resource
        for b in plan
    )


def test_every_role_writes_and_reads_exactly_the_topics_the_plan_grants(
    kafka_cluster: KafkaCluster, acl_lab: tuple[Lab, list[AclBinding]]
) -> None:
    """Every role x topic x {Write, Read}: the broker's answer is the plan's, with no exception."""
    lab, plan = acl_lab
    topics = lab.topics.model_dump()
    mismatches, rows = [], []
    for role in ROLES:
        user = NAMES[role]
        wrote = {k: _can_write(kafka_cluster, user, n) for k, n in topics.items()}
        read = {k: _can_read(kafka_cluster, user, n) for k, n in topics.items()}
        for key, name in topics.items():
            for op, got in (("Write", wrote[key]), ("Read", read[key])):
                if got != _granted(plan, user, op, name):
                    mismatches.append(f"{role} {op} {key}: broker said {got}")
        rows.append(
            f"{role:12} W:{','.join(k for k, v in wrote.items() if v) or '-'}"
            f"  R:{','.join(k for k, v in read.items() if v) or '-'}"
        )
    print("\n".join(rows))
    assert mismatches == []
    # deny by default: nothing the plan leaves out is possible
    assert not _granted(plan, NAMES["retriever"], "Read", lab.topics.candidates)


def test_only_the_operator_writes_control_and_only_compress_and_fused_write_live_packs(
    kafka_cluster: KafkaCluster, acl_lab: tuple[Lab, list[AclBinding]]
) -> None:
    """TopicAuthorizationFailed for every other role on the control and live pack topics."""
    lab, _ = acl_lab
    control = {r for r in ROLES if _can_write(kafka_cluster, NAMES[r], lab.topics.control)}
    packs = {r for r in ROLES if _can_write(kafka_cluster, NAMES[r], lab.topics.packs)}
    assert control == {"operator"}
    assert packs == {"compress", "fused"}
    producer = clients.producer(
        kafka_cluster.settings(NAMES["replay"]), acks="all", retries=0, max_block_ms=20000
    )
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            producer.send(lab.topics.packs, key=b"forged", value=b"{}").get(timeout=20)
    finally:
        producer.close(timeout=5)


def test_each_stage_principal_joins_its_own_consumer_group_only(
    kafka_cluster: KafkaCluster, acl_lab: tuple[Lab, list[AclBinding]]
) -> None:
    """route joins its group; shadow, reading the same topic, may not; the analyst has none."""
    lab, _ = acl_lab
    prefix = f"test-{lab.suffix}"
    assert _can_join(kafka_cluster, NAMES["route"], lab.topics.candidates, f"{prefix}-route")
    # shadow reads the candidates topic too, but not in route's group
    assert not _can_join(kafka_cluster, NAMES["shadow"], lab.topics.candidates, f"{prefix}-route")
    assert not _can_join(kafka_cluster, NAMES["analyst"], lab.topics.packs, f"{prefix}-analyst")


def test_a_wrong_password_is_refused(kafka_cluster: KafkaCluster, tmp_path: Path) -> None:
    """SCRAM: a known user with a wrong password gets no connection."""
    bad = tmp_path / "pw"
    bad.write_text("not-the-password\n")
    settings = kafka_cluster.settings(NAMES["operator"], sasl_password_file=bad)
    with pytest.raises(KafkaError):
        admin = clients.admin_client(settings, request_timeout_ms=5000, bootstrap_timeout_ms=8000)
        admin.close()


def test_applying_the_plan_again_changes_nothing_and_prunes_a_stray_grant(
    kafka_cluster: KafkaCluster, acl_lab: tuple[Lab, list[AclBinding]]
) -> None:
    """apply_acls is declarative: a grant outside the plan for a role's principal goes."""
    lab, plan = acl_lab
    admin = kafka_cluster.admin()
    try:
        again = apply_acls(admin, plan)
        assert again.created == () and again.deleted == () and again.kept == len(plan)
        stray = AclBinding(f"User:{NAMES['route']}", "topic", lab.topics.control, "Write")
        apply_acls(admin, [*plan, stray], prune=False)
        assert _can_write(kafka_cluster, NAMES["route"], lab.topics.control)
        pruned = apply_acls(admin, plan)
        assert pruned.deleted == (stray,)
    finally:
        admin.close()
    deadline = time.monotonic() + 15
    while _can_write(kafka_cluster, NAMES["route"], lab.topics.control):
        assert time.monotonic() < deadline, "the pruned grant still works"
        time.sleep(0.5)


def test_the_four_stages_pack_under_their_own_principals(
    kafka_cluster: KafkaCluster, acl_lab: tuple[Lab, list[AclBinding]], tmp_path: Path
) -> None:
    """retriever -> route -> consolidate -> select -> compress -> analyst, each as itself."""
    lab, _ = acl_lab
    for stage in ("route", "consolidate", "select", "compress"):
        lab.credentials = kafka_cluster.env(NAMES[stage])
        lab.start(stage, log_dir=tmp_path)
    items = batches(12, seed=77)
    producer = clients.producer(kafka_cluster.settings(NAMES["retriever"]), acks="all")
    for rid, raw in items:
        producer.send(lab.topics.candidates, key=rid.encode(), value=raw)
    producer.flush()
    producer.close()
    want = {rid for rid, _ in items}
    got: dict[str, bytes] = {}
    analyst = clients.consumer(
        kafka_cluster.settings(NAMES["analyst"]),
        lab.topics.packs,
        group_id=None,
        auto_offset_reset="earliest",
        consumer_timeout_ms=1000,
    )
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and not want <= set(got):
        for msg in analyst:
            got.setdefault(msg.key.decode(), msg.value)
    analyst.close()
    assert set(got) >= want, _logs(lab)
    pipe = Pipeline.from_store(PolicyStore.load(REPO / "policies"), "default@1")
    for rid, raw in items:
        assert got[rid] == encode(pipe.run(decode_batch(raw)).pack)
    assert all(p.poll() is None for p in lab.procs), _logs(lab)


def _logs(lab: Lab) -> Any:
    return {p.name: orjson.dumps(p.read_text(errors="replace")[-1500:]) for p in lab.logs}


def test_the_acls_command_applies_the_plan_of_the_environment(
    kafka_cluster: KafkaCluster, acl_lab: tuple[Lab, list[AclBinding]]
) -> None:
    """`ctxbudget acls --apply` as the admin: the lab's plan is in place, nothing to change."""
    from click.testing import CliRunner

    from ctxbudget.cli import main

    lab, plan = acl_lab
    env = {
        **kafka_cluster.env(),
        "CTXBUDGET_GROUP_PREFIX": f"test-{lab.suffix}",
        **{f"CTXBUDGET_TOPICS__{k.upper()}": v for k, v in lab.topics.model_dump().items()},
    }
    result = CliRunner().invoke(main, ["acls", "--apply", "--role", "analyst"], env=env)
    assert result.exit_code == 0, result.output
    analyst = [b for b in plan if b.principal == f"User:{NAMES['analyst']}"]
    assert f"acls: 0 created, 0 deleted, {len(analyst)} already in place" in result.output
