"""The admission stage: the evidence that earns its tokens, under caps and a hard budget.

Each round admits the remaining item with the highest utility

    relevance·w_r + novelty·w_n + authority·w_a + coverage gain·w_c + signal match·w_m
    + entity link·w_l

where novelty is one minus the share of the item's word shingles already in the pack,
coverage gain is the share of still-uncovered query terms (and facets: the options of a
comparison, or the batch's sub-questions) the item brings, and the entity link is 1 when the
item is about an entity (its title, without a parenthetical qualifier) that the question
names and no admitted item is about yet, or that an admitted item's text mentions while the
question does not: the bridge to the second hop of a multi-hop question (whole when that
text names at most :data:`BRIDGE_FANOUT` of the waiting titles, shared among them when it
names more: a text listing ten countries leads to none of them surely). So a lower-scored
passage can win because it covers a missing part of the question, and a high-scored repeat
loses once its content is in.

Gates, in order: the conformal filter (before everything), relevance floor, novelty floor,
per-source cap, item cap, then the budget. The per-source cap is a preference, not a wall:
an item over its source's cap waits until every other item has had its turn, then competes
for what is left (so a corpus that is one source packs like one of many sources, and no
source crowds out the others while they have evidence to give).

Under budget pressure (the eligible passages would not all fit whole) and when the class
allows excerpts, items are admitted as excerpts of their best sentences first (query terms,
protected facts, the opening sentence of a document), so more distinct evidence fits; the
room left then gives admitted excerpts their whole text back, best first. What does not fit
at all waits; the leftover budget then goes to the best waiting item in compressed form, and
the rest are dropped for ``budget``. At a tight budget (the eligible passages cost at least
:data:`TIGHT_PRESSURE` times the room), an item that neither links to the question or to
admitted evidence (named, bridged, sharing a name) nor carries half the query terms enters
as an excerpt of one sentence fewer (basis ``unlinked``): the room goes to the linked hops.
An admitted text also hands its names on to the titles that hold them as a part
("Mississippi" to "History of Mississippi"; basis ``title_name:<name>``): the fewer titles
hold the name the stronger the link, and none is made for a name too many passages hold, a
one-word modifier ("a Canadian author") or in a comparison of options the question names.
A name handed on by an item that itself entered only on a weak shared name or title name
(no query term, not named or bridged) links by less: the chain is as sure as its weakest
step, never below :data:`CHAIN_FLOOR` of the link.
Every item not admitted gets exactly one reason, and
every admission says why it earned its place (``Admission.basis``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import TYPE_CHECKING, cast

from ctxbudget.entities import (
    RARE_NAME_HOLDERS,
    SHARED_NAME_LINK,
    TITLE_NAME_LINK,
    distinctive_names,
    linkable,
    links_for,
    modifier_only,
    name_holder_cap,
    passed_names,
    subject_alias,
    subject_links,
    subject_of,
)
from ctxbudget.envelope import SET_OVERHEAD_TOKENS, SetDefaults, header_estimate
from ctxbudget.escaping import text_estimator
from ctxbudget.extractive import (
    SentenceAnalysis,
    StemMemo,
    analyse,
    query_stems,
    rank_stemmed,
)
from ctxbudget.memo import BoundedMemo
from ctxbudget.order import order_items
from ctxbudget.policy import ClassPolicy, Policy
from ctxbudget.query import comparison_options, troubleshooting_signals
from ctxbudget.ranking import best_ranked_member, primary_score_field
from ctxbudget.schemas import (
    Admission,
    CandidateFate,
    ConsolidatedBatch,
    ConsolidatedItem,
    DropReason,
    PackedBatch,
    Query,
    QueryClass,
)
from ctxbudget.text import (
    ShingleCache,
    content_terms,
    fold_accents,
    name_phrases,
    sentences,
    terms_of,
    word_skeleton,
    words,
)
from ctxbudget.tokens import estimate_tokens

if TYPE_CHECKING:  # annotations only: importing the filters loads the conformal package
    from ctxbudget.filters import EvidenceFilter


@dataclass(slots=True)
class _Option:
    item: int
    rank: int
    rel: float
    auth: float
    grams: frozenset[int]
    est: int
    header_est: int
    match: float
    source: str
    #: The item's text, and its estimated tokens (for a rough excerpt size).
    text: str = ""
    text_est: int = 0
    #: The words of the title and text, each with a space on either side (runs of spaces
    #: between them on ASCII text): ``f" {w} " in spaced_words`` says whether ``w`` is one of them.
    spaced_words: str = "  "
    overlap: float = 0.0
    #: ``terms & qterms``, the query terms the item carries (fixed for the batch).
    qhits: frozenset[str] = frozenset()
    #: The entity the item is about (its title's words), when it has a title.
    subject: str | None = None
    #: ``subject`` with a space on either side (for look-ups in padded text).
    subject_key: str = ""
    #: The short name of a title qualified after a comma (:func:`subject_alias`), padded
    #: the same way; empty when the title has none.
    alias_key: str = ""
    #: The question names ``subject``.
    named: bool = False
    #: The title of an admitted item whose text mentions ``subject`` (the bridge), if any.
    linked_from: str | None = None
    #: The strength of that bridge: whole when the admitted text names few of the waiting
    #: titles, shared when it names many (a text listing ten countries leads to none surely).
    bridge_link: float = 0.0
    #: The distinctive names of the item's text (:func:`distinctive_names`), and the one it
    #: shares with an admitted item (the hop that item leads to), if any.
    names: dict[str, int] = field(default_factory=dict)
    shared_name: str | None = None
    #: The link that name earns: fewer holders, a stronger link.
    shared_link: float = 0.0
    #: A name an admitted item hands on that this item's title holds as a part of it
    #: ("Mississippi" for "History of Mississippi"), and the link it earns: the fewer
    #: titles of the batch hold the name, the stronger.
    title_name: str | None = None
    title_link: float = 0.0
    #: How surely the item, once admitted, bears on the question (set on admission): 1 when
    #: it entered on the question itself (named, bridged, carrying query terms, or on its
    #: retrieval score alone), else between :data:`CHAIN_FLOOR` and 1 by the strength of
    #: the shared name or title name it was reached by, over the strongest such link. The
    #: names it hands on link by that share: a chain through a weak link is weaker.
    standing: float = 1.0
    #: Text tokens to ask the compressor for, keeping the best 1, 2, ... sentences (each
    #: smaller than the whole text); worked out when first needed, and left empty when the
    #: text has no more sentences than an excerpt keeps.
    steps: tuple[int, ...] | None = None
    #: Rough sentence count of the text; counted when first needed.
    sentence_count: int | None = None
    #: Admission state, kept by :class:`_Admission`: the facets the item covers (their
    #: indices), how many of its query terms and of those facets are still uncovered, its
    #: utility and ``-rank`` (the order key), and whether an input of the utility changed
    #: since the utility was worked out.
    facet_ids: tuple[int, ...] = ()
    uncovered: int = 0
    open_facets: int = 0
    util: float = 0.0
    neg_rank: int = 0
    stale: bool = True

    def padded_words(self) -> str:
        """The words of the title and text joined by single spaces, with a space on either
        side (a phrase of words is found in it as a phrase)."""
        return " " + " ".join(self.spaced_words.split()) + " "

    def rough_sentences(self) -> int:
        """About how many sentences the text has (abbreviations end sentences too)."""
        if self.sentence_count is None:
            self.sentence_count = len(_ROUGH_END.findall(self.text)) + 1
        return self.sentence_count

    def rough_excerpt(self, n: int) -> int | None:
        """About what an excerpt of ``n`` sentences costs, from the mean sentence length;
        None when the text has no more than ``n`` sentences."""
        count = self.rough_sentences()
        if count <= n:
            return None
        mean = self.text_est / count
        return self.header_est + math.ceil((2 + n * (mean + 1)) * EXCERPT_SLACK)


#: Best first: higher utility, then the better retrieval rank.
_BEST_FIRST = attrgetter("util", "neg_rank")


#: Sentence ends, roughly (abbreviations count too): for rough excerpt sizes only. A line
#: break, or ``[.!?]`` then closing quotes or brackets then a space; written to open with
#: one character class, which the regex engine scans for quickly.
_ROUGH_END = re.compile(r"[.!?\n](?:(?<=\n)|[\"')\]]*\s)")


def _analysis_weight(analysis: SentenceAnalysis) -> int:
    return analysis.weight


def _padded(text: str) -> str:
    return " " + " ".join(words(text)) + " "


def _spaced_words(text: str) -> str:
    """The words of ``text`` with a space on either side of each: the lower-cased text with
    every character but letters and digits made a space when it is ASCII, else its words
    joined by single spaces; ``f" {w} " in _spaced_words(text)`` exactly when
    ``w in words(text)``."""
    flat = word_skeleton(text)
    if flat is None:
        return " " + " ".join(words(text)) + " "
    return f" {flat} "


def _share_name(r: _Option, name: str, holders: int, standing: float = 1.0) -> None:
    """Link waiting ``r`` by ``name``, held by ``holders`` items, when that link is stronger
    than the one it has (the rarer the name, the stronger the link); ``standing`` is that of
    the admitted item handing the name on (:attr:`_Option.standing`)."""
    strength = SHARED_NAME_LINK * min(1.0, RARE_NAME_HOLDERS / holders) * standing
    if strength > r.shared_link:
        r.shared_name, r.shared_link = name, strength
        r.stale = True


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
        """Admit the best items of one batch through the gates and the budget (the module
        docstring), in rendering order; every item left out gets one drop reason."""
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
        options = self._build_options(
            items, eligible, qterms, query, routed.query_class, routed.flags
        )
        for o in options:
            if o.rel < rules.min_relevance:
                fates[o.item] = "relevance"
        options = [o for o in options if o.item not in fates]
        facets = self._facets(query, rules)
        run = _Admission(
            rules,
            routed.budget.evidence_budget,
            qterms,
            facets,
            self._stepper(items, qterms, rules),
            self._passer(qterms),
            self._receiver(qterms),
            self._hander(qterms, _padded(fold_accents(query.text))),
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
    ) -> list[_Option]:
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
        # The names the question does not say: what an admitted passage hands to the next hop.
        names_of = (
            distinctive_names([items[i] for i in eligible], shared_only=True) if linking else []
        )
        out: list[_Option] = []
        append = out.append
        for rank, (i, grams) in enumerate(zip(eligible, all_grams, strict=True)):
            it = items[i]
            text = it.text
            title = it.title
            spaced = _spaced_words(f"{title} {text}" if title else text)
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
                _Option(
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
                    names=passed_names(names_of[rank], qpadded) if linking else {},
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
        self, items: Sequence[ConsolidatedItem], qterms: frozenset[str], rules: ClassPolicy
    ) -> Callable[[_Option, int], tuple[int, ...]] | None:
        """How an option's excerpt sizes are worked out, given the fewest sentences an
        excerpt of it may keep (None: the class takes no excerpts)."""
        if not rules.compression or rules.excerpt_sentences <= 0:
            return None
        links = subject_links(items)
        qstems = query_stems(qterms)

        def steps(o: _Option, wanted: int) -> tuple[int, ...]:
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

    def _hop_sentences(self, o: _Option, qstems: frozenset[str]) -> list[str]:
        """The space-padded words of the sentences of admitted ``o`` that carry the question
        (a query term) or its own link (the name, title name or subject it was reached by)."""
        found = self.analyse(o.text)
        keys = [f" {k} " for k in (o.linked_from, o.shared_name, o.title_name, o.subject) if k]
        return [
            pad
            for st, pad in zip(found.stems, found.padded, strict=True)
            if not st.isdisjoint(qstems) or any(k in pad for k in keys)
        ]

    def _passer(self, qterms: frozenset[str]) -> Callable[[_Option], dict[str, int]]:
        """The names an admitted item hands on: those of its hop sentences
        (:meth:`_hop_sentences`)."""
        qstems = query_stems(qterms)

        def passes(o: _Option) -> dict[str, int]:
            hop = self._hop_sentences(o, qstems)
            return {n: k for n, k in o.names.items() if any(f" {n} " in pad for pad in hop)}

        return passes

    def _hander(self, qterms: frozenset[str], qpadded: str) -> Callable[[_Option], tuple[str, ...]]:
        """The names an admitted item hands to titles (sorted): every name of its hop
        sentences (:meth:`_hop_sentences`), however few texts share it, that the question
        (``qpadded``) does not say, but its own subject, calendar words and one-word names
        its text writes only as modifiers ("Indian literature": :func:`modifier_only`)."""
        qstems = query_stems(qterms)

        def hands(o: _Option) -> tuple[str, ...]:
            hop = self._hop_sentences(o, qstems)
            return tuple(
                sorted(
                    n
                    for n in name_phrases(o.text)
                    if n != o.subject
                    and linkable(n, 0)
                    and f" {fold_accents(n)} " not in qpadded
                    and any(f" {n} " in pad for pad in hop)
                    and (" " in n or not modifier_only(n, o.text))
                )
            )

        return hands

    def _receiver(self, qterms: frozenset[str]) -> Callable[[_Option, str], bool]:
        """Whether an item takes a shared name up as a hop: a sentence of its text names
        it beside a query term (the hop carries the question on)."""
        qstems = query_stems(qterms)

        def receives(o: _Option, name: str) -> bool:
            found = self.analyse(o.text)
            key = f" {name} "
            return any(
                key in pad and not st.isdisjoint(qstems)
                for st, pad in zip(found.stems, found.padded, strict=True)
            )

        return receives

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


#: The least standing of an admitted item reached by a weak link (``_Admission._standing``):
#: a name its text hands on still names the next hop, only less surely.
CHAIN_FLOOR = 0.5
#: An admitted text naming at most this many waiting titles bridges to each of them whole;
#: naming more, it shares the bridge among them (as a shared name is strongest with at most
#: as many holders).
BRIDGE_FANOUT = RARE_NAME_HOLDERS
#: The eligible passages whole cost at least this many times the room: a tight budget,
#: where an unlinked item enters as a shorter excerpt (``_Admission._unlinked``).
TIGHT_PRESSURE = 3.0
#: An item carrying at least this share of the query terms matches the question well.
WELL_MATCHED_SHARE = 0.5

#: Room asked of the compressor above the estimate of the sentences it should keep: the
#: exact count of short sentences runs above the character estimate.
EXCERPT_SLACK = 1.15


def excerpt_steps(
    item: ConsolidatedItem,
    qstems: frozenset[str],
    links: tuple[str, ...] = (),
    analysis: SentenceAnalysis | None = None,
    estimate: Callable[[str], int] = estimate_tokens,
) -> tuple[int, ...]:
    """Text tokens for excerpts of the item's best 1, 2, ... sentences (the compressor's
    ranking, with room for the gaps and :data:`EXCERPT_SLACK`), while smaller than the
    whole text. ``qstems`` are the query terms' stems (:func:`query_stems`), and
    ``analysis`` is ``analyse(item.text)`` when the caller has it; ``estimate`` estimates a
    text's tokens (:func:`text_estimator`)."""
    found = analysis if analysis is not None else analyse(item.text)
    bounds = found.bounds
    if len(bounds) < 2:
        return ()
    lead = item.span_start is None or item.span_start == 0
    _, order = rank_stemmed(found, qstems, lead=lead, links=links)
    whole = estimate(item.text)
    out: list[int] = []
    est = 2
    for i in order[:-1]:
        s, e = bounds[i]
        est += estimate(item.text[s:e]) + 1
        step = math.ceil(est * EXCERPT_SLACK)
        if step >= whole:
            break
        out.append(step)
    return tuple(out)


