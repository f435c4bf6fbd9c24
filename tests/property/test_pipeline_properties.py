"""Invariants of the whole pipeline, checked on generated batches (Hypothesis)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxbudget.codec import encode
from ctxbudget.envelope import parse, render, title_is_redundant
from ctxbudget.pipeline import Pipeline
from ctxbudget.policy import PolicyStore
from ctxbudget.schemas import Candidate, CandidateBatch, EvidenceItem, EvidenceSpan
from ctxbudget.testing import batch
from ctxbudget.tokens import TiktokenCounter, TokenizerRegistry
from tests.paths import REPO

STORE = PolicyStore.load(REPO / "policies")
PIPE = Pipeline.from_store(STORE, "default@1", tokenizers=TokenizerRegistry())
COUNTER = TiktokenCounter("cl100k_base")
SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

VOCAB = [
    "keys",
    "expire",
    "after",
    "90",
    "days",
    "rotate",
    "the",
    "gateway",
    "not",
    "region",
    "outage",
    "eu-west",
    "error",
    "E401",
    "plan",
    "pro",
    "basic",
    "if",
    "3.2",
    "ünïcode",
    "<b>",
    "&",
    "\u00e9t\u00e9",
    "数据",
    "😀",
    "fast",
    "slow",
    "because",
]

sentence = st.lists(st.sampled_from(VOCAB), min_size=3, max_size=14).map(
    lambda ws: " ".join(ws).capitalize() + "."
)
texts = st.lists(sentence, min_size=1, max_size=6).map(" ".join)


@st.composite
def candidates(draw: st.DrawFn) -> list[Candidate]:
    n = draw(st.integers(0, 14))
    base = draw(st.lists(texts, min_size=1, max_size=5))
    out = []
    for i in range(n):
        text = draw(st.sampled_from(base)) if draw(st.booleans()) else draw(texts)
        if draw(st.integers(0, 4)) == 0:
            text = "Reposted: " + text
        out.append(
            Candidate.model_validate(
                {
                    "chunk_id": f"c{i}",
                    "doc_id": f"d{draw(st.integers(0, 4))}",
                    "source_id": f"s{draw(st.integers(0, 3))}",
                    "text": text,
                    "version": draw(st.sampled_from([None, None, "1", "2"])),
                    "retrieval_score": draw(st.one_of(st.none(), st.floats(-5, 30))),
                    "rerank_score": draw(st.one_of(st.none(), st.floats(0, 1))),
                    "authority": draw(st.one_of(st.none(), st.floats(0, 1))),
                    "tenant_id": draw(st.sampled_from([None, None, None, "acme", "globex"])),
                }
            )
        )
    return out


@st.composite
def batches(draw: st.DrawFn) -> CandidateBatch:
    return batch(
        draw(candidates()),
        query=draw(
            st.sampled_from(
                [
                    "when do keys expire?",
                    "list all regions affected",
                    "compare basic vs pro plan",
                    "error E401 on 3.2",
                    "how do I rotate keys",
                    "what changed since version 1",
                ]
            )
        ),
        input_limit=draw(st.integers(200, 5000)),
        reserve_tokens=draw(st.one_of(st.none(), st.integers(0, 900))),
    )


@SETTINGS
@given(batches())
def test_never_over_budget_and_tokens_are_exact(b: CandidateBatch) -> None:
    """The pack never exceeds its budget and evidence_tokens is the exact count."""
    pack = PIPE.run(b).pack
    assert pack.evidence_tokens <= pack.budget.evidence_budget
    assert pack.evidence_tokens == COUNTER.count(pack.rendered)
    assert sum(e.tokens for e in pack.evidence) <= pack.evidence_tokens


@SETTINGS
@given(batches(), st.randoms(use_true_random=False))
def test_the_pack_does_not_depend_on_candidate_order(b: CandidateBatch, rnd: object) -> None:
    """Shuffling the candidates gives the byte-identical pack."""
    shuffled = list(b.candidates)
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]
    other = b.model_copy(update={"candidates": tuple(shuffled)})
    assert encode(PIPE.run(b).pack) == encode(PIPE.run(other).pack)


@SETTINGS
@given(batches())
def test_same_input_same_bytes_and_input_untouched(b: CandidateBatch) -> None:
    """Determinism: two runs give identical bytes; the input is not mutated."""
    before = encode(b)
    assert encode(PIPE.run(b).pack) == encode(PIPE.run(b).pack)
    assert encode(b) == before


@SETTINGS
@given(batches())
def test_every_candidate_not_admitted_has_exactly_one_reason(b: CandidateBatch) -> None:
    """Fates and admitted text chunks partition the candidates."""
    routed = PIPE.router.run(b)
    cb = PIPE.consolidator.run(routed)
    packed = PIPE.selector.run(cb)
    finished = PIPE.compressor.run(packed)
    evidence_ids = {e.chunk_ids[0] for e in finished.pack.evidence}
    text_members = sum(it.unit_size for it in cb.items if it.item_id in evidence_ids)
    fates = [*routed.dropped, *cb.dropped, *packed.dropped, *finished.dropped]
    fates_left = len(fates) - len(finished.restored)
    assert fates_left + text_members == len(b.candidates)
    assert sum(finished.pack.dropped.values()) == fates_left


@SETTINGS
@given(batches())
def test_no_unauthorized_or_quarantined_text_reaches_the_pack(b: CandidateBatch) -> None:
    """Cross-tenant passages never appear in any pack field."""
    pack = PIPE.run(b).pack
    foreign = {c.chunk_id for c in b.candidates if c.tenant_id not in (None, "acme")}
    assert not foreign & {cid for e in pack.evidence for cid in e.chunk_ids}


@SETTINGS
@given(batches())
def test_consolidation_is_idempotent(b: CandidateBatch) -> None:
    """Consolidating the representatives again merges nothing more."""
    cb = PIPE.consolidator.run(PIPE.router.run(b))
    reps = tuple(b.candidates[it.members[0]] for it in cb.items)
    again = PIPE.consolidator.run(PIPE.router.run(b.model_copy(update={"candidates": reps})))
    first_ids = sorted(it.item_id for it in cb.items)
    assert sorted(it.item_id for it in again.items) == first_ids


@settings(max_examples=200, deadline=None)
@given(st.text(), st.text(), st.text(alphabet=st.characters(codec="utf-8")))
def test_escaping_round_trips_through_the_envelope(text: str, title: str, chunk: str) -> None:
    """Whatever the evidence holds, the block parses back to it exactly."""
    item = EvidenceItem(
        evidence_id="ev-1",
        chunk_ids=(chunk or "c",),
        doc_id="d",
        source_id="s",
        title=title or None,
        version=None,
        trust="normal",
        text=text,
        spans=(EvidenceSpan(chunk_id=chunk or "c", start=0, end=1),),
        tokens=0,
        compressed=False,
    )
    ((attrs, back),) = parse(render([item]))
    assert back == text
    # A title the text opens with is left out of the tag (the reader has it already).
    if title and title_is_redundant(title, text):
        assert "title" not in attrs
    else:
        assert attrs.get("title", "") == (title or "")


@SETTINGS
@given(batches())
def test_compact_intermediate_messages_decode_to_the_same_models(b: CandidateBatch) -> None:
    """The compact wire form of a Consolidated/PackedBatch decodes to the model written."""
    from ctxbudget.codec import decode, encode_compact
    from ctxbudget.schemas import ConsolidatedBatch, PackedBatch

    routed = PIPE.router.run(b)
    cb = PIPE.consolidator.run(routed)
    packed = PIPE.selector.run(cb)
    assert decode(encode_compact(cb), ConsolidatedBatch) == cb
    assert decode(encode_compact(packed), PackedBatch) == packed
    assert len(encode_compact(packed)) <= len(encode(packed))
