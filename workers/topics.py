"""Topic specs: YAML files in ``topics/``, validated at load, applied and verified on a broker.

- :func:`load_topic_specs` reads ``<name>.yaml`` files (``yaml.safe_load``) into frozen
  :class:`TopicSpec` models; a bad file raises :class:`TopicSpecError` naming the file, the key and
  what was found.
- :func:`apply_topics` creates the missing topics and leaves existing ones alone (idempotent).
- :func:`verify_topics` lists drift: missing topics, partition or replica counts, config values.

Config values are compared only where the broker reports them. Apache Kafka reports every topic
config; Tansu 0.6.0 (the embedded broker) reports exactly the configs given when the topic was
created, labelled as defaults, and nothing else. A spec key the broker does not report is a
``config_unreported`` finding, never silently taken as a match.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ctxbudget.errors import KafkaEdgeError
from ctxbudget.resources import shipped
from workers import clients

if TYPE_CHECKING:
    from workers.settings import WorkerSettings

__all__ = [
    "DEFAULT_TOPICS_DIR",
    "KNOWN_TOPIC_CONFIGS",
    "ApplyReport",
    "DriftFinding",
    "TopicAdminError",
    "TopicError",
    "TopicSpec",
    "TopicSpecError",
    "apply_topics",
    "load_topic_spec",
    "load_topic_specs",
    "verify_topics",
]

#: The shipped topic specs: the checkout's ``topics/``, else the copy inside the package.
DEFAULT_TOPICS_DIR = shipped("topics")

_TOPIC_NAME = r"^[A-Za-z0-9._-]{1,249}$"
_CLEANUP_POLICIES = frozenset({"delete", "compact", "compact,delete", "delete,compact"})

#: Topic-level configs of Apache Kafka 3.x. Tansu accepts any key; Kafka rejects unknown ones,
#: so a typo is caught here rather than in production.
KNOWN_TOPIC_CONFIGS = frozenset(
    {
        "cleanup.policy",
        "compression.type",
        "delete.retention.ms",
        "file.delete.delay.ms",
        "flush.messages",
        "flush.ms",
        "follower.replication.throttled.replicas",
        "index.interval.bytes",
        "leader.replication.throttled.replicas",
        "local.retention.bytes",
        "local.retention.ms",
        "max.compaction.lag.ms",
        "max.message.bytes",
        "message.downconversion.enable",
        "message.timestamp.after.max.ms",
        "message.timestamp.before.max.ms",
        "message.timestamp.difference.max.ms",
        "message.timestamp.type",
        "min.cleanable.dirty.ratio",
        "min.compaction.lag.ms",
        "min.insync.replicas",
        "preallocate",
        "remote.storage.enable",
        "retention.bytes",
        "retention.ms",
        "segment.bytes",
        "segment.index.bytes",
        "segment.jitter.ms",
        "segment.ms",
        "unclean.leader.election.enable",
    }
)


class TopicError(KafkaEdgeError):
    """Root of the topic spec errors."""


class TopicSpecError(TopicError):
    """A topic spec file is unreadable or invalid; the message names the file and the key."""


class TopicAdminError(TopicError):
    """The broker refused or failed an admin request (create, describe)."""


class TopicSpec(BaseModel):
    """One Kafka topic as the project wants it."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    name: str = Field(pattern=_TOPIC_NAME)
    description: str = Field(min_length=1)
    partitions: int = Field(ge=1)
    replication_factor: int = Field(ge=1)
    config: dict[str, str] = Field(default_factory=dict)

    @field_validator("description")
    @classmethod
    def _one_line(cls, value: str) -> str:
        text = value.strip()
        if not text or "\n" in text:
            raise ValueError("must be one non-empty line")
        return text

    @field_validator("config", mode="before")
    @classmethod
    def _config_values_as_strings(cls, value: object) -> object:
        """Kafka configs are strings on the wire; YAML numbers and booleans are converted."""
        if not isinstance(value, Mapping):
            return value
        return {key: _config_value(item) for key, item in value.items()}

    @field_validator("config")
    @classmethod
    def _known_config_keys(cls, value: dict[str, str]) -> dict[str, str]:
        unknown = sorted(set(value) - KNOWN_TOPIC_CONFIGS)
        if unknown:
            raise ValueError(f"unknown topic config(s) {unknown}; Apache Kafka would reject them")
        policy = value.get("cleanup.policy")
        if policy is not None and _normalize_policy(policy) not in _CLEANUP_POLICIES:
            raise ValueError(f"cleanup.policy must be one of {sorted(_CLEANUP_POLICIES)}")
        return value


