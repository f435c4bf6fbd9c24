"""The hold on oversized passages is an order of admission, not a gate of its own: on any
batch under pressure the pack stays within its budget, does not depend on candidate order,
and only a passage neither the question nor the first admission stands for waits."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxbudget.pipeline import Pipeline
from ctxbudget.policy import PolicyStore
from ctxbudget.schemas import Candidate
from ctxbudget.testing import batch, candidate
from ctxbudget.tokens import TokenizerRegistry
from tests.paths import REPO

PIPELINE = Pipeline.from_store(
    PolicyStore.load(REPO / "policies"), "default@1", tokenizers=TokenizerRegistry()
)
QUESTION = "Which river town did the engraver Mara Vell print her harbour charts in?"
WORDS = ["harbour", "river", "engraver", "charts", "guild", "ledger", "mill", "quarter", "town"]


@st.composite
def _batches(draw: st.DrawFn) -> tuple[list[Candidate], int]:
    n = draw(st.integers(min_value=3, max_value=8))
    cands = []
    for k in range(n):
        # One long sentence (no shorter excerpt) or several short ones.
        long_one = draw(st.booleans())
        picks = draw(st.lists(st.sampled_from(WORDS), min_size=3, max_size=12))
        if long_one:
            text = (
                f"Record {k} lists "
                + ", ".join(f"the {w} of part {i}" for i, w in enumerate(picks))
                + "."
            )
        else:
            text = " ".join(f"Record {k} covers the {w} in part {i}." for i, w in enumerate(picks))
        if draw(st.booleans()):
            text += " Mara Vell worked there."
        title = "Mara Vell" if k == 0 else f"Record {k}"
        cands.append(
            candidate(
                f"c{k}",
                text,
                float(draw(st.integers(1, 90))) / 10,
                title=title,
                source_id="wiki",
                doc_id=title,
            )
        )
    limit = draw(st.sampled_from([330, 380, 450, 560]))
    return cands, limit


@settings(max_examples=60, deadline=None)
@given(drawn=_batches(), data=st.data())
def test_oversized_holds_keep_the_budget_and_the_order_free(
    drawn: tuple[list[Candidate], int], data: st.DataObject
) -> None:
    """Within budget, the same pack for any candidate order, and a held item is never the
    first admission nor the passage the question names."""
    cands, limit = drawn
    order = data.draw(st.permutations(range(len(cands))))
    make = lambda cs: batch(cs, query=QUESTION, input_limit=limit, reserve_tokens=120)  # noqa: E731
    result = PIPELINE.run(make(cands))
    again = PIPELINE.run(make([cands[i] for i in order]))
    assert again.pack.rendered == result.pack.rendered
    assert result.pack.evidence_tokens <= result.pack.budget.evidence_budget
    for adm in result.packed.admitted:
        if "waited:oversized" in adm.basis:
            assert adm.rank > 0
            assert "named_entity" not in adm.basis
