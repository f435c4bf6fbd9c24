"""The admission stage: the evidence that earns its tokens, under caps and a hard budget.

Each round admits the remaining item with the highest utility

    relevance·w_r + novelty·w_n + authority·w_a + coverage gain·w_c + signal match·w_m

where novelty is one minus the share of the item's word shingles already in the pack and
coverage gain is the share of still-uncovered query terms (and facets: the options of a
comparison, or the batch's sub-questions) the item brings. So a lower-scored passage can
win because it covers a missing part of the question, and a high-scored repeat loses once
its content is in. Gates, in order: the conformal filter (before everything), relevance
floor, novelty floor, per-source cap, item cap, then the budget. What does not fit whole
waits; the leftover budget then goes to the best waiting item in compressed form when the
policy allows, and the rest are dropped for ``budget``. Every item not admitted gets
exactly one reason.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from ctxbudget.envelope import SET_OVERHEAD_TOKENS
from ctxbudget.order import order_items
from ctxbudget.policy import ClassPolicy, Policy
from ctxbudget.schemas import (
    Admission,
    Candidate,
    CandidateBatch,
    CandidateFate,
    ConsolidatedBatch,
    ConsolidatedItem,
    Coverage,
    DropReason,
    PackedBatch,
    Query,
)
from ctxbudget.text import STOPWORDS, content_terms, text_shingles_many, words
from ctxbudget.tokens import estimate_tokens


class BoundEvidenceFilter(Protocol):
    def keep(self, candidate: Candidate, query_class: str) -> bool: ...


class EvidenceFilter(Protocol):
    """A pre-admission filter with a coverage statement (the conformal filter)."""

    def bind(self, batch: CandidateBatch) -> BoundEvidenceFilter: ...

    def applies_to(self, query_class: str) -> bool: ...

    def coverage(self, query_class: str) -> Coverage | None: ...


@dataclass(slots=True)
class _Option:
    item: int
    rank: int
    rel: float
    auth: float
    terms: frozenset[str]
    grams: frozenset[int]
    est: int
    header_est: int
    match: float
    source: str
    overlap: float = 0.0
    #: ``terms & qterms``, the query terms the item carries (fixed for the batch).
    qhits: frozenset[str] = frozenset()


_CONNECTOR = re.compile(r"\s(?:vs\.?|versus|compared (?:to|with)|or|and|with|to)\s", re.I)
_COMPARE_LEAD = re.compile(r"\b(?:compare|comparing|difference(?:s)? between|between)\b", re.I)
_SIGNAL = re.compile(r"\b[a-z]*\d[\w.\-]*\b|\b0x[0-9a-f]+\b", re.I)
_ENVIRONMENT = frozenset(
    [
        "linux",
        "windows",
        "macos",
        "mac",
        "ubuntu",
        "debian",
        "centos",
        "rhel",
        "alpine",
        "android",
        "ios",
        "docker",
        "kubernetes",
        "k8s",
        "aws",
        "gcp",
        "azure",
        "chrome",
        "firefox",
        "safari",
        "python",
        "java",
        "node",
        "arm64",
        "x86",
        "amd64",
    ]
)


def comparison_options(text: str) -> list[frozenset[str]]:
    """The options a comparison names ("X vs Y", "compare X and Y", "X or Y")."""
    m = None
    for cand in _CONNECTOR.finditer(text):
        word = cand.group(0).strip().lower()
        if word in {"and", "with", "to"} and not _COMPARE_LEAD.search(text[: cand.start()]):
            continue
        m = cand
        break
    if m is None:
        return []
    left = [w for w in words(text[: m.start()]) if w not in STOPWORDS and w not in _LEAD_WORDS]
    right = [w for w in words(text[m.end() :]) if w not in STOPWORDS and w not in _LEAD_WORDS]
    a, b = frozenset(left[-2:]), frozenset(right[:2])
    # Words both options share ("plan" in "Basic plan vs Pro plan") tell them apart from nothing.
    a, b = a - b, b - a
    if not a or not b:
        return []
    return [a, b]


_LEAD_WORDS = frozenset(
    [
        "compare",
        "comparing",
        "comparison",
        "difference",
        "differences",
        "between",
        "which",
        "better",
        "worse",
        "faster",
        "cheaper",
        "versus",
        "vs",
    ]
)


def troubleshooting_signals(text: str) -> frozenset[str]:
    found = {m.group(0).lower() for m in _SIGNAL.finditer(text)}
    found.update(w for w in words(text) if w in _ENVIRONMENT)
    return frozenset(found)


def header_estimate(item: ConsolidatedItem) -> int:
    """Tokens of an item's envelope header and closing tag (ids tokenize densely)."""
    chars = 50 + len(item.source_id) + len(item.version or "") + len(item.title or "")
    if len(item.pieces) > 1:
        chars += sum(len(p.chunk_id) + 12 for p in item.pieces)
    return math.ceil(chars / 2.5) + 4


