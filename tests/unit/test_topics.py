"""Topic specs are data: every shipped file loads, and a bad file says where and what is wrong."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from ctxbudget.kafka.topics import DEFAULT_TOPICS_DIR, TopicSpec, TopicSpecError, load_topic_specs
from ctxbudget.kafka.topics import load_topic_spec as load_one

# Every v1 topic the product reads or writes: the README's topics table, and ctx.labels.v1
# (the labels stream, in its section "Watching coverage under drift").
V1_TOPICS = {
    "ctx.candidates.v1",
    "ctx.routed.v1",
    "ctx.consolidated.v1",
    "ctx.packed.v1",
    "ctx.packs.v1",
    "ctx.shadow.v1",
    "ctx.audit.v1",
    "ctx.control.v1",
    "ctx.deadletter.v1",
    "ctx.labels.v1",
    "ctx.answers.v1",
    "ctx.verdicts.v1",
}

SHIPPED = sorted(DEFAULT_TOPICS_DIR.glob("*.yaml"))

GOOD = """\
name: t.good
description: a topic
partitions: 3
replication_factor: 1
config:
  cleanup.policy: delete
  retention.ms: 86400000
"""


def _write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_shipped_topic_file_loads(path: Path) -> None:
    """Each shipped spec must validate, or workers fail at start."""
    spec = load_one(path)
    assert spec.name == path.stem


def test_shipped_topics_are_exactly_the_v1_topics() -> None:
    """A topic added in code but not in topics/ (or the reverse) is a deployment bug."""
    assert {spec.name for spec in load_topic_specs()} == V1_TOPICS


def test_control_topic_is_compacted_with_one_partition() -> None:
    """Control state is read to its end and last-value-per-key; one ordered partition, compacted."""
    control = {spec.name: spec for spec in load_topic_specs()}["ctx.control.v1"]
    assert control.partitions == 1
    assert control.config["cleanup.policy"] == "compact"


def test_every_shipped_topic_sets_retention_cleanup_and_max_message_bytes() -> None:
    """Broker defaults differ between Tansu and Kafka; the specs must not lean on them."""
    for spec in load_topic_specs():
        assert {"retention.ms", "cleanup.policy", "max.message.bytes"} <= set(spec.config)


def test_yaml_numbers_become_kafka_config_strings(tmp_path: Path) -> None:
    """Kafka configs are strings on the wire; YAML integers are the natural way to write them."""
    spec = load_one(_write(tmp_path, "t.good.yaml", GOOD))
    assert spec.config == {"cleanup.policy": "delete", "retention.ms": "86400000"}


def test_spec_is_frozen() -> None:
    """Specs are shared between apply and verify; nobody may change one in passing."""
    spec = TopicSpec(name="t", description="d", partitions=1, replication_factor=1)
    with pytest.raises(ValidationError):
        spec.partitions = 2  # type: ignore[misc]


@pytest.mark.parametrize(
    ("text", "key", "found"),
    [
        (GOOD.replace("partitions: 3", "partitions: three"), "partitions", "(found 'three')"),
        (GOOD.replace("partitions: 3", "partitions: 0"), "partitions", "(found 0)"),
        (GOOD.replace("partitions: 3", "partitions: true"), "partitions", "(found True)"),
        (GOOD.replace("partitions: 3\n", ""), "partitions", "Field required"),
        (GOOD + "partitons: 3\n", "partitons", "(found 3)"),
        (GOOD + "  retention.msec: 5\n", "config", "['retention.msec']"),
        (GOOD.replace("86400000", "[1, 2]"), "config['retention.ms']", "(found [1, 2])"),
        (GOOD.replace("delete", "shred"), "config", "(found 'shred')"),
        (GOOD.replace("name: t.good", "name: t good"), "name", "(found 't good')"),
    ],
    ids=[
        "wrong-type",
        "zero-partitions",
        "bool-as-int",
        "missing-key",
        "unknown-key",
        "unknown-config",
        "config-not-scalar",
        "bad-cleanup-policy",
        "bad-name",
    ],
)
def test_bad_spec_error_names_file_key_and_what_was_found(
    tmp_path: Path, text: str, key: str, found: str
) -> None:
    """An operator fixing a spec must see the file, the key and the offending value at once,
    in one line (the model kernel's message; a key holding a dot is quoted)."""
    path = _write(tmp_path, "t.good.yaml", text)
    with pytest.raises(TopicSpecError) as caught:
        load_topic_specs(tmp_path)
    message = str(caught.value)
    assert message.startswith(f"{path}: {key}: ") and "\n" not in message
    assert found in message


def test_several_problems_are_one_line(tmp_path: Path) -> None:
    """Every problem of one file in one line, each with its key path."""
    _write(tmp_path, "t.good.yaml", "partitions: x\nconfig: {retention.ms: [1]}\n")
    with pytest.raises(TopicSpecError) as caught:
        load_topic_specs(tmp_path)
    message = str(caught.value)
    assert "\n" not in message
    for part in ("name: Field required", "partitions: ", "config['retention.ms']: "):
        assert part in message


def test_invalid_yaml_names_the_file(tmp_path: Path) -> None:
    """A syntax error must point at the file, not at a stack of parser internals."""
    path = _write(tmp_path, "t.good.yaml", "name: [unclosed\n")
    with pytest.raises(TopicSpecError, match="not valid YAML") as caught:
        load_topic_specs(tmp_path)
    assert str(path) in str(caught.value)
    assert caught.value.__cause__ is not None


def test_top_level_list_is_rejected_with_what_was_found(tmp_path: Path) -> None:
    """A spec must be a mapping; say what the file held instead."""
    _write(tmp_path, "t.good.yaml", "- name: t.good\n")
    with pytest.raises(TopicSpecError, match=r"expected a mapping .* found \[.*\] \(list\)"):
        load_topic_specs(tmp_path)


def test_file_name_must_match_topic_name(tmp_path: Path) -> None:
    """One file per topic, named after it, so a copied file cannot silently shadow another."""
    _write(tmp_path, "t.other.yaml", GOOD)
    with pytest.raises(
        TopicSpecError, match=r"name: expected the file stem 't.other' \(found 't.good'\)"
    ):
        load_topic_specs(tmp_path)


def test_empty_directory_is_an_error(tmp_path: Path) -> None:
    """Applying zero topics would look like success; refuse it."""
    with pytest.raises(TopicSpecError, match=r"no \*\.yaml topic specs"):
        load_topic_specs(tmp_path)


def test_missing_directory_is_an_error(tmp_path: Path) -> None:
    """A wrong --topics path must fail loudly."""
    with pytest.raises(TopicSpecError, match="not a directory"):
        load_topic_specs(tmp_path / "nope")
