"""Bytes in, models out (and back): the one place where JSON meets the wire models."""

from __future__ import annotations

import base64
from typing import Any, TypeVar

import orjson
from pydantic import BaseModel, ValidationError

from ctxbudget.errors import InputError
from ctxbudget.schemas import (
    CandidateBatch,
    ConsolidatedBatch,
    DeadLetter,
    PackedBatch,
)

M = TypeVar("M", bound=BaseModel)

#: Messages larger than this are refused before parsing (they go to the dead letters).
MAX_MESSAGE_BYTES = 8 * 1024 * 1024


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
    cb = _consolidated_part(data)
    if cb is not None:
        cands = cb["routed"]["batch"]["candidates"]
        for item in cb["items"]:
            for name, value in _derived(item, cands).items():
                if item[name] == value:
                    del item[name]
    return orjson.dumps(data)


def _restore(raw: bytes | str) -> bytes | str:
    """Put back the fields ``encode_compact`` left out; the raw bytes when nothing is missing
    or the message is too broken to tell (validation then says what is wrong)."""
    try:
        data = orjson.loads(raw)
        cb = _consolidated_part(data)
        if cb is None:
            return raw
        cands = cb["routed"]["batch"]["candidates"]
        changed = False
        for item in cb["items"]:
            missing = _COMPACTABLE.difference(item)
            if missing:
                derived = _derived(item, cands)
                for name in missing:
                    item[name] = derived[name]
                changed = True
        return orjson.dumps(data) if changed else raw
    except (orjson.JSONDecodeError, KeyError, IndexError, TypeError, AttributeError):
        return raw


def describe_validation(err: ValidationError, *, limit: int = 5) -> str:
    parts = []
    for e in err.errors()[:limit]:
        loc = ".".join(str(p) for p in e["loc"]) or "(message)"
        found = e.get("input")
        shown = ""
        if not isinstance(found, dict | list):
            text = repr(found)
            shown = f" (found {text if len(text) <= 60 else text[:57] + '...'})"
        parts.append(f"{loc}: {e['msg']}{shown}")
    more = err.error_count() - limit
    if more > 0:
        parts.append(f"... and {more} more")
    return "; ".join(parts)


def decode(raw: bytes | str, model: type[M]) -> M:
    """Parse and validate one message; every failure is an :class:`InputError`."""
    size = len(raw)
    if size > MAX_MESSAGE_BYTES:
        raise InputError(f"message of {size} bytes is over the {MAX_MESSAGE_BYTES}-byte limit")
    if model is ConsolidatedBatch or model is PackedBatch:
        raw = _restore(raw)
    try:
        return model.model_validate_json(raw)
    except ValidationError as e:
        if any(x["type"] == "json_invalid" for x in e.errors()):
            raise InputError(f"not valid JSON: {e.errors()[0]['msg']}") from e
        raise InputError(f"invalid {model.__name__}: {describe_validation(e)}") from e


def decode_batch(raw: bytes | str) -> CandidateBatch:
    return decode(raw, CandidateBatch)


def guess_request_id(raw: bytes | str) -> str | None:
    """The request_id of a message that failed validation, when it can still be read."""
    try:
        data: Any = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    rid = data.get("request_id") if isinstance(data, dict) else None
    return rid if isinstance(rid, str) else None


def dead_letter(
    raw: bytes | str,
    error: BaseException,
    *,
    stage: str,
    source: str,
    line: int | None = None,
    offset: int | None = None,
) -> DeadLetter:
    """A dead-letter record that keeps the original bytes (base64 when not UTF-8)."""
    data = raw.encode("utf-8", "surrogateescape") if isinstance(raw, str) else raw
    try:
        text, enc = data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        text, enc = base64.b64encode(data).decode("ascii"), "base64"
    return DeadLetter(
        request_id=guess_request_id(data),
        stage=stage,
        error_type=type(error).__name__,
        error=str(error),
        source=source,
        line=line,
        offset=offset,
        raw=text,
        raw_encoding=enc,  # type: ignore[arg-type]
    )
