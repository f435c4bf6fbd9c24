"""ACLs as code: one principal per role, each granted exactly what its code does, nothing else.

:func:`acl_plan` turns the topic names and consumer-group prefix of the settings into the
bindings of every role (allow only: the cluster denies whatever no ACL grants, with
``allow.everyone.if.no.acl.found=false``). The plan prints as ``kafka-acls.sh`` commands or
JSON (``ctxbudget acls``) and :func:`apply_acls` makes a cluster hold exactly the plan's
bindings for the plan's principals (missing ones created, others of those principals
deleted). ``ops/security.md`` explains the roles; the real-cluster tests check each of them.

Which resources each role touches follows the code: a stage worker reads its input topic
in its consumer group (``GROUP_PREFIX-STAGE``, the faust app id), writes its outputs, the
audit and dead-letter topics, reads the topics' configurations at start (record limits),
and, for the stages whose lanes depend on the rollout (route, fused, shadow), reads the
control topic; the control follower and every other reader use no consumer group.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ctxbudget.kafka.settings import TopicNames, WorkerSettings

__all__ = [
    "ROLES",
    "AclBinding",
    "AclReport",
    "acl_plan",
    "apply_acls",
    "describe_roles",
    "plan_json",
    "principals",
    "render_commands",
    "wait_for_acls",
]

Resource = Literal["topic", "group", "cluster"]
Operation = Literal[
    "Read", "Write", "Create", "Alter", "Describe", "DescribeConfigs", "AlterConfigs"
]

#: Every role, in the order the plan lists them.
ROLES: tuple[str, ...] = (
    "retriever",
    "route",
    "consolidate",
    "select",
    "compress",
    "fused",
    "shadow",
    "operator",
    "replay",
    "analyst",
    "answerer",
    "verify",
    "labeller",
    "monitor",
    "topics",
)
#: The answers and verdicts topics (the verify worker's ``CTXBUDGET_VERIFY_*_TOPIC``).
ANSWERS_TOPIC = "ctx.answers.v1"
VERDICTS_TOPIC = "ctx.verdicts.v1"
_STAGE_IO: dict[str, tuple[str, tuple[str, ...], bool]] = {
    # stage: (input topic field, output topic fields, reads the control topic)
    "route": ("candidates", ("routed",), True),
    "consolidate": ("routed", ("consolidated",), False),
    "select": ("consolidated", ("packed",), False),
    "compress": ("packed", ("packs", "shadow"), False),
    "fused": ("candidates", ("packs", "shadow"), True),
    "shadow": ("candidates", ("shadow",), True),
}
_CLI_OPERATION = {
    "Read": "Read",
    "Write": "Write",
    "Create": "Create",
    "Alter": "Alter",
    "Describe": "Describe",
    "DescribeConfigs": "DescribeConfigs",
    "AlterConfigs": "AlterConfigs",
}


@dataclass(frozen=True, slots=True, order=True)
class AclBinding:
    """One ALLOW binding: ``principal`` may do ``operation`` on a literal resource."""

    principal: str
    resource_type: Resource
    resource: str
    operation: Operation
    host: str = "*"

    def as_dict(self) -> dict[str, str]:
        return {
            "principal": self.principal,
            "permission": "Allow",
            "resource_type": self.resource_type,
            "pattern_type": "literal",
            "resource": self.resource,
            "operation": self.operation,
            "host": self.host,
        }


def principals(prefix: str = "ctxbudget-") -> dict[str, str]:
    """Each role's SCRAM user name (the principal is ``User:NAME``)."""
    return {role: f"{prefix}{role}" for role in ROLES}


def _stage_grants(
    role: str, t: dict[str, str], group_prefix: str, write_intermediate: bool
) -> list[tuple[Resource, str, Operation]]:
    source, made, controlled = _STAGE_IO[role]
    outputs = list(made)
    if role == "fused" and write_intermediate:
        outputs = ["routed", "consolidated", "packed", *outputs]
    out: list[tuple[Resource, str, Operation]] = [
        ("topic", t[source], "Read"),
        ("group", f"{group_prefix}-{role}", "Read"),
    ]
    out += [("topic", t[name], "Write") for name in (*outputs, "audit", "deadletter")]
    for name in dict.fromkeys((source, *outputs, "audit", "deadletter")):
        out.append(("topic", t[name], "DescribeConfigs"))
    if controlled:
        out.append(("topic", t["control"], "Read"))
    return out


_TOPICS_JOB: tuple[Operation, ...] = (
    "Create",
    "Alter",
    "AlterConfigs",
    "Describe",
    "DescribeConfigs",
)


