"""The wire models: strict validation with messages that name the field."""

from __future__ import annotations

import orjson
import pytest

from ctxbudget.codec import dead_letter, decode_batch, encode
from ctxbudget.errors import InputError
from ctxbudget.schemas import CandidateBatch
from ctxbudget.testing import batch, candidate


def _raw(**over: object) -> bytes:
    data = orjson.loads(encode(batch([candidate("c1", "text")])))
    data.update(over)
    return orjson.dumps(data)


def test_a_valid_batch_round_trips_byte_for_byte() -> None:
    """Encoding is canonical, so decode → encode gives the same bytes."""
    raw = encode(batch([candidate("c1", "some text", 0.5)]))
    assert encode(decode_batch(raw)) == raw


def test_every_message_names_its_schema() -> None:
    """The contract says every value carries "schema": "<name>.v1"."""
    data = orjson.loads(encode(batch([])))
    assert data["schema"] == "ctx.candidate_batch.v1"


def test_a_string_where_a_number_belongs_is_refused_naming_the_field() -> None:
    """Strict validation: no silent coercion, and the error says where."""
    data = orjson.loads(_raw())
    data["candidates"][0]["retrieval_score"] = "high"
    with pytest.raises(InputError, match=r"candidates\.0\.retrieval_score"):
        decode_batch(orjson.dumps(data))


def test_a_missing_field_is_named() -> None:
    """A batch without a query says so."""
    data = orjson.loads(_raw())
    del data["query"]
    with pytest.raises(InputError, match="query"):
        decode_batch(orjson.dumps(data))


def test_unknown_fields_are_ignored_for_forward_compatibility() -> None:
    """Producers may add fields; consumers of v1 keep working."""
    assert decode_batch(_raw(new_field={"x": 1})).request_id == "req-1"


def test_a_wrong_schema_name_is_refused() -> None:
    """A pack sent to the candidates topic is not a batch."""
    with pytest.raises(InputError, match="schema"):
        decode_batch(_raw(schema="ctx.pack.v1"))


def test_not_json_is_an_input_error() -> None:
    """Undecodable bytes become an InputError, never a crash."""
    with pytest.raises(InputError, match="not valid JSON"):
        decode_batch(b"\xff\xfe{")


def test_spans_must_be_ordered() -> None:
    """A span that ends before it starts is invalid."""
    data = orjson.loads(_raw())
    data["candidates"][0]["span"] = {"start": 9, "end": 3}
    with pytest.raises(InputError, match="span"):
        decode_batch(orjson.dumps(data))


def test_non_finite_scores_are_refused() -> None:
    """NaN scores would make every ordering arbitrary."""
    data = orjson.loads(_raw()).copy()
    raw = orjson.dumps(data).replace(b'"retrieval_score":1.0', b'"retrieval_score":NaN')
    with pytest.raises(InputError):
        decode_batch(raw)


def test_dead_letters_keep_the_original_bytes() -> None:
    """Nothing is lost: invalid UTF-8 is kept as base64, text as text."""
    dl = dead_letter(b"\xff\x00bad", InputError("x"), stage="pack", source="f", line=3)
    assert dl.raw_encoding == "base64" and dl.line == 3
    dl2 = dead_letter(b'{"request_id": "r9", "oops": 1}', InputError("x"), stage="s", source="f")
    assert dl2.raw_encoding == "utf-8" and dl2.request_id == "r9"


def test_models_are_frozen() -> None:
    """Inputs are never mutated: the models refuse assignment."""
    b = batch([])
    with pytest.raises(Exception, match="frozen"):
        b.request_id = "other"  # type: ignore[misc]
    assert isinstance(b, CandidateBatch)
