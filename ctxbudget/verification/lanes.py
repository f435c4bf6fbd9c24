"""Live against shadow judged on answers: the verdicts of the same requests in both lanes.

For the requests that have a verdict in each lane: unsupported claims (``fabricated_id``,
``unsupported_value``, ``uncited``), citation precision (micro-averaged over citations) and
the share of expected evidence the answers cited (from the verdicts' diagnosis, or, without
one, from the labels and the packs: a relevant chunk whose evidence item a claim cites).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ctxbudget.models import ReportModel
from ctxbudget.schemas import Pack
from ctxbudget.verification.models import Verdict

__all__ = ["AnswerDiff", "compare_answers"]

_UNSUPPORTED = ("fabricated_id", "unsupported_value", "uncited")


class AnswerDiff(ReportModel):
    """The answers of both lanes over the requests answered in both."""

    pairs: int
    live_unsupported: int
    shadow_unsupported: int
    live_unsupported_per_answer: float
    shadow_unsupported_per_answer: float
    live_citation_precision: float | None
    shadow_citation_precision: float | None
    live_expected_cited: float | None
    shadow_expected_cited: float | None


def _unsupported(v: Verdict) -> int:
    return sum(v.counts.get(s, 0) for s in _UNSUPPORTED)


def _precision(vs: Sequence[Verdict]) -> float | None:
    cites = sum(v.citations for v in vs)
    return round(sum(v.citations_supporting for v in vs) / cites, 4) if cites else None


def _cited_expected(
    v: Verdict, pack: Pack | None, labels: Mapping[str, Sequence[str]]
) -> tuple[int, int]:
    """(expected chunks cited, expected chunks) of one verdict."""
    if v.expected is not None:
        cited = sum(1 for e in v.expected if e.outcome in ("used", "unsupported"))
        return cited, len(v.expected)
    relevant = labels.get(v.request_id, ())
    if not relevant or pack is None:
        return 0, 0
    holder = {c: e.evidence_id for e in pack.evidence for c in e.chunk_ids}
    ids = {i for c in v.claims for i in c.evidence_ids}
    return sum(1 for c in relevant if holder.get(c) in ids), len(relevant)


def _expected_share(
    vs: Sequence[Verdict], packs: Mapping[str, Pack], labels: Mapping[str, Sequence[str]]
) -> float | None:
    got = need = 0
    for v in vs:
        c, n = _cited_expected(v, packs.get(v.request_id), labels)
        got, need = got + c, need + n
    return round(got / need, 4) if need else None


def compare_answers(
    verdicts: Iterable[Verdict],
    *,
    live_packs: Mapping[str, Pack] | None = None,
    shadow_packs: Mapping[str, Pack] | None = None,
    labels: Mapping[str, Sequence[str]] | None = None,
) -> AnswerDiff | None:
    """The answer comparison, or None when no request has a verdict in both lanes (the last
    verdict seen per request and lane counts)."""
    live: dict[str, Verdict] = {}
    shadow: dict[str, Verdict] = {}
    for v in verdicts:
        (live if v.lane == "live" else shadow)[v.request_id] = v
    common = sorted(set(live) & set(shadow))
    if not common:
        return None
    lv = [live[r] for r in common]
    sv = [shadow[r] for r in common]
    labels = labels or {}
    n = len(common)
    return AnswerDiff(
        pairs=n,
        live_unsupported=sum(_unsupported(v) for v in lv),
        shadow_unsupported=sum(_unsupported(v) for v in sv),
        live_unsupported_per_answer=round(sum(_unsupported(v) for v in lv) / n, 4),
        shadow_unsupported_per_answer=round(sum(_unsupported(v) for v in sv) / n, 4),
        live_citation_precision=_precision(lv),
        shadow_citation_precision=_precision(sv),
        live_expected_cited=_expected_share(lv, live_packs or {}, labels),
        shadow_expected_cited=_expected_share(sv, shadow_packs or {}, labels),
    )
