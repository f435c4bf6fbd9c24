"""Bytes in, models out (and back): the one place where JSON meets the wire models."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Callable
from typing import Any, TypeVar

import orjson
from pydantic import BaseModel, ValidationError

from ctxbudget.errors import InputError
from ctxbudget.limits import MAX_MESSAGE_BYTES as MAX_MESSAGE_BYTES
from ctxbudget.limits import (
    InputLimits,
    check_batch,
    check_message_size,
    parser_depth_error,
    precheck_candidates,
)
from ctxbudget.models import describe_validation, safe_repr
from ctxbudget.native import NATIVE
from ctxbudget.schemas import (
    CandidateBatch,
    ConsolidatedBatch,
    DeadLetter,
    PackedBatch,
)

M = TypeVar("M", bound=BaseModel)

#: The limits :func:`decode` holds a CandidateBatch to when given none.
DEFAULT_LIMITS = InputLimits()

#: A dead letter keeps the whole original up to this size, else this many first bytes of it
#: (with the sha256 and size of the whole).
DEAD_LETTER_EXCERPT_BYTES = 64 * 1024

#: Integers in a CandidateBatch must fit in a signed 64-bit integer: the wire encoder
#: (orjson) cannot write larger ones, and no count or offset is that large.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def encode(model: BaseModel) -> bytes:
    """Canonical JSON: field order of the model, aliases (``schema``), no whitespace."""
    return orjson.dumps(model.model_dump(mode="json", by_alias=True))


# ---------------------------------------------------------------- compact intermediate messages
#
# A ConsolidatedBatch (and the PackedBatch that embeds it) carries the candidate batch and,
# for every item, fields that mostly repeat its representative candidate (the first member):
# ids, title, version, date, text, and one piece covering the whole text. On the intermediate
# topics such a field is left out when it equals what it would be derived from the
# candidates; ``decode`` puts it back before validating, so the model read is equal to the
# model written. A field that differs from its derivation is always written.


def _derived(item: dict[str, Any], cands: list[dict[str, Any]]) -> dict[str, Any]:
    """What each compactable field of ``item`` would be if derived from the candidates: the
    representative (first member) gives the ids, title, version, date and text; the members
    give the chunk ids; the text gives the single whole-text piece."""
    members = item["members"]
    first = members[0]
    if type(first) is not int or not 0 <= first < len(cands):
        raise IndexError(f"member {first!r} is not a candidate index")
    rep = cands[first]
    text = item.get("text", rep["text"])
    span = rep["span"]
    return {
        "item_id": rep["chunk_id"],
        "doc_id": rep["doc_id"],
        "source_id": rep["source_id"],
        "source_ids": [rep["source_id"]],
        "title": rep["title"],
        "version": rep["version"],
        "published_at": rep["published_at"],
        "text": rep["text"],
        "chunk_ids": [cands[m]["chunk_id"] for m in members],
        "pieces": [{"chunk_id": rep["chunk_id"], "start": 0, "end": len(text), "at": 0}],
        "span_start": None if span is None else span["start"],
    }


#: The fields ``encode_compact`` may leave out (the keys of :func:`_derived`).
_COMPACTABLE = frozenset(
    {
        "item_id",
        "doc_id",
        "source_id",
        "source_ids",
        "title",
        "version",
        "published_at",
        "text",
        "chunk_ids",
        "pieces",
        "span_start",
    }
)


def _consolidated_part(data: Any) -> dict[str, Any] | None:
    """The ConsolidatedBatch inside a dumped ConsolidatedBatch or PackedBatch, else None."""
    if not isinstance(data, dict):
        return None
    schema = data.get("schema")
    if schema == "ctx.packed_batch.v1":
        data = data.get("consolidated")
        schema = data.get("schema") if isinstance(data, dict) else None
    return data if schema == "ctx.consolidated_batch.v1" else None


def encode_compact(model: BaseModel) -> bytes:
    """``encode``, but items of a Consolidated/PackedBatch leave out their derivable fields."""
    data = model.model_dump(mode="json", by_alias=True)
    consolidated = _consolidated_part(data)
    if consolidated is not None:
        cands = consolidated["routed"]["batch"]["candidates"]
        for item in consolidated["items"]:
            for name, value in _derived(item, cands).items():
                if item[name] == value:
                    del item[name]
    return orjson.dumps(data)


def _restore(raw: bytes | str) -> bytes | str:
    """Put back the fields ``encode_compact`` left out; the raw bytes when nothing is missing
    or the message is too broken to tell (validation then says what is wrong)."""
    try:
        data = orjson.loads(raw)
        consolidated = _consolidated_part(data)
        if consolidated is None:
            return raw
        cands = consolidated["routed"]["batch"]["candidates"]
        changed = False
        for item in consolidated["items"]:
            missing = _COMPACTABLE.difference(item)
            if missing:
                derived = _derived(item, cands)
                for name in missing:
                    item[name] = derived[name]
                changed = True
        return orjson.dumps(data) if changed else raw
    except (orjson.JSONDecodeError, KeyError, IndexError, TypeError, AttributeError):
        return raw


def decode(raw: bytes | str, model: type[M], *, limits: InputLimits | None = None) -> M:
    """Parse and validate one message; every failure is an :class:`InputError`.

    Every message is held to ``limits.max_message_bytes`` before it is parsed. A
    CandidateBatch (the one message that comes from outside) is held to strict JSON besides
    (no key may appear twice in an object, every integer must fit in 64 bits) and to the
    rest of ``limits`` (:mod:`ctxbudget.limits`; the defaults when None): a batch over one
    raises :class:`~ctxbudget.errors.LimitError` naming it, before any stage runs.
    """
    limits = limits or DEFAULT_LIMITS
    check_message_size(len(raw), limits)
    if model is CandidateBatch:
        precheck_candidates(raw, limits)
    if model is ConsolidatedBatch or model is PackedBatch:
        raw = _restore(raw)
    try:
        value = model.model_validate_json(raw)
    except ValidationError as e:
        invalid = [x for x in e.errors() if x["type"] == "json_invalid"]
        if invalid:
            msg = invalid[0]["msg"]
            if "recursion limit exceeded" in msg:
                raise parser_depth_error(msg.removeprefix("Invalid JSON: "), limits) from e
            raise InputError(f"not valid JSON: {msg}") from e
        raise InputError(
            f"invalid {model.__name__}: {describe_validation(e, root='(message)')}"
        ) from e
    if isinstance(value, CandidateBatch):
        data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
        if _strict_json(data):
            check_int_ranges(value)
        check_batch(value, limits, message_bytes=len(data))
    return value


#: The compiled one-pass scan of a document for repeated keys and long numbers, when the
#: compiled path has it (``scan_json(data) -> bits``: 1 = maybe a repeated key, 2 = a number
#: with 19 digits in a row).
_SCAN_JSON: Callable[[bytes], int] | None = getattr(NATIVE, "scan_json", None)
_MAY_REPEAT_KEY, _LONG_NUMBER = 1, 2


def _strict_json(data: bytes) -> bool:
    """Raise :class:`InputError` for a key repeated in an object of the document ``data``
    (valid JSON); else whether it may hold an integer beyond 64 bits.

    The compiled scan answers both in one pass; wherever it cannot vouch for unique keys
    (a key written with an escape, a repeated key) :func:`check_unique_keys` decides and
    words the error, so both paths accept and refuse the same documents with the same
    messages."""
    bits = _SCAN_JSON(data) if _SCAN_JSON is not None else _MAY_REPEAT_KEY
    if not bits & _MAY_REPEAT_KEY:
        return bool(bits & _LONG_NUMBER)
    check_unique_keys(data)
    return _may_hold_a_long_integer(data)


def decode_batch(raw: bytes | str, *, limits: InputLimits | None = None) -> CandidateBatch:
    """One CandidateBatch, held to strict JSON and the input limits by :func:`decode`; every
    failure is an :class:`InputError`."""
    return decode(raw, CandidateBatch, limits=limits)


# ---------------------------------------------------------------- strict JSON
#
# Duplicate keys. Neither parser reports them (both keep the last value), so a batch is
# checked after it validated. The fast path never walks the document in Python: it parses
# with orjson (which collapses duplicates) and writes the result back, then compares the
# number of colons. Outside strings a colon follows every key and nothing else, and orjson
# never escapes a colon inside a string; so without a duplicate both counts are equal, and a
# duplicate removes at least its own colon from the rewrite. The one way to hide a colon
# from the raw count is the escape \u003a; a message using it (or anything orjson refuses,
# such as NaN) takes the exact path, a second parse that sees every key of every object.

_ESCAPED_COLON = re.compile(rb"\\u003[aA]")


class _Pairs(list[tuple[str, Any]]):
    """An object of the exact path, as the list of its (key, value) pairs in order."""


def check_unique_keys(raw: bytes | str) -> None:
    """Raise :class:`InputError` naming the first key that appears twice in one object."""
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    if b"\\" not in data or _ESCAPED_COLON.search(data) is None:
        try:
            rewritten = orjson.dumps(orjson.loads(data))
        except (orjson.JSONDecodeError, orjson.JSONEncodeError):
            pass
        else:
            if rewritten.count(b":") == data.count(b":"):
                return
    _exact_unique_keys(data)


def _exact_unique_keys(data: bytes) -> None:
    try:
        tree = json.loads(data, object_pairs_hook=_Pairs)
    except RecursionError as e:
        raise InputError("not valid JSON: nested too deeply") from e
    except ValueError as e:
        raise InputError(f"not valid JSON: {e}") from e
    stack: list[tuple[Any, str]] = [(tree, "")]
    while stack:
        node, path = stack.pop()
        if isinstance(node, _Pairs):
            seen: set[str] = set()
            for key, _ in node:
                if key in seen:
                    raise InputError(
                        f"duplicate key {_shorten(path + key)}: a key may appear once per object"
                    )
                seen.add(key)
            stack.extend((v, f"{path}{k}.") for k, v in reversed(node))
        elif isinstance(node, list):
            stack.extend((v, f"{path}{i}.") for i, v in reversed(list(enumerate(node))))


# Integer ranges. The model's int fields are checked one by one (a walk over the whole model
# would cost more than the decoding), and a path is only spelled out for an error;
# ``metadata`` holds any JSON, so it is walked.


def _int_error(path: str, value: int) -> InputError:
    return InputError(f"{path}: integer {safe_repr(value)} is out of range (beyond 64 bits)")


def _check_any_ints(value: Any, path: str) -> None:
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        node, where = stack.pop()
        if isinstance(node, dict):
            stack.extend((v, f"{where}.{k}") for k, v in node.items())
        elif isinstance(node, list | tuple):
            stack.extend((v, f"{where}.{i}") for i, v in enumerate(node))
        elif type(node) is int and not INT64_MIN <= node <= INT64_MAX:
            raise _int_error(where, node)


# A 64-bit integer has at most 19 digits: a message without a run of 19 digits holds none
# beyond (digits map to "1", everything else to " ", then one substring search).
_DIGITS_TO_ONE = bytes(49 if 48 <= c <= 57 else 32 for c in range(256))
_NINETEEN_DIGITS = b"1" * 19


def _may_hold_a_long_integer(data: bytes) -> bool:
    return _NINETEEN_DIGITS in data.translate(_DIGITS_TO_ONE)


def check_int_ranges(batch: CandidateBatch) -> None:
    """Raise :class:`InputError` naming the first integer of ``batch`` beyond 64 bits."""
    lo, hi = INT64_MIN, INT64_MAX
    for path, value in (
        ("instructions.tokens", batch.instructions.tokens),
        ("model.input_limit", batch.model.input_limit),
        ("answer_contract.reserve_tokens", batch.answer_contract.reserve_tokens),
    ):
        if value is not None and not lo <= value <= hi:
            raise _int_error(path, value)
    for i, c in enumerate(batch.candidates):
        if c.tokens is not None and not lo <= c.tokens <= hi:
            raise _int_error(f"candidates.{i}.tokens", c.tokens)
        span = c.span
        if span is not None:
            if not lo <= span.start <= hi:
                raise _int_error(f"candidates.{i}.span.start", span.start)
            if not lo <= span.end <= hi:
                raise _int_error(f"candidates.{i}.span.end", span.end)
        if c.metadata:
            _check_any_ints(c.metadata, f"candidates.{i}.metadata")


def _shorten(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def guess_request_id(raw: bytes | str) -> str | None:
    """The request_id of a message that failed validation, when it can still be read."""
    if len(raw) > MAX_MESSAGE_BYTES:  # not worth parsing: read the id near the start
        head = (raw[:4096].encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw)[:4096]
        m = _LEADING_ID.search(head)
        return m.group(1).decode("utf-8", "replace") if m else None
    try:
        data: Any = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    rid = data.get("request_id") if isinstance(data, dict) else None
    return rid if isinstance(rid, str) and len(rid) <= _MAX_GUESSED_ID else None


#: A longer "request_id" of a dead message is not believed (it would become the record key).
_MAX_GUESSED_ID = 1024
#: The request id of a message too large to parse, when it is the first key (as the encoder
#: writes it: after ``schema``) and has no escapes.
_LEADING_ID = re.compile(
    rb'\A\s*\{(?:\s*"schema"\s*:\s*"[^"\\]{0,64}"\s*,)?'
    rb'\s*"request_id"\s*:\s*"([^"\\]{1,1024})"'
)
#: The error text of a dead letter is cut to this many characters.
_MAX_ERROR_TEXT = 4096


def _excerpt(data: bytes, size: int = DEAD_LETTER_EXCERPT_BYTES) -> tuple[str, str]:
    """``data`` (its first ``size`` bytes when longer) as text and its encoding: UTF-8 when
    it is, else base64. A cut never splits a UTF-8 character."""
    part = data[: max(0, size)]
    try:
        return part.decode("utf-8"), "utf-8"
    except UnicodeDecodeError as e:
        # a character cut by the excerpt's end is left out; any other bad byte means base64
        if len(part) < len(data) and e.reason == "unexpected end of data":
            try:
                return part[: e.start].decode("utf-8"), "utf-8"
            except UnicodeDecodeError:
                pass
        return base64.b64encode(part).decode("ascii"), "base64"


def _error_text(error: BaseException) -> str:
    try:
        text = str(error)
    except Exception:  # a broken __str__ must not lose the dead letter
        text = f"<{type(error).__name__} that cannot be shown>"
    return _shorten(text, _MAX_ERROR_TEXT)


def dead_letter(
    raw: bytes | str,
    error: BaseException,
    *,
    stage: str,
    source: str,
    line: int | None = None,
    offset: int | None = None,
    excerpt_bytes: int = DEAD_LETTER_EXCERPT_BYTES,
) -> DeadLetter:
    """A dead-letter record of the original bytes (base64 when not UTF-8), bounded in size.

    Up to ``excerpt_bytes`` (DEAD_LETTER_EXCERPT_BYTES) the whole original is kept; a longer
    one keeps that many first bytes. ``original_sha256`` and ``original_bytes`` always
    describe the whole. Encoded, a dead letter is at most about 4/3 of the excerpt (base64)
    plus 5 KiB (the error text, the ids and the field names).
    """
    data = raw.encode("utf-8", "surrogateescape") if isinstance(raw, str) else raw
    text, enc = _excerpt(data, excerpt_bytes)
    return DeadLetter(
        request_id=guess_request_id(data),
        stage=stage,
        error_type=type(error).__name__,
        error=_error_text(error),
        source=source,
        line=line,
        offset=offset,
        raw=text,
        raw_encoding=enc,  # type: ignore[arg-type]
        original_sha256=hashlib.sha256(data).hexdigest(),
        original_bytes=len(data),
    )
