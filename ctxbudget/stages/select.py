"""The select stage: the evidence of a consolidated batch that earns its tokens, under the
class's caps and the hard budget, in rendering order.

:class:`EvidenceSelector` runs the conformal filter and the relevance floor, builds one
:class:`~ctxbudget.admission.Option` per remaining item (relevance, authority, shingles, query
terms, subject and names), and hands them to the admission loop
(:class:`~ctxbudget.admission.GreedyAdmission`: utility, gates, excerpts under pressure, the
leftover compressed), whose links to the next hops are :mod:`ctxbudget.hops` and whose excerpt
sizes are :mod:`ctxbudget.excerpts`. Every item not admitted gets exactly one drop reason.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, cast

from ctxbudget.admission import GreedyAdmission, Option, spaced_words
from ctxbudget.entities import (
    distinctive_names,
    links_for,
    passed_names,
    subject_alias,
    subject_links,
    subject_of,
)
from ctxbudget.envelope import SetDefaults, header_estimate
from ctxbudget.escaping import text_estimator
from ctxbudget.excerpts import excerpt_steps
from ctxbudget.extractive import SentenceAnalysis, StemMemo, analyse, query_stems
from ctxbudget.hops import hander, passer, receiver
from ctxbudget.memo import BoundedMemo
from ctxbudget.order import order_items
from ctxbudget.policy import ClassPolicy, Policy
from ctxbudget.query import comparison_options, troubleshooting_signals
from ctxbudget.ranking import best_ranked_member, primary_score_field
from ctxbudget.schemas import (
    CandidateFate,
    ConsolidatedBatch,
    ConsolidatedItem,
    DropReason,
    PackedBatch,
    Query,
    QueryClass,
)
from ctxbudget.text import ShingleCache, content_terms, fold_accents, sentences, words

if TYPE_CHECKING:  # annotations only: importing the filters loads the conformal package
    from ctxbudget.filters import EvidenceFilter


def _analysis_weight(analysis: SentenceAnalysis) -> int:
    return analysis.weight


def _padded(text: str) -> str:
    return " " + " ".join(words(text)) + " "


class EvidenceSelector:
    """Stage 3: consolidated batch in, packed batch (admitted items, in order) out."""

    def __init__(
        self,
        *,
        policy: Policy,
        evidence_filter: EvidenceFilter | None = None,
        analyses: BoundedMemo[str, SentenceAnalysis] | None = None,
        shingles: ShingleCache | None = None,
    ) -> None:
        self.policy = policy
        self.evidence_filter = evidence_filter
        #: Sentence analyses of passages (a pure function of the text), shared with the
        #: compress stage in one process: a passage that recurs is split and read once.
        self.analyses = analyses if analyses is not None else BoundedMemo()
        #: Word ids and shingle sets, shared with the consolidator in one process.
        self.shingles = shingles if shingles is not None else ShingleCache()
        #: Word stems, remembered for the sentence analyses this stage makes.
        self.stems = StemMemo()
        #: The estimate of a text's tokens as the envelope writes it (datamarked or not).
        self.estimate = text_estimator(policy.marker)

    def analyse(self, text: str, bounds: list[tuple[int, int]] | None = None) -> SentenceAnalysis:
        """The sentence analysis of ``text``, memoised in ``analyses``; ``bounds`` is
        ``sentences(text)`` when the caller has it."""
        return self.analyses.get_or_make(
            text, lambda: analyse(text, self.stems, bounds), _analysis_weight
        )

    def run(self, consolidated: ConsolidatedBatch) -> PackedBatch:
        """Admit the best items of one batch through the gates and the budget
        (:mod:`ctxbudget.admission`), in rendering order; every item left out gets one drop
        reason."""
        routed = consolidated.routed
        rules = self.policy.classes[routed.query_class]
        query = routed.batch.query
        dropped: list[CandidateFate] = []
        fates: dict[int, DropReason] = {}
        coverage = None
        items = consolidated.items
        eligible = list(range(len(items)))
        evidence_filter = self.evidence_filter
        if evidence_filter is not None and evidence_filter.applies_to(routed.query_class):
            coverage = evidence_filter.coverage(routed.query_class)
            bound = evidence_filter.bind(routed.batch)
            cands = routed.batch.candidates
            score_field = primary_score_field(cands[i] for i in routed.admissible)
            kept = []
            for i in eligible:
                # A family is judged by the copy retrieval ranked best.
                if bound.keep(
                    best_ranked_member(items[i], cands, score_field, self.policy),
                    routed.query_class,
                ):
                    kept.append(i)
                else:
                    fates[i] = "conformal"
            eligible = kept
        qterms = content_terms(query.text)
        # The names the question does not say: what an admitted passage hands to the next hop.
        names_of = (
            distinctive_names([items[i] for i in eligible], shared_only=True)
            if rules.weights.link > 0
            else None
        )
        options = self._build_options(
            items, eligible, qterms, query, routed.query_class, routed.flags, names_of
        )
        for o in options:
            if o.rel < rules.min_relevance:
                fates[o.item] = "relevance"
        options = [o for o in options if o.item not in fates]
        facets = self._facets(query, rules)
        run = GreedyAdmission(
            rules,
            routed.budget.evidence_budget,
            qterms,
            facets,
            # every item eligible: the excerpts' links read the same names
            self._stepper(items, qterms, rules, names_of if len(eligible) == len(items) else None),
            passer(self.analyse, qterms),
            receiver(self.analyse, qterms),
            hander(self.analyse, qterms, _padded(fold_accents(query.text))),
            compares=rules.option_coverage and bool(comparison_options(query.text)),
        )
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
            request_id=consolidated.request_id,
            consolidated=consolidated,
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
        flags: Sequence[CandidateFate] = (),
        names_of: Sequence[dict[str, int]] | None = None,
    ) -> list[Option]:
        scores = [s for s in (items[i].score for i in eligible) if s is not None]
        lo, hi = (min(scores), max(scores)) if scores else (0.0, 0.0)
        signals = troubleshooting_signals(query.text) if query_class == "troubleshooting" else None
        size = self.policy.near_duplicate.shingle_words
        all_grams = self.shingles.text_shingles_many([items[i].text for i in eligible], size)
        rules = self.policy.classes[cast(QueryClass, query_class)]
        defaults = SetDefaults.common([(it.source_id, it.version) for it in items])
        linking = rules.weights.link > 0
        flagged = frozenset(f.chunk_id for f in flags)
        # Accents folded: a question typed without them still names an accented title.
        qpadded = _padded(fold_accents(query.text)) if linking else ""
        nq = len(qterms)
        # Each query term with a space on either side, in a fixed order.
        qkeys = [(t, f" {t} ") for t in sorted(qterms)]
        flagged_auth = bool(flagged)
        out: list[Option] = []
        append = out.append
        for rank, (i, grams) in enumerate(zip(eligible, all_grams, strict=True)):
            it = items[i]
            text = it.text
            title = it.title
            spaced = spaced_words(f"{title} {text}" if title else text)
            # The query terms are terms, so the item's words hold exactly its terms of them.
            qhits = frozenset([t for t, key in qkeys if key in spaced])
            lexical = len(qhits) / nq if nq else 0.0
            score = it.score
            if score is None:
                rel = 0.5 * lexical
            else:
                norm = 1.0 if hi == lo else (score - lo) / (hi - lo)
                rel = 0.8 * norm + 0.2 * lexical
            match = 0.0
            if signals:
                signal_text = f"{title or ''} {it.version or ''} {text}".lower()
                match = sum(1 for s in signals if s in signal_text) / len(signals)
            head = header_estimate(it, defaults)
            text_est = self.estimate(text)
            subject = subject_of(title) if linking else None
            subject_key = f" {subject} " if subject is not None else ""
            alias = subject_alias(title) if linking else None
            alias_key = f" {alias} " if alias is not None else ""
            append(
                Option(
                    item=i,
                    rank=rank,
                    rel=rel,
                    # A passage the gate flagged (rendered as low trust) carries no authority.
                    auth=min(it.authority, 0.2)
                    if flagged_auth and not flagged.isdisjoint(it.chunk_ids)
                    else it.authority,
                    grams=grams,
                    est=head + text_est,
                    header_est=head,
                    match=match,
                    source=it.source_id,
                    text=text,
                    text_est=text_est,
                    spaced_words=spaced,
                    qhits=qhits,
                    subject=subject,
                    subject_key=subject_key,
                    alias_key=alias_key,
                    named=subject is not None
                    and (
                        fold_accents(subject_key) in qpadded
                        or (bool(alias_key) and fold_accents(alias_key) in qpadded)
                    ),
                    names=passed_names(names_of[rank], qpadded) if names_of is not None else {},
                )
            )
        named = {o.subject for o in out if o.named and o.subject is not None}
        if len(named) > 1:
            # "Cry Wolf" is not named by a question about "Never Cry Wolf".
            for o in out:
                if o.named and any(
                    f" {o.subject} " in f" {other} " and other != o.subject for other in named
                ):
                    o.named = False
        return out

    def _stepper(
        self,
        items: Sequence[ConsolidatedItem],
        qterms: frozenset[str],
        rules: ClassPolicy,
        names: Sequence[dict[str, int]] | None = None,
    ) -> Callable[[Option, int], tuple[int, ...]] | None:
        """How an option's excerpt sizes are worked out, given the fewest sentences an
        excerpt of it may keep (None: the class takes no excerpts)."""
        if not rules.compression or rules.excerpt_sentences <= 0:
            return None
        links = subject_links(items, names)
        qstems = query_stems(qterms)

        def steps(o: Option, wanted: int) -> tuple[int, ...]:
            text = o.text
            bounds = None
            if o.rough_sentences() <= wanted:
                # A text that looks short is split first (a long one goes straight to the
                # memoised analysis): with no more than ``wanted`` sentences, every excerpt
                # is smaller than ``wanted`` sentences whatever their ranking, so the item
                # enters whole and its sentences need not be read.
                bounds = sentences(text)
                if len(bounds) <= wanted:
                    return ()
            it = items[o.item]
            analysis = self.analyse(text, bounds)
            return excerpt_steps(it, qstems, links_for(it, links), analysis, self.estimate)

        return steps

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
