"""Multi-hop packing: comparison routing and options, entity links, excerpts under pressure,
and the quality of packs on real HotpotQA questions against the naive assembler."""

from __future__ import annotations

import pytest

from ctxbudget.entities import subject_of
from ctxbudget.envelope import parse
from ctxbudget.pipeline import Pipeline
from ctxbudget.policy import PolicyStore
from ctxbudget.schemas import Query
from ctxbudget.stages.route import classify
from ctxbudget.stages.select import comparison_options
from ctxbudget.testing import batch, candidate


@pytest.mark.parametrize(
    "question",
    [
        "Were Scott Derrickson and Ed Wood of the same nationality?",
        "Which was founded first, Arthur's Magazine or First for Women?",
        "Are both Cadmium Chloride and Ethanol used as solvents?",
        "Who is older, Annie Morton or Terry Richardson?",
        "Are Local H and For Against both from the United States?",
        "Between Greyhound Lines and Megabus, which serves more cities?",
        "What do the Nile and the Amazon have in common?",
        "Which magazine was published first, Guitar World or Science News?",
    ],
)
def test_comparison_phrasings_route_to_comparison(store: PolicyStore, question: str) -> None:
    policy, rules = store.get("default@1")
    assert classify(Query(text=question), rules, policy.fallback_class).query_class == (
        "comparison"
    )


@pytest.mark.parametrize(
    "question",
    [
        "The director of the romantic comedy Big Stone Gap is based in what New York city?",
        "Who was the DJ of the compilation album produced by an English cricketer?",
        "What government position was held by the woman who portrayed Corliss Archer?",
        "In what year was the man who resigned as president of Israel in 2000 born?",
        "Which city hosts the university where the author of Dune studied?",
    ],
)
def test_bridge_questions_do_not_route_to_comparison(store: PolicyStore, question: str) -> None:
    policy, rules = store.get("default@1")
    assert classify(Query(text=question), rules, policy.fallback_class).query_class != (
        "comparison"
    )


def test_comparison_options_read_the_names() -> None:
    assert comparison_options("Who is older, Sid Haig or Vic Darchinyan?") == [
        frozenset({"sid", "haig"}),
        frozenset({"vic", "darchinyan"}),
    ]
    assert comparison_options("Are Medici and Senet both board games?") == [
        frozenset({"medici"}),
        frozenset({"senet"}),
    ]


def test_subject_drops_the_qualifier() -> None:
    assert subject_of("Big Stone Gap (film)") == "big stone gap"
    assert subject_of("The") is None and subject_of(None) is None


def _para(title: str, text: str, score: float) -> object:
    return candidate(
        title.lower().replace(" ", "-"), text, score, title=title, source_id="wiki", doc_id=title
    )


def test_the_second_hop_is_admitted_by_its_link(pipeline: Pipeline) -> None:
    """The paragraph the question never names, but the first hop does, earns its place."""
    filler = " ".join(
        f"Sentence {i} about the town's history and its famous fair." for i in range(6)
    )
    paras = [
        _para(
            "Big Stone Gap (film)",
            "Big Stone Gap is a 2014 American romantic comedy film directed by Adriana "
            "Trigiani. It was filmed in Virginia.",
            9.0,
        ),
        _para("Big Stone Gap, Virginia", "Big Stone Gap is a town in Virginia. " + filler, 8.5),
        _para("Gap Creek", "Gap Creek is a stream in Virginia. " + filler, 8.0),
        _para("Stone Mountain", "Stone Mountain is a quartz monzonite dome. " + filler, 7.9),
        _para("Romantic comedy", "Romantic comedy is a film genre. " + filler, 7.5),
        _para(
            "Adriana Trigiani",
            "Adriana Trigiani is an Italian American author and film director based in "
            "Greenwich Village, New York City. She wrote sixteen books.",
            2.0,
        ),
    ]
    b = batch(
        paras,
        query="The director of the romantic comedy Big Stone Gap is based in what New York city?",
        input_limit=1100,
        reserve_tokens=300,
    )
    routed = pipeline.router.run(b)
    packed = pipeline.selector.run(pipeline.consolidator.run(routed))
    items = packed.consolidated.items
    basis = {items[a.item].title: a.basis for a in packed.admitted}
    assert "named_entity" in basis["Big Stone Gap (film)"]
    assert any(b.startswith("bridge:") for b in basis["Adriana Trigiani"])
    pack = pipeline.run(b).pack
    texts = [t for _, t in parse(pack.rendered)]
    assert any("Greenwich Village, New York City" in t for t in texts)
    assert pack.evidence_tokens <= pack.budget.evidence_budget


