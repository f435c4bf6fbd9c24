"""The links admitted evidence makes to the passages still waiting: the next hops of a
multi-hop question.

An admitted text bridges to the passages whose subject it mentions (whole when it mentions at
most :data:`BRIDGE_FANOUT` of the waiting titles, shared among them when it mentions more),
hands its distinctive names on to the passages that share them (the rarer the name, the
stronger the link), hands its own subject on to the texts that name it, and hands the names
of its hop sentences on to the titles that hold them as a part. Each link is scaled by the
standing of the item handing it on (:attr:`ctxbudget.admission.Option.standing`). What a
passage is about and which of its names count is :mod:`ctxbudget.entities`; how much a link
weighs in the utility is :mod:`ctxbudget.admission`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ctxbudget.entities import (
    RARE_NAME_HOLDERS,
    SHARED_NAME_LINK,
    TITLE_NAME_LINK,
    linkable,
    modifier_only,
    name_holder_cap,
)
from ctxbudget.extractive import SentenceAnalysis, query_stems
from ctxbudget.text import fold_accents, name_phrases

if TYPE_CHECKING:  # annotations only: the admission imports this module
    from ctxbudget.admission import Option

#: An admitted text naming at most this many waiting titles bridges to each of them whole;
#: naming more, it shares the bridge among them (as a shared name is strongest with at most
#: as many holders).
BRIDGE_FANOUT = RARE_NAME_HOLDERS


def phrase_words(phrase: str) -> list[str] | None:
    """The words of ``phrase`` when it is words joined by single spaces (so
    ``f" {phrase} " in padded`` needs each of them among the words of ``padded``), else None."""
    parts = phrase.split()
    return parts if parts and " ".join(parts) == phrase else None


def may_hold(r: Option, parts: list[str] | None) -> bool:
    """Whether ``r``'s words may hold the phrase of ``parts`` (:func:`phrase_words`): False
    only when a word of it is not one of ``r``'s, so the phrase cannot be in its text."""
    if parts is None:
        return True
    bag = r.word_set()
    for p in parts:
        if p not in bag:
            return False
    return True


def share_name(r: Option, name: str, holders: int, standing: float = 1.0) -> None:
    """Link waiting ``r`` by ``name``, held by ``holders`` items, when that link is stronger
    than the one it has (the rarer the name, the stronger the link); ``standing`` is that of
    the admitted item handing the name on (:attr:`ctxbudget.admission.Option.standing`)."""
    strength = SHARED_NAME_LINK * min(1.0, RARE_NAME_HOLDERS / holders) * standing
    if strength > r.shared_link:
        r.shared_name, r.shared_link = name, strength
        r.stale = True


def hop_sentences(analysis: SentenceAnalysis, o: Option, qstems: frozenset[str]) -> list[str]:
    """The space-padded words of the sentences of admitted ``o`` (``analysis`` is that of
    its text) that carry the question (a query term) or its own link (the name, title name
    or subject it was reached by)."""
    keys = [f" {k} " for k in (o.linked_from, o.shared_name, o.title_name, o.subject) if k]
    return [
        pad
        for st, pad in zip(analysis.stems, analysis.padded, strict=True)
        if not st.isdisjoint(qstems) or any(k in pad for k in keys)
    ]


def passer(
    analyse: Callable[[str], SentenceAnalysis], qterms: frozenset[str]
) -> Callable[[Option], dict[str, int]]:
    """The names an admitted item hands on: those of its hop sentences
    (:func:`hop_sentences`); ``analyse`` gives a text's sentence analysis."""
    qstems = query_stems(qterms)

    def passes(o: Option) -> dict[str, int]:
        hop = hop_sentences(analyse(o.text), o, qstems)
        return {n: k for n, k in o.names.items() if any(f" {n} " in pad for pad in hop)}

    return passes


def hander(
    analyse: Callable[[str], SentenceAnalysis], qterms: frozenset[str], qpadded: str
) -> Callable[[Option], tuple[str, ...]]:
    """The names an admitted item hands to titles (sorted): every name of its hop
    sentences (:func:`hop_sentences`), however few texts share it, that the question
    (``qpadded``) does not say, but its own subject, calendar words and one-word names
    its text writes only as modifiers ("Indian literature": :func:`modifier_only`)."""
    qstems = query_stems(qterms)

    def hands(o: Option) -> tuple[str, ...]:
        hop = hop_sentences(analyse(o.text), o, qstems)
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


def receiver(
    analyse: Callable[[str], SentenceAnalysis], qterms: frozenset[str]
) -> Callable[[Option, str], bool]:
    """Whether an item takes a shared name up as a hop: a sentence of its text names
    it beside a query term (the hop carries the question on)."""
    qstems = query_stems(qterms)

    def receives(o: Option, name: str) -> bool:
        found = analyse(o.text)
        key = f" {name} "
        return any(
            key in pad and not st.isdisjoint(qstems)
            for st, pad in zip(found.stems, found.padded, strict=True)
        )

    return receives


