"""The codec (ctxbudget.codec): strict JSON (duplicate keys, 64-bit integers, one tenant),
bounded dead letters, and the compact form of intermediate messages: smaller, lossless, and
loud when broken."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import typing
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from ctxbudget.codec import (
    DEAD_LETTER_EXCERPT_BYTES,
    check_unique_keys,
    dead_letter,
    decode,
    decode_batch,
    encode,
    encode_compact,
)
from ctxbudget.errors import InputError
from ctxbudget.pipeline import Pipeline
from ctxbudget.schemas import (
    CandidateBatch,
    ConsolidatedBatch,
    PackedBatch,
    RoutedBatch,
)
from tests.paths import REPO
from tests.unit.example_lines import BIG, EXAMPLES, GOOD, edited


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


@pytest.mark.parametrize(
    ("old", "new", "where"),
    [
        (b'"request_id":"req-0001"', b'"request_id":"a","request_id":"req-0001"', "request_id"),
        (
            b'"chunk_id":"keys-1-old"',
            b'"chunk_id":"x","chunk_id":"keys-1-old"',
            "candidates.1.chunk_id",
        ),
        (b'"input_limit":4096', b'"input_limit" : 1 ,\t"input_limit":4096', "model.input_limit"),
        (b'"schema":"ctx.candidate_batch.v1",', b'"x":{"k":1,"k":2},', "x.k"),
    ],
)
def test_duplicate_keys_are_refused_wherever_they_are(old: bytes, new: bytes, where: str) -> None:
    """A key repeated in one object, at any depth, is refused naming its dotted path."""
    with pytest.raises(InputError, match=rf"^duplicate key {re.escape(where)}:"):
        decode_batch(edited(old, new))


def test_duplicate_keys_hidden_behind_an_escaped_colon_are_found() -> None:
    """\\u003a hides a colon from the fast count; such a message takes the exact path."""
    raw = edited(b'"title":"API key lifecycle"', b'"title":"API key\\u003a lifecycle"')
    assert decode_batch(raw).candidates[0].title == "API key: lifecycle"
    dup = edited(b'"input_limit":4096', b'"input_limit":1,"input_limit":4096', raw)
    with pytest.raises(InputError, match=r"duplicate key model\.input_limit"):
        decode_batch(dup)


def test_a_key_spelled_two_ways_is_still_a_duplicate() -> None:
    """A key written once with a unicode escape and once plainly is still a duplicate."""
    raw = edited(
        b'"principal":{"tenant_id":"acme"', b'"principal":{"tenant\\u005fid":"x","tenant_id":"acme"'
    )
    with pytest.raises(InputError, match=r"duplicate key principal\.tenant_id"):
        decode_batch(raw)


@pytest.mark.parametrize(
    ("old", "path"),
    [
        (b'"input_limit":4096', "model.input_limit"),
        (b'"tokens":350', "instructions.tokens"),
        (b'"reserve_tokens":null', "answer_contract.reserve_tokens"),
        (b'"access_label":"public"}', "candidates.0.tokens"),
        (b'"access_label":"public"}', "candidates.0.span.start"),
        (b'"access_label":"public"}', "candidates.0.span.end"),
        (b'"access_label":"public"}', "candidates.0.metadata.deep.1"),
    ],
)
def test_integers_beyond_64_bits_are_refused_naming_the_field(old: bytes, path: str) -> None:
    """An integer outside the signed 64-bit range is refused naming its field's path."""
    name = path.rsplit(".", 1)[-1] if "metadata" not in path else "metadata"
    if old.startswith(b'"access_label"'):
        extra = {
            "tokens": b'"tokens":' + BIG,
            "start": b'"span":{"start":' + BIG + b',"end":' + BIG + b"0}",
            "end": b'"span":{"start":1,"end":' + BIG + b"}",
            "metadata": b'"metadata":{"deep":[1,' + BIG + b"]}",
        }[name]
        raw = edited(old, b'"access_label":"public",' + extra + b"}")
    else:
        raw = edited(old, old.split(b":")[0] + b":" + BIG)
    with pytest.raises(InputError, match=rf"^{path}: integer \d+ is out of range"):
        decode_batch(raw)


def test_the_64_bit_limits_themselves_are_accepted() -> None:
    """2**63-1 and -2**63 are accepted; one below -2**63 is refused naming the field."""
    top, bottom = str(2**63 - 1).encode(), str(-(2**63)).encode()
    raw = edited(b'"input_limit":4096', b'"input_limit":' + top)
    assert decode_batch(raw).model.input_limit == 2**63 - 1
    meta = b'"access_label":"public","metadata":{"lo":' + bottom + b"}}"
    assert decode_batch(edited(b'"access_label":"public"}', meta)).candidates[0].metadata
    over = b'"access_label":"public","metadata":{"lo":' + str(-(2**63) - 1).encode() + b"}}"
    with pytest.raises(InputError, match=r"candidates\.0\.metadata\.lo"):
        decode_batch(edited(b'"access_label":"public"}', over))


def _int_paths(model: type[BaseModel], prefix: str = "") -> set[str]:
    """Paths of every int-typed field under ``model`` (items of a tuple share its path)."""
    found: set[str] = set()

    def visit(tp: Any, path: str) -> None:
        if tp is int:
            found.add(path)
        elif isinstance(tp, type) and issubclass(tp, BaseModel):
            found.update(_int_paths(tp, f"{path}."))
        else:
            for arg in typing.get_args(tp):
                visit(arg, path)

    for name, field in model.model_fields.items():
        if name != "metadata":  # any JSON: walked as a whole
            visit(field.annotation, prefix + name)
    return found


