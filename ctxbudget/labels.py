"""``ctx.label.v1``: which passages of a request were relevant, and who said so.

A label stream (topic ``ctx.labels.v1``, key = request id) feeds the coverage monitor. Its
``source`` says how far a coverage figure built on it can be trusted: ``analyst`` labels and
``replay`` labels (from labelled replay traffic) can name passages the filter removed;
``verify`` labels come from supported citations, which can only name passages the filter kept,
so coverage measured on them alone is an upper bound (see ``ctxbudget.conformal.monitor``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ctxbudget.models import WireModel
from ctxbudget.schemas import CandidateBatch, Labels

__all__ = ["LABEL_SOURCES", "Label", "LabelSource", "label_of_batch", "with_label"]

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


def with_label(batch: CandidateBatch, label: Label) -> CandidateBatch:
    """A copy of the batch carrying the label's relevant ids (the batch is not changed)."""
    return batch.model_copy(update={"labels": Labels(relevant_chunk_ids=label.relevant_chunk_ids)})
