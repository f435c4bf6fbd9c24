"""Hops that follow the evidence: a passage linked by a distinctive name its text shares with
admitted evidence (not only by its title), chains followed hop by hop, common names left out,
and the sentences that carry each hop kept in excerpts."""

from __future__ import annotations

from ctxbudget.entities import distinctive_names, linkable, modifier_only, name_holder_cap
from ctxbudget.envelope import parse
from ctxbudget.pipeline import Pipeline
from ctxbudget.schemas import Candidate, PackedBatch
from ctxbudget.testing import batch, candidate
from ctxbudget.text import name_phrases
from tests.unit.wiki_paragraphs import paragraph

FILLER = " ".join(
    f"Part {i} of the survey covers the harbour, the market and the river trade." for i in range(5)
)


def _chain() -> list[Candidate]:
    """A three-hop chain whose later hops are titled by something other than the bridge
    entity (the hop-1 answer is named only inside the hop-2 text), under five distractors
    that share the question's words and score above hops 2 and 3."""
    return [
        paragraph(
            "The Glass Orchard",
            "The Glass Orchard is a 1971 film shot on the coast. Its director was Ilse Varnhagen.",
            9.0,
        ),
        *(
            paragraph(
                f"Orchard film {k}", f"An orchard film of the coast, number {k}. " + FILLER, s
            )
            for k, s in ((1, 8.8), (2, 8.6), (3, 8.4), (4, 8.2), (5, 8.0))
        ),
        paragraph(
            "Varnhagen family",
            "The family ran a press in Lübeck. Its best-known member, Ilse Varnhagen, studied "
            "at the Rostmark Academy before she made films.",
            1.2,
        ),
        paragraph(
            "Schools of the north",
            "Several schools were founded in the north. The Rostmark Academy was founded in "
            "1803 in Kellinghusen.",
            0.9,
        ),
    ]


QUESTION = "In what town was the school founded where the director of The Glass Orchard trained?"


def _packed(pipeline: Pipeline, cands: list[Candidate], **kw: object) -> PackedBatch:
    b = batch(cands, query=QUESTION, **kw)
    return pipeline.selector.run(pipeline.consolidator.run(pipeline.router.run(b)))


def test_names_are_capitalised_runs_without_a_sentence_opening_single_word() -> None:
    """Names are runs of capitalised words (particles inside kept); a lone capitalised word
    that opens a sentence, or a short one, is not a name."""
    text = "After Hall died, the University of Southern California named a hall. Paris is far."
    names = name_phrases(text)
    assert "university of southern california" in names
    assert "hall" in names  # "After Hall": the run without its opening word
    assert "paris" not in names


def test_a_name_most_items_hold_is_not_distinctive(pipeline: Pipeline) -> None:
    """Document frequency within the batch decides: a name in every passage (a country)
    links nothing, a name two passages share does."""
    openings = (
        "A brass lamp with a green shade",
        "Oak chairs for a village hall",
        "The clock above the station door",
        "Kettles sold through mail catalogues",
        "Valve radios of the postwar decade",
        "Folding bicycles for city commuters",
        "Box cameras for schoolchildren",
        "Upright pianos in church basements",
        "Sofas covered in wool tweed",
    )
    items = [
        f"{opening} came from a workshop in the United States."
        + (" Ilse Varnhagen drew them." if k < 2 else "")
        for k, opening in enumerate(openings)
    ]
    cb = pipeline.consolidator.run(
        pipeline.router.run(batch([candidate(f"c{k}", t) for k, t in enumerate(items)]))
    )
    found = distinctive_names(cb.items, shared_only=True)
    assert all("united states" not in names for names in found)
    assert sum("ilse varnhagen" in names for names in found) == 2
    assert name_holder_cap(9) < 9
    assert linkable("ilse varnhagen", 4) and not linkable("march", 3)


def test_a_three_hop_chain_is_followed_through_names_in_the_text(pipeline: Pipeline) -> None:
    """Hop 2 names the hop-1 answer in its text (its title is something else), hop 3 names
    what hop 2 hands on: both are admitted, by shared names the basis traces, ahead of
    distractors scored far above them."""
    packed = _packed(pipeline, _chain(), input_limit=900, reserve_tokens=300)
    items = packed.consolidated.items
    basis = {items[a.item].title: a.basis for a in packed.admitted}
    assert "shared_name:ilse varnhagen" in basis["Varnhagen family"]
    assert "shared_name:rostmark academy" in basis["Schools of the north"]


