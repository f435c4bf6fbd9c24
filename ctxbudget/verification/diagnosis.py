"""The four-way diagnosis: what became of each labelled relevant passage of a request.

For every expected chunk, in label order, the first that holds of:

* ``retrieval_miss``: the chunk was never a candidate of the batch;
* ``packing_drop``: a candidate the pack does not hold (with the drop reason the trace gave:
  the chunk's own fate, or, for a copy folded into a representative that was dropped, the
  representative's; the pack's ``withheld`` list when there is no trace);
* ``ignored``: in the pack (as an evidence item's text or a merged copy) but cited by no claim;
* ``unsupported``: cited, and a claim citing it is not ``supported``;
* ``used``: cited, and every claim citing it is supported.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ctxbudget.schemas import CandidateBatch, CandidateFate, Pack, TraceEvent
from ctxbudget.verification.models import ClaimVerdict, ExpectedEvidence, Outcome

__all__ = ["RequestFacts", "diagnose", "facts_from_batch", "facts_from_traces", "fates_of"]

_STAGE_ORDER = ("route", "consolidate", "select", "compress")


class RequestFacts:
    """What a request's batch or traces say beyond the pack: the relevance labels, the
    candidates' chunk ids and each dropped chunk's fate (the last stage's, when several)."""

    __slots__ = ("candidates", "fates", "relevant")

    def __init__(
        self,
        *,
        relevant: Sequence[str],
        candidates: Iterable[str] | None,
        fates: Mapping[str, CandidateFate] | None = None,
    ) -> None:
        self.relevant = tuple(relevant)
        self.candidates = frozenset(candidates) if candidates is not None else None
        self.fates = dict(fates or {})


def facts_from_batch(
    batch: CandidateBatch, traces: Sequence[TraceEvent] = ()
) -> RequestFacts | None:
    """The facts of a labelled batch (its candidates and labels), with the drop reasons of
    its traces when given; ``None`` when the batch carries no labels."""
    if batch.labels is None:
        return None
    return RequestFacts(
        relevant=batch.labels.relevant_chunk_ids,
        candidates=(c.chunk_id for c in batch.candidates),
        fates=fates_of(traces),
    )


def facts_from_traces(traces: Sequence[TraceEvent]) -> RequestFacts | None:
    """The facts of one request and lane from its trace events; ``None`` without a route
    event or when the request carried no labels. The route event's accepted and dropped ids
    are the candidates; its ``details`` hold the labels."""
    by_stage = {t.stage: t for t in traces}
    route = by_stage.get("route")
    if route is None or not route.details.get("labelled"):
        return None
    relevant = [str(c) for c in route.details.get("relevant_chunk_ids", [])]
    candidates = {*route.accepted_ids, *(f.chunk_id for f in route.dropped)}
    return RequestFacts(relevant=relevant, candidates=candidates, fates=fates_of(traces))


def fates_of(traces: Iterable[TraceEvent]) -> dict[str, CandidateFate]:
    """Each dropped chunk's fate, the latest stage's winning (stage order, not arrival)."""
    ordered = sorted(traces, key=lambda t: _STAGE_ORDER.index(t.stage))
    fates: dict[str, CandidateFate] = {}
    for t in ordered:
        for f in t.dropped:
            fates[f.chunk_id] = f
    return fates


def _fate(chunk_id: str, fates: Mapping[str, CandidateFate]) -> CandidateFate | None:
    """The fate that kept the chunk out: its own, or its representative's when it was a
    copy kept as another chunk that was then dropped."""
    fate = fates.get(chunk_id)
    seen = {chunk_id}
    while fate is not None and fate.kept_as is not None and fate.kept_as not in seen:
        seen.add(fate.kept_as)
        rep = fates.get(fate.kept_as)
        if rep is None:
            break
        fate = CandidateFate(
            chunk_id=chunk_id,
            reason=rep.reason,
            detail=f"{fate.reason} of {fate.kept_as}" + (f": {rep.detail}" if rep.detail else ""),
        )
    return fate


def diagnose(
    pack: Pack, claims: Sequence[ClaimVerdict], facts: RequestFacts
) -> tuple[ExpectedEvidence, ...]:
    """The outcome of every expected chunk of the request, in label order."""
    holder = {cid: e.evidence_id for e in pack.evidence for cid in e.chunk_ids}
    withheld = {w.chunk_id: w for w in pack.withheld}
    cited: dict[str, bool] = {}
    for c in claims:
        for eid in c.evidence_ids:
            cited[eid] = cited.get(eid, True) and c.status == "supported"
    out: list[ExpectedEvidence] = []
    for cid in facts.relevant:
        held = holder.get(cid)
        if held is not None:
            outcome: Outcome = (
                "ignored" if held not in cited else "used" if cited[held] else "unsupported"
            )
            out.append(ExpectedEvidence(chunk_id=cid, outcome=outcome, evidence_id=held))
            continue
        if facts.candidates is not None and cid not in facts.candidates:
            out.append(ExpectedEvidence(chunk_id=cid, outcome="retrieval_miss"))
            continue
        fate = _fate(cid, facts.fates)
        if fate is not None:
            out.append(
                ExpectedEvidence(
                    chunk_id=cid,
                    outcome="packing_drop",
                    drop_reason=fate.reason,
                    detail=fate.detail,
                )
            )
        elif cid in withheld:
            w = withheld[cid]
            out.append(
                ExpectedEvidence(
                    chunk_id=cid, outcome="packing_drop", drop_reason="quarantined", detail=w.detail
                )
            )
        else:
            out.append(ExpectedEvidence(chunk_id=cid, outcome="packing_drop"))
    return tuple(out)
