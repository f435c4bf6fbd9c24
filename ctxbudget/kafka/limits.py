"""What a worker holds its records to, and the topics it checks before it starts.

- **Input limits** (:class:`~ctxbudget.limit_settings.LimitSettings`, ``CTXBUDGET_MAX_*``):
  a batch over one becomes a dead letter naming the limit before any stage works on it
  (:mod:`ctxbudget.limits`). The message size limit is the smaller of
  ``CTXBUDGET_MAX_MESSAGE_BYTES`` and the input topic's ``max.message.bytes``
  (``limits.input_limits(cap=topic_limits[source])``).
- **Output limits** (:func:`topic_limits`): every record a worker produces is checked
  against its destination topic's ``max.message.bytes`` as ``topics/*.yaml`` states it (and
  the producer's own request limit); an output over it becomes a dead letter naming the
  topic, the limit and the size. The embedded broker does not enforce the limit, Apache
  Kafka does: checking it here makes both behave the same and keeps a refused record from
  stopping the worker.
- **Topics at start** (:func:`check_topics`): a worker refuses to start while a topic it
  reads or writes is missing (the broker would create it on first use with its own
  defaults: 4 partitions and no configs on the embedded broker), and logs every other
  difference from the specs (partitions, configs) as a warning.

Specs are found by role: the spec of the default v1 name (``ctx.packs.v1`` ...) applies to
whatever name the topic is given (``CTXBUDGET_TOPICS__PACKS``), unless a spec of that very
name exists.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import structlog

from ctxbudget.errors import KafkaEdgeError
from ctxbudget.kafka.settings import TopicNames

if TYPE_CHECKING:
    from ctxbudget.kafka.settings import WorkerSettings
    from ctxbudget.kafka.topics import TopicSpec
    from ctxbudget.limit_settings import LimitSettings

log = structlog.get_logger("ctxbudget.worker")

#: Apache Kafka's default ``message.max.bytes``: the limit of a topic whose spec says none.
KAFKA_DEFAULT_MAX_MESSAGE_BYTES = 1048588
#: What a record adds to its key and value in a produce request (one-record batch header,
#: record attributes, varints; no headers are written).
RECORD_OVERHEAD = 128
#: How much a Kafka client's request limit exceeds ``CTXBUDGET_MAX_MESSAGE_BYTES``: the
#: producers' ``max_request_size`` and the workers' fetch size (``app``, ``verify``,
#: ``ctxbudget produce``).
PRODUCER_HEADROOM = 65536


def load_specs(settings: WorkerSettings) -> list[TopicSpec]:
    """The topic specs in :meth:`~ctxbudget.kafka.settings.WorkerSettings.specs_dir`; a
    :class:`~ctxbudget.kafka.topics.TopicSpecError` when the folder or a spec is invalid."""
    from ctxbudget.kafka.topics import load_topic_specs

    return load_topic_specs(settings.specs_dir())


def spec_for(role: str, names: TopicNames, specs: Sequence[TopicSpec]) -> TopicSpec | None:
    """The spec of the topic playing ``role`` (a field of :class:`TopicNames`)."""
    by_name = {s.name: s for s in specs}
    return by_name.get(getattr(names, role)) or by_name.get(getattr(TopicNames(), role))


def topic_limits(
    settings: WorkerSettings, limits: LimitSettings, specs: Sequence[TopicSpec]
) -> dict[str, int]:
    """Largest record (key + value + overhead) each of the worker's topics takes, by name:
    the spec's ``max.message.bytes`` (Kafka's default when it states none), never more than
    the producer's request limit."""
    producer_max = limits.max_message_bytes + PRODUCER_HEADROOM
    out: dict[str, int] = {}
    for role, name in settings.topics.model_dump().items():
        spec = spec_for(role, settings.topics, specs)
        stated = spec.config.get("max.message.bytes") if spec is not None else None
        limit = int(stated) if stated is not None else KAFKA_DEFAULT_MAX_MESSAGE_BYTES
        out[name] = min(limit, producer_max)
    return out


class TopicsMissingError(KafkaEdgeError):
    """A topic the worker reads or writes does not exist: the worker does not start."""


def check_topics(
    settings: WorkerSettings, specs: Sequence[TopicSpec], names: Sequence[str]
) -> list[str]:
    """Compare the topics ``names`` with their specs on the broker; return the warnings.

    Raises :class:`TopicsMissingError` when one is missing. A broker that cannot be asked
    is a warning (the worker then starts and its clients retry as ever).
    """
    from ctxbudget.kafka.topic_admin import TopicAdminError, verify_topics
    from ctxbudget.kafka.topics import TopicSpec

    wanted: list[TopicSpec] = []
    for name in dict.fromkeys(names):
        role = next((r for r, n in settings.topics.model_dump().items() if n == name), None)
        spec = spec_for(role, settings.topics, specs) if role is not None else None
        if spec is None:
            spec = TopicSpec(name=name, description="no spec", partitions=1, replication_factor=1)
        elif spec.name != name:
            spec = spec.model_copy(update={"name": name})
        wanted.append(spec)
    try:
        drift = verify_topics(settings.brokers, wanted, timeout_s=10.0, settings=settings)
    except TopicAdminError as e:
        return [f"topics not checked: {e}"]
    missing = sorted(f.topic for f in drift if f.kind == "missing")
    if missing:
        raise TopicsMissingError(
            f"topic(s) {', '.join(missing)} do not exist: create them from the specs first "
            "(ctxbudget topics apply). A worker never creates topics: the broker would make "
            "them with its own defaults (4 partitions and no limits on the embedded broker)."
        )
    return [
        f"{f} (a topic the broker created on first use has the broker's defaults; "
        "re-create it from the specs)"
        for f in drift
        if f.kind in ("partitions", "config")
    ]
