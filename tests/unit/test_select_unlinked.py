"""Selection at a tight budget: an item that neither links to the question or admitted
evidence nor matches the question well enters as a shorter excerpt (basis ``unlinked``),
so more linked evidence fits; a title qualified after a comma is reached by its short name."""

from __future__ import annotations

from ctxbudget.pipeline import Pipeline
from ctxbudget.schemas import Candidate, PackedBatch
from ctxbudget.testing import batch
from tests.unit.wiki_paragraphs import filler, paragraph

QUESTION = "In what county is the city where Harris Fawell was born?"


def _filler(k: int) -> str:
    return filler(k, 4)


def _cands() -> list[Candidate]:
    return [
        paragraph(
            "Harris Fawell",
            "Harris Fawell (born 1929 in West Chicago) was an American politician. "
            "He served in the House of Representatives for seven terms.",
            9.0,
        ),
        *(paragraph(f"Village chronicle {k}", _filler(k), 8.5 - 0.2 * k) for k in range(1, 13)),
        paragraph(
            "West Chicago, Illinois",
            "West Chicago is a city in DuPage County. It lies on the railroad west of the "
            "city of Chicago. Its museum keeps the records of the old depot.",
            0.5,
        ),
    ]


def _packed(pipeline: Pipeline, input_limit: int) -> PackedBatch:
    b = batch(_cands(), query=QUESTION, input_limit=input_limit, reserve_tokens=300)
    return pipeline.selector.run(pipeline.consolidator.run(pipeline.router.run(b)))


def test_a_comma_qualified_title_is_bridged_by_its_short_name(pipeline: Pipeline) -> None:
    """The politician's text names "West Chicago": the passage "West Chicago, Illinois" is
    the next hop, admitted with the bridge in its basis."""
    packed = _packed(pipeline, 580)
    items = packed.consolidated.items
    basis = {items[a.item].title: a.basis for a in packed.admitted}
    assert "bridge:harris fawell" in basis["West Chicago, Illinois"]


def test_unlinked_items_enter_as_shorter_excerpts_at_a_tight_budget(pipeline: Pipeline) -> None:
    """At a tight budget every distractor admitted is a one-sentence excerpt marked
    ``unlinked``, and the linked hop is admitted."""
    packed = _packed(pipeline, 580)
    items = packed.consolidated.items
    by_title = {items[a.item].title: a for a in packed.admitted}
    assert "West Chicago, Illinois" in by_title
    chronicles = [a for t, a in by_title.items() if t.startswith("Village chronicle")]
    assert chronicles
    for a in chronicles:
        assert "unlinked" in a.basis and "excerpt" in a.basis
    assert all(
        "unlinked" not in by_title[t].basis for t in ("Harris Fawell", "West Chicago, Illinois")
    )


def test_a_roomy_budget_keeps_the_class_excerpt_size(pipeline: Pipeline) -> None:
    """When the passages cost less than three times the room, no item is cut short."""
    packed = _packed(pipeline, 1000)
    assert packed.admitted
    assert all("unlinked" not in a.basis for a in packed.admitted)


def test_the_shorter_excerpts_are_deterministic(pipeline: Pipeline) -> None:
    """The same batch gives the same admissions."""
    assert _packed(pipeline, 580).admitted == _packed(pipeline, 580).admitted