def _grants(
    role: str,
    topics: TopicNames,
    group_prefix: str,
    write_intermediate: bool,
    verify_topics: tuple[str, str] = (ANSWERS_TOPIC, VERDICTS_TOPIC),
    verify_labels: bool = False,
) -> list[tuple[Resource, str, Operation]]:
    t = topics.model_dump()
    answers, verdicts = verify_topics
    labels_write: list[tuple[Resource, str, Operation]] = (
        [("topic", t["labels"], "Write")] if verify_labels else []
    )
    if role in _STAGE_IO:
        return _stage_grants(role, t, group_prefix, write_intermediate)
    fixed: dict[str, list[tuple[Resource, str, Operation]]] = {
        "retriever": [("topic", t["candidates"], "Write")],
        "operator": [
            ("topic", t["control"], "Read"),
            ("topic", t["control"], "Write"),
            ("topic", t["audit"], "Write"),
        ],
        "replay": [
            ("topic", t["candidates"], "Read"),
            ("topic", t["shadow"], "Write"),
            ("topic", t["audit"], "Write"),
        ],
        "analyst": [
            ("topic", t["audit"], "Read"),
            ("topic", t["packs"], "Read"),
            ("topic", t["shadow"], "Read"),
            ("topic", t["labels"], "Read"),
        ],
        # the application that asks the model and sends its answers to be verified
        "answerer": [("topic", answers, "Write")],
        # ctxbudget/kafka/verify.py: answers in its group, packs, shadow packs and traces followed
        # outside any group, verdicts and dead letters out
        "verify": [
            ("topic", answers, "Read"),
            ("group", f"{group_prefix}-verify", "Read"),
            ("topic", t["packs"], "Read"),
            ("topic", t["shadow"], "Read"),
            ("topic", t["audit"], "Read"),
            ("topic", verdicts, "Write"),
            ("topic", t["deadletter"], "Write"),
            *labels_write,
        ],
        # `ctxbudget label`: analysts' relevance labels
        "labeller": [("topic", t["labels"], "Write")],
        # `ctxbudget monitor --follow`: candidates and labels, no group
        "monitor": [("topic", t["candidates"], "Read"), ("topic", t["labels"], "Read")],
        "topics": [
            ("topic", name, op) for name in (*t.values(), answers, verdicts) for op in _TOPICS_JOB
        ],
    }
    if role not in fixed:
        raise ValueError(f"unknown role {role!r}; expected one of {', '.join(ROLES)}")
    return fixed[role]


def acl_plan(
    settings: WorkerSettings,
    *,
    prefix: str = "ctxbudget-",
    roles: Sequence[str] = ROLES,
    write_intermediate: bool = False,
    verify_topics: tuple[str, str] = (ANSWERS_TOPIC, VERDICTS_TOPIC),
    verify_labels: bool = False,
) -> list[AclBinding]:
    """Every role's ALLOW bindings for the topics and group prefix of ``settings`` (and the
    verify worker's answers and verdicts topics), in the order of :data:`ROLES`, then by
    resource and operation. ``verify_labels``: the verify worker writes ``verify`` labels
    (``CTXBUDGET_VERIFY_LABELS``)."""
    names = principals(prefix)
    order = {f"User:{names[role]}": i for i, role in enumerate(ROLES)}
    plan = {
        AclBinding(f"User:{names[role]}", kind, resource, op)
        for role in roles
        for kind, resource, op in _grants(
            role,
            settings.topics,
            settings.group_prefix,
            write_intermediate,
            verify_topics,
            verify_labels,
        )
    }
    return sorted(plan, key=lambda b: (order[b.principal], b))


def plan_json(plan: Sequence[AclBinding], *, prefix: str = "ctxbudget-") -> str:
    """The plan as JSON: the principal of each role, then every binding."""
    roles = {role: f"User:{name}" for role, name in principals(prefix).items()}
    return json.dumps(
        {"default": "deny", "principals": roles, "acls": [b.as_dict() for b in plan]}, indent=2
    )


def render_commands(plan: Sequence[AclBinding], *, bootstrap: str = "$BOOTSTRAP") -> str:
    """The plan as ``kafka-acls.sh --add`` commands, one per principal and resource."""
    grouped: dict[tuple[str, str, str], list[str]] = {}
    for b in plan:
        grouped.setdefault((b.principal, b.resource_type, b.resource), []).append(
            _CLI_OPERATION[b.operation]
        )
    lines = [
        "# Deny by default: the brokers run with allow.everyone.if.no.acl.found=false.",
        "# admin.properties holds the admin's SASL settings (security.protocol, sasl.mechanism,",
        "# sasl.jaas.config).",
    ]
    for (principal, kind, resource), ops in grouped.items():
        target = "--cluster" if kind == "cluster" else f"--{kind} {resource}"
        flags = " ".join(f"--operation {op}" for op in ops)
        lines.append(
            f"kafka-acls.sh --bootstrap-server {bootstrap} --command-config admin.properties "
            f"--add --allow-principal {principal} {flags} {target}"
        )
    return "\n".join(lines) + "\n"


@dataclass(frozen=True, slots=True)
class AclReport:
    """What :func:`apply_acls` changed."""

    created: tuple[AclBinding, ...]
    deleted: tuple[AclBinding, ...]
    kept: int


