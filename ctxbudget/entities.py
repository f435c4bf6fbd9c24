"""Entity links between passages: what a passage is about, and the names a hop hands on.

A passage about an entity (its title's subject) or naming a distinctive name that few
passages of the batch share links the question on to another passage; selection follows
these links hop by hop, and compression keeps the sentences that name them. Months and
weekdays link nothing, nor a name every holder uses as a modifier ("a Canadian author"), nor
one held by too many items of the batch (a country, a word capitalised everywhere).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache
from itertools import chain

from ctxbudget.schemas import ConsolidatedItem
from ctxbudget.text import NAME_FINDER, STOPWORDS, fold_accents, name_phrases, words


@lru_cache(maxsize=4096)
def subject_of(title: str | None) -> str | None:
    """The entity a titled item is about: the title's words without a parenthetical
    qualifier ("Big Stone Gap (film)" -> "big stone gap"); None for stopword-only titles."""
    if not title:
        return None
    cut = title.find(" (")
    base = words(title[:cut] if cut > 0 else title)
    if not base or all(w in STOPWORDS for w in base) or len("".join(base)) < 3:
        return None
    return " ".join(base)


@lru_cache(maxsize=4096)
def subject_alias(title: str | None) -> str | None:
    """The short name of a title qualified after a comma, the way a text names the entity
    ("West Chicago, Illinois" -> "west chicago"); None without a comma qualifier."""
    if not title:
        return None
    cut = title.find(" (")
    base = title[:cut] if cut > 0 else title
    comma = base.find(", ")
    if comma <= 0:
        return None
    head = words(base[:comma])
    if not head or all(w in STOPWORDS for w in head) or len("".join(head)) < 3:
        return None
    return " ".join(head)


def subject_links(
    items: Sequence[ConsolidatedItem], names: Sequence[dict[str, int]] | None = None
) -> tuple[str, ...]:
    """What a sentence can name to carry the question on to another passage, as
    space-padded phrases, sorted and distinct: the entities the items are about (their
    titles) and the distinctive names at least two of them share (:func:`distinctive_names`).

    ``names``: ``distinctive_names(items, shared_only=True)`` when the caller has read them
    already (selection, when every item is eligible). Selection and compression of one batch
    ask this of the very same tuple of items (in one process): the answer for the last tuple
    asked is kept, by identity."""
    last = _LAST_LINKS.get("links")
    if last is not None and last[0] is items:
        return last[1]
    links = _subject_links(items, names)
    if type(items) is tuple:  # immutable, of frozen items: the same object, the same answer
        # holding the tuple keeps it alive, so its identity cannot pass to another one
        _LAST_LINKS["links"] = (items, links)
    return links


#: The last tuple of items :func:`subject_links` answered for, and its answer (one entry).
_LAST_LINKS: dict[str, tuple[tuple[ConsolidatedItem, ...], tuple[str, ...]]] = {}


def _subject_links(
    items: Sequence[ConsolidatedItem], names: Sequence[dict[str, int]] | None = None
) -> tuple[str, ...]:
    subjects = {subject_of(it.title) for it in items}
    subjects.discard(None)
    shared: set[str] = set()
    if names is None:
        names = distinctive_names(items, shared_only=True)
    for per_item in names:
        shared.update(n for n, k in per_item.items() if linkable(n, k))
    return tuple(sorted({f" {s} " for s in subjects if s is not None} | {f" {n} " for n in shared}))


def links_for(item: ConsolidatedItem, links: tuple[str, ...]) -> tuple[str, ...]:
    """``links`` without the item's own subject (a sentence naming it links nowhere)."""
    own = subject_of(item.title)
    if own is None:
        return links
    key = f" {own} "
    return tuple([x for x in links if x != key])


#: A name held by more than this share of a batch's items (and by more than
#: :data:`NAME_MIN_HOLDERS`) is too common to link two passages: a country, a city, a
#: word capitalised everywhere.
NAME_MAX_SHARE = 0.2
NAME_MIN_HOLDERS = 3
#: The entity link a shared name earns is strongest when at most this many items hold the
#: name, and shrinks with more holders (``RARE_NAME_HOLDERS / holders``).
RARE_NAME_HOLDERS = 2
#: A shared name's link at its strongest, as a share of the link of an item about an entity
#: the question or an admitted text names: the passage a text names by its title is the
#: surer next hop than one that shares a name with it.
SHARED_NAME_LINK = 0.75
#: The link of an item whose title holds a name an admitted text hands on ("History of
#: Mississippi" after "... in Hinds County, Mississippi"), when no other title holds it: as
#: strong as a title the text names whole; shared by the titles holding the name.
TITLE_NAME_LINK = 1.0


def name_holder_cap(n_items: int) -> int:
    """How many items of a batch of ``n_items`` may hold a name it still links by."""
    return max(NAME_MIN_HOLDERS, int(n_items * NAME_MAX_SHARE))


