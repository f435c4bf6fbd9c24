"""Verdicts summed up: claims per status, citation precision and completeness, abstention
findings and the diagnosis of expected passages, overall and per query class."""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import Field

from ctxbudget.models import ReportModel
from ctxbudget.verification.models import CLAIM_STATUSES, OUTCOMES, Verdict

__all__ = ["VerdictSummary", "render_summary", "summarise"]


class VerdictSummary(ReportModel):
    """The sums of a group of verdicts (one lane, one class, or all)."""

    answers: int = 0
    claims: dict[str, int] = Field(default_factory=dict)
    citations: int = 0
    citations_supporting: int = 0
    #: Micro-averaged over the group's citations; None without any.
    citation_precision: float | None = None
    claims_needing_evidence: int = 0
    claims_supported: int = 0
    citation_completeness: float | None = None
    #: Answers with at least one claim not supported (nor uncheckable).
    answers_with_unsupported: int = 0
    abstention: dict[str, int] = Field(default_factory=dict)
    #: Expected passages per outcome (labelled requests only).
    expected: dict[str, int] = Field(default_factory=dict)
    #: Expected passages the answer cited (``used`` or ``unsupported``) over those labelled.
    expected_cited: float | None = None
    drop_reasons: dict[str, int] = Field(default_factory=dict)


def _share(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def summarise(verdicts: Iterable[Verdict]) -> VerdictSummary:
    """The sums of ``verdicts`` (any order: the sums do not depend on it)."""
    claims: dict[str, int] = dict.fromkeys(CLAIM_STATUSES, 0)
    expected: dict[str, int] = dict.fromkeys(OUTCOMES, 0)
    abstention: dict[str, int] = {}
    drops: dict[str, int] = {}
    answers = cites = supporting = needing = supported = flawed = 0
    for v in verdicts:
        answers += 1
        for status, n in v.counts.items():
            claims[status] = claims.get(status, 0) + n
        cites += v.citations
        supporting += v.citations_supporting
        needing += v.claims_needing_evidence
        supported += v.claims_supported
        flawed += v.claims_supported < v.claims_needing_evidence
        abstention[v.abstention] = abstention.get(v.abstention, 0) + 1
        for e in v.expected or ():
            expected[e.outcome] += 1
            if e.outcome == "packing_drop":
                reason = e.drop_reason or "unknown"
                drops[reason] = drops.get(reason, 0) + 1
    labelled = sum(expected.values())
    return VerdictSummary(
        answers=answers,
        claims=claims,
        citations=cites,
        citations_supporting=supporting,
        citation_precision=_share(supporting, cites),
        claims_needing_evidence=needing,
        claims_supported=supported,
        citation_completeness=_share(supported, needing),
        answers_with_unsupported=flawed,
        abstention=dict(sorted(abstention.items())),
        expected=expected,
        expected_cited=_share(expected["used"] + expected["unsupported"], labelled),
        drop_reasons=dict(sorted(drops.items())),
    )


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def render_summary(s: VerdictSummary) -> str:
    """A few lines for a terminal."""
    claims = ", ".join(f"{k} {n}" for k, n in s.claims.items())
    lines = [
        f"{s.answers} answers; claims: {claims}",
        f"citation precision {_pct(s.citation_precision)} ({s.citations_supporting}/"
        f"{s.citations}), completeness {_pct(s.citation_completeness)} "
        f"({s.claims_supported}/{s.claims_needing_evidence})",
        "abstention: " + (", ".join(f"{k} {n}" for k, n in s.abstention.items()) or "-"),
    ]
    if any(s.expected.values()):
        reasons = ", ".join(f"{k} {n}" for k, n in s.drop_reasons.items())
        lines.append(
            "expected evidence: "
            + ", ".join(f"{k} {n}" for k, n in s.expected.items())
            + (f" (drops: {reasons})" if reasons else "")
        )
    return "\n".join(lines)
