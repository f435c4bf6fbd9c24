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
from ctxbudget.extractive import RANKER, SentenceAnalysis, query_stems
from ctxbudget.text import fold_accents, name_phrases

if TYPE_CHECKING:  # annotations only: the admission imports this module
    from ctxbudget.admission import Option

#: An admitted text naming at most this many waiting titles bridges to each of them whole;
#: naming more, it shares the bridge among them (as a shared name is strongest with at most
#: as many holders).
BRIDGE_FANOUT = RARE_NAME_HOLDERS


def phrase_words(phrase: str) -> list[str] | None:
    """The words of ``phrase`` when it is words joined by single spaces (so ``f" {phrase} "``
    is found in a space-padded text only if each of them is one of its words), else None."""
    parts = phrase.split()
    return parts if parts and " ".join(parts) == phrase else None


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
    or subject it was reached by): scanned by the compiled path when it is loaded, else by
    :func:`hop_sentences_reference`."""
    keys = [f" {k} " for k in (o.linked_from, o.shared_name, o.title_name, o.subject) if k]
    if RANKER is not None:
        found = RANKER.hop_sentences(analysis.stems, analysis.padded, qstems, keys)
        if found is not None:
            return found
    return hop_sentences_reference(analysis, keys, qstems)


def hop_sentences_reference(
    analysis: SentenceAnalysis, keys: list[str], qstems: frozenset[str]
) -> list[str]:
    """:func:`hop_sentences` with the links' ``keys`` space-padded, in pure Python: the
    reference of ``SentenceRanker.hop_sentences`` (``native/src/rank.rs``;
    ``tests/property/test_native_rank.py`` compares the two)."""
    return [
        pad
        for st, pad in zip(analysis.stems, analysis.padded, strict=True)
        if not st.isdisjoint(qstems) or any(k in pad for k in keys)
    ]


def hop_text(analysis: SentenceAnalysis, o: Option, qstems: frozenset[str]) -> str:
    """The :func:`hop_sentences` of admitted ``o`` joined by line breaks: a space-padded
    name (words joined by single spaces) is in the result exactly when it is in one of
    them, since no sentence's padded words hold a line break."""
    return "\n".join(hop_sentences(analysis, o, qstems))


def passer(
    analyse: Callable[[str], SentenceAnalysis], qterms: frozenset[str]
) -> Callable[[Option], dict[str, int]]:
    """The names an admitted item hands on: those of its hop sentences
    (:func:`hop_sentences`); ``analyse`` gives a text's sentence analysis."""
    qstems = query_stems(qterms)

    def passes(o: Option) -> dict[str, int]:
        hop = hop_text(analyse(o.text), o, qstems)
        return {n: k for n, k in o.names.items() if f" {n} " in hop}

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
        hop = hop_text(analyse(o.text), o, qstems)
        return tuple(
            sorted(
                n
                for n in name_phrases(o.text)
                if f" {n} " in hop
                and n != o.subject
                and linkable(n, 0)
                and f" {fold_accents(n)} " not in qpadded
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
        if RANKER is not None:
            beside = RANKER.names_beside_query(found.stems, found.padded, qstems, key)
            if beside is not None:
                return beside
        return names_beside_query_reference(found, key, qstems)

    return receives


def names_beside_query_reference(
    analysis: SentenceAnalysis, key: str, qstems: frozenset[str]
) -> bool:
    """A sentence of ``analysis`` holds the space-padded ``key`` and a query stem: the
    reference of ``SentenceRanker.names_beside_query`` (``native/src/rank.rs``;
    ``tests/property/test_native_rank.py`` compares the two)."""
    return any(
        key in pad and not st.isdisjoint(qstems)
        for st, pad in zip(analysis.stems, analysis.padded, strict=True)
    )


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
        #: Per word, the options whose title words hold it (built when first needed:
        #: :meth:`_titled`).
        self.title_index: dict[str, list[Option]] | None = None
        #: The title words of every option, joined by line breaks, and the options they are
        #: of (made when first needed: :meth:`_title_holders`).
        self.joined_titles: tuple[Sequence[Option], str] | None = None

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
        elif not o.named and o.subject_key in r.spaced_words and own in name_phrases(r.text):
            # The name is the admitted item's title, which its own text may write otherwise
            # ('Benjamin Andrew "Ben" Stokes'): its holders are counted among titles and
            # texts, and too common a name links nothing.
            anywhere = self._text_holders(own)
            if anywhere <= name_holder_cap(len(self.options)):
                share_name(r, own, anywhere, o.standing)

    def _title_holders(self, name: str) -> int:
        """How many options' titles hold ``name`` (as whole words); counted once per name,
        in only the titles holding every word of it."""
        found = self.title_holders.get(name)
        if found is None:
            key = f" {name} "
            joined = self.joined_titles
            if joined is None or joined[0] is not self.options:
                text = "\n".join([r.subject_key for r in self.options])
                joined = self.joined_titles = (self.options, text)
            if key not in joined[1]:
                # no title holds it (a title's words are space-padded, without line breaks)
                self.title_holders[name] = 0
                return 0
            parts = phrase_words(name)
            found = self.title_holders[name] = sum(
                1
                for r in (self.options if parts is None else self._titled(parts))
                if key in r.subject_key
            )
        return found

    def _text_holders(self, name: str) -> int:
        """How many options' titles or texts hold ``name`` (as whole words); counted once
        per name."""
        found = self.holders.get(name)
        if found is None:
            key = f" {name} "
            found = self.holders[name] = sum(1 for r in self.options if key in r.spaced_words)
        return found

    def _titled(self, parts: list[str]) -> list[Option]:
        """The options whose title words hold every word of ``parts``: the only ones whose
        title can hold the phrase of them."""
        index = self.title_index
        if index is None:
            index = self.title_index = {}
            for r in self.options:
                for w in set(r.subject_key.split()):
                    index.setdefault(w, []).append(r)
        first = index.get(parts[0])
        if not first:
            return []
        for p in parts[1:]:
            more = index.get(p)
            if not more:
                return []
            if len(more) < len(first):
                first, more = more, first
            ids = {id(r) for r in more}
            first = [r for r in first if id(r) in ids]
        return first

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
