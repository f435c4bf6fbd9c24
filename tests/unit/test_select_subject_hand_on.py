"""Selection hands an admitted passage's own subject on: a waiting text naming that entity
is the next hop, even when the admitted text never names it mid-sentence."""

from __future__ import annotations

from ctxbudget.pipeline import Pipeline
from ctxbudget.schemas import Candidate, PackedBatch
from ctxbudget.testing import batch
from tests.unit.wiki_paragraphs import filler, paragraph


def _filler(k: int) -> str:
    return filler(k, 4)


QUESTION = "What position does the footballer from the largest town of the Stör valley play?"


def _cands() -> list[Candidate]:
    return [
        paragraph(
            "Kellinghusen",
            "Kellinghusen is the largest town of the Stör valley. " + _filler(0),
            9.0,
        ),
        *(
            paragraph(
                f"Valley town {k}", f"A town of the Stör valley, number {k}. " + _filler(k), s
            )
            for k, s in ((1, 8.8), (2, 8.6), (3, 8.4), (4, 8.2))
        ),
        paragraph(
            "Stör ferries",
            "Ferries once ran from the quay at Kellinghusen to the coast. " + _filler(5),
            7.5,
        ),
        paragraph(
            "Jan Petersen",
            "Jan Petersen (born 1981 in Kellinghusen) is a footballer who plays as a defender.",
            0.5,
        ),
    ]


def _packed(pipeline: Pipeline, input_limit: int) -> PackedBatch:
    b = batch(_cands(), query=QUESTION, input_limit=input_limit, reserve_tokens=300)
    return pipeline.selector.run(pipeline.consolidator.run(pipeline.router.run(b)))


def test_a_text_naming_the_admitted_subject_is_linked_by_it(pipeline: Pipeline) -> None:
    """The passage about Kellinghusen hands its subject on to the footballer born there."""
    packed = _packed(pipeline, 1000)
    items = packed.consolidated.items
    basis = {items[a.item].title: a.basis for a in packed.admitted}
    assert "Kellinghusen" in basis
    assert "shared_name:kellinghusen" in basis["Jan Petersen"]


def test_the_next_hop_goes_ahead_of_higher_scored_distractors(pipeline: Pipeline) -> None:
    """Under a tight budget the linked hop is admitted while distractors scored far above
    it wait."""
    packed = _packed(pipeline, 600)
    items = packed.consolidated.items
    by_title = {items[a.item].title: a for a in packed.admitted}
    assert "Jan Petersen" in by_title
    towns = {f"Valley town {k}" for k in range(1, 5)}
    waiting = {items[i].title for i in packed.budget_dropped}
    # A distractor the room still takes enters after the hop, as a short unlinked excerpt.
    for title in towns - waiting:
        assert by_title[title].rank > by_title["Jan Petersen"].rank
        assert "unlinked" in by_title[title].basis
    assert len(towns & waiting) >= 3


def test_the_hand_on_is_deterministic(pipeline: Pipeline) -> None:
    """The same batch gives the same admissions."""
    assert _packed(pipeline, 1000).admitted == _packed(pipeline, 1000).admitted