def test_the_chain_is_admitted_in_hop_order(pipeline: Pipeline) -> None:
    """Hop 1, then the passage it hands its answer to, then the next: each admission links
    the following hop, and four of the five distractors scored above them stay out."""
    packed = _packed(pipeline, _chain(), input_limit=700, reserve_tokens=300)
    items = packed.consolidated.items
    by_rank = [items[a.item].title for a in sorted(packed.admitted, key=lambda a: a.rank)]
    hops = [t for t in by_rank if not t.startswith("Orchard film")]
    assert hops == ["The Glass Orchard", "Varnhagen family", "Schools of the north"]
    assert len(by_rank) - len(hops) <= 1


def test_the_sentences_carrying_the_hops_survive_a_tight_budget(pipeline: Pipeline) -> None:
    """At a budget that takes excerpts, the sentence naming the bridge entity and the one
    with the asked-for attribute are the ones rendered."""
    b = batch(_chain(), query=QUESTION, input_limit=700, reserve_tokens=300)
    texts = [t for _, t in parse(pipeline.run(b).pack.rendered)]
    assert any("Ilse Varnhagen, studied at the Rostmark Academy" in t for t in texts)
    assert any("founded in 1803 in Kellinghusen" in t for t in texts)


def test_hop_links_are_deterministic_whatever_the_candidate_order(pipeline: Pipeline) -> None:
    """The same candidates in reverse order give the same pack, byte for byte."""
    a = pipeline.run(batch(_chain(), query=QUESTION, input_limit=900, reserve_tokens=300))
    b = pipeline.run(
        batch(list(reversed(_chain())), query=QUESTION, input_limit=900, reserve_tokens=300)
    )
    assert a.pack.rendered == b.pack.rendered


def test_a_question_without_accents_names_an_accented_title(pipeline: Pipeline) -> None:
    """ "Aschenbrodel" in the question names the passage titled "Aschenbrödel"."""
    cands = [
        paragraph("Aschenbrödel", "Aschenbrödel is a ballet with music by Johann Strauss II.", 1.0),
        paragraph("Ballet", "A ballet is a dance work. " + FILLER, 5.0),
    ]
    b = batch(cands, query="Who composed the music of Aschenbrodel?")
    packed = pipeline.selector.run(pipeline.consolidator.run(pipeline.router.run(b)))
    basis = {packed.consolidated.items[a.item].title: a.basis for a in packed.admitted}
    assert "named_entity" in basis["Aschenbrödel"]


def _one_word_chain() -> list[Candidate]:
    """A two-hop chain whose bridge is a one-word place name ("Kellinghusen") that three
    passages hold, under distractors scored far above the second hop."""
    return [
        paragraph(
            "Ilse Varnhagen",
            "Ilse Varnhagen was a film director born in Kellinghusen in 1931. She made six films.",
            9.0,
        ),
        *(
            paragraph(f"Director survey {k}", f"A survey of film directors, part {k}. " + FILLER, s)
            for k, s in ((1, 8.8), (2, 8.6), (3, 8.4), (4, 8.2), (5, 8.0))
        ),
        paragraph(
            "Stör valley towns",
            "The valley has several market towns. In Kellinghusen a faience "
            "pottery has been made since 1763.",
            1.1,
        ),
        paragraph(
            "Rail lines of Holstein",
            "A branch line once ran from Wrist to Kellinghusen and on to the coast.",
            1.0,
        ),
    ]


ONE_WORD_QUESTION = "What is the birthplace of the film director Ilse Varnhagen famous for?"


