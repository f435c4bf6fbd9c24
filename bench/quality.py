"""Quality of packs on labelled traffic: budget, safety, redundancy and needed evidence kept.

Given batches (with ``labels``) and, per request id, what was admitted (from Pack v1 lines, or
from the naive assembler), compute per query and overall:

* packs over budget (``evidence_tokens > budget.evidence_budget``) and missing packs;
* cross-tenant and unauthorized (access label not held) passages admitted, read from the
  batch's own fields;
* injected passages admitted (generator truth; also those not marked ``quarantined``);
* families admitted twice: a syndicated copy and its original (or one chunk id) in two
  separate evidence items;
* older versions admitted (a candidate of the same document has a higher version), and
  overlapping chunks of one document left in separate items;
* the fraction of relevant passages admitted. A relevant chunk counts as admitted when it is
  the representative or a merged member of an admitted item (``evidence[].chunk_ids``).

The truth file is what the generator knew (``ctxbudget.testing.traffic.BatchTruth``); without it the
injected count is unknown and families reduce to repeated chunk ids.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ctxbudget.schemas import Candidate, CandidateBatch, Pack
from ctxbudget.testing.naive import NaiveResult, naive_assemble
from ctxbudget.testing.traffic import BatchTruth, read_truth, truth_path_for


@dataclass(frozen=True, slots=True)
class AdmittedItem:
    """One admitted evidence item: the representative chunk id first, then its members."""

    chunk_ids: tuple[str, ...]
    trust: str = "normal"


@dataclass(frozen=True, slots=True)
class Admission:
    """What one assembler admitted for one request."""

    request_id: str
    items: tuple[AdmittedItem, ...]
    evidence_tokens: int
    evidence_budget: int


def admission_from_pack(pack: Pack) -> Admission:
    return Admission(
        request_id=pack.request_id,
        items=tuple(AdmittedItem(item.chunk_ids, item.trust) for item in pack.evidence),
        evidence_tokens=pack.evidence_tokens,
        evidence_budget=pack.budget.evidence_budget,
    )


def admission_from_naive(result: NaiveResult) -> Admission:
    return Admission(
        request_id=result.request_id,
        items=tuple(AdmittedItem((cid,)) for cid in result.admitted_chunk_ids),
        evidence_tokens=result.evidence_tokens,
        evidence_budget=result.budget.evidence_budget,
    )


def read_batches(path: Path) -> list[CandidateBatch]:
    with path.open(encoding="utf-8") as f:
        return [CandidateBatch.model_validate_json(line) for line in f if line.strip()]


def read_pack_admissions(path: Path, *, lane: str | None = None) -> dict[str, Admission]:
    """Admissions from Pack v1 JSONL; one pack per request id (filter with ``lane``)."""
    out: dict[str, Admission] = {}
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            if not line.strip():
                continue
            pack = Pack.model_validate_json(line)
            if lane is not None and pack.lane != lane:
                continue
            if pack.request_id in out:
                raise ValueError(
                    f"{path}:{n}: a second pack for request {pack.request_id!r}; "
                    "pass --lane to choose live or shadow packs"
                )
            out[pack.request_id] = admission_from_pack(pack)
    return out


def naive_admissions(batches: Iterable[CandidateBatch]) -> dict[str, Admission]:
    return {b.request_id: admission_from_naive(naive_assemble(b)) for b in batches}


# ---------------------------------------------------------------- per query


@dataclass(frozen=True, slots=True)
class QueryQuality:
    """The figures of one request."""

    request_id: str
    candidates: int
    relevant: int
    relevant_admitted: int
    evidence_items: int
    evidence_tokens: int
    evidence_budget: int
    missing: bool
    over_budget: bool
    cross_tenant_admitted: int
    unauthorized_admitted: int
    injected_admitted: int | None
    injected_unquarantined: int | None
    families_admitted_twice: int
    older_versions_admitted: int
    overlaps_split: int
    unknown_ids: int

    @property
    def fraction(self) -> float | None:
        return self.relevant_admitted / self.relevant if self.relevant else None


def _version_key(version: str | None) -> int | None:
    return int(version) if version is not None and version.isdigit() else None


def _older_versions(
    admitted: Iterable[Candidate], candidates: Sequence[Candidate], as_of: str | None = None
) -> int:
    """Admitted candidates older than their document's newest version: the newest published
    on or before ``as_of`` when the question has one (a version published later is not yet
    the document's), else the newest of all."""
    by_doc: dict[str, list[Candidate]] = {}
    for c in candidates:
        by_doc.setdefault(c.doc_id, []).append(c)
    newest: dict[str, int] = {}
    for doc, group in by_doc.items():
        published = [
            c for c in group if as_of is None or c.published_at is None or c.published_at <= as_of
        ]
        keys = [v for c in (published or group) if (v := _version_key(c.version)) is not None]
        if keys:
            newest[doc] = max(keys)
    count = 0
    for c in admitted:
        v = _version_key(c.version)
        if v is not None and v < newest.get(c.doc_id, v):
            count += 1
    return count


def _overlaps(a: Candidate, b: Candidate) -> bool:
    if a.chunk_id == b.chunk_id or a.doc_id != b.doc_id or a.version != b.version:
        return False
    if a.span is None or b.span is None:
        return False
    return a.span.start < b.span.end and b.span.start < a.span.end


def _overlaps_split(items: Sequence[Sequence[Candidate]]) -> int:
    """Documents whose overlapping chunks ended up in two different items."""
    docs: set[str] = set()
    for i, first in enumerate(items):
        for second in items[i + 1 :]:
            docs.update(a.doc_id for a in first for b in second if _overlaps(a, b))
    return len(docs)


def _families_twice(items: Sequence[AdmittedItem], truth: BatchTruth | None) -> int:
    holders: dict[str, set[int]] = {}
    for index, item in enumerate(items):
        for cid in item.chunk_ids:
            family = truth.family_of(cid) if truth is not None else cid
            holders.setdefault(family, set()).add(index)
    return sum(1 for held in holders.values() if len(held) >= 2)


def evaluate_query(
    batch: CandidateBatch, admission: Admission | None, truth: BatchTruth | None
) -> QueryQuality:
    """The figures of one request (a missing admission admits nothing)."""
    by_id: dict[str, Candidate] = {}
    for c in batch.candidates:
        by_id.setdefault(c.chunk_id, c)
    items = admission.items if admission is not None else ()
    admitted_ids = sorted({cid for item in items for cid in item.chunk_ids})
    admitted = [by_id[cid] for cid in admitted_ids if cid in by_id]
    relevant = set(batch.labels.relevant_chunk_ids) if batch.labels is not None else set()
    principal = batch.principal
    cross = [c for c in admitted if c.tenant_id is not None and c.tenant_id != principal.tenant_id]
    crossing = {c.chunk_id for c in cross}
    label_denied = [
        c
        for c in admitted
        if c.chunk_id not in crossing
        and c.access_label is not None
        and c.access_label not in principal.access_labels
    ]
    injected: int | None = None
    unquarantined: int | None = None
    if truth is not None:
        injected = sum(1 for cid in admitted_ids if truth.is_injected(cid))
        unquarantined = len(
            {
                cid
                for item in items
                if item.trust != "quarantined"
                for cid in item.chunk_ids
                if truth.is_injected(cid)
            }
        )
    item_candidates = [[by_id[cid] for cid in item.chunk_ids if cid in by_id] for item in items]
    tokens = admission.evidence_tokens if admission is not None else 0
    budget = admission.evidence_budget if admission is not None else 0
    return QueryQuality(
        request_id=batch.request_id,
        candidates=len(batch.candidates),
        relevant=len(relevant),
        relevant_admitted=len(relevant.intersection(admitted_ids)),
        evidence_items=len(items),
        evidence_tokens=tokens,
        evidence_budget=budget,
        missing=admission is None,
        over_budget=admission is not None and tokens > budget,
        cross_tenant_admitted=len(cross),
        unauthorized_admitted=len(label_denied),
        injected_admitted=injected,
        injected_unquarantined=unquarantined,
        families_admitted_twice=_families_twice(items, truth),
        older_versions_admitted=_older_versions(admitted, batch.candidates, batch.query.as_of),
        overlaps_split=_overlaps_split(item_candidates),
        unknown_ids=sum(1 for cid in admitted_ids if cid not in by_id),
    )


# ---------------------------------------------------------------- report


@dataclass(frozen=True, slots=True)
class QualityReport:
    """Totals over all requests, and the per-query figures."""

    source: str
    batches: int
    missing_packs: int
    unmatched_packs: int
    over_budget: int
    cross_tenant_admitted: int
    unauthorized_admitted: int
    injected_admitted: int | None
    injected_unquarantined: int | None
    families_admitted_twice: int
    older_versions_admitted: int
    overlaps_split: int
    unknown_ids: int
    relevant_total: int
    relevant_admitted: int
    fraction_overall: float | None
    fraction_mean_per_query: float | None
    queries_with_all_relevant: int
    queries_with_relevant: int
    mean_evidence_tokens: float
    per_query: tuple[QueryQuality, ...]

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["per_query"] = [{**asdict(q), "fraction": _round(q.fraction)} for q in self.per_query]
        for key in ("fraction_overall", "fraction_mean_per_query", "mean_evidence_tokens"):
            data[key] = _round(data[key])
        return data


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _sum_optional(values: Iterable[int | None]) -> int | None:
    total = 0
    for v in values:
        if v is None:
            return None
        total += v
    return total


def evaluate(
    batches: Sequence[CandidateBatch],
    admissions: Mapping[str, Admission],
    truths: Mapping[str, BatchTruth] | None = None,
    *,
    source: str = "packs",
) -> QualityReport:
    """Evaluate admissions against labelled batches (batch order is kept)."""
    per_query = tuple(
        evaluate_query(
            b, admissions.get(b.request_id), truths.get(b.request_id) if truths else None
        )
        for b in batches
    )
    known = {b.request_id for b in batches}
    fractions = [q.fraction for q in per_query if q.fraction is not None]
    relevant_total = sum(q.relevant for q in per_query)
    relevant_admitted = sum(q.relevant_admitted for q in per_query)
    present = [q for q in per_query if not q.missing]
    return QualityReport(
        source=source,
        batches=len(per_query),
        missing_packs=sum(q.missing for q in per_query),
        unmatched_packs=sum(1 for rid in admissions if rid not in known),
        over_budget=sum(q.over_budget for q in per_query),
        cross_tenant_admitted=sum(q.cross_tenant_admitted for q in per_query),
        unauthorized_admitted=sum(q.unauthorized_admitted for q in per_query),
        injected_admitted=_sum_optional(q.injected_admitted for q in per_query),
        injected_unquarantined=_sum_optional(q.injected_unquarantined for q in per_query),
        families_admitted_twice=sum(q.families_admitted_twice for q in per_query),
        older_versions_admitted=sum(q.older_versions_admitted for q in per_query),
        overlaps_split=sum(q.overlaps_split for q in per_query),
        unknown_ids=sum(q.unknown_ids for q in per_query),
        relevant_total=relevant_total,
        relevant_admitted=relevant_admitted,
        fraction_overall=relevant_admitted / relevant_total if relevant_total else None,
        fraction_mean_per_query=sum(fractions) / len(fractions) if fractions else None,
        queries_with_all_relevant=sum(1 for f in fractions if f == 1.0),
        queries_with_relevant=len(fractions),
        mean_evidence_tokens=(
            sum(q.evidence_tokens for q in present) / len(present) if present else 0.0
        ),
        per_query=per_query,
    )


def _fmt(value: object) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)


