"""An admitted passage hands its title on even when its own text writes the name otherwise
('Benjamin Andrew "Ben" Stokes'): a waiting text naming the title is the next hop. Not when
the question itself names the title (retrieval found its other passages already)."""

from __future__ import annotations

from ctxbudget.pipeline import Pipeline
from ctxbudget.schemas import Candidate, PackedBatch
from ctxbudget.testing import batch
from tests.unit.wiki_paragraphs import TOPICS, filler, paragraph


def _filler(k: int) -> str:
    return filler(k, 3, TOPICS[:5])


def _cands() -> list[Candidate]:
    return [
        paragraph(
            "Ben Stokes",
            'Benjamin Andrew "Ben" Stokes (born 1991) is a cricketer born in Christchurch. '
            + _filler(0),
            9.0,
        ),
        *(
            paragraph(
                f"Meadow town {k}", f"A town of the plain, number {k}. " + _filler(k), 8 - k / 10
            )
            for k in range(1, 5)
        ),
        paragraph(
            "Hello Friends",
            "Hello Friends is a compilation album by Jack Dangers with music by Ben Stokes.",
            0.5,
        ),
    ]


def _packed(pipeline: Pipeline, query: str) -> PackedBatch:
    b = batch(_cands(), query=query, input_limit=1000, reserve_tokens=300)
    return pipeline.selector.run(pipeline.consolidator.run(pipeline.router.run(b)))


def test_a_text_naming_the_admitted_title_is_linked_by_it(pipeline: Pipeline) -> None:
    """The cricketer's passage, whose text spells his name out in full, hands 'ben stokes'
    on to the album whose text names him: the album is the next hop."""
    packed = _packed(pipeline, "Who made the compilation album with a cricketer from Christchurch?")
    items = packed.consolidated.items
    basis = {items[a.item].title: a.basis for a in packed.admitted}
    assert "Ben Stokes" in basis
    assert "shared_name:ben stokes" in basis["Hello Friends"]


def test_a_title_the_question_names_is_not_handed_on(pipeline: Pipeline) -> None:
    """When the question names Ben Stokes, a text naming him is no further hop."""
    packed = _packed(pipeline, "Who made the compilation album with Ben Stokes in Christchurch?")
    items = packed.consolidated.items
    basis = {items[a.item].title: a.basis for a in packed.admitted}
    assert "shared_name:ben stokes" not in basis.get("Hello Friends", ())
