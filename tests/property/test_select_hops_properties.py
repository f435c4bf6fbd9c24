"""Hop links are a function of the candidates, not of their order: any permutation of a
multi-hop batch gives the same pack, byte for byte, and never exceeds its budget."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxbudget.hops import HopLinks
from ctxbudget.pipeline import Pipeline
from ctxbudget.policy import PolicyStore
from ctxbudget.schemas import Candidate
from ctxbudget.testing import batch, candidate
from ctxbudget.tokens import TokenizerRegistry
from tests.paths import REPO
from tests.unit.admission_options import option

FILLER = " ".join(
    f"Part {i} of the survey covers the harbour and the river trade." for i in range(4)
)

QUESTION = "What is the birthplace of the film director Ilse Varnhagen famous for?"


def _para(title: str, text: str, score: float) -> Candidate:
    return candidate(
        title.lower().replace(" ", "-"), text, score, title=title, source_id="wiki", doc_id=title
    )


CANDIDATES = [
    _para("Ilse Varnhagen", "Ilse Varnhagen was a director. She was born in Kellinghusen.", 9.0),
    *(
        _para(f"Survey {k}", f"A survey of film directors in March, part {k}. " + FILLER, 8.0 - k)
        for k in range(5)
    ),
    _para("Stör towns", "Kellinghusen is famous for faience. It lies near Wrist in March.", 1.1),
    _para("Rail of Holstein", "A line ran from Wrist to Kellinghusen in 1889.", 1.0),
    _para("Wrist", "Wrist is a village. The Stör flows past it.", 0.9),
]

PIPELINE = Pipeline.from_store(
    PolicyStore.load(REPO / "policies"), "default@1", tokenizers=TokenizerRegistry()
)
REFERENCE = {
    limit: PIPELINE.run(batch(CANDIDATES, query=QUESTION, input_limit=limit, reserve_tokens=300))
    for limit in (700, 900)
}


@settings(max_examples=40, deadline=None)
@given(order=st.permutations(range(len(CANDIDATES))), limit=st.sampled_from([700, 900]))
def test_hop_links_do_not_depend_on_candidate_order(order: list[int], limit: int) -> None:
    """Every order of the same candidates packs to the same bytes, within the budget."""
    cands = [CANDIDATES[i] for i in order]
    pack = PIPELINE.run(batch(cands, query=QUESTION, input_limit=limit, reserve_tokens=300)).pack
    assert pack.rendered == REFERENCE[limit].pack.rendered
    assert pack.evidence_tokens <= pack.budget.evidence_budget


_WORDS = st.sampled_from(["new", "york", "of", "history", "old", "ork", "n"])


@settings(max_examples=60, deadline=None)
@given(
    titles=st.lists(st.lists(_WORDS, min_size=1, max_size=4), min_size=1, max_size=6),
    name=st.lists(_WORDS, min_size=1, max_size=3),
    spacing=st.sampled_from([" ", "  "]),
)
def test_title_holders_match_a_search_of_every_title(
    titles: list[list[str]], name: list[str], spacing: str
) -> None:
    """The titles found holding a name through the index of title words are exactly those a
    search of every title finds (so the title links, and the packs, are as before)."""
    options = [
        option(k, subject=" ".join(t), subject_key=f" {' '.join(t)} ", spaced_words="  ")
        for k, t in enumerate(titles)
    ]
    run = HopLinks()
    run.options = options
    phrase = spacing.join(name)
    key = f" {phrase} "
    assert run._title_holders(phrase) == sum(1 for r in options if key in r.subject_key)