def _config_value(item: object) -> object:
    if isinstance(item, bool):
        return "true" if item else "false"
    if isinstance(item, int | float | str):
        return str(item)
    return item  # left for the strict str check, which names the key and the type found


def _normalize_policy(policy: str) -> str:
    return ",".join(sorted(part.strip() for part in policy.split(",")))


# -- loading ----------------------------------------------------------------------------------


def load_topic_specs(directory: str | Path = DEFAULT_TOPICS_DIR) -> list[TopicSpec]:
    """Load every ``*.yaml`` topic spec in ``directory``, sorted by topic name."""
    root = Path(directory)
    if not root.is_dir():
        raise TopicSpecError(f"{root}: not a directory of topic specs")
    files = sorted(root.glob("*.yaml"))
    if not files:
        raise TopicSpecError(f"{root}: no *.yaml topic specs found")
    # one file per topic: the stem is the name, so names are unique by construction
    return sorted((load_topic_spec(path) for path in files), key=lambda spec: spec.name)


def load_topic_spec(path: str | Path) -> TopicSpec:
    """Load one topic spec file; its name must be ``<topic name>.yaml``."""
    file = Path(path)
    data = _read_yaml(file)
    try:
        spec = TopicSpec.model_validate(data)
    except ValidationError as e:
        raise TopicSpecError(_describe_validation_error(file, e)) from e
    if file.stem != spec.name:
        raise TopicSpecError(
            f"{file}: key 'name': expected the file stem {file.stem!r}, found {spec.name!r}"
        )
    return spec


def _read_yaml(file: Path) -> dict[str, Any]:
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as e:
        raise TopicSpecError(f"{file}: cannot read: {e}") from e
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise TopicSpecError(f"{file}: not valid YAML: {e}") from e
    if not isinstance(data, dict):
        raise TopicSpecError(f"{file}: expected a mapping at the top level, found {_found(data)}")
    return data


def _describe_validation_error(file: Path, error: ValidationError) -> str:
    lines = []
    for item in error.errors():
        key = _key_path(item["loc"])
        found = "nothing" if item["type"] == "missing" else _found(item.get("input"))
        lines.append(f"{file}: key {key!r}: {item['msg']}, found {found}")
    return "\n".join(lines)


def _key_path(loc: tuple[int | str, ...]) -> str:
    """``config['retention.ms']`` rather than the ambiguous ``config.retention.ms``."""
    if not loc:
        return "<top level>"
    head, *rest = loc
    return str(head) + "".join(f"[{part!r}]" for part in rest)


def _found(value: object) -> str:
    text = repr(value)
    if len(text) > 80:
        text = text[:77] + "..."
    return f"{text} ({type(value).__name__})"


# -- admin --------------------------------------------------------------------------------------


class ApplyReport(BaseModel):
    """What :func:`apply_topics` did: topics it created, and topics that already existed."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    created: tuple[str, ...]
    existing: tuple[str, ...]


class DriftFinding(BaseModel):
    """One difference between a spec and the broker's topic."""

    model_config = ConfigDict(frozen=True, extra="forbid")

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
            bootstrap_timeout_ms=timeout_ms,
            request_timeout_ms=timeout_ms,
        )
    except (KafkaError, OSError) as e:
        raise TopicAdminError(f"cannot reach the broker at {bootstrap}: {e!r}") from e
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
        return _normalize_policy(expected) == _normalize_policy(actual)
    return expected.strip() == actual.strip()