def test_a_three_hop_chain_is_followed_link_by_link(pipeline: Pipeline) -> None:
    """Composed questions need passages two links away: the second hop is named by the first,
    the third only by the second. Each admission links what its text names, so the chain is
    followed hop by hop, ahead of better-scored passages that share the question's words."""
    filler = " ".join(
        f"Line {i} on the river trade, the harbour and the old market of the valley."
        for i in range(6)
    )
    paras = [
        _para(
            "The Lantern Keeper",
            "The Lantern Keeper is a 1998 novel set in a harbour town. It was written by Mara "
            "Quillon.",
            9.0,
        ),
        _para("Harbour town", "A harbour town is a town with a harbour. " + filler, 8.6),
        _para("Lantern", "A lantern is a portable light. " + filler, 8.4),
        _para("Keeper (novel)", "Keeper is a 2006 novel about a lighthouse. " + filler, 8.2),
        _para("Novel", "A novel is a long work of fiction. " + filler, 8.0),
        _para(
            "Mara Quillon",
            "Mara Quillon is a Welsh writer. She studied at Saint Brannock College before her "
            "first book appeared.",
            2.5,
        ),
        _para(
            "Saint Brannock College",
            "Saint Brannock College is a college in Aberystwyth, founded in 1872 by the "
            "Brannock family.",
            1.5,
        ),
    ]
    b = batch(
        paras,
        query="In what town is the college attended by the author of The Lantern Keeper?",
        input_limit=1100,
        reserve_tokens=300,
    )
    routed = pipeline.router.run(b)
    packed = pipeline.selector.run(pipeline.consolidator.run(routed))
    items = packed.consolidated.items
    basis = {items[a.item].title: a.basis for a in packed.admitted}
    assert "named_entity" in basis["The Lantern Keeper"]
    assert "bridge:the lantern keeper" in basis["Mara Quillon"]
    assert "bridge:mara quillon" in basis["Saint Brannock College"]
    texts = [t for _, t in parse(pipeline.run(b).pack.rendered)]
    assert any("Aberystwyth" in t for t in texts)


def _with(pipeline: Pipeline, **rules: object) -> Pipeline:
    policy = pipeline.policy
    classes = {k: v.model_copy(update=rules) for k, v in policy.classes.items()}
    return Pipeline(
        policy=policy.model_copy(update={"classes": classes}),
        rules=pipeline.router.rules,
        tokenizers=pipeline.router.tokenizers,
    )


def _topics(n: int) -> list[object]:
    words = ["amber", "birch", "cedar", "delta", "ember", "fjord", "grove", "heath", "inlet"]

    def noise(i: int) -> str:
        return " ".join(
            f"The {words[(i + k) % 9]} {words[(i * 2 + k) % 9]} trail {k * 7 + i} crosses "
            f"the {words[(k + 3 * i) % 9]} valley."
            for k in range(10)
        )

    return [
        _para(
            f"Topic {i}", f"Topic {i} was founded in {1900 + i} by engineers. " + noise(i), 9.0 - i
        )
        for i in range(n)
    ]


def test_excerpts_fit_more_distinct_evidence_and_keep_matching_sentences(
    pipeline: Pipeline,
) -> None:
    """Under pressure each item enters as its best sentences: every family gets in."""
    b = batch(_topics(6), query="When was each topic founded by engineers?", input_limit=900)
    pack = _with(pipeline, excerpt_floor=0.0).run(b).pack
    assert len(pack.evidence) == 6 and all(e.compressed for e in pack.evidence)
    texts = [t for _, t in parse(pack.rendered)]
    for i in range(6):
        assert any(f"founded in {1900 + i}" in t for t in texts)
    assert pack.evidence_tokens <= pack.budget.evidence_budget


