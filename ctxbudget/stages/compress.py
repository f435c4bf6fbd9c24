"""The compression stage: compress what must shrink, render, count exactly, never exceed.

Selection works on estimates; this stage makes the pack exact. Each admitted item is
rendered into its envelope and counted with the model's tokenizer (cached by content
hash). The block's count is the sum of its parts: every envelope ends in ``>\\n`` and the
next starts with ``<``, a boundary the tokenizer's pre-splitting never crosses, so the sum
equals the count of the whole block (the tests check this on every pack). When the sum is
over budget, the lowest-utility item is compressed to fit or dropped (``budget``), and
the block is counted again; when nothing was over and room is left, the best items that
waited for budget are tried again (a bounded top-up).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ctxbudget.cut import source_spans, withheld_sentences
from ctxbudget.entities import links_for, subject_links
from ctxbudget.envelope import (
    CLOSE_SET,
    MARKUP_CHARS_PER_TOKEN,
    SetDefaults,
    datamark_instruction,
    evidence_ids,
    header_estimate,
    join_rendered,
    open_set,
    render_item,
)
from ctxbudget.escaping import datamark, escape_text, text_estimator
from ctxbudget.extractive import ExtractiveCompressor, SentenceAnalysis, analyse, map_range
from ctxbudget.memo import BoundedMemo
from ctxbudget.order import order_items
from ctxbudget.policy import Policy
from ctxbudget.schemas import (
    Admission,
    Answerability,
    CandidateFate,
    ConsolidatedItem,
    Coverage,
    CutPassage,
    EvidenceItem,
    Pack,
    PackedBatch,
    Trust,
    Withheld,
)
from ctxbudget.tokens import TokenCounter, TokenizerRegistry
from ctxbudget.trace import CompressResult

#: Authority at or above which evidence is rendered as ``high`` trust, and below which as
#: ``low`` (:func:`trust_of`).
HIGH_TRUST_AUTHORITY = 0.8
LOW_TRUST_AUTHORITY = 0.3
#: Characters a kept sentence adds to the envelope's location attribute beside its chunk id:
#: the ``:start-end`` offsets and the comma between entries (offsets of four or five digits).
LOCATION_ENTRY_CHARS = 12
#: The chunk id length assumed for a batch without candidates.
DEFAULT_CHUNK_ID_CHARS = 8
#: Tokens held back when an item over the exact count is compressed again to fit: what the
#: header estimate misses of the compressed item's envelope (its excerpt attribute, rounding).
RECOMPRESS_MARGIN_TOKENS = 8
#: Tokens held back when the top-up asks for one compressed item in the room left.
TOP_UP_MARGIN_TOKENS = 4
#: A waiting item is tried whole (rendered and counted exactly) when this share of its
#: estimate fits the room left: estimates run above the exact count, which decides.
TOP_UP_ESTIMATE_SHARE = 0.9


def trust_of(authority: float) -> Trust:
    """The trust an authority earns: ``high`` at 0.8 or more, ``low`` below 0.3, else ``normal``."""
    if authority >= HIGH_TRUST_AUTHORITY:
        return "high"
    if authority < LOW_TRUST_AUTHORITY:
        return "low"
    return "normal"


@dataclass(frozen=True, slots=True)
class _PackRendering:
    """How one pack's items are rendered: the set's shared attributes and the items' ids."""

    defaults: SetDefaults
    #: The evidence id of each item, by (source_id, doc_id, item_id, text).
    ids: Mapping[tuple[str, str, str, str], str]
    #: Passages withheld by the safety gate, for the block's notice (0: no notice).
    withheld: int = 0
    #: Chunk ids the gate flagged but the policy renders as low-trust evidence.
    flagged: frozenset[str] = frozenset()
    #: The entities the batch's items are about (compression favours sentences naming them).
    links: tuple[str, ...] = ()
    #: Tokens of the block's frame: the opening and closing tags counted apart (what a block
    #: with items adds to their sum), and counted as one string (the empty block's cost).
    frame_tokens: int = 0
    empty_block_tokens: int = 0
    #: Flagged passages packed without their offending sentences, by chunk id.
    cuts: Mapping[str, CutPassage] = field(default_factory=dict)
    #: The datamarking character, when the policy datamarks evidence.
    marker: str | None = None


@dataclass(slots=True)
class _CountedItem:
    """An admitted item as the pack holds it: rendered, and counted with the tokenizer."""

    admission: Admission
    evidence: EvidenceItem
    tokens: int
    #: ``render_item(evidence)``: counted once, and reused for the block.
    rendered: str