class EvidenceSelector:
    """Stage 3: consolidated batch in, packed batch (admitted items, in order) out."""

    def __init__(self, *, policy: Policy, evidence_filter: EvidenceFilter | None = None) -> None:
        self.policy = policy
        self.evidence_filter = evidence_filter

    def run(self, cb: ConsolidatedBatch) -> PackedBatch:
        routed = cb.routed
        rules = self.policy.classes[routed.query_class]
        query = routed.batch.query
        dropped: list[CandidateFate] = []
        fates: dict[int, DropReason] = {}
        coverage = None
        items = cb.items
        eligible = list(range(len(items)))
        ef = self.evidence_filter
        if ef is not None and ef.applies_to(routed.query_class):
            coverage = ef.coverage(routed.query_class)
            bound = ef.bind(routed.batch)
            cands = routed.batch.candidates
            kept = []
            for i in eligible:
                # A family is judged by its representative, the copy retrieval ranked best.
                if bound.keep(cands[items[i].members[0]], routed.query_class):
                    kept.append(i)
                else:
                    fates[i] = "conformal"
            eligible = kept
        qterms = content_terms(query.text)
        options = self._build_options(items, eligible, qterms, query, routed.query_class)
        for o in options:
            if o.rel < rules.min_relevance:
                fates[o.item] = "relevance"
        options = [o for o in options if o.item not in fates]
        facets = self._facets(query, rules)
        run = _Admission(rules, routed.budget.evidence_budget, qterms, facets)
        run.admit_all(options, fates)
        budget_dropped = [o.item for o in run.budget_waiting]
        for i in budget_dropped:
            fates[i] = "budget"
        if coverage is not None and any(fates.get(i) == "budget" for i in eligible):
            coverage = coverage.model_copy(
                update={"guaranteed": False, "reason": "budget forced out passages the filter kept"}
            )
        for i in sorted(fates):
            # The chunks that make up the item's text share its fate; family copies already
            # carry theirs (duplicate / near_duplicate) from consolidation.
            for chunk_id in items[i].chunk_ids[: items[i].unit_size]:
                dropped.append(CandidateFate(chunk_id=chunk_id, reason=fates[i]))
        ranked = [a.item for a in run.admitted]
        order = order_items(ranked, items, rules.ordering, versions_adjacent=routed.history)
        by_item = {a.item: a for a in run.admitted}
        return PackedBatch(
            request_id=cb.request_id,
            consolidated=cb,
            admitted=tuple(by_item[i] for i in order),
            budget_dropped=tuple(budget_dropped),
            dropped=tuple(dropped),
            coverage=coverage,
            uncovered=tuple(sorted(" ".join(sorted(f)) for f in run.uncovered_facets())),
        )

    def _build_options(
        self,
        items: Sequence[ConsolidatedItem],
        eligible: list[int],
        qterms: frozenset[str],
        query: Query,
        query_class: str,
    ) -> list[_Option]:
        scores = [s for s in (items[i].score for i in eligible) if s is not None]
        lo, hi = (min(scores), max(scores)) if scores else (0.0, 0.0)
        signals = troubleshooting_signals(query.text) if query_class == "troubleshooting" else None
        size = self.policy.near_duplicate.shingle_words
        all_grams = text_shingles_many([items[i].text for i in eligible], size)
        out = []
        for rank, (i, grams) in enumerate(zip(eligible, all_grams, strict=True)):
            it = items[i]
            terms = content_terms(it.text if not it.title else f"{it.title} {it.text}")
            qhits = terms & qterms
            lexical = len(qhits) / len(qterms) if qterms else 0.0
            score = it.score
            if score is None:
                rel = 0.5 * lexical
            else:
                norm = 1.0 if hi == lo else (score - lo) / (hi - lo)
                rel = 0.8 * norm + 0.2 * lexical
            match = 0.0
            if signals:
                hay = f"{it.title or ''} {it.version or ''} {it.text}".lower()
                match = sum(1 for s in signals if s in hay) / len(signals)
            head = header_estimate(it)
            out.append(
                _Option(
                    item=i,
                    rank=rank,
                    rel=rel,
                    auth=it.authority,
                    terms=terms,
                    grams=grams,
                    est=head + estimate_tokens(it.text),
                    header_est=head,
                    match=match,
                    source=it.source_id,
                    qhits=qhits,
                )
            )
        return out

    @staticmethod
    def _facets(query: Query, rules: ClassPolicy) -> list[frozenset[str]]:
        facets: list[frozenset[str]] = []
        if rules.option_coverage:
            facets.extend(comparison_options(query.text))
        for sq in query.sub_questions or ():
            terms = content_terms(sq)
            if terms:
                facets.append(terms)
        return [f for f in facets if f]


