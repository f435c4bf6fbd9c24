"""The verify stage: citations read from prose, values normalised, each claim's status, the
precision, completeness and abstention figures, and the four-way diagnosis from labels."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ctxbudget.codec import encode
from ctxbudget.pipeline import Pipeline
from ctxbudget.schemas import Labels, Pack
from ctxbudget.testing import batch, candidate
from ctxbudget.verification import (
    Answer,
    AnswerClaim,
    AnswerVerifier,
    VerifyError,
    facts_from_batch,
    facts_from_traces,
)
from ctxbudget.verification.citations import parse_text
from ctxbudget.verification.values import claim_values, index_passage

KEYS = (
    "API keys for the Acme gateway expire after 90 days. The old key keeps working for 24 hours "
    "after rotation. Keys created before 2024-03-01 cannot be rotated; 12,000 customers use them."
)
PRICE = "The Pro plan costs $3.5 million a year for 12% of the Fortune 500, says Carl Rogers."


def _pack(pipeline: Pipeline) -> Pack:
    b = batch(
        [candidate("keys", KEYS, 9.0), candidate("price", PRICE, 8.0)],
        query="when do Acme API keys expire and what does the Pro plan cost?",
    )
    return pipeline.run(b).pack


def _ids(pack: Pack) -> dict[str, str]:
    return {e.chunk_ids[0]: e.evidence_id for e in pack.evidence}


# ---------------------------------------------------------------- citations


def test_citations_before_or_after_the_final_punctuation_belong_to_their_sentence() -> None:
    """``[a].``, ``. [b]``, ``.[c][d]`` and ``[e, f].`` each cite for the sentence they close."""
    claims = parse_text("A is 1 [a]. B is 2. [b] C is 3.[c][d] D is 4 [e, f].")
    assert [(c.text, c.evidence_ids) for c in claims] == [
        ("A is 1.", ("a",)),
        ("B is 2.", ("b",)),
        ("C is 3.", ("c", "d")),
        ("D is 4.", ("e", "f")),
    ]


def test_initials_abbreviations_and_decimals_do_not_end_a_sentence() -> None:
    """``J. R. R. Tolkien``, ``E.P. Dutton``, ``Dr. Who`` and ``1.355`` stay in one claim."""
    claims = parse_text(
        "J. R. R. Tolkien and E.P. Dutton met Dr. Who in 1.355 hours [x]. Then [y]."
    )
    assert [c.evidence_ids for c in claims] == [("x",), ("y",)]


def test_brackets_inside_a_sentence_are_text_unless_they_hold_known_ids() -> None:
    """``[who]`` and ``2015[update]`` are the passage's words; a known id inside cites."""
    claims = parse_text(
        "He [who] sang as of 2015[update]. [k1] X [k2] is Y.", known=frozenset({"k2"})
    )
    assert claims[0].text == "He [who] sang as of 2015[update]."
    assert claims[0].evidence_ids == ("k1",)
    assert claims[1].evidence_ids == ("k2",)


def test_a_line_of_citations_alone_cites_for_the_sentence_before() -> None:
    """A citation group on its own line adds its ids to the previous claim."""
    claims = parse_text("Keys expire after 90 days.\n[k1]")
    assert [(c.text, c.evidence_ids) for c in claims] == [("Keys expire after 90 days.", ("k1",))]


# ---------------------------------------------------------------- values


@pytest.mark.parametrize(
    ("claim", "passage"),
    [
        ("12000 customers", "12,000 customers"),
        ("3,500,000 dollars", "$3.5 million"),
        ("12 percent", "12%"),
        ("1 March 2024", "2024-03-01"),
        ("March 1, 2024", "1st of March, 2024"),
        ("March 2024", "on 1 March 2024"),
        ("90-day window", "after 90 calendar days"),
        ("ALÛ", "alû's"),
        ("the 1990s", "in 1990"),
    ],
)
def test_a_value_written_another_way_is_still_found(claim: str, passage: str) -> None:
    """Thousands separators, scale words, percent signs, date forms, units, case and accents."""
    index = index_passage(passage)
    values = claim_values(claim)
    assert values and all(index.supports(v) for v in values), [v.surface for v in values]


