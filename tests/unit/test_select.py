"""The admission stage (ctxbudget.stages.select): a passage per comparison option,
sub-question coverage, the per-source cap, links to the next hop, and excerpts under budget
pressure."""

from __future__ import annotations

from ctxbudget.envelope import parse
from ctxbudget.pipeline import Pipeline
from ctxbudget.testing import batch, candidate


def test_a_comparison_gets_a_passage_for_each_option(pipeline: Pipeline) -> None:
    """The weaker-scored option still gets its passage."""
    b = batch(
        [
            candidate(
                "basic1", "The Basic plan allows 60 requests per minute.", 9.0, source_id="kb"
            ),
            candidate(
                "basic2", "Basic plan customers get email support only.", 8.0, source_id="kb2"
            ),
            candidate(
                "basic3", "Upgrading from the Basic plan keeps your keys.", 7.5, source_id="kb3"
            ),
            candidate("pro1", "The Pro plan allows 600 requests per minute.", 2.0, source_id="kb4"),
        ],
        query="Compare the Basic plan vs the Pro plan",
        input_limit=4096,
    )
    pack = pipeline.run(b).pack
    admitted = {c for e in pack.evidence for c in e.chunk_ids}
    assert "pro1" in admitted and pack.query_class == "comparison"


def test_a_lower_scored_passage_covering_a_missing_part_wins(pipeline: Pipeline) -> None:
    """Coverage beats a near-repeat: the second sub-question gets its passage."""
    b = batch(
        [
            candidate("a1", "Paris is the capital of France and its largest city.", 9.0),
            candidate("a2", "The capital of France is Paris, a city on the Seine.", 8.9),
            candidate("b1", "Berlin has been the capital of Germany since reunification.", 3.0),
        ],
        query="What are the capitals of France and Germany?",
        sub_questions=("capital of France", "capital of Germany"),
        class_hint="point_lookup",
    )
    pack = pipeline.run(b).pack
    admitted = [e.chunk_ids[0] for e in pack.evidence]
    assert "b1" in admitted and "a1" in admitted


def test_per_source_cap_yields_when_the_corpus_is_one_source(pipeline: Pipeline) -> None:
    """The cap is a preference: with one source, its items still fill the budget."""
    b = batch(
        [
            candidate(
                f"c{i}",
                f"Region number {i} named r{i} was affected for {i} hours.",
                10.0 - i,
                source_id="status",
            )
            for i in range(4)
        ],
        query="list all regions affected",
    )
    pack = pipeline.run(b).pack
    assert pack.query_class == "aggregation"
    assert [e.chunk_ids[0] for e in pack.evidence] != [] and len(pack.evidence) == 4
    assert "source_cap" not in pack.dropped


def test_per_source_cap_lets_other_sources_go_first(pipeline: Pipeline) -> None:
    """Items over their source's cap wait until every other source has had its turn."""
    crowd = [
        candidate(
            f"a{i}", f"Region a{i} was affected for {i} hours in March.", 10.0 - i, source_id="a"
        )
        for i in range(4)
    ]
    other = candidate("b0", "Region b0 was affected for 9 hours in March.", 1.0, source_id="b")
    b = batch([*crowd, other], query="list all regions affected")
    packed = pipeline.selector.run(pipeline.consolidator.run(pipeline.router.run(b)))
    items = packed.consolidated.items
    order = [items[a.item].chunk_ids[0] for a in sorted(packed.admitted, key=lambda a: a.rank)]
    # aggregation caps a source at one item: b0 comes before a1..a3 despite its low score
    assert order[:2] == ["a0", "b0"] and sorted(order[2:]) == ["a1", "a2", "a3"]


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
