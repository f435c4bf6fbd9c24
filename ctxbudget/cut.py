"""Cutting injected sentences out of a flagged passage, so the rest can still be evidence.

A retrieved e-mail or page with an instruction inserted into it holds facts worth packing.
With the policy option ``injection: cut`` the router tries :func:`cut_passage` on a passage
the gate flagged before withholding it: the passage is split into sentences
(:func:`ctxbudget.text.sentences`), each sentence is scanned alone by the same gate, the
flagged ones are withheld, and the rest is scanned again as a whole, title included. Only
when that rest is clean is it kept, as an excerpt with a map back to the chunk's text;
otherwise the passage is withheld whole, as without the option. The method asks nothing of
the gate but its verdicts, so it works with any gate.

The later stages read a cut passage through :func:`candidates_as_cut` (its text is the kept
text, its span unknown, so it is never merged with its neighbours by offsets) and map the
kept text's spans back to the chunk's with :func:`source_spans`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from ctxbudget.extractive import GAP, map_range
from ctxbudget.schemas import (
    Candidate,
    CutPassage,
    EvidenceSpan,
    Piece,
    RoutedBatch,
    WithheldSentence,
)
from ctxbudget.text import sentences

#: A gate: the findings on a passage's title and text (empty: clean).
Gate = Callable[[str | None, str], Sequence[str]]


def cut_passage(index: int, cand: Candidate, gate: Gate) -> CutPassage | None:
    """``cand`` without the sentences ``gate`` flags on their own, or None when it cannot be
    cut: the title alone is flagged, no sentence or every sentence is flagged, or the rest is
    still flagged as a whole. Kept sentences that stood side by side keep the text between
    them; a withheld stretch between two kept ones is written as the excerpt gap (" … ")."""
    if cand.title and gate(cand.title, ""):
        return None
    text = cand.text
    bounds = sentences(text)
    if len(bounds) < 2:
        return None
    verdicts = [tuple(gate(None, text[s:e])) for s, e in bounds]
    if all(verdicts) or not any(verdicts):
        return None
    withheld = tuple(
        WithheldSentence(chunk_id=cand.chunk_id, start=s, end=e, findings=v)
        for (s, e), v in zip(bounds, verdicts, strict=True)
        if v
    )
    ranges: list[list[int]] = []
    previous_kept = False
    for (s, e), v in zip(bounds, verdicts, strict=True):
        if v:
            previous_kept = False
            continue
        if previous_kept:
            ranges[-1][1] = e
        else:
            ranges.append([s, e])
        previous_kept = True
    parts: list[str] = []
    pieces: list[Piece] = []
    at = 0
    for s, e in ranges:
        if parts:
            parts.append(GAP)
            at += len(GAP)
        parts.append(text[s:e])
        pieces.append(Piece(chunk_id=cand.chunk_id, start=s, end=e, at=at))
        at += e - s
    kept = "".join(parts)
    if gate(cand.title, kept):
        return None
    return CutPassage(
        index=index, chunk_id=cand.chunk_id, text=kept, pieces=tuple(pieces), withheld=withheld
    )


def candidates_as_cut(routed: RoutedBatch) -> tuple[Candidate, ...]:
    """The batch's candidates as the later stages pack them: a cut passage's text is its
    kept text, with no span (its offsets no longer match) and no stated token count."""
    cands = routed.batch.candidates
    if not routed.cuts:
        return cands
    out = list(cands)
    for cut in routed.cuts:
        out[cut.index] = cands[cut.index].model_copy(
            update={"text": cut.text, "span": None, "tokens": None}
        )
    return tuple(out)


def source_spans(
    spans: Sequence[EvidenceSpan], cuts: Mapping[str, CutPassage]
) -> tuple[EvidenceSpan, ...]:
    """``spans`` of kept texts mapped to the chunks' own texts (other spans as they are)."""
    out: list[EvidenceSpan] = []
    for span in spans:
        cut = cuts.get(span.chunk_id)
        if cut is None:
            out.append(span)
        else:
            out.extend(map_range(cut.pieces, span.start, span.end))
    return tuple(out)


def withheld_sentences(routed: RoutedBatch) -> tuple[WithheldSentence, ...]:
    """Every sentence cut out of the batch's passages, by chunk id and offset."""
    found = [w for cut in routed.cuts for w in cut.withheld]
    return tuple(sorted(found, key=lambda w: (w.chunk_id, w.start, w.end)))