def test_weak_items_wait_while_strong_excerpts_grow(pipeline: Pipeline) -> None:
    """With ``excerpt_floor``, items far below the best admitted one enter only after the
    strong excerpts have grown; without it, every item enters first."""
    b = batch(_topics(6), query="When was each topic founded by engineers?", input_limit=900)
    floor = _with(pipeline, excerpt_floor=0.5).selector.run(
        pipeline.consolidator.run(pipeline.router.run(b))
    )
    flat = _with(pipeline, excerpt_floor=0.0).selector.run(
        pipeline.consolidator.run(pipeline.router.run(b))
    )
    assert len(floor.admitted) < len(flat.admitted)
    best = floor.admitted[0]
    assert best.compress_to is None or best.estimated_tokens > flat.admitted[0].estimated_tokens


def test_no_pressure_no_excerpts(pipeline: Pipeline) -> None:
    """When the whole passages fit, they go in whole."""
    paras = [
        _para(f"Topic {i}", f"Topic {i} was founded in {1900 + i}. It grew.", 9.0 - i)
        for i in range(3)
    ]
    pack = pipeline.run(batch(paras, query="When was each topic founded?")).pack
    assert len(pack.evidence) == 3 and not any(e.compressed for e in pack.evidence)


def test_an_item_held_by_the_source_cap_is_linked_while_it_waits(pipeline: Pipeline) -> None:
    """The per-source cap holds a passage back; a passage from another source admitted
    meanwhile names it. When the cap yields, the held passage enters as that link's bridge."""
    paras = [
        _para(
            "Big Stone Gap (film)",
            "Big Stone Gap is a 2014 American romantic comedy film. It was filmed in Virginia.",
            9.0,
        ),
        _para(
            "Adriana Trigiani",
            "Adriana Trigiani is an Italian American author and film director based in "
            "Greenwich Village, New York City.",
            6.0,
        ),
        candidate(
            "review",
            "The film was directed by Adriana Trigiani, who also wrote the novel.",
            5.0,
            title="Film review",
            source_id="news",
            doc_id="review",
        ),
    ]
    b = batch(
        paras,
        query="The director of the romantic comedy Big Stone Gap is based in what New York city?",
        input_limit=1100,
        reserve_tokens=300,
    )
    capped = _with(pipeline, per_source_cap=1)
    routed = capped.router.run(b)
    packed = capped.selector.run(capped.consolidator.run(routed))
    items = packed.consolidated.items
    order = [items[a.item].title for a in sorted(packed.admitted, key=lambda a: a.rank)]
    basis = {items[a.item].title: a.basis for a in packed.admitted}
    assert order == ["Big Stone Gap (film)", "Film review", "Adriana Trigiani"]
    assert "bridge:film review" in basis["Adriana Trigiani"]


@pytest.mark.parametrize(
    "question",
    [
        "Which film whose director is younger, Charge It To Me or Danger: Diabolik?",
        "Who was born first, Ivan Foster or Jean Eustache?",
        "Are the directors of films The Hunting Party and Il Sorpasso both from the same country?",
        "Do both films The Falcon and Happy Go Lovely have the directors from the same country?",
        "Which film has the director died earlier, Ek Cheez Milli Hai or The Big Town Round-Up?",
        "Is Tulsa or Denver the more populous city?",
    ],
)
def test_composed_comparisons_route_to_comparison_with_options(
    store: PolicyStore, question: str
) -> None:
    """Comparisons of composed questions are comparisons, and name two options."""
    policy, rules = store.get("default@1")
    assert classify(Query(text=question), rules, policy.fallback_class).query_class == (
        "comparison"
    )
    assert len(comparison_options(question)) == 2


@pytest.mark.parametrize(
    "question",
    [
        "Who is the mother of the director of film Polish-Russian War?",
        "What is the place of birth of the performer of song Blue Or Green?",
        "Which award did the director of film War or Peace win?",
        "Who was born first in the family of Charles Darwin?",
        "Who was the first president of the association which published Journal of Psychotherapy"
        " Integration?",
    ],
)
def test_composed_bridge_questions_do_not_route_to_comparison(
    store: PolicyStore, question: str
) -> None:
    """A chain of hops that happens to hold "or" or "first" is not a comparison."""
    policy, rules = store.get("default@1")
    assert classify(Query(text=question), rules, policy.fallback_class).query_class != (
        "comparison"
    )


def test_a_parenthetical_qualifier_does_not_hide_an_option() -> None:
    """ "North Marion High School (Oregon) and Seoul High School": the first option is the
    school, not its qualifier."""
    options = comparison_options(
        "Are North Marion High School (Oregon) and Seoul High School both in the same country?"
    )
    assert options and "oregon" not in options[0] and "marion" in options[0]