def _victim_key(slot: _CountedItem) -> tuple[bool, float, int]:
    """The order in which an over-budget pack gives way, first to give first: the item
    compressed into the room left (basis ``leftover``: sized from estimates to fill what the
    others left, it is the first to shrink when the exact count says the room is not there),
    then the lowest utility, then the latest admitted."""
    adm = slot.admission
    return ("leftover" not in adm.basis, adm.utility, -adm.rank)


class PackCompressor:
    """Stage 4: packed batch in, Pack out (exactly counted, never over budget)."""

    def __init__(
        self,
        *,
        policy: Policy,
        tokenizers: TokenizerRegistry,
        max_topups: int = 8,
        analyses: BoundedMemo[str, SentenceAnalysis] | None = None,
    ) -> None:
        if max_topups < 0:
            raise ValueError(f"max_topups must be >= 0, got {max_topups}")
        self.policy = policy
        self.tokenizers = tokenizers
        #: Sentence analyses of passages (shared with the selector in one process).
        self.analyses = analyses if analyses is not None else BoundedMemo()
        self.max_topups = max_topups

    def run(self, packed: PackedBatch) -> CompressResult:
        """Render and count the admitted items exactly, compress or drop the least useful while
        over the evidence budget, top up while room is left, and make the Pack.
        :class:`~ctxbudget.errors.TokenizerError` when the batch's tokenizer cannot load."""
        consolidated = packed.consolidated
        routed = consolidated.routed
        rules = self.policy.classes[routed.query_class]
        budget = routed.budget.evidence_budget
        counter = self.tokenizers.get(routed.batch.model.tokenizer)
        query = routed.batch.query.text
        longest_id = max(
            (len(c.chunk_id) for c in routed.batch.candidates), default=DEFAULT_CHUNK_ID_CHARS
        )
        # What each kept sentence adds to the location attribute, at the longest chunk id.
        span_cost = (
            math.ceil((longest_id + LOCATION_ENTRY_CHARS) / MARKUP_CHARS_PER_TOKEN)
            if self.policy.envelope_location != "none"
            else 0
        )
        marker = self.policy.marker
        compressor = ExtractiveCompressor(
            count=counter.count if marker is None else _marked_count(counter, marker),
            span_cost=span_cost,
            analyse=self._analyse,
        )
        # Stated once on the set, from every item the batch could admit (so an item's
        # rendering never depends on which others made it in).
        withheld = tuple(
            Withheld(chunk_id=f.chunk_id, reason=f.reason, detail=f.detail)
            for f in routed.dropped
            if f.reason == "quarantined"
        )
        flagged = {routed.batch.candidates[i].chunk_id for i in routed.flagged}
        keys = [(it.source_id, it.doc_id, it.item_id, it.text) for it in consolidated.items]
        defaults = SetDefaults.common([(it.source_id, it.version) for it in consolidated.items])
        notice = len(withheld) if self.policy.withheld_notice else 0
        opening = open_set(defaults, notice, marker)
        look = _PackRendering(
            defaults=defaults,
            withheld=notice,
            flagged=frozenset(flagged),
            links=subject_links(consolidated.items),
            ids=dict(zip(keys, evidence_ids(keys), strict=True)),
            frame_tokens=counter.count(opening) + counter.count(CLOSE_SET),
            empty_block_tokens=counter.count(opening + CLOSE_SET),
            cuts={cut.chunk_id: cut for cut in routed.cuts},
            marker=marker,
        )
        dropped: list[CandidateFate] = []
        details: dict[str, Any] = {"recounts": 0, "compressed": [], "topped_up": []}

        def drop(item: ConsolidatedItem) -> None:
            dropped.extend(
                CandidateFate(chunk_id=c, reason="budget", detail="exact count")
                for c in item.chunk_ids[: item.unit_size]
            )

        slots: list[_CountedItem] = []
        for adm in packed.admitted:
            item = consolidated.items[adm.item]
            ev = self._evidence(look, item, adm.compress_to, compressor, query)
            if ev is None:
                drop(item)
                continue
            slots.append(self._slot(look, adm, ev, counter))
        total = self._total(look, slots)
        while total > budget and slots:
            details["recounts"] += 1
            victim = min(slots, key=_victim_key)
            item = consolidated.items[victim.admission.item]
            target = (
                victim.tokens - (total - budget) - header_estimate(item) - RECOMPRESS_MARGIN_TOKENS
            )
            ev = None
            if rules.compression and target >= rules.min_compressed_tokens:
                ev = self._evidence(look, item, target, compressor, query)
            slots.remove(victim)
            if ev is not None and ev.text != victim.evidence.text:
                slots.append(self._slot(look, victim.admission, ev, counter))
            else:
                drop(item)
            total = self._total(look, slots)
        restored: list[str] = []
        total = self._top_up(
            look, packed, slots, total, budget, counter, compressor, query, restored, details
        )
        ranked = [s.admission.item for s in sorted(slots, key=lambda s: s.admission.rank)]
        order = order_items(
            ranked, consolidated.items, rules.ordering, versions_adjacent=routed.history
        )
        by_item = {s.admission.item: s for s in slots}
        placed = [by_item[i] for i in order]
        evidence = tuple(s.evidence for s in placed)
        rendered = join_rendered([s.rendered for s in placed], look.defaults, look.withheld, marker)
        details["compressed"] = [e.evidence_id for e in evidence if e.compressed]
        pack = Pack(
            request_id=packed.request_id,
            lane=routed.lane,
            cohort=routed.cohort,
            policy=routed.policy,
            query_class=routed.query_class,
            budget=routed.budget,
            evidence=evidence,
            rendered=rendered,
            evidence_tokens=total if evidence else 0,
            answerability=self._answerability(packed, evidence, dropped),
            dropped=self._drop_counts(packed, dropped, restored),
            coverage=self._coverage(packed.coverage, dropped),
            replay=routed.batch.replay,
            withheld=withheld,
            withheld_sentences=withheld_sentences(routed),
            evidence_instruction=datamark_instruction(marker) if marker and rendered else None,
        )
        return CompressResult(
            pack=pack, dropped=tuple(dropped), restored=tuple(restored), details=details
        )

    # -- pieces

    def _analyse(self, text: str) -> SentenceAnalysis:
        return self.analyses.get_or_make(text, lambda: analyse(text), lambda a: a.weight)

    def _evidence(
        self,
        look: _PackRendering,
        item: ConsolidatedItem,
        compress_to: int | None,
        compressor: ExtractiveCompressor,
        query: str,
    ) -> EvidenceItem | None:
        if compress_to is None:
            text, spans, compressed = (
                item.text,
                tuple(map_range(item.pieces, 0, len(item.text))),
                False,
            )
        else:
            lead = item.span_start == 0 or item.span_start is None
            result = compressor.compress(
                item.text,
                item.pieces,
                query,
                compress_to,
                lead=lead,
                links=links_for(item, look.links),
            )
            if result is None:
                return None
            text, spans, compressed = result.text, result.spans, True
        cut = bool(look.cuts) and any(c in look.cuts for c in item.chunk_ids[: item.unit_size])
        if cut:
            # A cut passage is an excerpt of its chunk (spans in the chunk's own text), and
            # the low trust of a text someone tampered with.
            spans, compressed = source_spans(spans, look.cuts), True
        flagged = cut or bool(look.flagged.intersection(item.chunk_ids))
        return EvidenceItem(
            evidence_id=look.ids[(item.source_id, item.doc_id, item.item_id, item.text)],
            chunk_ids=item.chunk_ids,
            doc_id=item.doc_id,
            source_id=item.source_id,
            title=item.title,
            version=item.version,
            trust="low" if flagged else trust_of(item.authority),
            text=text,
            spans=spans,
            tokens=0,
            compressed=compressed,
        )

    def _slot(
        self, look: _PackRendering, adm: Admission, ev: EvidenceItem, counter: TokenCounter
    ) -> _CountedItem:
        text = render_item(ev, self.policy.envelope_location, look.defaults, look.marker)
        n = counter.count(text)
        return _CountedItem(
            admission=adm, evidence=ev.model_copy(update={"tokens": n}), tokens=n, rendered=text
        )

    @staticmethod
    def _total(look: _PackRendering, slots: list[_CountedItem]) -> int:
        if not slots:
            return 0
        return look.frame_tokens + sum(s.tokens for s in slots)

    def _top_up(
        self,
        look: _PackRendering,
        packed: PackedBatch,
        slots: list[_CountedItem],
        total: int,
        budget: int,
        counter: TokenCounter,
        compressor: ExtractiveCompressor,
        query: str,
        restored: list[str],
        details: dict[str, Any],
    ) -> int:
        """Fill the room the estimates left: whole items first, then one compressed item."""
        filler = _Filler(self, look, packed, slots, total, budget, counter, compressor, query)
        filler.whole_items()
        filler.one_compressed()
        for item in filler.added:
            restored.extend(item.chunk_ids[: item.unit_size])
            details["topped_up"].append(item.item_id)
        return filler.total

    def _answerability(
        self, packed: PackedBatch, evidence: tuple[EvidenceItem, ...], dropped: list[CandidateFate]
    ) -> Answerability:
        routed = packed.consolidated.routed
        if routed.budget.evidence_budget <= 0:
            return "insufficient_budget"
        if not evidence:
            if packed.budget_dropped or packed.admitted or dropped:
                return "insufficient_budget"
            return "no_evidence"
        coverage = self._coverage(packed.coverage, dropped)
        if packed.uncovered or (
            coverage is not None and not coverage.guaranteed and coverage.threshold is not None
        ):
            return "partial"
        if routed.query_class == "aggregation" and (
            packed.budget_dropped
            or any(f.reason in ("item_cap", "source_cap") for f in packed.dropped)
        ):
            return "partial"
        return "ok"

    @staticmethod
    def _coverage(coverage: Coverage | None, dropped: list[CandidateFate]) -> Coverage | None:
        if coverage is None or not dropped or not coverage.guaranteed:
            return coverage
        return coverage.model_copy(
            update={
                "guaranteed": False,
                "reason": "exact count forced out passages the filter kept",
            }
        )

    @staticmethod
    def _drop_counts(
        packed: PackedBatch, dropped: list[CandidateFate], restored: list[str]
    ) -> dict[str, int]:
        consolidated = packed.consolidated
        counts: Counter[str] = Counter()
        back = Counter(restored)
        for fate in (
            *consolidated.routed.dropped,
            *consolidated.dropped,
            *packed.dropped,
            *dropped,
        ):
            if fate.reason == "budget" and back[fate.chunk_id] > 0 and fate.detail is None:
                back[fate.chunk_id] -= 1
                continue
            counts[fate.reason] += 1
        return dict(sorted(counts.items()))


