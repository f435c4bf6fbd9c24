"""Topic admin: create the topics of the specs on a broker, and list how a broker's topics drift.

- :func:`apply_topics` creates the missing topics and leaves existing ones alone (idempotent).
- :func:`verify_topics` lists drift: missing topics, partition or replica counts, config values.

The specs themselves (models, YAML loading) are :mod:`ctxbudget.kafka.topics`, which needs no
broker.

Config values are compared only where the broker reports them. Apache Kafka reports every topic
config; Tansu 0.6.0 (the embedded broker) reports exactly the configs given when the topic was
created, labelled as defaults, and nothing else. A spec key the broker does not report is a
``config_unreported`` finding, never silently taken as a match.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from ctxbudget.errors import one_line
from ctxbudget.kafka import clients
from ctxbudget.kafka.probe import BOOTSTRAP_TIMEOUT_MS
from ctxbudget.kafka.topics import TopicError, TopicSpec, normalize_cleanup_policy
from ctxbudget.models import ResultModel

if TYPE_CHECKING:
    from ctxbudget.kafka.settings import WorkerSettings

__all__ = [
    "ApplyReport",
    "DriftFinding",
    "TopicAdminError",
    "apply_topics",
    "verify_topics",
]


class TopicAdminError(TopicError):
    """The broker refused or failed an admin request (create, describe)."""


class ApplyReport(ResultModel):
    """What :func:`apply_topics` did: topics it created, and topics that already existed."""

    created: tuple[str, ...]
    existing: tuple[str, ...]


class DriftFinding(ResultModel):
    """One difference between a spec and the broker's topic."""

    topic: str
    kind: Literal["missing", "partitions", "replication_factor", "config", "config_unreported"]
    key: str | None = None
    expected: str
    actual: str | None = None

    def __str__(self) -> str:
        where = f"{self.topic} {self.key}" if self.key else self.topic
        return f"{where}: {self.kind}: expected {self.expected}, found {self.actual}"


@contextlib.contextmanager
def _admin(
    bootstrap: str, *, timeout_s: float, settings: WorkerSettings | None = None
) -> Iterator[Any]:
    from kafka.errors import KafkaError

    timeout_ms = int(timeout_s * 1000)
    try:
        client = clients.admin_client(
            settings,
            brokers=bootstrap,
            client_id="ctxbudget-topics",
            bootstrap_timeout_ms=min(timeout_ms, BOOTSTRAP_TIMEOUT_MS),
            request_timeout_ms=timeout_ms,
        )
    except (KafkaError, OSError) as e:
        raise TopicAdminError(f"cannot reach the broker at {bootstrap}: {one_line(e)}") from e
    try:
        yield client
    except (KafkaError, OSError) as e:
        raise TopicAdminError(f"admin request to {bootstrap} failed: {e!r}") from e
    finally:
        client.close()


def _check_admin_args(bootstrap: str, timeout_s: float, replication_factor: int | None) -> None:
    if not bootstrap.strip():
        raise ValueError(f"bootstrap must be 'host:port[,host:port]', got {bootstrap!r}")
    if timeout_s <= 0:
        raise ValueError(f"timeout_s must be > 0, got {timeout_s!r}")
    if replication_factor is not None and replication_factor < 1:
        raise ValueError(f"replication_factor must be >= 1 or None, got {replication_factor!r}")


def apply_topics(
    bootstrap: str,
    specs: Sequence[TopicSpec],
    *,
    replication_factor: int | None = None,
    timeout_s: float = 30.0,
    settings: WorkerSettings | None = None,
) -> ApplyReport:
    """Create the topics of ``specs`` that do not exist; leave existing ones untouched.

    ``replication_factor`` overrides every spec's (the shipped specs say 1, for one broker;
    pass 3 against a production cluster). Existing topics are reported, never altered: run
    :func:`verify_topics` to see how they differ. ``settings`` carries the cluster's
    security (SASL / TLS); None connects in plaintext.
    """
    _check_admin_args(bootstrap, timeout_s, replication_factor)
    with _admin(bootstrap, timeout_s=timeout_s, settings=settings) as admin:
        present = set(admin.list_topics())
        missing = [spec for spec in specs if spec.name not in present]
        raced = _create(admin, missing, replication_factor, timeout_s) if missing else set()
    created = tuple(spec.name for spec in missing if spec.name not in raced)
    existing = tuple(spec.name for spec in specs if spec.name not in created)
    return ApplyReport(created=created, existing=existing)


