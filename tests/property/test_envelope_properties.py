"""Whatever the evidence and its metadata hold, a rendered block holds the envelope's own tags
and no other, raw or look-alike, and parses back to what was rendered (Hypothesis)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxbudget.envelope import evidence_ids, header, parse, render
from ctxbudget.escaping import CLOSE_LOOKALIKES, OPEN_LOOKALIKES, SLASH_LOOKALIKES
from ctxbudget.pipeline import Pipeline
from ctxbudget.policy import PolicyStore
from ctxbudget.schemas import Candidate, CandidateBatch, EvidenceItem, EvidenceSpan
from ctxbudget.testing import batch
from ctxbudget.tokens import TiktokenCounter, TokenizerRegistry
from tests.envelope_tags import envelope_tags, own_tags
from tests.paths import REPO

SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

#: Pieces an attacker builds forged tags from.
PIECES = [
    "<",
    ">",
    "</ev>",
    "<ev id=k7m",
    'trust="high"',
    "ev",
    "Ev",
    "EV",
    "evidence_set",
    "evidence",
    " ",
    "  ",
    '"',
    "'",
    "=",
    "&",
    "&lt;",
    "&#65308;",
    "\n",
    "\r",
    "\x0b",
    "\x0c",
    "\x85",
    "\u2028",
    "\u2029",
    "\t",
    "\u200b",
    "\u200d",
    "\u0301",
    "\u202e",
    "\u0435",  # Cyrillic e
    "\u03bd",  # Greek nu
    "\uff45",  # fullwidth e
    "\uff56",  # fullwidth v
    "\U0001d41e",  # mathematical bold e
    "\u02c6",
    "\u00a4",
    "words here.",
    *OPEN_LOOKALIKES,
    *CLOSE_LOOKALIKES,
    *SLASH_LOOKALIKES,
]
hostile = st.lists(
    st.one_of(st.sampled_from(PIECES), st.text(max_size=4)), min_size=0, max_size=16
).map("".join)
nonempty = hostile.filter(bool)


@st.composite
def items(draw: st.DrawFn) -> list[EvidenceItem]:
    n = draw(st.integers(1, 4))
    drafts = []
    for _ in range(n):
        chunk = draw(nonempty)
        text = draw(hostile)
        drafts.append(
            {
                "chunk_ids": (chunk,),
                "doc_id": "d",
                "source_id": draw(nonempty),
                "title": draw(st.one_of(st.none(), nonempty)),
                "version": draw(st.one_of(st.none(), hostile)),
                "trust": draw(st.sampled_from(["normal", "low", "high"])),
                "text": text,
                "spans": (EvidenceSpan(chunk_id=chunk, start=0, end=len(text)),),
                "tokens": 0,
                "compressed": draw(st.booleans()),
            }
        )
    hostile_ids = draw(st.booleans())
    keys = [(d["source_id"], "d", d["chunk_ids"][0], d["text"]) for d in drafts]
    ids = [draw(nonempty) for _ in drafts] if hostile_ids else evidence_ids(keys)
    pairs = zip(drafts, ids, strict=True)
    return [EvidenceItem.model_validate({**d, "evidence_id": i}) for d, i in pairs]


@SETTINGS
@given(items(), st.sampled_from([None, "\u02c6", "\u00a4"]))
def test_a_block_holds_only_its_own_tags_and_parses_back(
    its: list[EvidenceItem], marker: str | None
) -> None:
    """Hostile titles, sources, versions, chunk ids, ids and texts: no extra tag in any form,
    every tag on one line, and every field read back exactly."""
    rendered = render(its, "always", marker=marker)
    assert envelope_tags(rendered) == own_tags(len(its))
    parsed = parse(rendered)
    assert len(parsed) == len(its)
    for item, (attrs, text) in zip(its, parsed, strict=True):
        assert len(header(item, "always", marker=marker).splitlines()) == 1
        assert text == item.text and attrs["id"] == item.evidence_id
        assert attrs["source"] == item.source_id
        assert attrs.get("version", "") == (item.version or "")
        if "title" in attrs:
            assert attrs["title"] == item.title


STORE = PolicyStore.load(REPO / "policies")
TOKENIZERS = TokenizerRegistry()
PIPES = [Pipeline.from_store(STORE, p, tokenizers=TOKENIZERS) for p in ("default@1", "guarded@1")]
COUNTER = TiktokenCounter("cl100k_base")


@st.composite
def hostile_batches(draw: st.DrawFn) -> CandidateBatch:
    n = draw(st.integers(1, 6))
    cands = [
        Candidate.model_validate(
            {
                "chunk_id": f"c{i}{draw(hostile)}",
                "doc_id": f"d{i}",
                "source_id": draw(nonempty),
                "title": draw(st.one_of(st.none(), nonempty)),
                "version": draw(st.one_of(st.none(), hostile)),
                "text": "Keys expire after 90 days. " + draw(hostile),
                "retrieval_score": float(i),
            }
        )
        for i in range(n)
    ]
    return batch(cands, query="when do keys expire?", input_limit=draw(st.integers(300, 3000)))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_batches())
def test_packs_of_hostile_batches_hold_only_their_own_tags(b: CandidateBatch) -> None:
    """Through the whole pipeline, plain and datamarked with cuts: the block's own tags only,
    an exact count, and never over budget."""
    for pipe in PIPES:
        pack = pipe.run(b).pack
        assert envelope_tags(pack.rendered) == own_tags(len(pack.evidence))
        assert COUNTER.count(pack.rendered) == pack.evidence_tokens
        assert pack.evidence_tokens <= max(0, pack.budget.evidence_budget)
