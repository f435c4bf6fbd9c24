"""Invariants of the citation parser, the value normaliser and the verifier, on generated
answers: ids are never invented, a sentence copied from its passage is always supported, a
number written with or without thousands separators is the same value, verdicts follow the
claims one for one and never depend on the verifier's memo."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxbudget.codec import encode
from ctxbudget.pipeline import Pipeline
from ctxbudget.policy import PolicyStore, default_policies_dir
from ctxbudget.schemas import Pack
from ctxbudget.testing import batch, candidate
from ctxbudget.verification import Answer, AnswerVerifier
from ctxbudget.verification.citations import parse_text
from ctxbudget.verification.values import claim_values, index_passage

IDS = st.text("abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=6)
WORDS = st.sampled_from(
    ["keys", "expire", "after", "Paris", "Acme", "rotation", "the", "of", "Carl", "in", "was"]
)
SENTENCE = st.lists(WORDS, min_size=2, max_size=8).map(lambda ws: " ".join(ws).capitalize())
PLACEMENT = st.sampled_from(["before", "after", "attached"])

_PIPELINE = Pipeline.from_store(PolicyStore.load(default_policies_dir()), "default@1")
PASSAGE = (
    "API keys for the Acme gateway expire after 90 days. The old key keeps working for "
    "24 hours. Keys created before 2024-03-01 cannot be rotated. About 12,000 customers in "
    "Paris use 3.5 million keys, 12% of them on March 1, 2024."
)
_PACK: Pack = _PIPELINE.run(batch([candidate("keys", PASSAGE, 9.0)], query="keys expire?")).pack
_EID = _PACK.evidence[0].evidence_id


def _cite(sentence: str, ids: list[str], where: str) -> str:
    group = "[" + ", ".join(ids) + "]"
    if where == "before":
        return f"{sentence} {group}."
    if where == "after":
        return f"{sentence}. {group}"
    return f"{sentence}.{group}"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(SENTENCE, st.lists(IDS, max_size=3), PLACEMENT), min_size=1, max_size=5))
def test_the_parser_gives_each_sentence_exactly_the_ids_written_for_it(
    parts: list[tuple[str, list[str], str]],
) -> None:
    """One claim per sentence, its ids in order (once each), wherever the group was put."""
    text = " ".join(_cite(s, ids, w) if ids else f"{s}." for s, ids, w in parts)
    claims = parse_text(text)
    assert [c.evidence_ids for c in claims] == [tuple(dict.fromkeys(ids)) for _, ids, _ in parts]
    assert all("[" not in c.text for c in claims)


@given(st.text(max_size=300))
def test_the_parser_never_invents_an_id(text: str) -> None:
    """Every cited id is a piece of a bracket group of the text."""
    for c in parse_text(text):
        for i in c.evidence_ids:
            assert i in text and "[" in text


@given(st.integers(min_value=1000, max_value=10**12))
def test_a_number_is_the_same_with_or_without_thousands_separators(n: int) -> None:
    """``12,000`` in the passage supports ``12000`` in the claim, and the reverse."""
    for claim, passage in ((f"{n:,}", str(n)), (str(n), f"{n:,}")):
        values = claim_values(f"about {claim} keys")
        assert values and all(index_passage(f"with {passage} keys").supports(v) for v in values)


@given(st.integers(min_value=1000, max_value=10**9), st.integers(min_value=1, max_value=999))
def test_a_changed_number_is_never_supported(n: int, delta: int) -> None:
    """``n + delta`` is missing from a passage that holds only ``n``."""
    index = index_passage(f"with {n:,} keys")
    assert not all(index.supports(v) for v in claim_values(f"about {n + delta} keys"))


@given(
    st.integers(min_value=1, max_value=28),
    st.integers(min_value=1, max_value=12),
    st.integers(min_value=1900, max_value=2100),
)
def test_every_written_form_of_a_date_is_the_same_date(day: int, month: int, year: int) -> None:
    """ISO, day-month-year and month-day-year forms support one another."""
    names = "January February March April May June July August September October November December"
    name = names.split()[month - 1]
    forms = [f"{year}-{month:02d}-{day:02d}", f"{day} {name} {year}", f"{name} {day}, {year}"]
    for a in forms:
        index = index_passage(f"It opened on {a}.")
        for b in forms:
            values = claim_values(f"It opened on {b}.")
            assert values and all(index.supports(v) for v in values), (a, b)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from([s + "." for s in PASSAGE.split(". ")]), PLACEMENT)
def test_a_sentence_copied_from_its_passage_is_supported(sentence: str, where: str) -> None:
    """Whatever the placement of its citation, a verbatim sentence is supported."""
    sentence = sentence.rstrip(".")
    answer = Answer(request_id=_PACK.request_id, text=_cite(sentence, [_EID], where))
    v = AnswerVerifier().run(answer, _PACK)
    assert [c.status for c in v.claims] == ["supported"]
    assert v.citation_precision == 1.0


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(SENTENCE, st.lists(st.sampled_from([_EID, "zz9", "E2"]), max_size=2)),
        min_size=1,
        max_size=4,
    )
)
def test_verdicts_follow_the_claims_and_never_depend_on_the_memo(
    claims: list[tuple[str, list[str]]],
) -> None:
    """One verdict per claim in order; an id outside the pack is always fabricated; a warm
    verifier writes the same bytes as a cold one."""
    from ctxbudget.verification import AnswerClaim

    answer = Answer(
        request_id=_PACK.request_id,
        claims=tuple(AnswerClaim(text=t, evidence_ids=tuple(ids)) for t, ids in claims),
    )
    warm = AnswerVerifier()
    warm.run(answer, _PACK)
    v = warm.run(answer, _PACK)
    assert encode(v) == encode(AnswerVerifier().run(answer, _PACK))
    assert [c.index for c in v.claims] == list(range(len(claims)))
    for c, (_, ids) in zip(v.claims, claims, strict=True):
        assert (c.status == "fabricated_id") == any(i != _EID for i in ids)
    assert sum(v.counts.values()) == len(claims)


_DIAG_BATCH = batch(
    [
        candidate("keys", PASSAGE, 9.0),
        candidate("copy", PASSAGE, 8.0),
        candidate("other", "The Pro plan of Acme costs $30 a month in Paris since 2019.", 7.0),
        candidate("hidden", "Staff keys at Acme expire after 7 days.", 9.5, tenant_id="x"),
    ],
    query="when do Acme keys expire and what does the Pro plan cost?",
)
_DIAG = _PIPELINE.run(_DIAG_BATCH)
_DIAG_IDS = [e.evidence_id for e in _DIAG.pack.evidence]
_HOLDER = {c: e.evidence_id for e in _DIAG.pack.evidence for c in e.chunk_ids}


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.sampled_from(["keys", "copy", "other", "hidden", "never-1", "never-2"]), unique=True
    ),
    st.lists(
        st.tuples(
            st.sampled_from(["Keys expire after 90 days.", "Keys expire after 91 days.", "Hello."]),
            st.lists(st.sampled_from([*_DIAG_IDS, "zz9"]), max_size=2),
        ),
        max_size=4,
    ),
)
def test_each_expected_passage_gets_the_outcome_its_facts_imply(
    relevant: list[str], claims: list[tuple[str, list[str]]]
) -> None:
    """retrieval_miss iff never a candidate, packing_drop iff a candidate not in the pack,
    ignored iff its item is not cited, used iff every claim citing it is supported."""
    from ctxbudget.schemas import Labels
    from ctxbudget.verification import AnswerClaim, facts_from_batch

    b = _DIAG_BATCH.model_copy(update={"labels": Labels(relevant_chunk_ids=tuple(relevant))})
    facts = facts_from_batch(b, _DIAG.traces)
    assert facts is not None
    answer = Answer(
        request_id=_DIAG.pack.request_id,
        claims=tuple(AnswerClaim(text=t, evidence_ids=tuple(ids)) for t, ids in claims),
    )
    v = AnswerVerifier().run(answer, _DIAG.pack, facts=facts)
    assert v.expected is not None
    assert [e.chunk_id for e in v.expected] == relevant
    candidates = {c.chunk_id for c in b.candidates}
    for e in v.expected:
        if e.chunk_id not in candidates:
            assert e.outcome == "retrieval_miss"
        elif e.chunk_id not in _HOLDER:
            assert e.outcome == "packing_drop" and e.drop_reason is not None
        else:
            eid = _HOLDER[e.chunk_id]
            citing = [c for c in v.claims if eid in c.evidence_ids]
            if not citing:
                assert e.outcome == "ignored"
            elif all(c.status == "supported" for c in citing):
                assert e.outcome == "used"
            else:
                assert e.outcome == "unsupported"