class HopLinks:
    """The links one batch's admissions make to its waiting options (working state of one
    admission run, never shared)."""

    def __init__(
        self,
        passes: Callable[[Option], dict[str, int]] | None = None,
        hands: Callable[[Option], tuple[str, ...]] | None = None,
    ) -> None:
        #: The names an admitted option hands to the next hop (default: all its names).
        self.passes = passes
        #: The names an admitted option hands to the titles that hold them (default: none).
        self.hands = hands
        #: Every option of the batch (set when the admission starts), and per name handed
        #: to titles, how many titles and how many titles or texts hold it (counted when
        #: first needed).
        self.options: Sequence[Option] = ()
        self.title_holders: dict[str, int] = {}
        self.holders: dict[str, int] = {}
        #: Per option (by id, the option kept alive beside it), its subject's words.
        self.subject_parts: dict[int, tuple[Option, list[str] | None]] = {}
        #: Per word, the options whose title words or whose words hold it (built when
        #: first needed: :meth:`_holding`).
        self.title_index: dict[str, list[Option]] | None = None
        self.word_index: dict[str, list[Option]] | None = None
        self.name_words: frozenset[str] | None = None

    def link_from(self, o: Option, groups: Sequence[Sequence[Option]]) -> None:
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
                            share_name(r, n, k, o.standing)
                if own is not None and own != r.subject:
                    self._hand_own(o, own, r)
        if self.hands is not None:
            self._hand_to_titles(o, groups)

    def _bridge_from(self, o: Option, groups: Sequence[Sequence[Option]]) -> None:
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

    def _hand_own(self, o: Option, own: str, r: Option) -> None:
        """Link waiting ``r`` by the subject ``own`` of admitted ``o`` when its text names it
        (:meth:`link_from`)."""
        if own in r.names:
            share_name(r, own, r.names[own], o.standing)
        elif (
            not o.named
            and may_hold(r, self._subject_words(o, own))
            and o.subject_key in r.spaced_words
            and own in name_phrases(r.text)
        ):
            # The name is the admitted item's title, which its own text may write otherwise
            # ('Benjamin Andrew "Ben" Stokes'): its holders are counted among titles and
            # texts, and too common a name links nothing.
            anywhere = self._text_holders(own)
            if anywhere <= name_holder_cap(len(self.options)):
                share_name(r, own, anywhere, o.standing)

    def _subject_words(self, o: Option, subject: str) -> list[str] | None:
        """:func:`phrase_words` of ``o``'s subject, split once per option."""
        found = self.subject_parts.get(id(o))
        if found is None:
            found = self.subject_parts[id(o)] = (o, phrase_words(subject))
        return found[1]

    def _title_holders(self, name: str) -> int:
        """How many options' titles hold ``name`` (as whole words); counted once per name,
        in only the titles holding every word of it."""
        found = self.title_holders.get(name)
        if found is None:
            key = f" {name} "
            parts = phrase_words(name)
            found = self.title_holders[name] = sum(
                1
                for r in (self.options if parts is None else self._holding(parts, True))
                if key in r.subject_key
            )
        return found

    def _text_holders(self, name: str) -> int:
        """How many options' titles or texts hold ``name`` (as whole words); counted once
        per name, in only the texts holding every word of it."""
        found = self.holders.get(name)
        if found is None:
            key = f" {name} "
            parts = phrase_words(name)
            found = self.holders[name] = sum(
                1
                for r in (self.options if parts is None else self._holding(parts, False))
                if key in r.spaced_words
            )
        return found

    def _name_words(self) -> frozenset[str]:
        """The words of the names of the batch's texts (:func:`name_phrases`)."""
        found = self.name_words
        if found is None:
            found = self.name_words = frozenset(
                w for r in self.options for n in name_phrases(r.text) for w in n.split()
            )
        return found

    def _holding(self, parts: list[str], titles: bool) -> list[Option]:
        """The options whose title words (``titles``) or words hold every word of
        ``parts``: the only ones whose title or text can hold the phrase of them."""
        index = self.title_index if titles else self.word_index
        if index is None:
            index = {}
            if titles:
                for r in self.options:
                    for w in set(r.subject_key.split()):
                        index.setdefault(w, []).append(r)
                self.title_index = index
            else:
                # Only the words of the batch's names are looked up: only they are indexed.
                vocab = self._name_words()
                for r in self.options:
                    for w in r.word_set() & vocab:
                        index.setdefault(w, []).append(r)
                self.word_index = index
        if not titles and not self._name_words().issuperset(parts):
            return [r for r in self.options if may_hold(r, parts)]
        lists = [index.get(p, []) for p in parts]
        lists.sort(key=len)
        first = lists[0]
        if len(lists) == 1 or not first:
            return first
        rest = [{id(r) for r in found} for found in lists[1:]]
        return [r for r in first if all(id(r) in ids for ids in rest)]

    def _hand_to_titles(self, o: Option, groups: Sequence[Sequence[Option]]) -> None:
        """Link the waiting items whose title holds, as a part of it, a name admitted ``o``
        hands on (:func:`hander`): "History of Mississippi" after a
        passage placing its subject in Mississippi. A name that too many items hold
        (:func:`name_holder_cap`) links nothing; the link is :data:`TITLE_NAME_LINK` over the
        number of titles holding the name, and among equals the name first in sorted order
        keeps it."""
        assert self.hands is not None
        cap = name_holder_cap(len(self.options))
        for n in self.hands(o):
            key = f" {n} "
            titles = self._title_holders(n)
            if not titles or self._text_holders(n) > cap:
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
