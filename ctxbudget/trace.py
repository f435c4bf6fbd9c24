"""One TraceEvent per stage per lane, enough to rebuild why each candidate was kept or dropped."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ctxbudget.schemas import (
    CandidateFate,
    ConsolidatedBatch,
    Pack,
    PackedBatch,
    RoutedBatch,
    TraceEvent,
)


@dataclass(frozen=True, slots=True)
class CompressResult:
    """The pack, with what the compress stage decided (what its trace records)."""

    pack: Pack
    dropped: tuple[CandidateFate, ...]
    restored: tuple[str, ...]
    details: dict[str, Any]


def _base(routed: RoutedBatch, stage: str, latency_ms: float) -> dict[str, object]:
    return {
        "request_id": routed.request_id,
        "stage": stage,
        "lane": routed.lane,
        "cohort": routed.cohort,
        "policy": routed.policy,
        "query_class": routed.query_class,
        "latency_ms": round(latency_ms, 3),
        "replay": routed.batch.replay,
    }


def route_trace(routed: RoutedBatch, latency_ms: float = 0.0) -> TraceEvent:
    """The route stage's event: the admissible candidates accepted, the unauthorized and
    quarantined ones dropped, the budget ledger, the rule that chose the class, and in
    ``details`` the conversation turns kept, the relevance labels and the passages cut."""
    cands = routed.batch.candidates
    return TraceEvent.model_validate(
        {
            **_base(routed, "route", latency_ms),
            "candidate_count": len(cands),
            "accepted_ids": tuple(cands[i].chunk_id for i in routed.admissible),
            "dropped": routed.dropped,
            "budget": routed.budget,
            "route_rule": routed.route_rule,
            "details": {
                "conversation_turns_kept": routed.conversation_turns,
                "conversation_turns": len(routed.batch.conversation),
                "history": routed.history,
                "labelled": routed.batch.labels is not None,
                "relevant_chunk_ids": list(routed.batch.labels.relevant_chunk_ids)
                if routed.batch.labels is not None
                else [],
                **_cut_details(routed),
            },
        }
    )


def _cut_details(routed: RoutedBatch) -> dict[str, object]:
    """``cut``: each passage packed without its flagged sentences, with their spans and the
    gate's findings (absent when none was cut)."""
    if not routed.cuts:
        return {}
    return {
        "cut": [
            {
                "chunk_id": cut.chunk_id,
                "kept_chars": len(cut.text),
                "withheld": [w.model_dump(mode="json") for w in cut.withheld],
            }
            for cut in routed.cuts
        ]
    }


def consolidate_trace(consolidated: ConsolidatedBatch, latency_ms: float = 0.0) -> TraceEvent:
    """The consolidate stage's event: the item ids accepted, the consolidation drops, and in
    ``details`` each family of more than one chunk."""
    routed = consolidated.routed
    return TraceEvent.model_validate(
        {
            **_base(routed, "consolidate", latency_ms),
            "candidate_count": len(routed.admissible),
            "accepted_ids": tuple(it.item_id for it in consolidated.items),
            "dropped": consolidated.dropped,
            "details": {
                "families": {
                    it.item_id: list(it.chunk_ids)
                    for it in consolidated.items
                    if len(it.chunk_ids) > 1
                },
            },
        }
    )


def select_trace(packed: PackedBatch, latency_ms: float = 0.0) -> TraceEvent:
    """The select stage's event: the admitted item ids, the drops, and in ``details``
    the admission order, utilities, estimated tokens, items to compress, uncovered
    facets and the coverage statement."""
    consolidated = packed.consolidated
    items = consolidated.items
    return TraceEvent.model_validate(
        {
            **_base(consolidated.routed, "select", latency_ms),
            "candidate_count": len(items),
            "accepted_ids": tuple(items[a.item].item_id for a in packed.admitted),
            "dropped": packed.dropped,
            "budget": consolidated.routed.budget,
            "details": {
                "ranked": [
                    items[a.item].item_id for a in sorted(packed.admitted, key=lambda a: a.rank)
                ],
                "utility": {items[a.item].item_id: a.utility for a in packed.admitted},
                "estimated_tokens": sum(a.estimated_tokens for a in packed.admitted),
                "compress": [items[a.item].item_id for a in packed.admitted if a.compress_to],
                "uncovered": list(packed.uncovered),
                "coverage": packed.coverage.model_dump(mode="json") if packed.coverage else None,
            },
        }
    )


def compress_trace(
    result: CompressResult, packed: PackedBatch, latency_ms: float = 0.0
) -> TraceEvent:
    """The compress stage's event: the chunk ids in the pack, the drops of the exact count, the
    evidence tokens, and in ``details`` what was compressed, topped up or restored, the
    answerability and the pack's drop counts."""
    pack = result.pack
    return TraceEvent.model_validate(
        {
            **_base(packed.consolidated.routed, "compress", latency_ms),
            "candidate_count": len(packed.admitted),
            "accepted_ids": tuple(cid for e in pack.evidence for cid in e.chunk_ids),
            "dropped": result.dropped,
            "budget": pack.budget,
            "evidence_tokens": pack.evidence_tokens,
            "details": {
                **result.details,
                "restored": list(result.restored),
                "answerability": pack.answerability,
                "dropped_counts": pack.dropped,
                "evidence_ids": [e.evidence_id for e in pack.evidence],
            },
        }
    )
