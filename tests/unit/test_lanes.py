"""Non-live writers never reach the live pack topic, however the destination is configured."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from ctxbudget.cli import main
from ctxbudget.kafka.lanes import (
    LIVE_PACK_TOPIC,
    LaneError,
    check_destination,
    check_roles,
    is_live,
)
from ctxbudget.kafka.settings import TopicNames
from ctxbudget.kafka.topics import TopicSpec, load_topic_specs
from tests.paths import REPO

SPECS = load_topic_specs(REPO / "topics")
BATCHES = str(REPO / "examples" / "batches.jsonl")
#: The live setting moved to a decoy, the shadow one given the live topic's v1 name.
DECOY = {"CTXBUDGET_TOPICS__SHADOW": LIVE_PACK_TOPIC, "CTXBUDGET_TOPICS__PACKS": "ctx.decoy.v1"}


def _spec(name: str, lane: str | None) -> TopicSpec:
    return TopicSpec.model_validate(
        {"name": name, "description": "d", "partitions": 1, "replication_factor": 1, "lane": lane}
    )


# -- what is live ---------------------------------------------------------------------------


def test_the_shipped_specs_declare_the_live_and_the_shadow_lane() -> None:
    """ctx.packs.v1 is declared live and ctx.shadow.v1 shadow; no other spec names a lane."""
    lanes = {s.name: s.lane for s in SPECS if s.lane is not None}
    assert lanes == {LIVE_PACK_TOPIC: "live", "ctx.shadow.v1": "shadow"}


@pytest.mark.parametrize(
    ("name", "topics"),
    [
        ("ctx.packs.v1", TopicNames()),
        ("ctx.packs.v1", TopicNames(packs="ctx.decoy.v1")),  # the v1 name, whatever the setting
        ("my.live", TopicNames(packs="my.live")),  # the configured live topic
        (" ctx.packs.v1 ", TopicNames()),  # blanks
        ("ctx_packs_v1", TopicNames()),  # a name Kafka takes for the same (metrics collide)
        ("other.live", TopicNames()),  # declared live by a spec
    ],
)
def test_a_live_topic_is_known_by_setting_by_v1_name_and_by_spec(
    name: str, topics: TopicNames
) -> None:
    """Each way a destination can be the live topic is refused."""
    specs = [*SPECS, _spec("other.live", "live")]
    assert is_live(name, topics, specs)
    with pytest.raises(LaneError, match="is the live pack topic"):
        check_destination(name, topics, specs, writer="replay")


def test_a_shadow_destination_with_its_own_spec_must_declare_the_shadow_lane() -> None:
    """The audit topic has a spec that is no shadow lane: refused as a shadow destination."""
    with pytest.raises(LaneError, match="not a shadow lane"):
        check_destination("ctx.audit.v1", TopicNames(), SPECS, writer="replay")
    assert check_destination("ctx.shadow.v1", TopicNames(), SPECS, writer="replay")
    assert check_destination("my.shadow.v1", TopicNames(), SPECS, writer="replay")  # no spec


def test_a_live_worker_keeps_every_role_but_packs_off_the_live_topic() -> None:
    """Traces or dead letters pointed at the live topic are refused; packs there are fine."""
    check_roles(TopicNames(), ["packs", "shadow", "audit"], SPECS, writer="worker fused")
    with pytest.raises(LaneError, match="CTXBUDGET_TOPICS__AUDIT"):
        check_roles(TopicNames(audit=LIVE_PACK_TOPIC), ["audit"], SPECS, writer="worker fused")


# -- each writer, each way of configuring it ------------------------------------------------


def _run(args: list[str], env: dict[str, str], tmp_path: Path, dotenv: str = "") -> Result:
    if dotenv:
        (tmp_path / ".env").write_text(dotenv)
    return CliRunner().invoke(main, args, env=env, catch_exceptions=False)


def _refused(result: Result, what: str) -> None:
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2, result.output
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.output
    assert what in lines[0]


_REPLAY = ["replay", BATCHES, "--policy", "default@1", "--run-id", "r1", "--out", "out.jsonl"]


@pytest.mark.parametrize(
    ("extra", "env", "dotenv"),
    [
        # the case that once wrote replay packs to the live topic: the live setting moved away
        ([], DECOY, ""),
        ([], {"CTXBUDGET_TOPICS__SHADOW": "my.live", "CTXBUDGET_TOPICS__PACKS": "my.live"}, ""),
        (["--shadow-topic", "ctx.packs.v1"], {}, ""),
        (["--shadow-topic", "my.live"], {"CTXBUDGET_TOPICS__PACKS": "my.live"}, ""),
        ([], {}, "CTXBUDGET_TOPICS__SHADOW=ctx.packs.v1\nCTXBUDGET_TOPICS__PACKS=ctx.decoy.v1\n"),
        ([], {"CTXBUDGET_TOPICS__AUDIT": "ctx.packs.v1"}, ""),
    ],
    ids=["env-decoy", "env-same", "option", "option-configured", "dotenv", "audit"],
)  # fmt: skip
def test_replay_refuses_a_live_destination(
    extra: list[str],
    env: dict[str, str],
    dotenv: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Option, environment or .env file: one Error line, exit 2, nothing written."""
    monkeypatch.chdir(tmp_path)
    result = _run([*_REPLAY, "--policies", str(REPO / "policies"), *extra], env, tmp_path, dotenv)
    _refused(result, "is the live pack topic")
    assert not (tmp_path / "out.jsonl").exists()


def test_replay_to_a_shadow_topic_still_works(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A shadow topic of any name that is not live is accepted."""
    monkeypatch.chdir(tmp_path)
    result = _run(
        [*_REPLAY, "--policies", str(REPO / "policies"), "--shadow-topic", "my.shadow"],
        {},
        tmp_path,
    )
    assert result.exit_code == 0, result.output
    assert (tmp_path / "out.jsonl").stat().st_size > 0


@pytest.mark.parametrize("stage", ["shadow", "fused", "compress"])
@pytest.mark.parametrize(
    ("env", "dotenv"),
    [
        ({"CTXBUDGET_TOPICS__SHADOW": "ctx.packs.v1"}, ""),
        (DECOY, ""),
        ({}, "CTXBUDGET_TOPICS__SHADOW=ctx.packs.v1\n"),
    ],
    ids=["env", "env-decoy", "dotenv"],
)  # fmt: skip
def test_a_worker_writing_shadow_packs_refuses_a_live_shadow_topic(
    stage: str,
    env: dict[str, str],
    dotenv: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The shadow worker (and the live ones, for their shadow packs) stop before connecting."""
    pytest.importorskip("faust")
    monkeypatch.chdir(tmp_path)
    env = {**env, "CTXBUDGET_POLICIES": str(REPO / "policies"), "CTXBUDGET_BROKERS": "k1:1"}
    _refused(_run(["worker", stage], env, tmp_path, dotenv), "is the live pack topic")


@pytest.mark.parametrize(
    ("args", "env"),
    [
        (["--topic", "ctx.packs.v1"], {}),
        ([], {"CTXBUDGET_TOPICS__CANDIDATES": "ctx.packs.v1"}),
        (["--topic", "mine"], {"CTXBUDGET_TOPICS__PACKS": "mine"}),
    ],
    ids=["option", "env", "option-configured"],
)
def test_produce_refuses_the_live_topic(
    args: list[str], env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Candidate batches are never written to the live pack topic, dry run or not."""
    monkeypatch.chdir(tmp_path)
    _refused(_run(["produce", BATCHES, "--dry-run", *args], env, tmp_path), "live pack topic")