def test_a_one_word_name_three_passages_hold_links_the_next_hop(pipeline: Pipeline) -> None:
    """A one-word name (a town) that several passages hold links the passage naming it in
    its text: the hop is traced by the name it shares."""
    b = batch(_one_word_chain(), query=ONE_WORD_QUESTION, input_limit=800, reserve_tokens=300)
    packed = pipeline.selector.run(pipeline.consolidator.run(pipeline.router.run(b)))
    items = packed.consolidated.items
    basis = {items[a.item].title: a.basis for a in packed.admitted}
    assert "shared_name:kellinghusen" in basis["Stör valley towns"]
    holders = sum("kellinghusen" in n for n in distinctive_names(items, shared_only=True))
    assert holders == 3 and linkable("kellinghusen", holders)


def test_months_and_weekdays_link_nothing() -> None:
    """A calendar word is capitalised but names a time: it never links two passages, however
    rare; any other name within the batch's holder cap does."""
    for word in ("march", "june", "december", "monday", "sunday"):
        assert not linkable(word, 1)
    assert linkable("stockholm", 3) and linkable("national action party", 3)


def _floor_chain(verb: str) -> list[Candidate]:
    """The three-hop chain with a third passage naming the hop-1 answer (so its link is
    weaker), and the hop-2 sentence naming it written with ``verb``."""
    extra = paragraph(
        "Varnhagen prize",
        "A prize named after Ilse Varnhagen is given each year in Lübeck to a young painter.",
        0.5,
    )
    out = [
        c.model_copy(update={"text": c.text.replace("studied", verb)})
        if c.title == "Varnhagen family"
        else c
        for c in _chain()
    ]
    return [*out, extra]


def test_the_next_hop_enters_before_the_excerpts_grow(pipeline: Pipeline) -> None:
    """Under the excerpt floor, a weak item an admission links to (the next hop), whose
    sentence naming the shared name carries the question ("trained"), is admitted in the
    first round though its utility is below the floor's share of the first admission's:
    growing a distractor's excerpt back waits, and the hop after it fits too."""
    b = batch(_floor_chain("trained"), query=QUESTION, input_limit=600, reserve_tokens=300)
    packed = pipeline.selector.run(pipeline.consolidator.run(pipeline.router.run(b)))
    items = packed.consolidated.items
    by_title = {items[a.item].title: a for a in packed.admitted}
    first = min(packed.admitted, key=lambda a: a.rank)
    hop = by_title["Varnhagen family"]
    assert hop.utility < 0.5 * first.utility
    assert "shared_name:ilse varnhagen" in hop.basis
    assert "Schools of the north" in by_title
    assert by_title["Orchard film 1"].compress_to is not None


def test_a_shared_name_beside_no_query_term_waits_behind_the_floor(pipeline: Pipeline) -> None:
    """The same chain, but the hop-2 sentence naming the shared name carries nothing of the
    question ("studied"): the weak item waits behind the floor like any other, so the
    distractor's excerpt grows back first."""
    b = batch(_floor_chain("studied"), query=QUESTION, input_limit=600, reserve_tokens=300)
    packed = pipeline.selector.run(pipeline.consolidator.run(pipeline.router.run(b)))
    items = packed.consolidated.items
    by_title = {items[a.item].title: a for a in packed.admitted}
    assert by_title["Orchard film 1"].compress_to is None
    assert "Schools of the north" not in by_title


def test_a_demonym_used_only_before_a_noun_links_nothing(pipeline: Pipeline) -> None:
    """ "Canadian" written before a noun in every passage that holds it describes them and
    links none; "Africa", named as a place (before punctuation or "and"), still links."""
    assert modifier_only("canadian", "Jed MacKay is a Canadian comic writer.")
    assert not modifier_only("africa", "It flows through Africa and Asia.")
    assert not modifier_only("africa", "Imperialism in Africa, as in Asia, grew.")
    assert not modifier_only("stockholm", "Stockholm Arlanda Airport serves the city.")
    texts = [
        "Jed MacKay is a Canadian comic writer. He lives near Africa and works there.",
        "Mélanie Watt is a Canadian author of children's books about Africa.",
        "A Canadian studio animated the series set in Africa.",
    ]
    cb = pipeline.consolidator.run(
        pipeline.router.run(batch([candidate(f"c{k}", t) for k, t in enumerate(texts)]))
    )
    found = distinctive_names(cb.items, shared_only=True)
    assert all("canadian" not in names for names in found)
    assert sum("africa" in names for names in found) == 3