def _create(
    admin: Any, specs: Sequence[TopicSpec], replication_factor: int | None, timeout_s: float
) -> set[str]:
    """Create ``specs``; return the names another client created first (already exists)."""
    from kafka.errors import TopicAlreadyExistsError, for_code

    request = {
        spec.name: {
            "num_partitions": spec.partitions,
            "replication_factor": replication_factor or spec.replication_factor,
            "configs": dict(spec.config),
        }
        for spec in specs
    }
    response = admin.create_topics(request, timeout_ms=int(timeout_s * 1000), raise_errors=False)
    raced: set[str] = set()
    failures = []
    for topic in response["topics"]:
        error = for_code(topic["error_code"])
        if error is TopicAlreadyExistsError:
            raced.add(topic["name"])
        elif topic["error_code"] != 0:
            failures.append(f"{topic['name']}: {error.__name__} {topic.get('error_message')}")
    if failures:
        raise TopicAdminError("create_topics failed: " + "; ".join(failures))
    admin.wait_for_topics(sorted(set(request) - raced), timeout_ms=int(timeout_s * 1000))
    return raced


def verify_topics(
    bootstrap: str,
    specs: Sequence[TopicSpec],
    *,
    replication_factor: int | None = None,
    timeout_s: float = 30.0,
    settings: WorkerSettings | None = None,
) -> list[DriftFinding]:
    """Compare the broker's topics with ``specs``; an empty list means no drift."""
    _check_admin_args(bootstrap, timeout_s, replication_factor)
    with _admin(bootstrap, timeout_s=timeout_s, settings=settings) as admin:
        present = set(admin.list_topics())
        found = [spec for spec in specs if spec.name in present]
        described = {t["name"]: t for t in admin.describe_topics([s.name for s in found])}
        configs = _describe_configs(admin, found)
    findings: list[DriftFinding] = []
    for spec in specs:
        if spec.name not in present:
            findings.append(
                DriftFinding(topic=spec.name, kind="missing", expected="present", actual=None)
            )
            continue
        expected_rf = replication_factor or spec.replication_factor
        findings += _layout_drift(spec, described[spec.name], expected_rf)
        findings += _config_drift(spec, configs.get(spec.name, {}))
    return findings


def _describe_configs(admin: Any, specs: Sequence[TopicSpec]) -> dict[str, dict[str, str]]:
    """Topic configs as the broker reports them (all sources, not only "modified")."""
    from kafka.admin import ConfigResource, ConfigResourceType

    if not specs:
        return {}
    resources = [ConfigResource(ConfigResourceType.TOPIC, spec.name) for spec in specs]
    answer = admin.describe_configs(resources, config_filter="all")
    return {
        name: {key: entry["value"] for key, entry in entries.items()}
        for name, entries in answer.get("topic", {}).items()
    }


def _layout_drift(
    spec: TopicSpec, described: Mapping[str, Any], expected_rf: int
) -> list[DriftFinding]:
    partitions = described["partitions"]
    findings = []
    if len(partitions) != spec.partitions:
        findings.append(
            DriftFinding(
                topic=spec.name,
                kind="partitions",
                expected=str(spec.partitions),
                actual=str(len(partitions)),
            )
        )
    replicas = {len(p["replica_nodes"]) for p in partitions}
    if replicas and replicas != {expected_rf}:
        findings.append(
            DriftFinding(
                topic=spec.name,
                kind="replication_factor",
                expected=str(expected_rf),
                actual=",".join(str(r) for r in sorted(replicas)),
            )
        )
    return findings


def _config_drift(spec: TopicSpec, reported: Mapping[str, str]) -> list[DriftFinding]:
    findings = []
    for key, expected in sorted(spec.config.items()):
        actual = reported.get(key)
        if actual is None:
            kind: Literal["config", "config_unreported"] = "config_unreported"
        elif _same_config(key, expected, actual):
            continue
        else:
            kind = "config"
        findings.append(
            DriftFinding(topic=spec.name, kind=kind, key=key, expected=expected, actual=actual)
        )
    return findings


def _same_config(key: str, expected: str, actual: str) -> bool:
    if key == "cleanup.policy":
        return normalize_cleanup_policy(expected) == normalize_cleanup_policy(actual)
    return expected.strip() == actual.strip()
