"""The admission loop of the select stage: the evidence that earns its tokens, under caps
and a hard budget.

Each round admits the remaining item with the highest utility

    relevance·w_r + novelty·w_n + authority·w_a + coverage gain·w_c + signal match·w_m
    + entity link·w_l

where novelty is one minus the share of the item's word shingles already in the pack,
coverage gain is the share of still-uncovered query terms (and facets: the options of a
comparison, or the batch's sub-questions) the item brings, and the entity link is 1 when the
item is about an entity (its title, without a parenthetical qualifier) that the question
names and no admitted item is about yet, or that an admitted item's text mentions while the
question does not: the bridge to the second hop of a multi-hop question (whole when that
text names at most :data:`~ctxbudget.hops.BRIDGE_FANOUT` of the waiting titles, shared among
them when it names more: a text listing ten countries leads to none of them surely). So a
lower-scored passage can win because it covers a missing part of the question, and a
high-scored repeat loses once its content is in.

Gates, in order: the conformal filter and the relevance floor (applied by the selector,
before the loop), novelty floor, per-source cap, item cap, then the budget. The per-source
cap is a preference, not a wall: an item over its source's cap waits until every other item
has had its turn, then competes for what is left (so a corpus that is one source packs like
one of many sources, and no source crowds out the others while they have evidence to give).

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from operator import attrgetter

from ctxbudget.entities import SHARED_NAME_LINK, TITLE_NAME_LINK
from ctxbudget.envelope import SET_OVERHEAD_TOKENS
from ctxbudget.excerpts import EXCERPT_SLACK, rough_sentence_count
from ctxbudget.hops import HopLinks
from ctxbudget.native import NATIVE
from ctxbudget.policy import ClassPolicy
from ctxbudget.schemas import Admission, DropReason
from ctxbudget.text import terms_of, word_skeleton, words

#: The least standing of an admitted item reached by a weak link
#: (``GreedyAdmission._standing``): a name its text hands on still names the next hop, only
#: less surely.
CHAIN_FLOOR = 0.5
#: The eligible passages whole cost at least this many times the room: a tight budget,
#: where an unlinked item enters as a shorter excerpt (``GreedyAdmission._unlinked``).
TIGHT_PRESSURE = 3.0
#: An item carrying at least this share of the query terms matches the question well.
WELL_MATCHED_SHARE = 0.5


@dataclass(slots=True)
class Option:
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
    #: Admission state, kept by :class:`GreedyAdmission`: the facets the item covers (their
    #: indices), how many of its query terms and of those facets are still uncovered, its
    #: utility and ``-rank`` (the order key), and whether an input of the utility changed
    #: since the utility was worked out.
    facet_ids: tuple[int, ...] = ()
    uncovered: int = 0
    open_facets: int = 0
    util: float = 0.0
    neg_rank: int = 0
    stale: bool = True
    #: The option's place in the admission's options (the row of :attr:`GreedyAdmission.shared`).
    slot: int = 0

    def padded_words(self) -> str:
        """The words of the title and text joined by single spaces, with a space on either
        side (a phrase of words is found in it as a phrase)."""
        return " " + " ".join(self.spaced_words.split()) + " "

    def rough_sentences(self) -> int:
        """About how many sentences the text has (abbreviations end sentences too)."""
        if self.sentence_count is None:
            self.sentence_count = rough_sentence_count(self.text)
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


def spaced_words(text: str) -> str:
    """The words of ``text`` with a space on either side of each: the lower-cased text with
    every character but letters and digits made a space when it is ASCII, else its words
    joined by single spaces; ``f" {w} " in spaced_words(text)`` exactly when
    ``w in words(text)``."""
    flat = word_skeleton(text)
    if flat is None:
        return " " + " ".join(words(text)) + " "
    return f" {flat} "


def shared_shingles_reference(sets: Sequence[frozenset[int]]) -> list[list[int]]:
    """How many shingles each two of ``sets`` share: ``len(a & b)`` in row ``a``, column
    ``b`` (a set's size on the diagonal). The reference of the compiled table
    (``native/src/novelty.rs``; ``tests/property/test_native_rank.py`` compares the two)."""
    return [[len(a & b) for b in sets] for a in sets]


def shared_shingles(sets: Sequence[frozenset[int]]) -> list[list[int]] | None:
    """:func:`shared_shingles_reference` counted by the compiled path in one pass over the
    sets, or None without it (or for ids beyond 64 bits): the admission loop then
    intersects only the sets it needs, as they are needed."""
    if NATIVE is None:
        return None
    return NATIVE.shared_shingles(list(sets))


class GreedyAdmission:
    """The greedy admission of one batch (mutable working state, never shared)."""

    def __init__(
        self,
        rules: ClassPolicy,
        budget: int,
        qterms: frozenset[str],
        facets: list[frozenset[str]],
        stepper: Callable[[Option, int], tuple[int, ...]] | None = None,
        passes: Callable[[Option], dict[str, int]] | None = None,
        receives: Callable[[Option, str], bool] | None = None,
        hands: Callable[[Option], tuple[str, ...]] | None = None,
        *,
        compares: bool = False,
    ) -> None:
        self.rules = rules
        self.stepper = stepper
        #: Whether a waiting option takes a shared name up as its hop (default: always).
        self.receives = receives
        #: The links admissions make to the waiting options, through the names an admitted
        #: option hands on (``passes``, default: all its names) and hands to the titles that
        #: hold them (``hands``, default: none).
        self.hops = HopLinks(passes, hands)
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
        self.taken: list[Option] = []
        self.budget_waiting: list[Option] = []
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
        self.by_term: dict[str, list[Option]] = {}
        self.by_facet: list[list[Option]] = [[] for _ in facets]
        self.by_subject: dict[str, list[Option]] = {}
        #: The shingles each two options share, by their ``slot`` (:func:`shared_shingles`,
        #: set by :meth:`_prepare`), or None: novelty then intersects their shingle sets.
        self.shared: list[list[int]] | None = None

    def uncovered_facets(self) -> list[frozenset[str]]:
        return [f for f, done in zip(self.facets, self.facet_done, strict=True) if not done]

    def _covers(self, o: Option, f: frozenset[str]) -> bool:
        """At least half of the facet's words are terms of the item."""
        spaced = o.spaced_words
        return len(terms_of([w for w in f if f" {w} " in spaced])) * 2 >= len(f)

    def _title_link(self, o: Option) -> bool:
        if o.subject is None or o.subject in self.subjects:
            return False
        return o.named or o.linked_from is not None

    def _title_named(self, o: Option) -> bool:
        """An admitted text hands on a name ``o``'s title holds, no admitted item is about
        ``o``'s subject yet, and the question is no comparison of options it names (their
        passages are its hops: a title a hop's text leads to is off the comparison)."""
        return (
            o.title_name is not None and not self.options_asked and o.subject not in self.subjects
        )

    def _hop_link(self, o: Option) -> bool:
        """Admitted evidence leads to ``o``: its text names ``o``'s subject or a name its
        title holds, or they share a distinctive name (the next hop of the chain)."""
        if o.shared_name is not None and (self.receives is None or self.receives(o, o.shared_name)):
            return True
        if self._title_named(o):
            return True
        subject = o.subject
        return o.linked_from is not None and subject is not None and subject not in self.subjects

    def _prepare(self, options: Sequence[Option]) -> None:
        """Set the options' admission state for an empty pack, and index them by query
        term, facet and subject."""
        self.hops.options = options
        for slot, o in enumerate(options):
            o.slot = slot
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
        if len(options) > 1:
            self.shared = shared_shingles([o.grams for o in options])

    def utility(self, o: Option) -> float:
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

    def _standing(self, o: Option) -> float:
        """How surely admitted ``o`` bears on the question (:attr:`Option.standing`)."""
        if o.uncovered or self._title_link(o):
            return 1.0
        reached = max(
            o.shared_link / SHARED_NAME_LINK if o.shared_name is not None else 0.0,
            o.title_link / TITLE_NAME_LINK if self._title_named(o) else 0.0,
        )
        if reached <= 0:
            return 1.0
        return CHAIN_FLOOR + (1.0 - CHAIN_FLOOR) * min(1.0, reached)

    def _basis(self, o: Option) -> tuple[str, ...]:
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

    def excerpt_est(self, o: Option, *, exact: bool = True) -> int | None:
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

    def _unlinked(self, o: Option) -> bool:
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

    def _excerpt_size(self, o: Option) -> int:
        """How many sentences an excerpt of ``o`` keeps now: one fewer than the class's
        when it is unlinked at a tight budget (:meth:`_unlinked`)."""
        return self.fewest if self._unlinked(o) else self.rules.excerpt_sentences

    def settle(self, o: Option) -> bool:
        """Rank the item's sentences and say whether its real cost still fits."""
        if self.excerpts and self.stepper is not None and o.steps is None:
            o.steps = self.stepper(o, self.fewest)
        return self.cost(o) <= self.remaining

    def cost(self, o: Option, *, exact: bool = True) -> int:
        if self.excerpts:
            est = self.excerpt_est(o, exact=exact)
            if est is not None:
                return est
        return o.est

    def admit_all(self, options: list[Option], fates: dict[int, DropReason]) -> None:
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
        later: list[Option] = []
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
        self, options: list[Option], fates: dict[int, DropReason], later: list[Option]
    ) -> None:
        deferred: list[Option] = []
        self.capped = True
        self._greedy(options, fates, deferred, later)
        if deferred:
            # The per-source cap yields: what waited behind it competes for what is left.
            self.capped = False
            self._greedy(deferred, fates, [], later)

    def _greedy(
        self,
        options: list[Option],
        fates: dict[int, DropReason],
        deferred: list[Option],
        later: list[Option],
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

    def _revive(self, later: list[Option], pool: list[Option]) -> None:
        """Move the items held behind the excerpt floor that an admission now leads to (the
        next hop) from ``later`` back to ``pool``: they compete at once, before the admitted
        excerpts grow back, in their utility order like the rest."""
        if not later:
            return
        linked = [self._hop_link(o) for o in later]
        if any(linked):
            pool.extend(o for o, hop in zip(later, linked, strict=True) if hop)
            later[:] = [o for o, hop in zip(later, linked, strict=True) if not hop]

    def _gate(self, o: Option) -> DropReason | None:
        if 1.0 - o.overlap < self.rules.min_novelty:
            return "novelty"
        if self.capped and self.sources.get(o.source, 0) >= self.rules.per_source_cap:
            return "source_cap"
        if len(self.admitted) >= self.rules.max_items:
            return "item_cap"
        if self.cost(o, exact=False) > self.remaining:
            return "budget"
        return None

    def _take(self, o: Option, waiting: tuple[Sequence[Option], ...], *, excerpt: bool) -> None:
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

    def _cover(self, o: Option) -> None:
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

    def _reach(self, o: Option, *groups: Sequence[Option]) -> None:
        """What admitted ``o`` does to the items still waiting (in ``groups``): they may be
        linked from it (:meth:`HopLinks.link_from`), and their novelty counts its shingles."""
        if self.linking:
            self.hops.link_from(o, groups)
        grams = o.grams
        shared = self.shared
        if grams and shared is not None:
            row = shared[o.slot]
            for waiting in groups:
                for r in waiting:
                    common = row[r.slot]
                    if common:
                        # the same share as below: len(r.grams & grams) / len(r.grams)
                        share = common / len(r.grams)
                        if share > r.overlap:
                            r.overlap = share
                            r.stale = True
        elif grams:
            for waiting in groups:
                for r in waiting:
                    theirs = r.grams
                    # Disjoint shingles add no overlap: no intersection is built for them.
                    if theirs and not grams.isdisjoint(theirs):
                        share = len(theirs & grams) / len(theirs)
                        if share > r.overlap:
                            r.overlap = share
                            r.stale = True

    def _record(
        self, o: Option, util: float, cost: int, compress_to: int | None, basis: tuple[str, ...]
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