def _marked_count(counter: TokenCounter, marker: str) -> Callable[[str], int]:
    """Counts a piece of evidence text as the datamarked envelope writes it."""

    def count(text: str) -> int:
        return counter.count(datamark(escape_text(text), marker))

    return count


class _Filler:
    """Tries the items that waited for budget, each checked with an exact count."""

    def __init__(
        self,
        stage: PackCompressor,
        look: _PackRendering,
        packed: PackedBatch,
        slots: list[_CountedItem],
        total: int,
        budget: int,
        counter: TokenCounter,
        compressor: ExtractiveCompressor,
        query: str,
    ) -> None:
        self.stage = stage
        self.look = look
        self.packed = packed
        self.items = packed.consolidated.items
        self.rules = stage.policy.classes[packed.consolidated.routed.query_class]
        self.slots = slots
        self.total = total
        self.budget = budget
        self.counter = counter
        self.compressor = compressor
        self.query = query
        self.sources = Counter(self.items[s.admission.item].source_id for s in slots)
        self.waiting = list(packed.budget_dropped)
        self.tries = 0
        self.added: list[ConsolidatedItem] = []
        self.estimate = text_estimator(stage.policy.marker)

    def room(self) -> int:
        used = self.total if self.slots else self.look.empty_block_tokens
        return self.budget - used

    def fits_caps(self, i: int) -> bool:
        # The per-source cap already yielded in selection: what waits here is only budget.
        return len(self.slots) < self.rules.max_items

    def whole_items(self) -> None:
        for i in list(self.waiting):
            if self.tries >= self.stage.max_topups:
                return
            item = self.items[i]
            estimate = header_estimate(item) + self.estimate(item.text)
            fits = estimate * TOP_UP_ESTIMATE_SHARE <= self.room()
            if self.fits_caps(i) and fits and self.attempt(i, None):
                self.waiting.remove(i)

    def one_compressed(self) -> None:
        if not self.rules.compression or self.tries >= self.stage.max_topups:
            return
        for i in self.waiting:
            target = self.room() - header_estimate(self.items[i]) - TOP_UP_MARGIN_TOKENS
            if target < self.rules.min_compressed_tokens:
                return
            if self.fits_caps(i):
                self.attempt(i, target)
                return

    def attempt(self, i: int, compress_to: int | None) -> bool:
        self.tries += 1
        item = self.items[i]
        adm = Admission(
            item=i,
            rank=len(self.packed.admitted) + self.tries,
            utility=-1.0,
            estimated_tokens=0,
            compress_to=compress_to,
        )
        ev = self.stage._evidence(self.look, item, compress_to, self.compressor, self.query)
        if ev is None:
            return False
        slot = self.stage._slot(self.look, adm, ev, self.counter)
        new_total = self.stage._total(self.look, [*self.slots, slot])
        if new_total > self.budget:
            return False
        self.slots.append(slot)
        self.total = new_total
        self.sources[item.source_id] += 1
        self.added.append(item)
        return True