def test_the_range_check_knows_every_int_field_of_a_batch() -> None:
    """A new int field in the schema must be added to codec.check_int_ranges."""
    assert _int_paths(CandidateBatch) == {
        "instructions.tokens",
        "model.input_limit",
        "answer_contract.reserve_tokens",
        "candidates.tokens",
        "candidates.span.start",
        "candidates.span.end",
    }


def test_a_tenant_mismatch_is_refused_naming_both() -> None:
    """A batch tenant unlike its principal's is refused by codec and model, naming both."""
    raw = edited(b'"tenant_id":"acme","principal"', b'"tenant_id":"globex","principal"')
    with pytest.raises(
        InputError, match=r"tenant_id 'globex' differs from principal\.tenant_id 'acme'"
    ):
        decode_batch(raw)
    other = {**orjson.loads(GOOD), "principal": {"tenant_id": "globex"}}
    with pytest.raises(ValueError, match="differs"):
        CandidateBatch.model_validate_json(orjson.dumps(other))


def test_every_example_batch_passes_the_strict_checks() -> None:
    """The shipped examples have one tenant, unique keys and 64-bit integers."""
    for line in EXAMPLES:
        assert decode_batch(line).tenant_id == decode_batch(line).principal.tenant_id


def test_a_small_original_is_kept_whole_with_its_digest() -> None:
    """A small bad line's dead letter keeps it whole as UTF-8 with size, digest and request id."""
    raw = b'{"request_id": "r1", "x": "\xc3\xa9"}'
    dl = dead_letter(raw, InputError("bad"), stage="pack", source="f", line=4)
    assert dl.raw.encode() == raw and dl.raw_encoding == "utf-8" and dl.line == 4
    assert dl.original_bytes == len(raw) and dl.original_sha256 == hashlib.sha256(raw).hexdigest()
    assert dl.request_id == "r1"


def test_a_large_original_keeps_a_bounded_excerpt() -> None:
    """Over 64 KiB: the first 64 KiB (never a split character), plus digest and size."""
    raw = b'{"request_id": "big", "x": "' + "é".encode() * 100_000 + b'"'
    dl = dead_letter(raw, InputError("bad"), stage="pack", source="f", line=1)
    kept = dl.raw.encode()
    assert dl.raw_encoding == "utf-8"
    assert DEAD_LETTER_EXCERPT_BYTES - 1 <= len(kept) <= DEAD_LETTER_EXCERPT_BYTES
    assert raw.startswith(kept)
    assert dl.original_bytes == len(raw) and dl.original_sha256 == hashlib.sha256(raw).hexdigest()
    assert len(encode(dl)) < DEAD_LETTER_EXCERPT_BYTES + 2048


def test_a_large_binary_original_keeps_a_base64_excerpt() -> None:
    """A large non-UTF-8 original keeps a base64 excerpt; the error text is capped at 4 KiB."""
    raw = b"\xff" + os.urandom(200_000)
    dl = dead_letter(raw, ValueError("x" * 100_000), stage="route", source="t", offset=9)
    assert dl.raw_encoding == "base64"
    assert base64.b64decode(dl.raw) == raw[:DEAD_LETTER_EXCERPT_BYTES]
    assert dl.original_bytes == len(raw) and len(dl.error) <= 4096 and dl.error_type == "ValueError"


def _json_text(value: Any, escape_colons: bool) -> str:
    """JSON of a value whose objects are lists of pairs (so a key may repeat)."""
    if isinstance(value, Pairs):
        inner = ", ".join(
            f"{_json_text(k, escape_colons)} : {_json_text(v, escape_colons)}" for k, v in value
        )
        return "{" + inner + "}"
    if isinstance(value, list):
        return "[" + ",".join(_json_text(v, escape_colons) for v in value) + "]"
    text = json.dumps(value)
    return text.replace(":", "\\u003a") if escape_colons and isinstance(value, str) else text


class Pairs(list[tuple[str, Any]]):
    pass


def _has_duplicate(value: Any) -> bool:
    if isinstance(value, Pairs):
        keys = [k for k, _ in value]
        return len(set(keys)) < len(keys) or any(_has_duplicate(v) for _, v in value)
    if isinstance(value, list):
        return any(_has_duplicate(v) for v in value)
    return False


_KEYS = st.sampled_from(["a", "b", ":", '"', "a:b", '":', "\\", "é"])


_LEAVES = (
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.text(":\"\\ab'é", max_size=6)
)


_JSON = st.recursive(
    _LEAVES,
    lambda inner: (
        st.lists(inner, max_size=4) | st.lists(st.tuples(_KEYS, inner), max_size=5).map(Pairs)
    ),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None)
@given(value=_JSON.map(lambda v: Pairs([("root", v)])), escape=st.booleans())
def test_the_duplicate_check_is_exact(value: Pairs, escape: bool) -> None:
    """Fast path or exact path, a duplicate is found iff there is one."""
    raw = _json_text(value, escape).encode()
    if _has_duplicate(value):
        with pytest.raises(InputError, match="duplicate key"):
            check_unique_keys(raw)
    else:
        check_unique_keys(raw)
