"""``ctx.label.v1``: which passages of a request were relevant, and who said so.

A label stream (topic ``ctx.labels.v1``, key = request id) feeds the coverage monitor. Its
``source`` says how far a coverage figure built on it can be trusted: ``analyst`` labels and
``replay`` labels (from labelled replay traffic) can name passages the filter removed;
``verify`` labels come from supported citations, which can only name passages the filter kept,
so coverage measured on them alone is an upper bound (see ``ctxbudget.conformal.monitor``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field

from ctxbudget.models import WireModel
from ctxbudget.schemas import CandidateBatch, Labels, Pack

if TYPE_CHECKING:
    from ctxbudget.verification.models import Verdict

__all__ = [
    "LABEL_SOURCES",
    "Label",
    "LabelSource",
    "label_of_batch",
    "label_of_verdict",
    "with_label",
]

LabelSource = Literal["analyst", "verify", "replay"]
LABEL_SOURCES: tuple[LabelSource, ...] = ("analyst", "verify", "replay")


class Label(WireModel):
    """``ctx.label.v1``: the relevant chunk ids of one request (possibly none)."""

    schema_: Literal["ctx.label.v1"] = Field(default="ctx.label.v1", alias="schema")
    request_id: str = Field(min_length=1, max_length=256)
    relevant_chunk_ids: tuple[str, ...] = ()
    source: LabelSource


def label_of_batch(batch: CandidateBatch, source: LabelSource) -> Label | None:
    """The label a labelled batch carries; None when it carries none."""
    if batch.labels is None:
        return None
    return Label(
        request_id=batch.request_id,
        relevant_chunk_ids=batch.labels.relevant_chunk_ids,
        source=source,
    )


def label_of_verdict(verdict: Verdict, pack: Pack) -> Label | None:
    """A ``verify`` label: the chunk ids of the pack's evidence that supported claims cite,
    in pack order (every chunk id of a merged item: its copies hold the same passage);
    None when no supported claim cites the pack's evidence, or the pack is another's."""
    if (verdict.request_id, verdict.lane) != (pack.request_id, pack.lane):
        return None
    cited = {
        eid for claim in verdict.claims if claim.status == "supported" for eid in claim.evidence_ids
    }
    chunks = [c for item in pack.evidence if item.evidence_id in cited for c in item.chunk_ids]
    if not chunks:
        return None
    return Label(
        request_id=verdict.request_id,
        relevant_chunk_ids=tuple(dict.fromkeys(chunks)),
        source="verify",
    )


def with_label(batch: CandidateBatch, label: Label) -> CandidateBatch:
    """A copy of the batch carrying the label's relevant ids (the batch is not changed)."""
    return batch.model_copy(update={"labels": Labels(relevant_chunk_ids=label.relevant_chunk_ids)})