@pytest.mark.parametrize(
    ("claim", "passage", "missing"),
    [
        ("12001 customers", "12,000 customers", "12001"),
        ("90 hours", "90 days", "90 hours"),
        ("2 March 2024", "2024-03-01", "2 March 2024"),
        ("11%", "12%", "11%"),
        ("He met Carl Jung", "he met Carl Rogers", "Jung"),
    ],
)
def test_a_changed_value_is_missing(claim: str, passage: str, missing: str) -> None:
    """A number, unit, date, percentage or name the passage does not hold is named."""
    index = index_passage(passage)
    assert [v.surface for v in claim_values(claim) if not index.supports(v)] == [missing]


def test_a_sentence_opening_word_is_a_name_only_when_it_is_not_a_common_word() -> None:
    """``According``, ``The`` and ``Founded`` open sentences; ``Paris`` names a place."""
    assert [v.surface for v in claim_values("According to it, Paris won.")] == ["Paris"]
    assert [v.surface for v in claim_values("Founded in 1990; The club won.")] == ["1990"]
    assert [v.surface for v in claim_values("Paris is big.")] == ["Paris"]


# ---------------------------------------------------------------- verdicts


def test_each_status_is_found_and_named(pipeline: Pipeline) -> None:
    """supported, unsupported_value (with what is missing), fabricated_id, uncited, uncheckable."""
    pack = _pack(pipeline)
    k, p = _ids(pack)["keys"], _ids(pack)["price"]
    text = (
        f"API keys expire after 90 days [{k}]. The old key works for 48 hours. [{k}] "
        f"The Pro plan costs $3.5 million [{p}, zz9]. Carl Rogers said so. I hope this helps."
    )
    v = AnswerVerifier().run(Answer(request_id=pack.request_id, text=text), pack)
    assert [c.status for c in v.claims] == [
        "supported",
        "unsupported_value",
        "fabricated_id",
        "uncited",
        "uncheckable",
    ]
    assert v.claims[1].missing == ("48 hours",)
    assert v.claims[2].unknown_ids == ("zz9",)
    assert v.claims[3].missing == ("Carl", "Rogers")
    assert v.counts["supported"] == 1 and sum(v.counts.values()) == 5
    assert v.citations == 4 and v.citations_supporting == 1 and v.citation_precision == 0.25
    assert v.claims_needing_evidence == 4 and v.citation_completeness == 0.25


def test_a_citation_that_holds_none_of_the_claims_values_lowers_precision(
    pipeline: Pipeline,
) -> None:
    """The claim stays supported by its other citation; the extra one does not count."""
    pack = _pack(pipeline)
    k, p = _ids(pack)["keys"], _ids(pack)["price"]
    claim = AnswerClaim(text="API keys expire after 90 days.", evidence_ids=(k, p))
    v = AnswerVerifier().run(Answer(request_id=pack.request_id, claims=(claim,)), pack)
    assert v.claims[0].status == "supported"
    assert (v.citations, v.citations_supporting, v.citation_precision) == (2, 1, 0.5)
    assert v.form == "claims"


def test_the_title_of_a_passage_is_part_of_what_it_says(pipeline: Pipeline) -> None:
    """A name only the title holds is supported: the model sees the title in the block."""
    b = batch([candidate("t", "It was founded in 1963.", 9.0, title="Journal of Physics")])
    pack = pipeline.run(b).pack
    eid = pack.evidence[0].evidence_id
    answer = Answer(
        request_id=pack.request_id, text=f"The Journal of Physics began in 1963 [{eid}]."
    )
    assert AnswerVerifier().run(answer, pack).claims[0].status == "supported"


def test_the_abstention_check_compares_the_answer_with_the_pack(pipeline: Pipeline) -> None:
    """Saying the evidence is insufficient over an ``ok`` pack is flagged, and answering in
    full over a ``no_evidence`` pack."""
    pack = _pack(pipeline)
    v = AnswerVerifier().run(
        Answer(request_id=pack.request_id, text="The evidence does not say when keys expire."), pack
    )
    assert v.abstained and v.abstention == "abstained_with_evidence"
    assert v.claims[0].status == "uncheckable"
    empty = pipeline.run(batch([], query="when do keys expire?")).pack
    assert empty.answerability == "no_evidence"
    v = AnswerVerifier().run(
        Answer(request_id=empty.request_id, text="Keys expire after 90 days at Acme."), empty
    )
    assert not v.abstained and v.abstention == "answered_without_evidence"