def _to_kafka(binding: AclBinding) -> Any:
    from kafka.admin import (
        ACL,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        ResourcePattern,
        ResourceType,
    )

    op = {
        "Read": ACLOperation.READ,
        "Write": ACLOperation.WRITE,
        "Create": ACLOperation.CREATE,
        "Alter": ACLOperation.ALTER,
        "Describe": ACLOperation.DESCRIBE,
        "DescribeConfigs": ACLOperation.DESCRIBE_CONFIGS,
        "AlterConfigs": ACLOperation.ALTER_CONFIGS,
    }[binding.operation]
    kind = {
        "topic": ResourceType.TOPIC,
        "group": ResourceType.GROUP,
        "cluster": ResourceType.CLUSTER,
    }[binding.resource_type]
    return ACL(
        principal=binding.principal,
        host=binding.host,
        operation=op,
        permission_type=ACLPermissionType.ALLOW,
        resource_pattern=ResourcePattern(kind, binding.resource, ACLResourcePatternType.LITERAL),
    )


def _from_kafka(acl: Any) -> AclBinding | None:
    """A binding of ours from a described ACL; None for a kind the plan never makes."""
    from kafka.admin import ACLPermissionType, ACLResourcePatternType

    pattern = acl.resource_pattern
    if (
        acl.permission_type != ACLPermissionType.ALLOW
        or pattern.pattern_type != ACLResourcePatternType.LITERAL
    ):
        return None
    kind = pattern.resource_type.name.lower()
    op = "".join(part.capitalize() for part in acl.operation.name.split("_"))
    if kind not in ("topic", "group", "cluster") or op not in _CLI_OPERATION:
        return None
    return AclBinding(acl.principal, kind, pattern.resource_name, op, acl.host)  # type: ignore[arg-type]


def _existing(admin: Any) -> list[Any]:
    from kafka.admin import (
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        ResourcePatternFilter,
        ResourceType,
    )

    found, error = admin.describe_acls(
        ACLFilter(
            principal=None,
            host=None,
            operation=ACLOperation.ANY,
            permission_type=ACLPermissionType.ANY,
            resource_pattern=ResourcePatternFilter(
                ResourceType.ANY, None, ACLResourcePatternType.ANY
            ),
        )
    )
    if error is not None and int(getattr(error, "errno", 0) or 0):
        raise RuntimeError(f"could not list the cluster's ACLs: {error}")
    return list(found)


def _filter_of(acl: Any) -> Any:
    from kafka.admin import ACLFilter, ResourcePatternFilter

    p = acl.resource_pattern
    return ACLFilter(
        principal=acl.principal,
        host=acl.host,
        operation=acl.operation,
        permission_type=acl.permission_type,
        resource_pattern=ResourcePatternFilter(p.resource_type, p.resource_name, p.pattern_type),
    )


def _ours(admin: Any, principals_: set[str]) -> list[tuple[AclBinding | None, Any]]:
    return [(_from_kafka(acl), acl) for acl in _existing(admin) if acl.principal in principals_]


def wait_for_acls(admin: Any, plan: Sequence[AclBinding], *, timeout_s: float = 30.0) -> None:
    """Return once the cluster describes every binding of ``plan`` (ACLs reach the brokers
    through the metadata log, a moment after they are created)."""
    import time

    wanted = set(plan)
    deadline = time.monotonic() + timeout_s
    while True:
        seen = {b for b, _ in _ours(admin, {b.principal for b in plan})}
        if wanted <= seen:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{len(wanted - seen)} ACLs not visible after {timeout_s:g} s")
        time.sleep(0.25)


def apply_acls(
    admin: Any, plan: Sequence[AclBinding], *, prune: bool = True, wait: bool = True
) -> AclReport:
    """Make the cluster hold the plan: create its missing bindings and (``prune``) delete
    the other ALLOW bindings of the plan's principals; with ``wait``, return once the
    cluster describes them all. ``admin`` is a kafka-python admin client of a principal
    allowed to alter ACLs (a super user)."""
    wanted = set(plan)
    ours = {b.principal for b in plan}
    present: dict[AclBinding, Any] = {}
    stray: list[tuple[AclBinding, Any]] = []
    for acl in _existing(admin):
        if acl.principal not in ours:
            continue
        binding = _from_kafka(acl)
        if binding is not None and binding in wanted:
            present[binding] = acl
        elif binding is not None:
            stray.append((binding, acl))
    missing = sorted(wanted - set(present))
    if missing:
        result = admin.create_acls([_to_kafka(b) for b in missing])
        failed = result.get("failed", []) if isinstance(result, Mapping) else []
        if failed:
            raise RuntimeError(f"could not create {len(failed)} ACLs, e.g. {failed[0]}")
    deleted: list[AclBinding] = []
    if prune and stray:
        admin.delete_acls([_filter_of(acl) for _, acl in stray])
        deleted = [b for b, _ in stray]
    if wait and missing:
        wait_for_acls(admin, plan)
    return AclReport(tuple(missing), tuple(sorted(deleted)), len(present))


def describe_roles(plan: Iterable[AclBinding]) -> dict[str, list[str]]:
    """Each principal's bindings as short lines (``Write topic ctx.candidates.v1``)."""
    out: dict[str, list[str]] = {}
    for b in plan:
        out.setdefault(b.principal, []).append(f"{b.operation} {b.resource_type} {b.resource}")
    return out
