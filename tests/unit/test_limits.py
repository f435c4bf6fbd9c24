"""Input limits (ctxbudget.limits) on hostile batches: counts, UTF-8 sizes and JSON depth are
refused naming the limit, before any stage runs."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from ctxbudget.codec import decode_batch
from ctxbudget.errors import InputError, LimitError
from ctxbudget.limits import InputLimits
from ctxbudget.schemas import CandidateBatch
from tests.paths import REPO

EXAMPLE = (REPO / "examples" / "batches.jsonl").read_bytes().splitlines()[0]


def _with(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = orjson.loads(EXAMPLE)
    data.update(changes)
    return data


def _limit_of(raw: bytes, limits: InputLimits | None = None) -> str:
    with pytest.raises(LimitError) as info:
        decode_batch(raw, limits=limits)
    assert info.value.limit in str(info.value)
    return info.value.limit


def test_the_examples_are_within_the_default_limits() -> None:
    """Ordinary traffic never meets a limit: each example decodes whole, every candidate kept."""
    for raw in (REPO / "examples" / "batches.jsonl").read_bytes().splitlines():
        data = orjson.loads(raw)
        decoded = decode_batch(raw)
        assert decoded == CandidateBatch.model_validate_json(raw)
        assert decoded.request_id == data["request_id"]
        assert [c.chunk_id for c in decoded.candidates] == [
            c["chunk_id"] for c in data["candidates"]
        ]


def test_too_many_candidates_are_refused_before_the_strict_parse() -> None:
    """The count comes from the raw bytes (then orjson), and the error names the limit."""
    data = _with()
    data["candidates"] = [dict(data["candidates"][0], chunk_id=f"c{i}") for i in range(11)]
    raw = orjson.dumps(data)
    assert _limit_of(raw, InputLimits(max_candidates=10)) == "max_candidates"
    allowed = decode_batch(raw, limits=InputLimits(max_candidates=11))
    assert [c.chunk_id for c in allowed.candidates] == [f"c{i}" for i in range(11)]


def test_escaped_chunk_id_keys_are_still_counted_after_the_parse() -> None:
    """A key spelled with escapes escapes the raw count, not the limit."""
    data = _with()
    data["candidates"] = [dict(data["candidates"][0], chunk_id=f"c{i}") for i in range(11)]
    raw = orjson.dumps(data).replace(b'"chunk_id"', b'"\\u0063hunk_id"')
    assert _limit_of(raw, InputLimits(max_candidates=10)) == "max_candidates"


def test_metadata_holding_chunk_ids_does_not_count_as_candidates() -> None:
    """The raw count is only an upper bound: an exact count decides."""
    data = _with()
    data["candidates"] = [
        dict(c, metadata={"chunk_id": "x", "parent": {"chunk_id": "y"}}) for c in data["candidates"]
    ]
    n = len(data["candidates"])
    decoded = decode_batch(orjson.dumps(data), limits=InputLimits(max_candidates=n))
    assert len(decoded.candidates) == n
    assert all(
        c.metadata == {"chunk_id": "x", "parent": {"chunk_id": "y"}} for c in decoded.candidates
    )


@pytest.mark.parametrize(
    ("where", "field"),
    [("candidates.0.text", "text"), ("candidates.0.title", "title"), ("query.text", "query")],
)
def test_a_text_over_max_text_bytes_is_refused_by_its_utf8_size(where: str, field: str) -> None:
    """64 characters of a 3-byte letter are 192 bytes."""
    data = _with()
    for c in data["candidates"]:
        c.update(text="short text", title=None)
    long = "€" * 64
    if field == "query":
        data["query"]["text"] = long
    else:
        data["candidates"][0][field] = long
    with pytest.raises(LimitError) as info:
        decode_batch(orjson.dumps(data), limits=InputLimits(max_text_bytes=191))
    assert info.value.limit == "max_text_bytes" and where in str(info.value)
    assert info.value.size == 192
    at_limit = decode_batch(orjson.dumps(data), limits=InputLimits(max_text_bytes=192))
    first = at_limit.candidates[0]
    assert (at_limit.query.text if field == "query" else getattr(first, field)) == long


def test_metadata_nested_too_deep_is_refused_naming_the_depth_limit() -> None:
    """Metadata is the one field that can nest; depth counts from the message's top."""
    data = _with()
    deep: Any = "leaf"
    for _ in range(10):
        deep = {"k": deep}
    data["candidates"][0]["metadata"] = deep  # 10 objects from depth 4: depth 13
    raw = orjson.dumps(data)
    assert _limit_of(raw, InputLimits(max_json_depth=12)) == "max_json_depth"
    assert decode_batch(raw, limits=InputLimits(max_json_depth=13)).candidates[0].metadata == deep


def test_json_deeper_than_the_parser_allows_names_the_depth_limit() -> None:
    """An ignored field nested thousands deep is stopped by the parser, named as the limit."""
    raw = EXAMPLE[:-1] + b',"junk":' + b"[" * 5000 + b"]" * 5000 + b"}"
    assert _limit_of(raw) == "max_json_depth"


def test_an_oversize_message_names_the_byte_limit_and_is_not_parsed() -> None:
    """The size check comes first."""
    with pytest.raises(LimitError, match="over the 100-byte limit") as info:
        decode_batch(EXAMPLE, limits=InputLimits(max_message_bytes=100))
    assert info.value.limit == "max_message_bytes"


def test_integers_beyond_64_bits_stay_input_errors() -> None:
    """The integer range check is unchanged."""
    raw = EXAMPLE.replace(b'"tokens":350', b'"tokens":' + b"9" * 30)
    with pytest.raises(InputError, match="beyond 64 bits"):
        decode_batch(raw)


@pytest.mark.parametrize(
    "bad", [{"max_candidates": 0}, {"max_text_bytes": -1}, {"max_json_depth": 3}]
)
def test_limits_must_be_sensible(bad: dict[str, int]) -> None:
    """A limit of zero (or a depth that forbids metadata) is a configuration error."""
    with pytest.raises(ValueError, match=next(iter(bad))):
        InputLimits(**bad)
