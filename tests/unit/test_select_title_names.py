"""Selection follows a name an admitted passage hands on to the passage whose title holds
it as a part ("History of Mississippi" after "... in Hinds County, Mississippi"), traced as
``title_name:<name>``; not in a comparison of named options, not by a modifier ("a Canadian
author"), not by a name too many passages hold."""

from __future__ import annotations

from ctxbudget.pipeline import Pipeline
from ctxbudget.schemas import Candidate, PackedBatch
from ctxbudget.testing import batch
from tests.unit.wiki_paragraphs import filler, paragraph

QUESTION = "When did the state where Pocahontas Mounds is located join the Union?"

TOPICS = (
    "The state fair was located on the river meadows and sold cheese every week",
    "A narrow railway once carried peat from the moor to the brickworks of the state",
    "The old mill grinds rye for the bakers of the neighbouring villages",
    "Storks nest on the chimneys of the barns along the northern dike",
    "A rowing club trains on the quiet reach below the lock every spring",
)

HOP_ONE = (
    "Pocahontas Mounds is an archaeological site located in Hinds County, {where}. "
    "The mounds were built by people of the Plaquemine culture."
)
HOP_TWO = (
    "In 1817 elected delegates wrote a constitution and applied to Congress. "
    "The western portion of the territory became the 20th state of the Union that year."
)


def _filler(k: int, extra: str = "") -> str:
    return filler(k, 4, TOPICS) + extra


def _cands(*, where: str = "Mississippi", common: bool = False) -> list[Candidate]:
    extra = " Traders came up the Mississippi by boat." if common else ""
    return [
        paragraph("Pocahontas Mounds", HOP_ONE.format(where=where), 9.0),
        *(
            paragraph(f"Village chronicle {k}", _filler(k, extra), 8.5 - 0.2 * k)
            for k in range(1, 11)
        ),
        paragraph("History of Mississippi", HOP_TWO, 0.5),
    ]


def _packed(
    pipeline: Pipeline, cands: list[Candidate], query: str = QUESTION, input_limit: int = 620
) -> PackedBatch:
    b = batch(cands, query=query, input_limit=input_limit, reserve_tokens=300)
    return pipeline.selector.run(pipeline.consolidator.run(pipeline.router.run(b)))


def _bases(packed: PackedBatch) -> dict[str | None, tuple[str, ...]]:
    items = packed.consolidated.items
    return {items[a.item].title: a.basis for a in packed.admitted}


def test_a_title_holding_a_name_the_hop_hands_on_is_the_next_hop(pipeline: Pipeline) -> None:
    """The mounds' passage places them in Mississippi; the lowest-scored passage, about the
    history of Mississippi, never says the name in its text yet is admitted for its title."""
    bases = _bases(_packed(pipeline, _cands()))
    assert "title_name:mississippi" in bases["History of Mississippi"]


def test_without_the_handed_on_name_the_titled_passage_earns_no_link(pipeline: Pipeline) -> None:
    """The control: when the first hop names another state, the history passage is not
    linked, and nothing is admitted by a title name."""
    bases = _bases(_packed(pipeline, _cands(where="Louisiana")))
    assert not any(b.startswith("title_name:") for basis in bases.values() for b in basis)
    assert "History of Mississippi" not in bases


def test_a_name_too_many_passages_hold_links_no_title(pipeline: Pipeline) -> None:
    """When every chronicle mentions the Mississippi too, the name says nothing about which
    passage is the next hop: no title link is made."""
    bases = _bases(_packed(pipeline, _cands(common=True)))
    assert not any(b.startswith("title_name:") for basis in bases.values() for b in basis)


def test_a_comparison_of_named_options_follows_no_title_names(pipeline: Pipeline) -> None:
    """In "Which came first, A or B?" the options' passages are the hops: a title holding a
    name an option's text hands on is not linked."""
    cands = [
        paragraph(
            "Little Caesars",
            "Little Caesars is a pizza chain founded in 1959 in Garden City, Michigan. "
            "Its owners also bought the Detroit Tigers.",
            9.0,
        ),
        paragraph(
            "Pizza Hut",
            "Pizza Hut is a restaurant chain founded in 1958 in Wichita, Kansas.",
            8.0,
        ),
        *(paragraph(f"Village chronicle {k}", _filler(k), 7.5 - 0.2 * k) for k in range(1, 9)),
        paragraph(
            "History of the Detroit Tigers",
            "The team won its first pennant in 1907 and played at Bennett Park.",
            0.5,
        ),
    ]
    packed = _packed(pipeline, cands, query="Which was founded first, Little Caesars or Pizza Hut?")
    bases = _bases(packed)
    assert packed.consolidated.routed.query_class == "comparison"
    assert not any(b.startswith("title_name:") for basis in bases.values() for b in basis)
    assert {"Little Caesars", "Pizza Hut"} <= set(bases)


def test_a_name_written_only_as_a_modifier_links_no_title(pipeline: Pipeline) -> None:
    """ "A Canadian author" describes the writer: the passage "Canadian literature" is not
    reached through the word."""
    cands = [
        paragraph(
            "Dead Ernest",
            "Dead Ernest is a mystery novel by a Canadian author, published in 1944 in Boston.",
            9.0,
        ),
        *(paragraph(f"Village chronicle {k}", _filler(k), 8.5 - 0.2 * k) for k in range(1, 11)),
        paragraph(
            "Canadian literature", "Writing in the country grew with its small presses.", 0.5
        ),
    ]
    bases = _bases(_packed(pipeline, cands, query="Where was Dead Ernest published first?"))
    assert "title_name:canadian" not in bases.get("Canadian literature", ())
