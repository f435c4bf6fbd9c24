"""Topic specs: YAML files in ``topics/``, validated at load. Pure: no broker, no client.

:func:`load_topic_specs` reads ``<name>.yaml`` files into frozen :class:`TopicSpec` models with
the model kernel (:mod:`ctxbudget.models`); a bad file raises :class:`TopicSpecError` in one line
naming the file, each key (``config['retention.ms']``) and what was found. Creating the topics
of the specs and checking a broker's topics against them is :mod:`ctxbudget.kafka.topic_admin`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from ctxbudget.errors import KafkaEdgeError
from ctxbudget.models import ConfigModel, load_yaml_model
from ctxbudget.resources import shipped

__all__ = [
    "DEFAULT_TOPICS_DIR",
    "KNOWN_TOPIC_CONFIGS",
    "TopicError",
    "TopicSpec",
    "TopicSpecError",
    "load_topic_spec",
    "load_topic_specs",
    "normalize_cleanup_policy",
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
    """Root of the topic errors (a bad spec here, a failed admin request in
    :mod:`ctxbudget.kafka.topic_admin`)."""


class TopicSpecError(TopicError):
    """A topic spec file is unreadable or invalid; the message names the file and the key."""


class TopicSpec(ConfigModel):
    """One Kafka topic as the project wants it."""

    name: str = Field(pattern=_TOPIC_NAME)
    description: str = Field(min_length=1)
    partitions: int = Field(ge=1)
    replication_factor: int = Field(ge=1)
    config: dict[str, str] = Field(default_factory=dict)
    #: The pack lane the topic carries, if any: ``live`` (what the generator reads) or
    #: ``shadow``. A non-live writer refuses a live topic (:mod:`ctxbudget.kafka.lanes`).
    lane: Literal["live", "shadow"] | None = None

    @field_validator("description")
    @classmethod
    def _description_is_one_line(cls, value: str) -> str:
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
        if policy is not None and normalize_cleanup_policy(policy) not in _CLEANUP_POLICIES:
            raise ValueError(
                f"cleanup.policy must be one of {sorted(_CLEANUP_POLICIES)} (found {policy!r})"
            )
        return value


def _config_value(item: object) -> object:
    if isinstance(item, bool):
        return "true" if item else "false"
    if isinstance(item, int | float | str):
        return str(item)
    return item  # left for the strict str check, which names the key and the type found


def normalize_cleanup_policy(policy: str) -> str:
    """``cleanup.policy`` in one spelling, its parts sorted ("delete,compact": "compact,delete")."""
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
    spec = load_yaml_model(TopicSpec, file, error=TopicSpecError)
    if file.stem != spec.name:
        raise TopicSpecError(
            f"{file}: name: expected the file stem {file.stem!r} (found {spec.name!r})"
        )
    return spec
