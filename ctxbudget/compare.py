"""Live vs shadow: what a policy change does to the packs of the same requests.

Pairs packs by request id and reports, overall and per query class: tokens saved or spent,
Jaccard overlap of the evidence ids, the order distance of the shared evidence (normalised
Kendall tau: 0 same order, 1 reversed), drop-reason shifts, answerability changes, and the
share of needed evidence admitted in each lane when labels are known. The noise floor is the
same comparison between two packings of the same traffic with the live policy (as Diffy
compares two primaries): with a deterministic packer it is exactly zero, and the report
says so from a measurement, not an assumption.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from itertools import combinations
from statistics import mean

from pydantic import Field

from ctxbudget.models import ReportModel
from ctxbudget.schemas import Pack
from ctxbudget.verification.lanes import AnswerDiff, compare_answers
from ctxbudget.verification.models import Verdict


class ClassDiff(ReportModel):
    """Live against shadow over the pairs of one query class (or ``all``, or the noise floor):
    mean evidence tokens per lane and their difference (shadow minus live), id overlap, order
    distance, identical renderings, and the share of labelled relevant chunks each lane
    admitted (None without labels)."""

    query_class: str
    pairs: int
    live_tokens_mean: float
    shadow_tokens_mean: float
    tokens_delta_mean: float
    jaccard_mean: float
    order_distance_mean: float
    identical: int
    live_needed_admitted: float | None
    shadow_needed_admitted: float | None


class Comparison(ReportModel):
    """The whole comparison: how many packs paired, each lane's policies, the differences
    overall and per class, drop reasons per lane, answerability shifts (``live->shadow``: count)
    and the noise floor when measured."""

    pairs: int
    unpaired_live: int
    unpaired_shadow: int
    live_policy: list[str]
    shadow_policy: list[str]
    overall: ClassDiff
    by_class: list[ClassDiff]
    dropped_live: dict[str, int]
    dropped_shadow: dict[str, int]
    answerability_shifts: dict[str, int]
    noise_floor: ClassDiff | None = None
    #: Packs per lane (every request id seen, paired or not): the denominators below.
    live_packs: int = 0
    shadow_packs: int = 0
    #: Mean candidates dropped per pack, per reason, over every pack of the lane: comparable
    #: when the lanes hold different numbers of packs (``dropped_*`` are totals over pairs).
    dropped_live_per_pack: dict[str, float] = Field(default={})
    dropped_shadow_per_pack: dict[str, float] = Field(default={})
    #: The answers of both lanes, when verdicts exist for both (``compare(verdicts=...)``).
    answers: AnswerDiff | None = None


def drops_per_pack(packs: Sequence[Pack]) -> dict[str, float]:
    """Mean count per pack of each drop reason (a pack without the reason counts as 0)."""
    total: Counter[str] = Counter()
    for p in packs:
        total.update(p.dropped)
    return {r: n / len(packs) for r, n in sorted(total.items())} if packs else {}


def jaccard(a: Iterable[str], b: Iterable[str]) -> float:
    """Jaccard overlap of two collections of ids, as sets; 1.0 when both are empty."""
    sa, sb = set(a), set(b)
    if not sa and not sb:
        return 1.0
    return len(sa & sb) / len(sa | sb)


def order_distance(a: Sequence[str], b: Sequence[str]) -> float:
    """Normalised Kendall tau distance over the ids both sequences hold (0 with < 2 shared)."""
    shared = [x for x in a if x in set(b)]
    if len(shared) < 2:
        return 0.0
    pos = {x: i for i, x in enumerate(b)}
    pairs = list(combinations(shared, 2))
    discordant = sum(1 for x, y in pairs if pos[x] > pos[y])
    return discordant / len(pairs)


def _admitted(p: Pack) -> set[str]:
    return {c for e in p.evidence for c in e.chunk_ids}


def _needed_share(packs: Sequence[Pack], labels: Mapping[str, Sequence[str]]) -> float | None:
    need = got = 0
    for p in packs:
        rel = set(labels.get(p.request_id, ()))
        need += len(rel)
        got += len(rel & _admitted(p))
    return got / need if need else None


def _diff(
    name: str, pairs: Sequence[tuple[Pack, Pack]], labels: Mapping[str, Sequence[str]]
) -> ClassDiff:
    live = [a for a, _ in pairs]
    shadow = [b for _, b in pairs]
    ids = [
        ([e.evidence_id for e in a.evidence], [e.evidence_id for e in b.evidence]) for a, b in pairs
    ]
    return ClassDiff(
        query_class=name,
        pairs=len(pairs),
        live_tokens_mean=round(mean(p.evidence_tokens for p in live), 2) if pairs else 0.0,
        shadow_tokens_mean=round(mean(p.evidence_tokens for p in shadow), 2) if pairs else 0.0,
        tokens_delta_mean=round(mean(b.evidence_tokens - a.evidence_tokens for a, b in pairs), 2)
        if pairs
        else 0.0,
        jaccard_mean=round(mean(jaccard(x, y) for x, y in ids), 4) if pairs else 1.0,
        order_distance_mean=round(mean(order_distance(x, y) for x, y in ids), 4) if pairs else 0.0,
        identical=sum(1 for a, b in pairs if a.rendered == b.rendered),
        live_needed_admitted=_needed_share(live, labels),
        shadow_needed_admitted=_needed_share(shadow, labels),
    )


def compare(
    live: Iterable[Pack],
    shadow: Iterable[Pack],
    *,
    labels: Mapping[str, Sequence[str]] | None = None,
    noise: Sequence[tuple[Pack, Pack]] | None = None,
    verdicts: Iterable[Verdict] = (),
) -> Comparison:
    """Compare packs of the same requests; the last pack seen per request id counts. With
    ``verdicts`` of both lanes, the answers are compared too
    (:mod:`ctxbudget.verification.lanes`)."""
    labels = labels or {}
    by_live = {p.request_id: p for p in live}
    by_shadow = {p.request_id: p for p in shadow}
    common = sorted(set(by_live) & set(by_shadow))
    pairs = [(by_live[r], by_shadow[r]) for r in common]
    per_class: dict[str, list[tuple[Pack, Pack]]] = defaultdict(list)
    for a, b in pairs:
        per_class[a.query_class].append((a, b))
    dropped_live: Counter[str] = Counter()
    dropped_shadow: Counter[str] = Counter()
    shifts: Counter[str] = Counter()
    for a, b in pairs:
        dropped_live.update(a.dropped)
        dropped_shadow.update(b.dropped)
        if a.answerability != b.answerability:
            shifts[f"{a.answerability}->{b.answerability}"] += 1
    return Comparison(
        pairs=len(pairs),
        unpaired_live=len(set(by_live) - set(by_shadow)),
        unpaired_shadow=len(set(by_shadow) - set(by_live)),
        live_policy=sorted({str(a.policy) for a, _ in pairs}),
        shadow_policy=sorted({str(b.policy) for _, b in pairs}),
        overall=_diff("all", pairs, labels),
        by_class=[_diff(c, per_class[c], labels) for c in sorted(per_class)],
        dropped_live=dict(sorted(dropped_live.items())),
        dropped_shadow=dict(sorted(dropped_shadow.items())),
        answerability_shifts=dict(sorted(shifts.items())),
        noise_floor=_diff("noise floor", noise, labels) if noise is not None else None,
        live_packs=len(by_live),
        shadow_packs=len(by_shadow),
        dropped_live_per_pack=drops_per_pack(list(by_live.values())),
        dropped_shadow_per_pack=drops_per_pack(list(by_shadow.values())),
        answers=compare_answers(
            verdicts, live_packs=by_live, shadow_packs=by_shadow, labels=labels
        ),
    )


def render(c: Comparison) -> str:
    """A plain-text table."""
    head = (
        f"{'class':<16}{'pairs':>6}{'live tok':>10}{'shadow tok':>11}{'delta':>8}"
        f"{'jaccard':>9}{'order':>7}{'same':>6}{'needed L':>10}{'needed S':>10}"
    )
    lines = [
        f"live {', '.join(c.live_policy)}  vs  shadow {', '.join(c.shadow_policy)}: "
        f"{c.pairs} pairs ({c.unpaired_live} live and {c.unpaired_shadow} shadow unpaired)",
        head,
        "-" * len(head),
    ]
    rows = [c.overall, *c.by_class] + ([c.noise_floor] if c.noise_floor else [])
    for d in rows:

        def pct(v: float | None) -> str:
            return "-" if v is None else f"{v:.1%}"

        lines.append(
            f"{d.query_class:<16}{d.pairs:>6}{d.live_tokens_mean:>10.1f}"
            f"{d.shadow_tokens_mean:>11.1f}{d.tokens_delta_mean:>8.1f}"
            f"{d.jaccard_mean:>9.3f}{d.order_distance_mean:>7.3f}{d.identical:>6}"
            f"{pct(d.live_needed_admitted):>10}{pct(d.shadow_needed_admitted):>10}"
        )
    live_d, shadow_d = c.dropped_live_per_pack, c.dropped_shadow_per_pack
    reasons = sorted(set(live_d) | set(shadow_d))
    lines.append(
        f"drop reasons per pack (live {c.live_packs} packs -> shadow {c.shadow_packs} packs): "
        + ", ".join(f"{r} {live_d.get(r, 0):.2f}->{shadow_d.get(r, 0):.2f}" for r in reasons)
    )
    if c.answerability_shifts:
        lines.append(
            "answerability shifts: "
            + ", ".join(f"{k} {v}" for k, v in c.answerability_shifts.items())
        )
    if c.answers is not None:
        a = c.answers

        def share(v: float | None) -> str:
            return "-" if v is None else f"{v:.1%}"

        lines.append(
            f"answers ({a.pairs} requests answered in both lanes), live -> shadow: unsupported "
            f"claims {a.live_unsupported} -> {a.shadow_unsupported} "
            f"({a.live_unsupported_per_answer:.2f} -> {a.shadow_unsupported_per_answer:.2f} "
            f"per answer), citation precision {share(a.live_citation_precision)} -> "
            f"{share(a.shadow_citation_precision)}, expected evidence cited "
            f"{share(a.live_expected_cited)} -> {share(a.shadow_expected_cited)}"
        )
    if c.noise_floor is not None:
        nf = c.noise_floor
        lines.append(
            f"noise floor: {nf.pairs - nf.identical} of {nf.pairs} packs differ "
            "between two packings of the same traffic with the live policy"
        )
    return "\n".join(lines)