class _Admission:
    """The greedy admission of one batch (mutable working state, never shared)."""

    def __init__(
        self, rules: ClassPolicy, budget: int, qterms: frozenset[str], facets: list[frozenset[str]]
    ) -> None:
        self.rules = rules
        self.remaining = budget - SET_OVERHEAD_TOKENS
        self.qterms = qterms
        self.covered: set[str] = set()
        self.facets = facets
        self.facet_done = [False] * len(facets)
        self.sources: dict[str, int] = {}
        self.admitted: list[Admission] = []
        self.budget_waiting: list[_Option] = []

    def uncovered_facets(self) -> list[frozenset[str]]:
        return [f for f, done in zip(self.facets, self.facet_done, strict=True) if not done]

    def _covers(self, o: _Option, f: frozenset[str]) -> bool:
        return len(o.terms & f) * 2 >= len(f)

    def utility(self, o: _Option) -> float:
        w = self.rules.weights
        gain = len(o.qhits - self.covered) / len(self.qterms) if self.qterms else 0.0
        facet_gain = (
            sum(
                1
                for f, done in zip(self.facets, self.facet_done, strict=True)
                if not done and self._covers(o, f)
            )
            if self.facets
            else 0
        )
        return (
            w.relevance * o.rel
            + w.novelty * (1.0 - o.overlap)
            + w.authority * o.auth
            + w.coverage * (gain + facet_gain)
            + w.match * o.match
        )

    def admit_all(self, options: list[_Option], fates: dict[int, DropReason]) -> None:
        if self.remaining <= 0:
            self.budget_waiting.extend(options)
            return
        # Each step takes the best remaining item (utility, then rank) through the gates.
        # Utilities and gate outcomes change only when an item is admitted, so between two
        # admissions the items come out in one sorted order: sort once per admission rather
        # than search the pool once per item (k sorts instead of n maxima over n items).
        pool = list(options)
        while pool:
            utility = self.utility
            ranked = sorted(pool, key=lambda o: (utility(o), -o.rank), reverse=True)
            pool = []
            for at, best in enumerate(ranked):
                reason = self._gate(best)
                if reason is None:
                    pool = ranked[at + 1 :]
                    self._take(best, pool, compress_to=None)
                    break
                if reason == "budget":
                    self.budget_waiting.append(best)
                    continue
                fates[best.item] = reason
                if reason == "item_cap":
                    for o in ranked[at + 1 :]:
                        fates[o.item] = "item_cap"
                    break
        self._compress_leftover()

    def _gate(self, o: _Option) -> DropReason | None:
        if 1.0 - o.overlap < self.rules.min_novelty:
            return "novelty"
        if self.sources.get(o.source, 0) >= self.rules.per_source_cap:
            return "source_cap"
        if len(self.admitted) >= self.rules.max_items:
            return "item_cap"
        if o.est > self.remaining:
            return "budget"
        return None

    def _take(self, o: _Option, pool: list[_Option], *, compress_to: int | None) -> None:
        util = self.utility(o)
        cost = o.est if compress_to is None else o.header_est + compress_to
        self.admitted.append(
            Admission(
                item=o.item,
                rank=len(self.admitted),
                utility=round(util, 9),
                estimated_tokens=cost,
                compress_to=compress_to,
            )
        )
        self.remaining -= cost
        self.sources[o.source] = self.sources.get(o.source, 0) + 1
        self.covered.update(o.terms & self.qterms)
        for k, f in enumerate(self.facets):
            if not self.facet_done[k] and self._covers(o, f):
                self.facet_done[k] = True
        if o.grams:
            for r in (*pool, *self.budget_waiting):
                if r.grams:
                    r.overlap = max(r.overlap, len(r.grams & o.grams) / len(r.grams))

    def _compress_leftover(self) -> None:
        """Give what is left to the best waiting item, compressed, if the policy allows."""
        if not self.rules.compression or len(self.admitted) >= self.rules.max_items:
            return
        for o in sorted(self.budget_waiting, key=lambda o: (-self.utility(o), o.rank)):
            target = self.remaining - o.header_est
            if target < self.rules.min_compressed_tokens:
                continue
            if (
                1.0 - o.overlap < self.rules.min_novelty
                or self.sources.get(o.source, 0) >= self.rules.per_source_cap
            ):
                continue
            self.budget_waiting.remove(o)
            self._take(o, [], compress_to=target)
            return