def test_an_answer_holds_text_or_claims_never_both() -> None:
    """The Answer model refuses an answer with both forms, or neither."""
    with pytest.raises(ValidationError):
        Answer(request_id="r", text="x", claims=())
    with pytest.raises(ValidationError):
        Answer(request_id="r")


def test_an_answer_is_checked_only_against_its_own_pack(pipeline: Pipeline) -> None:
    """Another request id or lane is an error, never a silent verdict."""
    pack = _pack(pipeline)
    with pytest.raises(VerifyError):
        AnswerVerifier().run(Answer(request_id="other", text="x"), pack)
    with pytest.raises(VerifyError):
        AnswerVerifier().run(Answer(request_id=pack.request_id, lane="shadow", text="x"), pack)


def test_the_same_answer_and_pack_give_byte_identical_verdicts(pipeline: Pipeline) -> None:
    """Deterministic: a fresh verifier and a warm one write the same bytes."""
    pack = _pack(pipeline)
    k = _ids(pack)["keys"]
    answer = Answer(request_id=pack.request_id, text=f"Keys expire after 90 days [{k}].")
    warm = AnswerVerifier()
    warm.run(answer, pack)
    assert encode(warm.run(answer, pack)) == encode(AnswerVerifier().run(answer, pack))


# ---------------------------------------------------------------- diagnosis


def test_every_expected_passage_gets_one_of_the_four_outcomes(pipeline: Pipeline) -> None:
    """retrieval_miss, packing_drop (with the trace's reason), ignored, unsupported, used."""
    b = batch(
        [
            candidate("keys", KEYS, 9.0),
            candidate("price", PRICE, 8.0),
            candidate("copy", KEYS, 7.0),
            candidate("low", "Unrelated gardening tips for tomatoes in spring.", 0.1),
            candidate("secret", "Acme API keys for staff expire after 7 days.", 9.5, tenant_id="x"),
        ],
        query="when do Acme API keys expire and what does the Pro plan cost?",
    )
    b = b.model_copy(
        update={
            "labels": Labels(relevant_chunk_ids=("keys", "price", "gone", "low", "copy", "secret"))
        }
    )
    result = pipeline.run(b)
    pack = result.pack
    ids = {c: e.evidence_id for e in pack.evidence for c in e.chunk_ids}
    text = f"Keys expire after 90 days [{ids['keys']}]. The plan costs $9 [{ids['price']}]."
    answer = Answer(request_id=pack.request_id, text=text)
    facts = facts_from_batch(b, result.traces)
    assert facts is not None
    v = AnswerVerifier().run(answer, pack, facts=facts)
    assert v.expected is not None
    outcomes = {e.chunk_id: e for e in v.expected}
    assert [e.chunk_id for e in v.expected] == ["keys", "price", "gone", "low", "copy", "secret"]
    assert outcomes["keys"].outcome == "used"
    assert outcomes["copy"].outcome == "used"  # a merged copy shares its family's evidence id
    assert outcomes["copy"].evidence_id == outcomes["keys"].evidence_id
    assert outcomes["gone"].outcome == "retrieval_miss"
    assert outcomes["price"].outcome == "unsupported"
    assert outcomes["low"].outcome == "ignored"
    assert outcomes["secret"].outcome == "packing_drop"
    assert outcomes["secret"].drop_reason == "unauthorized"
    from_traces = facts_from_traces(result.traces)
    assert from_traces is not None and from_traces.relevant == facts.relevant
    again = AnswerVerifier().run(answer, pack, facts=from_traces)
    assert again.expected == v.expected


def test_an_admitted_passage_nobody_cites_is_ignored(pipeline: Pipeline) -> None:
    """In the pack, not cited: ``ignored``, with the evidence id that held it."""
    b = batch([candidate("keys", KEYS, 9.0)], query="when do API keys expire?")
    b = b.model_copy(update={"labels": Labels(relevant_chunk_ids=("keys",))})
    pack = pipeline.run(b).pack
    facts = facts_from_batch(b)
    assert facts is not None
    v = AnswerVerifier().run(Answer(request_id=pack.request_id, text="No idea."), pack, facts=facts)
    assert v.expected is not None
    assert v.expected[0].outcome == "ignored"
    assert v.expected[0].evidence_id == pack.evidence[0].evidence_id