_SUMMARY_ROWS: tuple[tuple[str, str], ...] = (
    ("batches", "batches"),
    ("missing packs", "missing_packs"),
    ("packs for unknown requests", "unmatched_packs"),
    ("packs over budget", "over_budget"),
    ("cross-tenant passages admitted", "cross_tenant_admitted"),
    ("unauthorized passages admitted", "unauthorized_admitted"),
    ("injected passages admitted", "injected_admitted"),
    ("  of which not quarantined", "injected_unquarantined"),
    ("families admitted twice", "families_admitted_twice"),
    ("older versions admitted", "older_versions_admitted"),
    ("overlapping chunks split", "overlaps_split"),
    ("admitted ids not in the batch", "unknown_ids"),
    ("relevant passages", "relevant_total"),
    ("relevant passages admitted", "relevant_admitted"),
    ("fraction admitted (overall)", "fraction_overall"),
    ("fraction admitted (mean per query)", "fraction_mean_per_query"),
    ("queries with every relevant admitted", "queries_with_all_relevant"),
    ("queries with relevant passages", "queries_with_relevant"),
    ("mean evidence tokens", "mean_evidence_tokens"),
)

_QUERY_COLUMNS: tuple[tuple[str, str], ...] = (
    ("cand", "candidates"),
    ("rel", "relevant"),
    ("adm", "relevant_admitted"),
    ("frac", "fraction"),
    ("items", "evidence_items"),
    ("tokens", "evidence_tokens"),
    ("budget", "evidence_budget"),
    ("xt", "cross_tenant_admitted"),
    ("acl", "unauthorized_admitted"),
    ("inj", "injected_admitted"),
    ("fam2", "families_admitted_twice"),
    ("old", "older_versions_admitted"),
    ("ovl", "overlaps_split"),
)


