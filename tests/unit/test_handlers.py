"""Worker handlers without a broker: the bytes a worker would produce for each record."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import orjson
import pytest

from ctxbudget.codec import decode_batch, encode
from ctxbudget.kafka.handlers import (
    Context,
    Metrics,
    Output,
    Pipelines,
    build_handler,
    static_assignment,
)
from ctxbudget.kafka.settings import TopicNames
from ctxbudget.limits import InputLimits
from tests.paths import REPO

TOPICS = TopicNames()
EXAMPLES = (REPO / "examples" / "batches.jsonl").read_bytes().splitlines()


@pytest.fixture(scope="module")
def ctx() -> Context:
    return Context(
        pipelines=Pipelines(REPO / "policies"),
        topics=TOPICS,
        metrics=Metrics(),
        assign=static_assignment("default@1"),
        limits=InputLimits(max_message_bytes=1 << 20),
    )


def _hop(ctx: Context, stage: str, raw: bytes, topic: str) -> tuple[bytes, list[Output]]:
    outs = build_handler(stage, ctx).handle(raw, source="test")
    main = [o for o in outs if o.topic == topic]
    assert len(main) == 1, [o.topic for o in outs]
    assert [o.topic for o in outs if o.topic != topic] == [TOPICS.audit]
    return main[0].value, outs


def test_four_hops_give_the_bytes_of_the_in_process_pipeline(ctx: Context) -> None:
    """route → consolidate → select → compress equals `ctxbudget pack`, byte for byte."""
    for raw in EXAMPLES:
        routed, _ = _hop(ctx, "route", raw, TOPICS.routed)
        cb, _ = _hop(ctx, "consolidate", routed, TOPICS.consolidated)
        packed, _ = _hop(ctx, "select", cb, TOPICS.packed)
        pack, outs = _hop(ctx, "compress", packed, TOPICS.packs)
        expected = ctx.pipelines.get("default@1").run(decode_batch(raw)).pack
        assert pack == encode(expected)
        assert all(o.key == expected.request_id.encode() for o in outs)


def test_the_fused_worker_gives_the_same_pack_and_four_traces(ctx: Context) -> None:
    """One hop, same bytes; intermediate topics only when asked."""
    for raw in EXAMPLES:
        outs = build_handler("fused", ctx).handle(raw)
        packs = [o for o in outs if o.topic == TOPICS.packs]
        assert len(packs) == 1
        assert packs[0].value == encode(ctx.pipelines.get("default@1").run(decode_batch(raw)).pack)
        assert sum(o.topic == TOPICS.audit for o in outs) == 4
        assert not any(o.topic == TOPICS.routed for o in outs)


def test_intermediate_topics_on_request(ctx: Context) -> None:
    """write_intermediate adds the routed, consolidated and packed records."""
    wide = replace(ctx, metrics=Metrics(), write_intermediate=True)
    topics = [o.topic for o in build_handler("fused", wide).handle(EXAMPLES[0])]
    assert {TOPICS.routed, TOPICS.consolidated, TOPICS.packed} <= set(topics)


def test_full_and_compact_intermediate_forms_give_the_same_pack(ctx: Context) -> None:
    """compact_intermediate=False writes the full form; either form feeds the next stage, and
    a stage fed by a worker of the other setting still makes the same pack."""
    full = replace(ctx, metrics=Metrics(), compact_intermediate=False)
    for raw in EXAMPLES:
        routed, _ = _hop(ctx, "route", raw, TOPICS.routed)
        cb_full, _ = _hop(full, "consolidate", routed, TOPICS.consolidated)
        cb_compact, _ = _hop(ctx, "consolidate", routed, TOPICS.consolidated)
        assert len(cb_compact) <= len(cb_full)
        packed_a, _ = _hop(ctx, "select", cb_full, TOPICS.packed)  # new reader, full form
        packed_b, _ = _hop(full, "select", cb_compact, TOPICS.packed)  # compact in, full out
        pack_a, _ = _hop(full, "compress", packed_a, TOPICS.packs)
        pack_b, _ = _hop(ctx, "compress", packed_b, TOPICS.packs)
        assert pack_a == pack_b


@pytest.mark.parametrize(
    "raw",
    [
        b"\xff\xfe not json",
        b'{"schema": "ctx.candidate_batch.v1", "request_id": "r1"}',
        b"",
        None,
    ],
)
def test_poison_becomes_a_dead_letter_with_the_original_bytes(
    ctx: Context, raw: bytes | None
) -> None:
    """Undecodable or invalid input never raises; the bytes are kept."""
    for stage in ("route", "consolidate", "select", "compress", "fused"):
        (out,) = build_handler(stage, ctx).handle(raw, source="t", offset=7)
        assert out.topic == TOPICS.deadletter
        dl = orjson.loads(out.value)
        assert dl["stage"] == stage and dl["offset"] == 7
        if raw and dl["raw_encoding"] == "utf-8":
            assert dl["raw"].encode() == raw


def test_an_unknown_tokenizer_and_an_oversize_message_are_dead_letters(ctx: Context) -> None:
    """Per-batch errors go to the dead letters keyed by request id."""
    data = orjson.loads(EXAMPLES[0])
    data["model"]["tokenizer"] = "nope"
    (out,) = build_handler("route", ctx).handle(orjson.dumps(data))
    assert out.topic == TOPICS.deadletter and out.key == data["request_id"].encode()
    assert b"nope" in out.value
    small = Context(
        pipelines=ctx.pipelines,
        topics=TOPICS,
        metrics=Metrics(),
        assign=ctx.assign,
        limits=InputLimits(max_message_bytes=100),
    )
    (out,) = build_handler("route", small).handle(EXAMPLES[0])
    assert out.topic == TOPICS.deadletter and b"over the 100-byte limit" in out.value
    assert small.metrics.snapshot()["dead_letters"] == 1


def test_replayed_requests_never_reach_the_live_pack_topic(ctx: Context) -> None:
    """A batch marked as replay is packed in the shadow lane only."""
    data = orjson.loads(EXAMPLES[0])
    data["replay"] = {"run_id": "run-1"}
    outs = build_handler("fused", ctx).handle(orjson.dumps(data))
    assert TOPICS.packs not in {o.topic for o in outs}
    (shadow,) = [o for o in outs if o.topic == TOPICS.shadow]
    pack = orjson.loads(shadow.value)
    assert pack["lane"] == "shadow" and pack["replay"] == {"run_id": "run-1"}


def test_an_unknown_stage_is_refused(ctx: Context, tmp_path: Path) -> None:
    """Typos in the stage name fail at start, not per record."""
    with pytest.raises(ValueError, match="unknown stage"):
        build_handler("packer", ctx)
