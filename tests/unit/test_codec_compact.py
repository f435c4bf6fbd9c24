"""The compact form of intermediate messages: smaller, lossless, and loud when broken."""

from __future__ import annotations

import orjson
import pytest

from ctxbudget.codec import decode, encode, encode_compact
from ctxbudget.errors import InputError
from ctxbudget.pipeline import Pipeline
from ctxbudget.schemas import CandidateBatch, ConsolidatedBatch, PackedBatch, RoutedBatch
from tests.paths import REPO


def _examples() -> list[CandidateBatch]:
    lines = (REPO / "examples" / "batches.jsonl").read_bytes().splitlines()
    out = []
    for line in lines:
        try:
            out.append(decode(line, CandidateBatch))
        except InputError:
            continue  # the examples file keeps one bad line on purpose
    return out


def test_round_trip_on_the_examples(pipeline: Pipeline) -> None:
    """Every example's intermediate messages decode to equal models, and are smaller."""
    examples = _examples()
    assert examples
    for b in examples:
        routed = pipeline.router.run(b)
        cb = pipeline.consolidator.run(routed)
        packed = pipeline.selector.run(cb)
        assert encode_compact(routed) == encode(routed)  # nothing to leave out
        for model, cls in ((cb, ConsolidatedBatch), (packed, PackedBatch)):
            compact = encode_compact(model)
            assert decode(compact, cls) == model
            assert decode(encode(model), cls) == model  # the full form is still read
            if model_items(model):
                assert len(compact) < len(encode(model))


def model_items(model: ConsolidatedBatch | PackedBatch) -> int:
    cb = model if isinstance(model, ConsolidatedBatch) else model.consolidated
    return len(cb.items)


def _one(pipeline: Pipeline) -> ConsolidatedBatch:
    for b in _examples():
        cb = pipeline.consolidator.run(pipeline.router.run(b))
        if cb.items:
            return cb
    raise AssertionError("no example with items")


def test_fields_that_differ_from_the_representative_are_written(pipeline: Pipeline) -> None:
    """Only what equals its derivation is left out: a changed title travels."""
    cb = _one(pipeline)
    first = cb.items[0].model_copy(update={"title": "a title of the family's own"})
    changed = cb.model_copy(update={"items": (first, *cb.items[1:])})
    data = orjson.loads(encode_compact(changed))
    assert data["items"][0]["title"] == "a title of the family's own"
    assert "text" not in data["items"][0] or data["items"][0]["text"] != ""
    assert decode(encode_compact(changed), ConsolidatedBatch) == changed


def test_a_broken_compact_message_is_an_input_error(pipeline: Pipeline) -> None:
    """A member index that points nowhere cannot restore the text: a clear error."""
    data = orjson.loads(encode_compact(_one(pipeline)))
    at, item = next((i, it) for i, it in enumerate(data["items"]) if "text" not in it)
    item["members"] = [999, *item["members"][1:]]
    with pytest.raises(InputError, match=rf"items\.{at}\.\w+: Field required"):
        decode(orjson.dumps(data), ConsolidatedBatch)


def test_routed_batches_are_not_touched(pipeline: Pipeline) -> None:
    """The compact form of a routed batch is its ordinary encoding, and decodes back equal."""
    routed = pipeline.router.run(_examples()[0])
    assert encode_compact(routed) == encode(routed)
    assert decode(encode_compact(routed), RoutedBatch) == routed
