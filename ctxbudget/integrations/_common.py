"""What the framework components share: a framework document read as a candidate, one
Packer call with the component's budget, and each evidence item traced back to the caller's
documents.

Every component maps a document the same way (each module says where its framework keeps
these): the id (else ``c<n>``, the document's 1-based position), the text, the score, and
from the metadata ``doc_id``, ``title``, ``source`` (the candidate's ``source_id``),
``version``, ``authority``, ``access_label``, ``tenant_id``, ``rerank_score`` and
``published_at`` when present.
Where the framework's text splitter records the chunk's offset in its document, that is the
candidate's span (so overlapping windows of one document are merged). Other metadata stays
with the caller's document and is not sent to the packer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ctxbudget.api import (
    AnswerLike,
    InstructionsLike,
    Packer,
    PrincipalLike,
    TurnLike,
)
from ctxbudget.policy import PolicyStore
from ctxbudget.schemas import EvidenceItem, Pack

__all__ = [
    "META_KEYS",
    "Budget",
    "Packed",
    "Placed",
    "candidate_of",
    "pack_sources",
    "span_from_start",
]

#: Metadata keys read into a candidate (the candidate mapping's key of the same name).
META_KEYS: tuple[str, ...] = (
    "doc_id",
    "title",
    "source",
    "version",
    "authority",
    "access_label",
    "tenant_id",
    "rerank_score",
    "published_at",
)
#: Metadata keys whose value is written as text when it is not (a page number as a version,
#: a path as a source).
_TEXT_KEYS = frozenset(
    {"doc_id", "title", "source", "version", "access_label", "tenant_id", "published_at"}
)


@dataclass(frozen=True, slots=True)
class Budget:
    """The budget keywords of :meth:`ctxbudget.Packer.pack` a component packs every call with."""

    input_limit: int
    tokenizer: str = "cl100k_base"
    instructions: InstructionsLike = None
    conversation: Sequence[TurnLike] = ()
    answer: AnswerLike = "short_fact"
    principal: PrincipalLike = None
    model: str | None = None


@dataclass(frozen=True, slots=True)
class Placed:
    """One evidence item of a pack and the positions of the caller's documents it stands for
    (one per chunk id, in the item's order; the representative first)."""

    item: EvidenceItem
    positions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Packed:
    """A pack and its evidence items, in pack order, traced back to the caller's documents."""

    pack: Pack
    placed: tuple[Placed, ...]


def _text_or_none(value: Any) -> Any:
    if value is None or isinstance(value, str):
        return value
    return str(value)


def _offset(value: Any) -> int | None:
    return value if type(value) is int and value >= 0 else None


def span_from_start(text: str, start: Any) -> tuple[int, int] | None:
    """Where a chunk sits in its document, from the start offset a text splitter recorded
    (None when there is none)."""
    begin = _offset(start)
    return (begin, begin + len(text)) if begin is not None else None


def candidate_of(
    doc_id: str | None,
    text: str,
    score: float | None,
    meta: Mapping[str, Any],
    span: tuple[int, int] | None = None,
) -> dict[str, Any]:
    """The candidate mapping of one framework document (module docstring); ``span`` is
    where the chunk sits in its document, when the framework's splitter recorded it (it lets
    the packer merge overlapping windows of one document)."""
    candidate: dict[str, Any] = {"text": text}
    if doc_id is not None:
        candidate["id"] = doc_id
    elif meta.get("id") is not None:
        candidate["id"] = _text_or_none(meta["id"])
    if score is not None:
        candidate["score"] = score
    elif meta.get("score") is not None:
        candidate["score"] = meta["score"]
    for key in META_KEYS:
        value = meta.get(key)
        if value is not None:
            candidate[key] = _text_or_none(value) if key in _TEXT_KEYS else value
    if span is not None:
        candidate["span"] = {"start": span[0], "end": span[1]}
    return candidate


def make_packer(policy: str, policies: str | Path | PolicyStore | None) -> Packer:
    """The component's Packer."""
    return Packer(policy, policies)


def pack_sources(
    packer: Packer, budget: Budget, query: str, candidates: Sequence[Mapping[str, Any]]
) -> Packed:
    """Pack the candidates of the caller's documents and trace each item back to them."""
    pack = packer.pack(
        query,
        candidates,
        input_limit=budget.input_limit,
        tokenizer=budget.tokenizer,
        instructions=budget.instructions,
        conversation=budget.conversation,
        answer=budget.answer,
        principal=budget.principal,
        model=budget.model,
    )
    first: dict[str, int] = {}
    for position, candidate in enumerate(candidates):
        chunk_id = candidate.get("id")
        first.setdefault(str(chunk_id) if chunk_id is not None else f"c{position + 1}", position)
    placed = tuple(
        Placed(item, tuple(first[c] for c in item.chunk_ids if c in first))
        for item in pack.evidence
    )
    return Packed(pack=pack, placed=placed)


def evidence_metadata(item: EvidenceItem) -> dict[str, Any]:
    """What a returned document's metadata gains: the evidence id it is cited by, whether its
    text is an excerpt, where its text comes from, and the caller's ids it stands for."""
    return {
        "ctxbudget_id": item.evidence_id,
        "excerpt": item.compressed,
        "spans": [{"chunk_id": s.chunk_id, "start": s.start, "end": s.end} for s in item.spans],
        "chunk_ids": list(item.chunk_ids),
    }