def distinctive_names(
    items: Sequence[ConsolidatedItem], *, shared_only: bool = False
) -> list[dict[str, int]]:
    """Per item, the names of its text (:func:`~ctxbudget.text.name_phrases`) that few items
    of the batch hold (document frequency within the batch at most :func:`name_holder_cap`),
    each with the number of articles holding it (:func:`holder_key`: the items of one title
    count once): what a hop passes on. A one-word name every
    holder uses as a modifier (:func:`modifier_only`: "a Canadian author") is left out. With
    ``shared_only``, only the names another item holds too."""
    found = [name_phrases(it.text) for it in items]
    holders = Counter(chain.from_iterable(found))
    low = 2 if shared_only else 1
    cap = name_holder_cap(len(items))
    # A one-word name every holder writes before a noun ("a Canadian author", "an English
    # cricketer") describes its subject: it names no entity a hop could pass on. Only the
    # names still in the running are read for it.
    kept = {n for n, k in holders.items() if low <= k <= cap}
    modifiers = {
        n
        for n in kept
        if " " not in n
        and n not in CALENDAR_WORDS
        and all(
            modifier_only(n, it.text) for it, names in zip(items, found, strict=True) if n in names
        )
    }
    kept -= modifiers
    keys = [holder_key(it, k) for k, it in enumerate(items)]
    if len(set(keys)) == len(keys):
        # every item its own article: a name's articles are its holders
        articles = {n: holders[n] for n in kept}
    else:
        of: dict[str, set[str]] = {}
        for key, names in zip(keys, found, strict=True):
            for n in names & kept:
                of.setdefault(n, set()).add(key)
        articles = {n: len(v) for n, v in of.items()}
    return [{n: articles[n] for n in sorted(names & kept)} for names in found]


def holder_key(item: ConsolidatedItem, index: int) -> str:
    """Whose a name is, for the strength of the link it makes: the passages of one titled
    article (one title: its sections, a syndicated copy) hold a name once, since the
    article names it once over its sections; an untitled item holds it by itself."""
    return f"t:{item.title}" if item.title else f"#{index}"


#: Capitalised words that name a time, not an entity: they link nothing.
CALENDAR_WORDS = frozenset(
    [
        "january", "february", "march", "april", "may", "june", "july", "august",
        "september", "october", "november", "december", "monday", "tuesday", "wednesday",
        "thursday", "friday", "saturday", "sunday",
    ]
)  # fmt: skip


#: One word character, and the blanks and word after a use (the patterns of the definition).
_WORD_CHAR = re.compile(r"\w")
_FOLLOWER = re.compile(r"[ \t]*(\w*)")


def word_uses(word: str, text: str) -> list[str]:
    r"""The uses in ``text`` of the capitalised one-word name ``word`` as a whole word, each
    given by the word that follows it on its line ("" when none does).

    By definition the matches of ``(?<!\w)Word(?!\w)[ 	]*(\w*)``, found left to right
    without overlap; found here with ``str.find`` and two precompiled patterns, so no
    pattern is compiled per word (compiling one cost more than the search)."""
    cap = word[:1].upper() + word[1:]
    if not cap:
        return [m.group(1) for m in _EMPTY_USES.finditer(text)]
    uses = []
    size = len(cap)
    at = text.find(cap)
    while at >= 0:
        end = at + size
        if (at and _WORD_CHAR.match(text, at - 1)) or _WORD_CHAR.match(text, end):
            at = text.find(cap, at + 1)
            continue
        follower = _FOLLOWER.match(text, end)
        assert follower is not None  # the pattern matches the empty string
        uses.append(follower.group(1))
        at = text.find(cap, follower.end())
    return uses


#: What an empty word's uses are by the definition (a name is never empty; kept exact).
_EMPTY_USES = re.compile(r"(?<!\w)(?!\w)[ \t]*(\w*)")


def modifier_only(word: str, text: str) -> bool:
    """Whether ``text`` uses the one-word name ``word`` (lower case) only as a modifier:
    every capitalised use comes straight before a lower-case content word ("Canadian
    author", "Gothic church"), never before punctuation, a function word ("Africa and") or
    another capitalised word. A demonym describes; a place or a person is named."""
    if NAME_FINDER is not None and word:
        found = NAME_FINDER.modifier_only(word[:1].upper() + word[1:], text)
        if found is not None:
            return found
    return modifier_only_reference(word, text)


def modifier_only_reference(word: str, text: str) -> bool:
    """:func:`modifier_only` in pure Python: the reference. A change here (or to
    :func:`word_uses`) needs the same change in ``native/src/latin.rs``;
    ``tests/property/test_native_paths.py`` compares the two."""
    uses = word_uses(word, text)
    return bool(uses) and all(w[:1].islower() and w not in STOPWORDS for w in uses)


def linkable(name: str, holders: int) -> bool:
    """Whether a distinctive name can link two passages: any name but a calendar word (a
    month or a weekday is capitalised, yet names a time, not an entity). How common a name
    is in the batch is judged by :func:`distinctive_names` (at most
    :func:`name_holder_cap` holders) and by the link's strength (fewer holders, a stronger
    link): a one-word name ("Hiroshima", "Stockholm") links as a longer one does."""
    del holders  # rarity is the link's strength, not a gate
    return name not in CALENDAR_WORDS


def passed_names(names: dict[str, int], qpadded: str) -> dict[str, int]:
    """The names an item can hand to the next hop: its linkable distinctive names that the
    question does not say (``qpadded``: the question's accent-folded words, space-padded)."""
    return {
        n: k for n, k in names.items() if f" {fold_accents(n)} " not in qpadded and linkable(n, k)
    }
