"""The ACL plan (ctxbudget.kafka.acls): one principal per role, only the grants its code needs."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from ctxbudget.cli import main
from ctxbudget.kafka.acls import ROLES, AclBinding, acl_plan, plan_json, principals, render_commands
from ctxbudget.kafka.settings import TopicNames, WorkerSettings

T = TopicNames()


def _grants(plan: list[AclBinding], role: str) -> set[tuple[str, str, str]]:
    return {
        (b.operation, b.resource_type, b.resource)
        for b in plan
        if b.principal == f"User:ctxbudget-{role}"
    }


@pytest.fixture(scope="module")
def plan() -> list[AclBinding]:
    return acl_plan(WorkerSettings())


def test_every_role_has_a_principal_of_its_own(plan: list[AclBinding]) -> None:
    """Fifteen roles, fifteen principals, each with at least one grant."""
    names = principals()
    assert len(set(names.values())) == len(ROLES) == 15
    assert {b.principal for b in plan} == {f"User:{n}" for n in names.values()}


def test_the_retriever_only_writes_candidates(plan: list[AclBinding]) -> None:
    """The producer of requests may not read anything, nor write anywhere else."""
    assert _grants(plan, "retriever") == {("Write", "topic", T.candidates)}


def test_route_reads_its_input_and_control_and_writes_its_outputs(plan: list[AclBinding]) -> None:
    """route: candidates in its group, routed + audit + dead letters out, control read."""
    g = _grants(plan, "route")
    assert {(op, r) for op, kind, r in g if kind == "topic" and op in ("Read", "Write")} == {
        ("Read", T.candidates),
        ("Read", T.control),
        ("Write", T.routed),
        ("Write", T.audit),
        ("Write", T.deadletter),
    }
    assert ("Read", "group", "ctxbudget-route") in g


def test_only_the_operator_writes_control(plan: list[AclBinding]) -> None:
    """The kill switch has one writer."""
    writers = {b.principal for b in plan if b.resource == T.control and b.operation == "Write"}
    assert writers == {"User:ctxbudget-operator"}


def test_only_compress_and_fused_write_the_live_pack_topic(plan: list[AclBinding]) -> None:
    """Replay and the shadow worker cannot reach the live lane, whatever their settings."""
    writers = {b.principal for b in plan if b.resource == T.packs and b.operation == "Write"}
    assert writers == {"User:ctxbudget-compress", "User:ctxbudget-fused"}
    replay = {(op, r) for op, _, r in _grants(plan, "replay") if op == "Write"}
    assert replay == {("Write", T.shadow), ("Write", T.audit)}


def test_the_analyst_reads_what_the_audit_sink_reads_and_writes_nothing(
    plan: list[AclBinding],
) -> None:
    """The analyst sink reads its four topics without a group and writes nothing."""
    assert _grants(plan, "analyst") == {
        ("Read", "topic", T.audit),
        ("Read", "topic", T.packs),
        ("Read", "topic", T.shadow),
        ("Read", "topic", T.labels),
    }


def test_the_verify_worker_reads_answers_packs_and_traces_and_writes_verdicts(
    plan: list[AclBinding],
) -> None:
    """verify: answers in its group; packs, shadow and audit followed; verdicts out."""
    assert _grants(plan, "verify") == {
        ("Read", "topic", "ctx.answers.v1"),
        ("Read", "group", "ctxbudget-verify"),
        ("Read", "topic", T.packs),
        ("Read", "topic", T.shadow),
        ("Read", "topic", T.audit),
        ("Write", "topic", "ctx.verdicts.v1"),
        ("Write", "topic", T.deadletter),
    }
    assert _grants(plan, "answerer") == {("Write", "topic", "ctx.answers.v1")}


def test_only_the_labeller_writes_labels_and_the_monitor_reads_them(
    plan: list[AclBinding],
) -> None:
    """A forged label would move the coverage monitor: one writer; the monitor and the
    analyst sink read them."""
    writers = {b.principal for b in plan if b.resource == T.labels and b.operation == "Write"}
    readers = {b.principal for b in plan if b.resource == T.labels and b.operation == "Read"}
    assert writers == {"User:ctxbudget-labeller"}
    assert readers == {"User:ctxbudget-monitor", "User:ctxbudget-analyst"}
    assert _grants(plan, "monitor") == {
        ("Read", "topic", T.candidates),
        ("Read", "topic", T.labels),
    }


def test_the_verify_worker_writes_labels_only_when_it_is_to(plan: list[AclBinding]) -> None:
    """CTXBUDGET_VERIFY_LABELS=1 adds the one grant it needs, and no other."""
    wide = acl_plan(WorkerSettings(), verify_labels=True)
    assert _grants(wide, "verify") - _grants(plan, "verify") == {("Write", "topic", T.labels)}
    assert {b for b in wide if b.principal != "User:ctxbudget-verify"} == {
        b for b in plan if b.principal != "User:ctxbudget-verify"
    }


def test_the_verify_topics_follow_the_verify_settings() -> None:
    """Renamed answers and verdicts topics are the ones granted (and managed)."""
    plan = acl_plan(WorkerSettings(), verify_topics=("a.x", "v.x"))
    assert ("Write", "topic", "a.x") in _grants(plan, "answerer")
    assert ("Create", "topic", "v.x") in _grants(plan, "topics")


def test_the_topics_job_manages_topics_but_reads_and_writes_no_records(
    plan: list[AclBinding],
) -> None:
    """Create/alter every topic; no Read or Write."""
    ops = {op for op, _, _ in _grants(plan, "topics")}
    assert ops == {"Create", "Alter", "AlterConfigs", "Describe", "DescribeConfigs"}


def test_the_plan_follows_the_topic_names_and_group_prefix_of_the_settings() -> None:
    """Renamed topics and another group prefix are what the plan grants."""
    settings = WorkerSettings(group_prefix="blue", topics=TopicNames(candidates="blue.candidates"))
    plan = acl_plan(settings, roles=["route"])
    assert ("Read", "topic", "blue.candidates") in _grants(plan, "route")
    assert ("Read", "group", "blue-route") in _grants(plan, "route")


def test_write_intermediate_adds_the_fused_workers_intermediate_topics() -> None:
    """The fused worker writes routed/consolidated/packed only when told to."""
    plain = _grants(acl_plan(WorkerSettings(), roles=["fused"]), "fused")
    wide = _grants(acl_plan(WorkerSettings(), roles=["fused"], write_intermediate=True), "fused")
    assert wide - plain >= {("Write", "topic", T.routed), ("Write", "topic", T.packed)}


def test_the_commands_and_the_json_hold_every_binding(plan: list[AclBinding]) -> None:
    """Each binding appears once in the JSON and as an --operation in the commands."""
    data = json.loads(plan_json(plan))
    assert data["default"] == "deny" and len(data["acls"]) == len(plan)
    text = render_commands(plan)
    assert text.count("--operation") == len(plan)
    assert "--allow-principal User:ctxbudget-operator --operation Read --operation Write" in text


def test_the_acls_command_prints_the_plan() -> None:
    """`ctxbudget acls --format json --role operator`: the operator's three grants."""
    result = CliRunner().invoke(main, ["acls", "--format", "json", "--role", "operator"])
    assert result.exit_code == 0, result.output
    acls = json.loads(result.output)["acls"]
    assert {(a["operation"], a["resource"]) for a in acls} == {
        ("Read", T.control),
        ("Write", T.control),
        ("Write", T.audit),
    }
