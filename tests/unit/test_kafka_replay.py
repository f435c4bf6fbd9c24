"""Where replay writes (ctxbudget.kafka.replay): the shadow lane only, the pack before its
traces, keyed by request; never the live pack topic."""

from __future__ import annotations

from typing import Any

import pytest

from ctxbudget.codec import encode
from ctxbudget.errors import ConfigError
from ctxbudget.kafka import TopicNames
from ctxbudget.kafka.replay import ReplayTopics, replay_records, replay_topics
from ctxbudget.pipeline import Pipeline
from ctxbudget.policy import PolicyStore
from ctxbudget.schemas import ReplayInfo
from ctxbudget.testing import batch, candidate
from tests.paths import REPO

# -- replay writes the shadow lane only ---------------------------------------------------------


def _replayed(lane: str = "shadow", run_id: str | None = "r1") -> Any:
    store = PolicyStore.load(REPO / "policies")
    b = batch([candidate("c1", "Tokyo is the capital of Japan.")], request_id="q1")
    if run_id is not None:
        b = b.model_copy(update={"replay": ReplayInfo(run_id=run_id)})
    return Pipeline.from_store(store, "default@1").run(b, lane=lane)  # type: ignore[arg-type]


def test_replay_never_writes_to_the_live_pack_topic() -> None:
    """A shadow topic that is the live one, by its v1 name or as configured, is refused."""
    with pytest.raises(ConfigError, match="is the live pack topic"):
        replay_topics(TopicNames(shadow="ctx.packs.v1"))
    with pytest.raises(ConfigError):
        replay_topics(TopicNames(shadow="mine.v1", packs="mine.v1"))
    assert replay_topics(TopicNames()) == ReplayTopics(shadow="ctx.shadow.v1", audit="ctx.audit.v1")


def test_replay_writes_the_shadow_pack_then_its_traces_keyed_by_request() -> None:
    """A replayed request is its shadow pack, then its traces in order, all keyed by request id."""
    result = _replayed()
    records = replay_records(result.pack, result.traces, replay_topics(TopicNames()))
    assert [r.topic for r in records] == ["ctx.shadow.v1"] + ["ctx.audit.v1"] * len(result.traces)
    assert {r.key for r in records} == {b"q1"}
    assert [r.value for r in records] == [encode(result.pack), *map(encode, result.traces)]


@pytest.mark.parametrize(("lane", "run_id"), [("live", "r1"), ("shadow", None)])
def test_replay_refuses_a_live_pack_or_one_of_no_replay_run(lane: str, run_id: str | None) -> None:
    """Replay refuses to write a live pack, or a shadow pack without a replay run id."""
    result = _replayed(lane, run_id)
    with pytest.raises(ValueError, match="shadow packs of a replay run only"):
        replay_records(result.pack, result.traces, replay_topics(TopicNames()))
