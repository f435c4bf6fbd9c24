"""The consolidation stage: one item per source family, every merged chunk_id recorded.

In order, on the candidates the router let through:

1. identical ``chunk_id``s collapse into one (``duplicate``);
2. an older version of a document beside a newer one is dropped (``stale_version``) unless
   the query asks about history; with ``query.as_of`` the newest version published on or
   before that date wins; every chunk of the winning version stays (chunks of one version
   are parts of the document, whatever dates they carry);
3. overlapping or touching spans of one document merge into one text in document order,
   and children of one parent are grouped;
4. exact duplicates after normalisation and near-duplicates (word-shingle Jaccard or
   containment; cosine when every candidate carries an embedding) form one source family
   (``duplicate`` / ``near_duplicate`` for the copies left out). The family is shown as its
   canonical copy: the most authoritative, then the cheapest in bytes (no "Reposted from
   ..." boilerplate, curly quotes or doubled spaces), then the best-ranked, among the copies
   that keep :data:`CANONICAL_KEEP` of the best-ranked copy's shingles (a truncated copy
   never represents its family). The family keeps its best copy's score and rank.
   Two passages from distinct sources that both reach the policy's independent-authority
   level are kept apart: they are confirmations, not copies. Passages with the same shingle
   set are grouped by hash first and only one of each group enters the pairwise work, so
   identical copies cost linear time; the pairwise work left is counted before it is done
   and held to ``max_pair_checks`` (:class:`~ctxbudget.errors.LimitError` beyond).

Every decision is independent of the input order: candidates are first put in a canonical
order, and every tie is broken on explicit keys.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ctxbudget.codec import encode
from ctxbudget.cut import candidates_as_cut
from ctxbudget.limits import DEFAULT_MAX_PAIR_CHECKS
from ctxbudget.near_duplicates import (
    DisjointSets,
    cosine_pairs,
    near_duplicate_pairs,
    pair_work_bound,
    table_pairs,
)
from ctxbudget.policy import Policy
from ctxbudget.ranking import candidate_score, primary_score_field, rank_key
from ctxbudget.schemas import (
    Candidate,
    CandidateFate,
    ConsolidatedBatch,
    ConsolidatedItem,
    DropReason,
    Piece,
    RoutedBatch,
)
from ctxbudget.text import ShingleCache, containment, index_sets, jaccard

PIECE_SEPARATOR = "\n"
#: Shingle containment at or above which a passage is a verbatim copy of another.
VERBATIM = 0.95
#: A copy may represent its family only if it keeps this share of the word shingles of the
#: copy retrieval ranked best: a cheaper copy that lost part of the content (a truncated
#: window, an article that quotes only the lead) does not.
CANONICAL_KEEP = 0.8
_Key = Callable[[int], tuple[int, float, float, str]]
#: A slice of one chunk placed in a unit's text: (chunk_id, start, end, at), as in :class:`Piece`.
_Piece = tuple[str, int, int, int]


_NUM = re.compile(r"\d+")


def version_key(
    version: str | None, published_at: str | None
) -> tuple[tuple[tuple[int, str], ...], str, str]:
    """Order versions by their numbers ("1.10" after "1.9"), then the publication date.

    A number is compared as (digit count, digits) without leading zeros: the numeric order,
    with no int() of a 5,000-digit string (Python refuses those)."""
    nums = tuple((len(d), d) for d in (n.lstrip("0") for n in _NUM.findall(version or "")))
    return (nums, published_at or "", version or "")


@dataclass(slots=True)
class _Unit:
    """A text made of one or more candidates of one document (merged spans, one parent)."""

    members: list[int]
    text: str
    pieces: list[_Piece]
    span_start: int | None
    best: int = -1
    shingle_set: frozenset[int] = frozenset()
    #: ``normalize(text)``: equal for exact duplicates.
    norm: str = ""


class Consolidator:
    """Stage 2: routed batch in, consolidated batch out."""

    def __init__(
        self,
        *,
        policy: Policy,
        max_pair_checks: int = DEFAULT_MAX_PAIR_CHECKS,
        shingles: ShingleCache | None = None,
    ) -> None:
        if max_pair_checks < 1:
            raise ValueError(f"max_pair_checks must be >= 1, got {max_pair_checks!r}")
        self.policy = policy
        self.max_pair_checks = max_pair_checks
        #: Word ids and shingle sets (shared with the selector in one pipeline).
        self.shingles = shingles if shingles is not None else ShingleCache()

    def run(self, routed: RoutedBatch) -> ConsolidatedBatch:
        """One item per source family of the admissible candidates (the module's steps 1 to 4),
        and every drop with its reason. :class:`~ctxbudget.errors.LimitError` when the
        near-duplicate work would exceed ``max_pair_checks``."""
        batch = routed.batch
        cands = candidates_as_cut(routed)
        score_field = primary_score_field(cands[i] for i in routed.admissible)
        authority_of = self.policy.authority_of
        keys: dict[int, tuple[int, float, float, str]] = {}
        for i in routed.admissible:
            c = cands[i]
            keys[i] = rank_key(
                candidate_score(c, score_field), authority_of(c.source_id, c.authority), c.chunk_id
            )
        key: _Key = keys.__getitem__

        dropped: list[CandidateFate] = []
        alive = self._collapse_ids(routed.admissible, cands, key, dropped)
        if not routed.history:
            alive = self._drop_stale(alive, cands, batch.query.as_of, dropped)
        units, common = self._build_units(alive, cands, key)
        items = self._families(units, common, cands, score_field, dropped)
        dropped.sort(key=lambda f: (f.chunk_id, f.reason))
        return ConsolidatedBatch(
            request_id=routed.request_id, routed=routed, items=tuple(items), dropped=tuple(dropped)
        )

    # -- 1. identical chunk ids

    @staticmethod
    def _collapse_ids(
        admissible: Sequence[int],
        cands: Sequence[Candidate],
        key: _Key,
        dropped: list[CandidateFate],
    ) -> list[int]:
        by_id: dict[str, list[int]] = defaultdict(list)
        for i in admissible:
            by_id[cands[i].chunk_id].append(i)
        alive = []
        for cid in sorted(by_id):
            group = by_id[cid]
            if len(group) > 1:
                # Ties between copies of one chunk id fall back to their canonical JSON, so the
                # choice never depends on the input order.
                group = sorted(group, key=lambda i: (key(i), encode(cands[i])))
                dropped.extend(
                    CandidateFate(
                        chunk_id=cid, reason="duplicate", detail="same chunk_id", kept_as=cid
                    )
                    for _ in group[1:]
                )
            alive.append(group[0])
        return alive

    # -- 2. versions

    @staticmethod
    def _drop_stale(
        alive: list[int],
        cands: Sequence[Candidate],
        as_of: str | None,
        dropped: list[CandidateFate],
    ) -> list[int]:
        by_doc: dict[str, list[int]] = defaultdict(list)
        for i in alive:
            by_doc[cands[i].doc_id].append(i)
        keep: list[int] = []
        for doc in sorted(by_doc):
            group = by_doc[doc]
            versions = {cands[i].version for i in group if cands[i].version is not None}
            if len(versions) < 2:
                keep.extend(group)
                continue
            eligible = [i for i in group if _published_by(cands[i], as_of)] or group
            newest = max(version_key(cands[i].version, cands[i].published_at) for i in eligible)
            # Every chunk of the newest version stays: chunks of one version are parts of
            # one document (their dates may differ as they were indexed), not versions of it.
            for i in group:
                c = cands[i]
                if c.version is None or c.version == newest[2]:
                    keep.append(i)
                else:
                    dropped.append(
                        CandidateFate(
                            chunk_id=c.chunk_id,
                            reason="stale_version",
                            detail=f"version {c.version} beside {newest[2] or newest[1]}",
                        )
                    )
        return keep

    # -- 3. spans and parents

    def _build_units(
        self, alive: list[int], cands: Sequence[Candidate], key: _Key
    ) -> tuple[list[_Unit], np.ndarray | None]:
        """The units, best-ranked first (by their best-ranked member), and how many shingles
        each two of them share (:func:`~ctxbudget.text.common_shingles`).

        ``alive`` lists each document's candidates in ``chunk_id`` order (both earlier steps
        keep that order), which the span merge relies on for its ties."""
        by_doc: dict[str, list[int]] = defaultdict(list)
        for i in alive:
            by_doc[cands[i].doc_id].append(i)
        units: list[_Unit] = []
        for doc in sorted(by_doc):
            group = by_doc[doc]
            if len(group) == 1:
                units.append(_single_unit(group[0], cands[group[0]]))
            else:
                units.extend(_group_parents(_merge_spans(group, cands), cands))
        for u in units:
            u.best = u.members[0] if len(u.members) == 1 else min(u.members, key=key)
        units.sort(key=lambda u: key(u.best))
        size = self.policy.near_duplicate.shingle_words
        found = self.shingles.text_overlaps([u.text for u in units], size)
        for u, shingle_set, norm in zip(units, found.sets, found.norms, strict=True):
            u.shingle_set = shingle_set
            u.norm = norm
        return units, found.common

    # -- 4. families

    def _families(
        self,
        units: list[_Unit],
        common: np.ndarray | None,
        cands: Sequence[Candidate],
        score_field: str,
        dropped: list[CandidateFate],
    ) -> list[ConsolidatedItem]:
        exact = [u.norm for u in units]
        sets = self._join_copies(units, common, cands, exact)
        families: dict[int, list[int]] = defaultdict(list)
        for u in range(len(units)):
            families[sets.find(u)].append(u)
        items = []
        for root in sorted(families):
            family = self._canonical_first(families[root], units, cands)
            items.append(self._item(family, units, cands, exact, score_field, dropped))
        return items

    def _canonical_first(
        self, family: list[int], units: list[_Unit], cands: Sequence[Candidate]
    ) -> list[int]:
        """The family with the copy that represents it first (see the module docstring)."""
        if len(family) == 1:
            return family
        authority_of = self.policy.authority_of
        best = units[family[0]].shingle_set  # family[0]: the best-ranked copy
        need = CANONICAL_KEEP * len(best)

        def canon(at: int) -> tuple[float, int, int]:
            unit = units[family[at]]
            c = cands[unit.best]
            size = len(unit.text.encode("utf-8", "surrogatepass"))
            return (-authority_of(c.source_id, c.authority), size, at)

        keeps = [
            at for at, u in enumerate(family) if at == 0 or len(units[u].shingle_set & best) >= need
        ]
        first = family[min(keeps, key=canon)]
        return [first, *(u for u in family if u != first)]

    def _independent(self, ua: _Unit, ub: _Unit, cands: Sequence[Candidate]) -> bool:
        """Two authoritative sources that say the same thing in their own words are two
        confirmations; a verbatim copy (one text contained in the other) is still a copy."""
        a, b = cands[ua.best], cands[ub.best]
        level = self.policy.independent_authority
        return (
            a.source_id != b.source_id
            and self.policy.authority_of(a.source_id, a.authority) >= level
            and self.policy.authority_of(b.source_id, b.authority) >= level
            and self._independent_texts(ua, ub)
        )

    @staticmethod
    def _independent_texts(ua: _Unit, ub: _Unit) -> bool:
        """Neither text is a verbatim copy of the other."""
        return (
            containment(ua.shingle_set, ub.shingle_set) < VERBATIM
            and jaccard(ua.shingle_set, ub.shingle_set) < VERBATIM
        )

    def _join_copies(
        self,
        units: list[_Unit],
        common: np.ndarray | None,
        cands: Sequence[Candidate],
        exact: list[str],
    ) -> DisjointSets:
        """The units joined into families (the best-ranked unit of each is its root)."""
        sets = DisjointSets(len(units))
        # Exact copies (the same normalised text) are one family, whatever their sources.
        first_by_text: dict[str, int] = {}
        for u, text in enumerate(exact):
            first = first_by_text.setdefault(text, u)
            if first != u:
                sets.union(first, u)
        # Units with the same shingle set are copies by every measure (containment 1): one
        # family, which its first unit stands for in the pairwise work, so identical
        # passages cost one hash each instead of a pair with every other copy.
        groups = _same_shingles(units)
        for rep, members in groups.items():
            for u in members[1:]:
                sets.union(rep, u)
        for a, b in self._near_pairs(units, common, groups):
            if self._groups_join(groups[a], groups[b], units, cands):
                sets.union(a, b)
        cosine = self.policy.near_duplicate.cosine
        embeddings = [cands[u.best].embedding for u in units]
        for a, b in cosine_pairs(embeddings, cosine, self.max_pair_checks):
            if exact[a] == exact[b] or not self._independent(units[a], units[b], cands):
                sets.union(a, b)
        return sets

    def _groups_join(
        self, ga: list[int], gb: list[int], units: list[_Unit], cands: Sequence[Candidate]
    ) -> bool:
        """Whether two groups of identical units that are near-duplicates of each other are
        one family: exactly when some unit of one and some unit of the other are not
        independent confirmations (what pairing every unit with every unit would decide,
        since the units of a group share one shingle set and so every similarity)."""
        if len(ga) == 1 and len(gb) == 1:
            return not self._independent(units[ga[0]], units[gb[0]], cands)
        if not self._independent_texts(units[ga[0]], units[gb[0]]):
            return True
        level = self.policy.independent_authority
        sides = []
        for group in (ga, gb):
            reps = [cands[units[u].best] for u in group]
            if any(self.policy.authority_of(c.source_id, c.authority) < level for c in reps):
                return True  # a unit below the independent-authority level: a copy
            sides.append({c.source_id for c in reps})
        return not sides[0].isdisjoint(sides[1])  # one source on both sides: a copy

    def _near_pairs(
        self, units: list[_Unit], common: np.ndarray | None, groups: dict[int, list[int]]
    ) -> list[tuple[int, int]]:
        """Near-duplicate pairs among the groups' first units (sorted).

        With the table of shared shingles at hand and a work bound within ``max_pair_checks``
        (:func:`pair_work_bound`), every pair is tested at once from the table; otherwise
        :func:`near_duplicate_pairs` counts the work exactly (and raises beyond the budget).
        Both give the pairs that share a shingle and pass the thresholds."""
        nd = self.policy.near_duplicate
        reps = list(groups)  # the first unit of each group, in ascending order
        sets = [units[r].shingle_set for r in reps]
        if common is not None and pair_work_bound(sets) <= self.max_pair_checks:
            if len(reps) < len(units):
                common = common[np.ix_(reps, reps)]
            found = table_pairs(common, nd.jaccard, nd.containment)
        else:
            found = sorted(
                near_duplicate_pairs(
                    index_sets(sets), nd.jaccard, nd.containment, max_checks=self.max_pair_checks
                )
            )
        return [(reps[a], reps[b]) for a, b in found]

    def _item(
        self,
        family: list[int],
        units: list[_Unit],
        cands: Sequence[Candidate],
        exact: list[str],
        score_field: str,
        dropped: list[CandidateFate],
    ) -> ConsolidatedItem:
        root = family[0]
        rep_unit = units[root]
        rep = cands[rep_unit.best]
        if len(family) == 1 and len(rep_unit.members) == 1:  # one candidate: nothing merged
            best = rep
            members: tuple[int, ...] = (rep_unit.best,)
            chunk_ids: tuple[str, ...] = (rep.chunk_id,)
            sources: tuple[str, ...] = (rep.source_id,)
        else:
            best = cands[units[min(family)].best]
            members, sources = _family_members(family, units, cands, exact, dropped)
            chunk_ids = tuple(cands[m].chunk_id for m in members)
        return ConsolidatedItem(
            item_id=rep.chunk_id,
            members=members,
            unit_size=len(rep_unit.members),
            chunk_ids=chunk_ids,
            doc_id=rep.doc_id,
            source_id=rep.source_id,
            source_ids=sources,
            title=rep.title,
            version=rep.version,
            published_at=rep.published_at,
            text=rep_unit.text,
            pieces=tuple(
                Piece(chunk_id=cid, start=start, end=end, at=at)
                for cid, start, end, at in rep_unit.pieces
            ),
            score=candidate_score(best, score_field),
            authority=self.policy.authority_of(rep.source_id, rep.authority),
            span_start=rep_unit.span_start,
        )


def _family_members(
    family: list[int],
    units: list[_Unit],
    cands: Sequence[Candidate],
    exact: list[str],
    dropped: list[CandidateFate],
) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """The candidates of a family: its representative, the rest of its unit, then each other
    unit's, each unit's in ``chunk_id`` order. And the sources of the representative and of
    the copies, first seen first. Each copy left out is recorded in ``dropped``."""
    root = family[0]  # represents the family (``_canonical_first``)
    rep_unit = units[root]
    rep = cands[rep_unit.best]
    rest = sorted(
        (m for m in rep_unit.members if m != rep_unit.best), key=lambda m: cands[m].chunk_id
    )
    members = [rep_unit.best, *rest]
    sources = {rep.source_id: None}
    for u in family[1:]:
        unit = units[u]
        reason: DropReason = "duplicate" if exact[u] == exact[root] else "near_duplicate"
        for m in sorted(unit.members, key=lambda m: cands[m].chunk_id):
            c = cands[m]
            members.append(m)
            sources.setdefault(c.source_id, None)
            dropped.append(CandidateFate(chunk_id=c.chunk_id, reason=reason, kept_as=rep.chunk_id))
    return tuple(members), tuple(sources)


def _single_unit(i: int, c: Candidate) -> _Unit:
    """The unit of a document's only candidate (what the span merge and the parent grouping
    make of one candidate)."""
    return _Unit(
        members=[i],
        text=c.text,
        span_start=c.span.start if c.span is not None else None,
        pieces=[(c.chunk_id, 0, len(c.text), 0)],
    )


def _published_by(c: Candidate, as_of: str | None) -> bool:
    return as_of is None or c.published_at is None or c.published_at <= as_of


def _offsets_trusted(c: Candidate) -> bool:
    return c.span is not None and c.span.end - c.span.start == len(c.text)


def _merge_spans(group: list[int], cands: Sequence[Candidate]) -> list[_Unit]:
    """Merge overlapping or touching spans of one document; others stay single units."""
    spanned = sorted(
        (i for i in group if _offsets_trusted(cands[i])),
        key=lambda i: (cands[i].span.start, cands[i].span.end, cands[i].chunk_id),  # type: ignore[union-attr]
    )
    units: list[_Unit] = []
    # a merged unit's text is built from its parts once (appending to a str would copy the
    # whole text for every chunk of a long document)
    parts: list[list[str]] = []
    length = 0  # of the last unit's text
    for i in spanned:
        c = cands[i]
        assert c.span is not None
        last = units[-1] if units else None
        end = (last.span_start or 0) + length if last is not None else -1
        if last is not None and c.span.start <= end:
            if c.span.end > end:
                skip = end - c.span.start
                last.pieces.append((c.chunk_id, skip, len(c.text), length))
                parts[-1].append(c.text[skip:])
                length += len(c.text) - skip
            last.members.append(i)
            continue
        units.append(
            _Unit(
                members=[i],
                text=c.text,
                span_start=c.span.start,
                pieces=[(c.chunk_id, 0, len(c.text), 0)],
            )
        )
        parts.append([c.text])
        length = len(c.text)
    for unit, texts in zip(units, parts, strict=True):
        if len(texts) > 1:
            unit.text = "".join(texts)
    for i in group:
        if not _offsets_trusted(cands[i]):
            c = cands[i]
            units.append(
                _Unit(
                    members=[i],
                    text=c.text,
                    span_start=c.span.start if c.span else None,
                    pieces=[(c.chunk_id, 0, len(c.text), 0)],
                )
            )
    return units


def _group_parents(units: list[_Unit], cands: Sequence[Candidate]) -> list[_Unit]:
    """Units of one document whose chunks share a parent become one unit, in document order."""
    by_parent: dict[str, list[_Unit]] = defaultdict(list)
    out: list[_Unit] = []
    for u in units:
        pid = cands[u.members[0]].parent_id
        if pid is None:
            out.append(u)
        else:
            by_parent[pid].append(u)
    for pid in sorted(by_parent):
        group = sorted(
            by_parent[pid],
            key=lambda u: (
                u.span_start if u.span_start is not None else 1 << 62,
                cands[u.members[0]].chunk_id,
            ),
        )
        head = group[0]
        merged = _Unit(
            members=list(head.members),
            text=head.text,
            pieces=list(head.pieces),
            span_start=head.span_start,
        )
        length = len(head.text)
        for u in group[1:]:
            offset = length + len(PIECE_SEPARATOR)
            length = offset + len(u.text)
            merged.members.extend(u.members)
            merged.pieces.extend((cid, start, end, at + offset) for cid, start, end, at in u.pieces)
        if len(group) > 1:
            merged.text = PIECE_SEPARATOR.join(u.text for u in group)
        out.append(merged)
    return out


def _same_shingles(units: list[_Unit]) -> dict[int, list[int]]:
    """Units grouped by equal, non-empty shingle sets: first unit -> the group, in order.

    A unit with no shingles (no words) is a group of its own: it pairs with nothing.
    """
    first_of: dict[frozenset[int], int] = {}
    groups: dict[int, list[int]] = {}
    for u, unit in enumerate(units):
        rep = first_of.setdefault(unit.shingle_set, u) if unit.shingle_set else u
        groups.setdefault(rep, []).append(u)
    return groups
