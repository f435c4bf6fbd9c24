"""Bytes in, models out (and back): the one place where JSON meets the wire models."""

from __future__ import annotations

import base64
from typing import Any, TypeVar

import orjson
from pydantic import BaseModel, ValidationError

from ctxbudget.errors import InputError
from ctxbudget.schemas import CandidateBatch, DeadLetter

M = TypeVar("M", bound=BaseModel)

#: Messages larger than this are refused before parsing (they go to the dead letters).
MAX_MESSAGE_BYTES = 8 * 1024 * 1024


def encode(model: BaseModel) -> bytes:
    """Canonical JSON: field order of the model, aliases (``schema``), no whitespace."""
    return orjson.dumps(model.model_dump(mode="json", by_alias=True))


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