class _Admission:
    """The greedy admission of one batch (mutable working state, never shared)."""

    def __init__(
        self,
        rules: ClassPolicy,
        budget: int,
        qterms: frozenset[str],
        facets: list[frozenset[str]],
        stepper: Callable[[_Option, int], tuple[int, ...]] | None = None,
        passes: Callable[[_Option], dict[str, int]] | None = None,
        receives: Callable[[_Option, str], bool] | None = None,
        hands: Callable[[_Option], tuple[str, ...]] | None = None,
        *,
        compares: bool = False,
    ) -> None:
        self.rules = rules
        self.stepper = stepper
        #: The names an admitted option hands to the next hop (default: all its names).
        self.passes = passes
        #: Whether a waiting option takes a shared name up as its hop (default: always).
        self.receives = receives
        #: The names an admitted option hands to the titles that hold them (default: none).
        self.hands = hands
        #: Every option of the batch (set by :meth:`_prepare`), and per name handed to
        #: titles, how many titles and how many titles or texts hold it.
        self.options: Sequence[_Option] = ()
        self.holders: dict[str, tuple[int, int]] = {}
        #: The question compares options it names (the class covers them as facets).
        self.options_asked = compares
        self.remaining = budget - SET_OVERHEAD_TOKENS
        self.qterms = qterms
        self.nq = len(qterms)
        self.weights = rules.weights
        self.covered: set[str] = set()
        self.facets = facets
        self.facet_done = [False] * len(facets)
        self.sources: dict[str, int] = {}
        self.subjects: set[str] = set()
        self.admitted: list[Admission] = []
        self.taken: list[_Option] = []
        self.budget_waiting: list[_Option] = []
        #: Excerpts first: set by :meth:`admit_all` when the whole passages would not fit.
        self.excerpts = False
        #: The fewest sentences an excerpt keeps: the class's, or one fewer for unlinked
        #: items at a tight budget (set by :meth:`admit_all`).
        self.fewest = rules.excerpt_sentences
        #: The per-source cap applies (the first pass); the second pass lets it yield.
        self.capped = True
        #: Under pressure, items below this share of the first admitted item's utility wait
        #: until the admitted excerpts have grown (``excerpt_floor``).
        self.floor_share = 0.0
        #: Admitted items' text is searched for the subjects of the others (entity links).
        self.linking = rules.weights.link > 0
        #: The options carrying each query term, each facet and each subject: the ones whose
        #: utility an admission can change through them (filled by :meth:`_prepare`).
        self.by_term: dict[str, list[_Option]] = {}
        self.by_facet: list[list[_Option]] = [[] for _ in facets]
        self.by_subject: dict[str, list[_Option]] = {}

    def uncovered_facets(self) -> list[frozenset[str]]:
        return [f for f, done in zip(self.facets, self.facet_done, strict=True) if not done]

    def _covers(self, o: _Option, f: frozenset[str]) -> bool:
        """At least half of the facet's words are terms of the item."""
        spaced = o.spaced_words
        return len(terms_of([w for w in f if f" {w} " in spaced])) * 2 >= len(f)

    def _title_link(self, o: _Option) -> bool:
        if o.subject is None or o.subject in self.subjects:
            return False
        return o.named or o.linked_from is not None

    def _title_named(self, o: _Option) -> bool:
        """An admitted text hands on a name ``o``'s title holds, no admitted item is about
        ``o``'s subject yet, and the question is no comparison of options it names (their
        passages are its hops: a title a hop's text leads to is off the comparison)."""
        return (
            o.title_name is not None and not self.options_asked and o.subject not in self.subjects
        )

    def _hop_link(self, o: _Option) -> bool:
        """Admitted evidence leads to ``o``: its text names ``o``'s subject or a name its
        title holds, or they share a distinctive name (the next hop of the chain)."""
        if o.shared_name is not None and (self.receives is None or self.receives(o, o.shared_name)):
            return True
        if self._title_named(o):
            return True
        subject = o.subject
        return o.linked_from is not None and subject is not None and subject not in self.subjects

    def _prepare(self, options: Sequence[_Option]) -> None:
        """Set the options' admission state for an empty pack, and index them by query
        term, facet and subject."""
        self.options = options
        for o in options:
            if self.facets:
                o.facet_ids = tuple(k for k, f in enumerate(self.facets) if self._covers(o, f))
                o.open_facets = len(o.facet_ids)
                for k in o.facet_ids:
                    self.by_facet[k].append(o)
            o.uncovered = len(o.qhits)
            o.neg_rank = -o.rank
            o.stale = True
            for t in o.qhits:
                self.by_term.setdefault(t, []).append(o)
            if o.subject is not None:
                self.by_subject.setdefault(o.subject, []).append(o)

    def utility(self, o: _Option) -> float:
        """The option's utility now (the module docstring); worked out again only when one
        of its inputs changed since it was last worked out."""
        if o.stale:
            w = self.weights
            nq = self.nq
            gain = o.uncovered / nq if nq else 0.0
            facet_gain = o.open_facets if self.facets else 0
            subject = o.subject
            titled = subject is not None and subject not in self.subjects
            link = (
                1.0
                if titled and o.named
                else max(
                    o.bridge_link if titled and o.linked_from is not None else 0.0,
                    o.shared_link,
                    o.title_link if self._title_named(o) else 0.0,
                )
            )
            o.util = (
                w.relevance * o.rel
                + w.novelty * (1.0 - o.overlap)
                + w.authority * o.auth
                + w.coverage * (gain + facet_gain)
                + w.match * o.match
                + w.link * link
            )
            o.stale = False
        return o.util

    def _standing(self, o: _Option) -> float:
        """How surely admitted ``o`` bears on the question (:attr:`_Option.standing`)."""
        if o.uncovered or self._title_link(o):
            return 1.0
        reached = max(
            o.shared_link / SHARED_NAME_LINK if o.shared_name is not None else 0.0,
            o.title_link / TITLE_NAME_LINK if self._title_named(o) else 0.0,
        )
        if reached <= 0:
            return 1.0
        return CHAIN_FLOOR + (1.0 - CHAIN_FLOOR) * min(1.0, reached)

    def _basis(self, o: _Option) -> tuple[str, ...]:
        out = []
        if o.uncovered:
            out.append("query_terms")
        if o.open_facets:
            out.append("facet")
        if self._title_link(o):
            out.append("named_entity" if o.named else f"bridge:{o.linked_from}")
        if o.shared_name is not None:
            out.append(f"shared_name:{o.shared_name}")
        if self._title_named(o) and not self._title_link(o):
            out.append(f"title_name:{o.title_name}")
        return tuple(out)

    def excerpt_est(self, o: _Option, *, exact: bool = True) -> int | None:
        """Estimated tokens of the item as an excerpt, when one is smaller than the whole.

        With ``exact=False`` and before the item's sentences were ranked, a rough figure
        from its mean sentence length: the gates use it, so only the items that pass them
        are split and ranked (:meth:`settle` then checks the real excerpt fits)."""
        if self.stepper is None:
            return None
        n = self._excerpt_size(o)
        if o.steps is None:
            if not exact:
                return o.rough_excerpt(n)
            o.steps = self.stepper(o, self.fewest)
        return o.header_est + o.steps[n - 1] if len(o.steps) >= n else None

    def _unlinked(self, o: _Option) -> bool:
        """At a tight budget (:data:`TIGHT_PRESSURE`), ``o`` neither links to the question
        or admitted evidence (named, bridged, sharing a name) nor carries at least
        :data:`WELL_MATCHED_SHARE` of the query terms: it earns a shorter excerpt."""
        return (
            self.fewest < self.rules.excerpt_sentences
            and not o.named
            and o.linked_from is None
            and o.shared_name is None
            and o.title_name is None
            and len(o.qhits) < WELL_MATCHED_SHARE * self.nq
        )

    def _excerpt_size(self, o: _Option) -> int:
        """How many sentences an excerpt of ``o`` keeps now: one fewer than the class's
        when it is unlinked at a tight budget (:meth:`_unlinked`)."""
        return self.fewest if self._unlinked(o) else self.rules.excerpt_sentences

    def settle(self, o: _Option) -> bool:
        """Rank the item's sentences and say whether its real cost still fits."""
        if self.excerpts and self.stepper is not None and o.steps is None:
            o.steps = self.stepper(o, self.fewest)
        return self.cost(o) <= self.remaining

    def cost(self, o: _Option, *, exact: bool = True) -> int:
        if self.excerpts:
            est = self.excerpt_est(o, exact=exact)
            if est is not None:
                return est
        return o.est

    def admit_all(self, options: list[_Option], fates: dict[int, DropReason]) -> None:
        if self.remaining <= 0:
            self.budget_waiting.extend(options)
            return
        self._prepare(options)
        self.excerpts = (
            self.rules.compression
            and self.rules.excerpt_sentences > 0
            and sum(o.est for o in options) > self.remaining
        )
        if (
            self.excerpts
            and self.rules.excerpt_sentences > 1
            and sum(o.est for o in options) >= TIGHT_PRESSURE * self.remaining
        ):
            self.fewest = self.rules.excerpt_sentences - 1
        later: list[_Option] = []
        if self.excerpts and self.rules.excerpt_floor > 0:
            self.floor_share = self.rules.excerpt_floor
        self._round(options, fates, later)
        if self.excerpts and self.rules.expand_excerpts:
            self._expand()
        if later:
            # The weak items get what the strong ones' excerpts left.
            self.floor_share = 0.0
            self._round(later, fates, [])
            if self.excerpts and self.rules.expand_excerpts:
                self._expand()
        self._compress_leftover()

    def _round(
        self, options: list[_Option], fates: dict[int, DropReason], later: list[_Option]
    ) -> None:
        deferred: list[_Option] = []
        self.capped = True
        self._greedy(options, fates, deferred, later)
        if deferred:
            # The per-source cap yields: what waited behind it competes for what is left.
            self.capped = False
            self._greedy(deferred, fates, [], later)

    def _greedy(
        self,
        options: list[_Option],
        fates: dict[int, DropReason],
        deferred: list[_Option],
        later: list[_Option],
    ) -> None:
        # Each step takes the best remaining item (utility, then rank) through the gates.
        # Utilities and gate outcomes change only when an item is admitted, so between two
        # admissions the items come out in one sorted order: sort once per admission rather
        # than search the pool once per item (k sorts instead of n maxima over n items).
        # Only the utilities an admission changed are worked out again.
        pool = options
        while pool:
            for o in pool:
                if o.stale:
                    self.utility(o)
            ranked = sorted(pool, key=_BEST_FIRST, reverse=True)
            pool = []
            for at, best in enumerate(ranked):
                if (
                    self.floor_share > 0
                    and self.admitted
                    and best.util < self.floor_share * self.admitted[0].utility
                    and not self._hop_link(best)
                ):
                    # A weak item waits for what the grown excerpts leave; one that admitted
                    # evidence leads to (the next hop) does not: room is kept for it first.
                    later.append(best)
                    continue
                reason = self._gate(best)
                if reason is None and not self.settle(best):
                    reason = "budget"
                if reason is None:
                    pool = ranked[at + 1 :]
                    excerpt = self.excerpts and self.excerpt_est(best) is not None
                    # Items held back (source cap, excerpt floor) wait too: they are reached.
                    self._take(best, (pool, deferred, later), excerpt=excerpt)
                    self._revive(later, pool)
                    break
                if reason == "source_cap":
                    deferred.append(best)
                    continue
                if reason == "budget":
                    self.budget_waiting.append(best)
                    continue
                fates[best.item] = reason
                if reason == "item_cap":
                    for o in ranked[at + 1 :]:
                        fates[o.item] = "item_cap"
                    break

    def _revive(self, later: list[_Option], pool: list[_Option]) -> None:
        """Move the items held behind the excerpt floor that an admission now leads to (the
        next hop) from ``later`` back to ``pool``: they compete at once, before the admitted
        excerpts grow back, in their utility order like the rest."""
        if not later:
            return
        linked = [self._hop_link(o) for o in later]
        if any(linked):
            pool.extend(o for o, hop in zip(later, linked, strict=True) if hop)
            later[:] = [o for o, hop in zip(later, linked, strict=True) if not hop]

    def _gate(self, o: _Option) -> DropReason | None:
        if 1.0 - o.overlap < self.rules.min_novelty:
            return "novelty"
        if self.capped and self.sources.get(o.source, 0) >= self.rules.per_source_cap:
            return "source_cap"
        if len(self.admitted) >= self.rules.max_items:
            return "item_cap"
        if self.cost(o, exact=False) > self.remaining:
            return "budget"
        return None

    def _take(self, o: _Option, waiting: tuple[Sequence[_Option], ...], *, excerpt: bool) -> None:
        util = self.utility(o)
        basis = self._basis(o)
        if excerpt:
            est = self.excerpt_est(o)
            assert est is not None and o.steps is not None
            n = self._excerpt_size(o)
            cost, compress_to, basis = (
                est,
                o.steps[n - 1],
                (*basis, "excerpt")
                if n == self.rules.excerpt_sentences
                else (*basis, "excerpt", "unlinked"),
            )
        else:
            cost, compress_to = o.est, None
        o.standing = self._standing(o)
        self._record(o, util, cost, compress_to, basis)
        self.sources[o.source] = self.sources.get(o.source, 0) + 1
        self._cover(o)
        self._reach(o, *waiting, self.budget_waiting)

    def _cover(self, o: _Option) -> None:
        """Mark the query terms, facets and subject of admitted ``o`` as covered, and the
        options whose utility that changes as stale."""
        for t in o.qhits - self.covered:
            self.covered.add(t)
            for r in self.by_term[t]:
                r.uncovered -= 1
                r.stale = True
        for k in o.facet_ids:
            if not self.facet_done[k]:
                self.facet_done[k] = True
                for r in self.by_facet[k]:
                    r.open_facets -= 1
                    r.stale = True
        if o.subject is not None and o.subject not in self.subjects:
            self.subjects.add(o.subject)
            for r in self.by_subject[o.subject]:
                r.stale = True

    def _reach(self, o: _Option, *groups: Sequence[_Option]) -> None:
        """What admitted ``o`` does to the items still waiting (in ``groups``): they may be
        linked from it (:meth:`_link_from`), and their novelty counts its shingles."""
        if self.linking:
            self._link_from(o, groups)
        grams = o.grams
        if grams:
            for waiting in groups:
                for r in waiting:
                    theirs = r.grams
                    if theirs:
                        share = len(theirs & grams) / len(theirs)
                        if share > r.overlap:
                            r.overlap = share
                            r.stale = True

    def _link_from(self, o: _Option, groups: Sequence[Sequence[_Option]]) -> None:
        """Link the waiting items admitted ``o`` leads to: those whose subject its text
        mentions (the bridge: :meth:`_bridge_from`), and those that share a distinctive
        name it hands on (the next hop; the rarer the name, the stronger the link, the first
        name in sorted order among equals). ``o``'s own subject is handed on too: a waiting
        text that names the entity ``o`` is about is the next hop of the chain ("born in
        Lisbon" after the passage about Lisbon), as strong as a shared name with as many
        holders; it is tried after the names of ``o``'s text, so an equal link keeps the
        name found first. A waiting text naming the subject as a name of its own is linked
        by it even when no other text shares that name (``o``'s text may write it otherwise:
        'Benjamin Andrew "Ben" Stokes'), counting its holders among titles and texts; not
        when the question names the subject (its other passages are retrieved by the
        question itself)."""
        self._bridge_from(o, groups)
        passed = o.names
        if passed and self.passes is not None:
            passed = self.passes(o)
        own = o.subject
        for waiting in groups:
            for r in waiting:
                if r.names:
                    for n, k in passed.items():
                        if n in r.names:
                            _share_name(r, n, k, o.standing)
                if own is not None and own != r.subject:
                    self._hand_own(o, own, r)
        if self.hands is not None:
            self._hand_to_titles(o, groups)

    def _bridge_from(self, o: _Option, groups: Sequence[Sequence[_Option]]) -> None:
        """Bridge admitted ``o`` to the waiting items whose subject (or its alias) its text
        mentions, the question not naming it: whole when it mentions at most
        :data:`BRIDGE_FANOUT` such subjects, else that many over their number. A stronger
        bridge replaces a weaker one; among equals the first is kept."""
        padded = ""
        bridged = []
        for waiting in groups:
            for r in waiting:
                if r.subject is not None and not r.named:
                    padded = padded or o.padded_words()
                    if r.subject_key in padded or (r.alias_key and r.alias_key in padded):
                        bridged.append(r)
        if not bridged:
            return
        strength = min(1.0, BRIDGE_FANOUT / len({r.subject for r in bridged}))
        for r in bridged:
            if strength > r.bridge_link:
                r.linked_from, r.bridge_link = o.subject, strength
                r.stale = True

    def _hand_own(self, o: _Option, own: str, r: _Option) -> None:
        """Link waiting ``r`` by the subject ``own`` of admitted ``o`` when its text names it
        (:meth:`_link_from`)."""
        if own in r.names:
            _share_name(r, own, r.names[own], o.standing)
        elif not o.named and o.subject_key in r.spaced_words and own in name_phrases(r.text):
            # The name is the admitted item's title, which its own text may write otherwise
            # ('Benjamin Andrew "Ben" Stokes'): its holders are counted among titles and
            # texts, and too common a name links nothing.
            anywhere = self._name_holders(own)[1]
            if anywhere <= name_holder_cap(len(self.options)):
                _share_name(r, own, anywhere, o.standing)

    def _name_holders(self, name: str) -> tuple[int, int]:
        """How many options' titles hold ``name`` (as whole words), and how many options'
        titles or texts do; counted once per name."""
        found = self.holders.get(name)
        if found is None:
            key = f" {name} "
            titles = sum(1 for r in self.options if key in r.subject_key)
            anywhere = sum(1 for r in self.options if key in r.spaced_words)
            found = self.holders[name] = (titles, anywhere)
        return found

    def _hand_to_titles(self, o: _Option, groups: Sequence[Sequence[_Option]]) -> None:
        """Link the waiting items whose title holds, as a part of it, a name admitted ``o``
        hands on (:meth:`EvidenceSelector._hander`): "History of Mississippi" after a
        passage placing its subject in Mississippi. A name that too many items hold
        (:func:`name_holder_cap`) links nothing; the link is :data:`TITLE_NAME_LINK` over the
        number of titles holding the name, and among equals the name first in sorted order
        keeps it."""
        assert self.hands is not None
        cap = name_holder_cap(len(self.options))
        for n in self.hands(o):
            key = f" {n} "
            titles, anywhere = self._name_holders(n)
            if not titles or anywhere > cap:
                continue
            strength = TITLE_NAME_LINK / titles * o.standing
            for waiting in groups:
                for r in waiting:
                    if (
                        strength > r.title_link
                        and r.subject is not None
                        and r.subject != n
                        and r.subject != o.subject
                        and key in r.subject_key
                    ):
                        r.title_name, r.title_link = n, strength
                        r.stale = True

    def _record(
        self, o: _Option, util: float, cost: int, compress_to: int | None, basis: tuple[str, ...]
    ) -> None:
        self.admitted.append(
            Admission(
                item=o.item,
                rank=len(self.admitted),
                utility=round(util, 9),
                estimated_tokens=cost,
                compress_to=compress_to,
                basis=basis,
            )
        )
        self.taken.append(o)
        self.remaining -= cost

    def _expand(self) -> None:
        """Grow admitted excerpts one sentence at a time, in admission order, round after
        round while any grows; an excerpt that would reach its whole text gets it back.
        The rounds run on plain numbers; each admission that grew is copied once at the end."""
        targets = [adm.compress_to for adm in self.admitted]
        costs = [adm.estimated_tokens for adm in self.admitted]
        grown: set[int] = set()
        grew = True
        while grew:
            grew = False
            for k, o in enumerate(self.taken):
                current = targets[k]
                if current is None or o.steps is None:
                    continue
                level = o.steps.index(current) + 1 if current in o.steps else 0
                if level and level < len(o.steps):
                    target: int | None = o.steps[level]
                    cost = o.header_est + o.steps[level]
                else:
                    target, cost = None, o.est
                extra = cost - costs[k]
                if extra > self.remaining:
                    continue
                self.remaining -= extra
                targets[k], costs[k] = target, cost
                grown.add(k)
                grew = True
        for k in sorted(grown):
            adm = self.admitted[k]
            basis = (
                adm.basis
                if targets[k] is not None
                else tuple(b for b in adm.basis if b != "excerpt")
            )
            self.admitted[k] = adm.model_copy(
                update={"compress_to": targets[k], "estimated_tokens": costs[k], "basis": basis}
            )

    def _compress_leftover(self) -> None:
        """Give what is left to the best waiting item, compressed, if the policy allows."""
        if not self.rules.compression or len(self.admitted) >= self.rules.max_items:
            return
        for o in sorted(self.budget_waiting, key=lambda o: (-self.utility(o), o.rank)):
            target = self.remaining - o.header_est
            if target < self.rules.min_compressed_tokens:
                continue
            if 1.0 - o.overlap < self.rules.min_novelty:
                continue
            self.budget_waiting.remove(o)
            self._record(
                o, self.utility(o), o.header_est + target, target, (*self._basis(o), "leftover")
            )
            return
