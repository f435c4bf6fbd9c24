"""Input limits: what one batch may hold, checked before any stage works on it.

A worker (and ``ctxbudget pack``) refuses a batch over a limit with a :class:`LimitError`
naming the limit, what was found and the allowed value; the batch becomes a dead letter and
nothing else is done with it. The limits bound the work and the memory one batch can cost:

- ``max_message_bytes``: the message's size, checked before anything is parsed;
- ``max_candidates``: candidates per batch, counted in the raw bytes before the strict
  parse when the count could be over (an exact count follows the parse);
- ``max_text_bytes``: UTF-8 bytes of one candidate's text or title, and of the query;
- ``max_json_depth``: containers nested in the message (the top object is depth 1, a
  candidate's ``metadata`` object depth 4); the JSON parser's own bound (about 250
  levels) refuses deeper documents before they are built;
- ``max_pair_checks``: the consolidation work budget, the candidate pairs the near-duplicate
  join would compare, counted in linear time before any pair is made (see
  :func:`ctxbudget.near_duplicates.near_duplicate_pairs`). Identical passages are collapsed
  before the join and cost nothing; the budget stops batches of many near-identical ones.

Integers beyond 64 bits are refused by :func:`ctxbudget.codec.check_int_ranges`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

import orjson

from ctxbudget.errors import LimitError

if TYPE_CHECKING:
    from ctxbudget.schemas import CandidateBatch

#: Messages larger than this are refused before parsing (they go to the dead letters).
MAX_MESSAGE_BYTES = 8 * 1024 * 1024
DEFAULT_MAX_CANDIDATES = 2000
DEFAULT_MAX_TEXT_BYTES = 64 * 1024
DEFAULT_MAX_JSON_DEPTH = 32
#: About a second of consolidation on one core; ordinary batches need a few hundred.
DEFAULT_MAX_PAIR_CHECKS = 2_000_000

#: Where a candidate's ``metadata`` object sits: batch (1) > candidates (2) > candidate (3).
_METADATA_DEPTH = 4


@dataclass(frozen=True, slots=True)
class InputLimits:
    """The limits one batch is held to; every value must be positive.

    The one object every path hands the core: :func:`ctxbudget.codec.decode` checks the
    first four as it reads a message, and the pipeline is built with ``max_pair_checks``,
    which the consolidator checks before its near-duplicate join. The command line and the
    workers make it from the environment (:class:`~ctxbudget.limit_settings.LimitSettings`),
    the Python API takes it as it is."""

    max_message_bytes: int = MAX_MESSAGE_BYTES
    max_candidates: int = DEFAULT_MAX_CANDIDATES
    max_text_bytes: int = DEFAULT_MAX_TEXT_BYTES
    max_json_depth: int = DEFAULT_MAX_JSON_DEPTH
    max_pair_checks: int = DEFAULT_MAX_PAIR_CHECKS

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if type(value) is not int or value < 1:
                raise ValueError(f"{f.name} must be a positive integer, got {value!r}")
        if self.max_json_depth < _METADATA_DEPTH:
            raise ValueError(
                f"max_json_depth must be at least {_METADATA_DEPTH} (a candidate's metadata "
                f"sits at that depth), got {self.max_json_depth}"
            )


def _over(what: str, size: int, allowed: int, limit: str, unit: str = "") -> LimitError:
    return LimitError(
        f"{what}: {size:,}{unit} is over the limit of {allowed:,}{unit} ({limit})",
        limit=limit,
        size=size,
        allowed=allowed,
    )


def check_message_size(size: int, limits: InputLimits) -> None:
    """The size check made before anything is parsed."""
    if size > limits.max_message_bytes:
        raise LimitError(
            f"message of {size} bytes is over the {limits.max_message_bytes}-byte limit "
            "(max_message_bytes)",
            limit="max_message_bytes",
            size=size,
            allowed=limits.max_message_bytes,
        )


_CHUNK_ID_KEY = re.compile(rb'"chunk_id"\s*:')


def precheck_candidates(raw: bytes | str, limits: InputLimits) -> None:
    """Refuse a batch with too many candidates before the strict parse builds them.

    Every candidate has a ``chunk_id`` key, so the key's count bounds the candidates from
    above (metadata may hold the key too). Only when that count is over the limit is the
    message parsed (orjson, a fraction of the models' memory) to count exactly. A key
    spelled with escapes is not counted here; :func:`check_batch` counts after the parse.
    """
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    if data.count(b'"chunk_id"') <= limits.max_candidates:
        return
    if len(_CHUNK_ID_KEY.findall(data)) <= limits.max_candidates:
        return
    try:
        parsed: Any = orjson.loads(data)
    except orjson.JSONDecodeError:
        return  # the strict parse reports it
    cands = parsed.get("candidates") if isinstance(parsed, dict) else None
    if isinstance(cands, list) and len(cands) > limits.max_candidates:
        raise _over("candidates", len(cands), limits.max_candidates, "max_candidates")


def _utf8_len(text: str, limit: int) -> int:
    """UTF-8 length of ``text``; exact when it may be over ``limit`` (at most 4 bytes a char)."""
    n = len(text)
    if n * 4 <= limit or n > limit:
        return n  # within for sure, or over for sure (never fewer bytes than characters)
    return len(text.encode("utf-8", "surrogatepass"))


def check_batch(
    batch: CandidateBatch, limits: InputLimits, *, message_bytes: int | None = None
) -> None:
    """Candidates, text sizes and metadata depth of a parsed batch (the first one over).

    ``message_bytes`` is the size of the JSON the batch was parsed from, when known: a
    decoded JSON string is never longer in UTF-8 than its encoding, so a message within
    ``max_text_bytes`` holds no text over it and the texts are not measured."""
    cands = batch.candidates
    if len(cands) > limits.max_candidates:
        raise _over("candidates", len(cands), limits.max_candidates, "max_candidates")
    cap = limits.max_text_bytes
    texts_fit = message_bytes is not None and message_bytes <= cap
    size = _utf8_len(batch.query.text, cap)
    if size > cap:
        raise _over("query.text", size, cap, "max_text_bytes", " bytes")
    depth_limit = limits.max_json_depth
    for i, c in enumerate(cands):
        for name, text in () if texts_fit else (("text", c.text), ("title", c.title)):
            size = _utf8_len(text, cap) if text is not None else 0
            if size > cap:
                raise _over(f"candidates.{i}.{name}", size, cap, "max_text_bytes", " bytes")
        metadata = c.metadata
        # Metadata of plain values sits at _METADATA_DEPTH, which the limits never go below:
        # only nested values need the walk.
        if metadata and any(isinstance(v, dict | list) for v in metadata.values()):
            _check_depth(metadata, f"candidates.{i}.metadata", depth_limit)


def _check_depth(value: Any, path: str, limit: int) -> None:
    stack: list[tuple[Any, int]] = [(value, _METADATA_DEPTH)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            raise LimitError(
                f"{path}: JSON nested over the limit of {limit} levels (max_json_depth)",
                limit="max_json_depth",
                size=depth,
                allowed=limit,
            )
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values() if isinstance(v, dict | list))
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node if isinstance(v, dict | list))


def parser_depth_error(detail: str, limits: InputLimits) -> LimitError:
    """The JSON parser's own nesting bound, reported as the depth limit."""
    return LimitError(
        f"JSON nested deeper than the parser's bound ({detail}); the limit is "
        f"{limits.max_json_depth} levels (max_json_depth)",
        limit="max_json_depth",
        size=limits.max_json_depth + 1,
        allowed=limits.max_json_depth,
    )


def check_pair_work(pairs: int, limits_max: int) -> None:
    """The consolidation work budget: ``pairs`` candidate pairs against ``limits_max``."""
    if pairs > limits_max:
        raise LimitError(
            f"consolidation work: {pairs:,} candidate pairs to compare is over the limit of "
            f"{limits_max:,} (max_pair_checks): too many near-identical passages",
            limit="max_pair_checks",
            size=pairs,
            allowed=limits_max,
        )
