"""Under budget pressure, a passage that would take a large share of the budget on a weak
link waits: the smaller linked evidence goes first, and the large passage enters with the
room left, traced as ``waited:oversized``."""

from __future__ import annotations

from ctxbudget.pipeline import Pipeline
from ctxbudget.schemas import Candidate
from ctxbudget.stages.select import WHOLE_SHARE
from ctxbudget.testing import batch, candidate

QUESTION = "Where was the founder of Quillon Press born?"

SURVEY = (
    "The harbour survey of Quillon Press lists the founder's shops, the printers, the binders, "
    "the paper mills along the river, the ink makers of the old quarter, the carters who "
    "brought the rag from the hill farms, the boatmen who took the bound books down to the "
    "coast, and every guild hall, warehouse and tavern where the trade met in the long years "
    "before the railway came to the valley and the town grew past its walls."
)
LEDGER = (
    "The ledger of the guilds names the founder of every press, bindery and mill that paid "
    "its dues to the harbour court in the years when the river carried the trade, with the "
    "sums each paid and the streets where each shop stood."
)
FILLER = " ".join(
    f"Part {i} of the record covers the harbour trade and the river." for i in range(5)
)


def _para(title: str, text: str, score: float) -> Candidate:
    return candidate(
        title.lower().replace(" ", "-"), text, score, title=title, source_id="wiki", doc_id=title
    )


def _paras() -> list[Candidate]:
    return [
        _para("Quillon Press", "Quillon Press is a map printer. It was founded by Mara Vell.", 9.0),
        _para("Harbour survey", SURVEY, 8.8),
        _para("River trade", "The river trade grew. " + FILLER, 8.0),
        _para("Old quarter", "The old quarter is by the harbour. " + FILLER, 7.5),
        _para("Ledger of the guilds", LEDGER, 8.5),
        _para("Engravers of Tarnow", "Mara Vell was born in Tarnow in 1791. She engraved.", 1.0),
    ]


def test_an_oversized_weakly_linked_passage_waits_for_the_next_hop(pipeline: Pipeline) -> None:
    """The one-sentence survey (over a quarter of the budget, named by nothing) enters after
    the short passage that carries the founder's name on, and says it waited."""
    b = batch(_paras(), query=QUESTION, input_limit=420, reserve_tokens=120)
    packed = pipeline.selector.run(pipeline.consolidator.run(pipeline.router.run(b)))
    items = packed.consolidated.items
    by_title = {items[a.item].title: a for a in packed.admitted}
    budget = packed.consolidated.routed.budget.evidence_budget
    survey, hop = by_title["Harbour survey"], by_title["Engravers of Tarnow"]
    assert survey.estimated_tokens > WHOLE_SHARE * budget
    assert "waited:oversized" in survey.basis
    assert hop.rank < survey.rank
    assert any(b.startswith("shared_name:") for b in hop.basis)
    assert "waited:oversized" not in by_title["Quillon Press"].basis
    pack = pipeline.run(b).pack
    assert pack.evidence_tokens <= pack.budget.evidence_budget


def test_without_pressure_nothing_waits_for_its_size(pipeline: Pipeline) -> None:
    """When every passage fits whole, none is held back for its size."""
    b = batch(_paras(), query=QUESTION, input_limit=4096, reserve_tokens=300)
    packed = pipeline.selector.run(pipeline.consolidator.run(pipeline.router.run(b)))
    assert len(packed.admitted) == len(packed.consolidated.items)
    assert not any("waited:oversized" in a.basis for a in packed.admitted)