def format_table(report: QualityReport, *, per_query: bool = False) -> str:
    """A plain-text table of the totals, then optionally one row per query."""
    width = max(len(label) for label, _ in _SUMMARY_ROWS)
    lines = [f"quality of {report.source}", "-" * (width + 12)]
    lines += [f"{label:<{width}}  {_fmt(getattr(report, key))}" for label, key in _SUMMARY_ROWS]
    if per_query and report.per_query:
        rid_width = max(len("request_id"), *(len(q.request_id) for q in report.per_query))
        header = f"{'request_id':<{rid_width}}" + "".join(
            f" {name:>7}" for name, _ in _QUERY_COLUMNS
        )
        lines += ["", header, "-" * len(header)]
        for q in report.per_query:
            cells = "".join(f" {_fmt(getattr(q, key)):>7}" for _, key in _QUERY_COLUMNS)
            flag = "  MISSING" if q.missing else ("  OVER" if q.over_budget else "")
            lines.append(f"{q.request_id:<{rid_width}}{cells}{flag}")
    return "\n".join(lines)


# ---------------------------------------------------------------- command line


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench.quality",
        description="Evaluate packs (or the naive assembler) on labelled CandidateBatch traffic.",
    )
    parser.add_argument("--batches", type=Path, required=True, help="CandidateBatch v1 JSONL")
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--packs", type=Path, help="Pack v1 JSONL of the product")
    which.add_argument("--naive", action="store_true", help="evaluate the naive assembler")
    parser.add_argument(
        "--truth", type=Path, default=None, help="generator truth (default: BATCHES.truth.jsonl)"
    )
    parser.add_argument("--lane", choices=("live", "shadow"), default=None)
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--per-query", action="store_true", help="add one row per query")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        batches = read_batches(args.batches)
        truth_path = args.truth if args.truth is not None else truth_path_for(args.batches)
        truths: dict[str, BatchTruth] | None = None
        if truth_path.is_file():
            truths = read_truth(truth_path)
        else:
            print(f"warning: no truth file at {truth_path}; injected: n/a", file=sys.stderr)
        if args.naive:
            admissions = naive_admissions(batches)
            source = f"naive assembler on {args.batches}"
        else:
            admissions = read_pack_admissions(args.packs, lane=args.lane)
            source = f"packs {args.packs} on {args.batches}"
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    report = evaluate(batches, admissions, truths, source=source)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, ensure_ascii=False))
    else:
        print(format_table(report, per_query=args.per_query))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
