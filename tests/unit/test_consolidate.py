"""The consolidation stage (ctxbudget.stages.consolidate): families, versions, spans and parents
with every merged id recorded, and the pair-work budget on hostile batches."""

from __future__ import annotations

import random
from typing import Any

import pytest

import ctxbudget.near_duplicates as near_duplicates_mod
from ctxbudget.codec import encode
from ctxbudget.errors import LimitError
from ctxbudget.near_duplicates import DisjointSets
from ctxbudget.pipeline import Pipeline
from ctxbudget.policy import PolicyStore
from ctxbudget.schemas import Candidate, CandidateBatch, ConsolidatedBatch, RoutedBatch
from ctxbudget.stages.consolidate import Consolidator
from ctxbudget.stages.route import QueryRouter
from ctxbudget.testing import batch, candidate
from ctxbudget.text import containment, jaccard
from ctxbudget.tokens import TokenizerRegistry

PRESS = (
    "Acme Corp announced on Monday that its new gateway will support 10,000 requests per "
    "second, a tenfold increase over the previous release, starting in the third quarter."
)


def consolidate(store: PolicyStore, b: CandidateBatch) -> ConsolidatedBatch:
    policy, rules = store.get("default@1")
    routed = QueryRouter(policy=policy, rules=rules, tokenizers=TokenizerRegistry()).run(b)
    return Consolidator(policy=policy).run(routed)


def test_identical_chunk_ids_collapse(store: PolicyStore) -> None:
    """The same chunk twice is one item and one 'duplicate' fate."""
    c = candidate("c1", "some text here", 2.0)
    out = consolidate(store, batch([c, c]))
    assert [it.chunk_ids for it in out.items] == [("c1",)]
    assert [f.reason for f in out.dropped] == ["duplicate"]


def test_syndicated_copies_form_one_family_shown_as_the_clean_original(store: PolicyStore) -> None:
    """Five copies of a press release are one source, not five confirmations; the original,
    without the reposting boilerplate, represents them."""
    copies = [
        candidate(
            f"copy{i}", f"Reposted from newswire {i}: " + PRESS.replace(",", ""), score=1.0 + i / 10
        )
        for i in range(4)
    ]
    orig = candidate("orig", PRESS, score=3.0)
    other = candidate("other", "A different passage about pricing tiers and discounts.", 2.5)
    out = consolidate(store, batch([*copies, orig, other]))
    assert len(out.items) == 2
    fam = out.items[0]
    assert fam.item_id == "orig" and fam.chunk_ids[0] == "orig"
    assert set(fam.chunk_ids) == {"orig", "copy0", "copy1", "copy2", "copy3"}
    assert {f.reason for f in out.dropped} == {"near_duplicate"}
    assert all(f.kept_as == "orig" for f in out.dropped)


def test_exact_duplicates_after_normalisation_are_duplicates(store: PolicyStore) -> None:
    """Case and punctuation differences do not make a new source; the family is shown as its
    cheaper copy and keeps its best copy's score."""
    out = consolidate(
        store, batch([candidate("a", "Hello, World!", 2.0), candidate("b", "hello world", 1.0)])
    )
    assert [it.chunk_ids for it in out.items] == [("b", "a")]
    assert out.items[0].score == 2.0
    assert [f.reason for f in out.dropped] == ["duplicate"]


def test_independent_authoritative_sources_are_kept_apart(store: PolicyStore) -> None:
    """Two registries stating the same rule in their own words are two confirmations."""
    a = candidate("a", PRESS, 2.0, source_id="regulator-eu", authority=0.95)
    reworded = PRESS.replace("announced on Monday that", "said this week").replace(
        "starting in", "from"
    )
    b = candidate("b", reworded, 1.0, source_id="regulator-us", authority=0.95)
    assert len(consolidate(store, batch([a, b])).items) == 2


def test_a_verbatim_copy_on_an_authoritative_site_is_still_a_copy(store: PolicyStore) -> None:
    """Authority does not turn a reposted text into an independent confirmation."""
    a = candidate("a", PRESS, 2.0, source_id="regulator-eu", authority=0.95)
    b = candidate("b", "Reposted: " + PRESS, 1.0, source_id="mirror", authority=0.95)
    assert len(consolidate(store, batch([a, b])).items) == 1


def test_an_older_version_beside_a_newer_one_is_stale(store: PolicyStore) -> None:
    """Old vs new: the newest version wins, the old one is dropped with a reason."""
    old = candidate("old", "Keys expire after 30 days.", 3.0, doc_id="kb", version="2")
    new = candidate("new", "Keys expire after 90 days.", 1.0, doc_id="kb", version="10")
    out = consolidate(store, batch([old, new], query="when do keys expire?"))
    assert [it.item_id for it in out.items] == ["new"]
    assert [(f.chunk_id, f.reason) for f in out.dropped] == [("old", "stale_version")]


def test_every_chunk_of_the_newest_version_stays_whatever_its_date(store: PolicyStore) -> None:
    """Two chunks of one version are parts of one document, not versions of it: a later date
    on one of them does not make the other stale; the older version still is."""
    kw = {"doc_id": "kb", "version": "2"}
    intro = candidate("intro", "Keys expire after 90 days.", 2.0, published_at="2023-06-06", **kw)
    notes = candidate(
        "notes", "Rotation is automatic on the paid plan.", 1.5, published_at="2025-12-28", **kw
    )
    old = candidate(
        "old",
        "Keys expire after 30 days.",
        3.0,
        doc_id="kb",
        version="1",
        published_at="2021-04-28",
    )
    out = consolidate(store, batch([intro, notes, old], query="when do keys expire?"))
    assert {cid for it in out.items for cid in it.chunk_ids} == {"intro", "notes"}
    assert [(f.chunk_id, f.reason, f.detail) for f in out.dropped] == [
        ("old", "stale_version", "version 1 beside 2")
    ]


def test_history_questions_keep_every_version(store: PolicyStore) -> None:
    """'What changed' needs both versions."""
    old = candidate("old", "Keys expire after 30 days.", 3.0, doc_id="kb", version="1")
    new = candidate("new", "Keys expire after 90 days.", 1.0, doc_id="kb", version="2")
    out = consolidate(store, batch([old, new], query="what changed in key expiry since v1?"))
    assert {it.item_id for it in out.items} == {"old", "new"}


def test_as_of_picks_the_version_current_at_that_date(store: PolicyStore) -> None:
    """With as_of, a version published later is not the current one."""
    v1 = candidate(
        "v1",
        "Rate limit is 60 per minute.",
        1.0,
        doc_id="kb",
        version="1",
        published_at="2024-01-01",
    )
    v2 = candidate(
        "v2",
        "Rate limit is 100 per minute.",
        1.0,
        doc_id="kb",
        version="2",
        published_at="2025-06-01",
    )
    out = consolidate(store, batch([v1, v2], as_of="2024-12-31"))
    assert [it.item_id for it in out.items] == ["v1"]


def test_overlapping_spans_merge_in_document_order(store: PolicyStore) -> None:
    """Overlapping chunks of one document become one text with a span map."""
    doc = "Alpha beta gamma. Delta epsilon zeta. Eta theta iota. Kappa lambda mu."
    a = candidate("a", doc[0:37], 1.0, doc_id="d", span={"start": 0, "end": 37})
    b = candidate("b", doc[18:], 2.0, doc_id="d", span={"start": 18, "end": len(doc)})
    out = consolidate(store, batch([b, a]))
    (item,) = out.items
    assert item.text == doc
    assert item.chunk_ids == ("b", "a") and item.unit_size == 2
    assert [(p.chunk_id, p.start, p.end, p.at) for p in item.pieces] == [
        ("a", 0, 37, 0),
        ("b", 19, len(doc) - 18, 37),
    ]
    assert out.dropped == ()


def test_children_of_one_parent_are_grouped(store: PolicyStore) -> None:
    """Sections of one parent travel together, in document order."""
    a = candidate(
        "a", "First step: unplug.", 1.0, doc_id="d", parent_id="p", span={"start": 0, "end": 19}
    )
    b = candidate(
        "b", "Second step: wait.", 2.0, doc_id="d", parent_id="p", span={"start": 100, "end": 118}
    )
    (item,) = consolidate(store, batch([b, a])).items
    assert item.text == "First step: unplug.\nSecond step: wait."
    assert set(item.chunk_ids) == {"a", "b"}


def test_near_duplicate_by_embedding(store: PolicyStore) -> None:
    """With embeddings on every candidate, cosine finds paraphrased copies."""
    a = candidate("a", "The cat sat on the mat.", 2.0, embedding=(1.0, 0.0, 0.01))
    b = candidate("b", "A feline rested upon the rug.", 1.0, embedding=(1.0, 0.0, 0.0))
    c = candidate("c", "Stock prices fell sharply.", 1.5, embedding=(0.0, 1.0, 0.0))
    out = consolidate(store, batch([a, b, c]))
    assert [it.chunk_ids for it in out.items] == [("a", "b"), ("c",)]


def test_inputs_are_not_mutated(store: PolicyStore) -> None:
    """The batch we pass in is equal to itself afterwards (frozen models, no copies changed)."""
    cands: list[Candidate] = [candidate("a", PRESS, 1.0), candidate("b", PRESS, 2.0)]
    b = batch(cands)
    before = b.model_dump()
    consolidate(store, b)
    assert b.model_dump() == before


def test_version_order_is_numeric_and_takes_huge_numbers() -> None:
    """'1.10' is after '1.9'; a 5,000-digit version orders without int() refusing it."""
    from ctxbudget.stages.consolidate import version_key

    assert version_key("1.10", None) > version_key("1.9", None)
    assert version_key("10", None) > version_key("9", None)
    assert version_key("9" * 5000, None) > version_key("8" + "9" * 4999, None)
    assert version_key("1", "2024-01-02") > version_key("1", "2024-01-01")


def test_the_cheapest_copy_represents_a_family_even_when_ranked_lower(store: PolicyStore) -> None:
    """A syndicated copy that retrieval ranked first still yields to the plain original: the
    family's text is the original's, its score the copy's."""
    story = PRESS + (
        " The company said the release had been tested with its largest customers for six"
        " months, and that existing gateways can be upgraded in place without downtime."
    )
    copy = candidate("copy", "Reposted from wire.example: " + story, 3.0)
    orig = candidate("orig", story, 1.0)
    out = consolidate(store, batch([copy, orig]))
    [fam] = out.items
    assert fam.item_id == "orig" and fam.text == story
    assert fam.chunk_ids == ("orig", "copy") and fam.score == 3.0
    assert [(f.chunk_id, f.reason, f.kept_as) for f in out.dropped] == [
        ("copy", "near_duplicate", "orig")
    ]


def test_a_cheaper_copy_that_lost_content_does_not_represent(store: PolicyStore) -> None:
    """A copy that kept only part of the best-ranked text (here about half) is cheaper but
    loses content: the best-ranked whole text represents the family."""
    whole = PRESS + (
        " Pricing will be announced at the partner conference in Berlin next month, together"
        " with the support terms and the list of regions where the gateway launches first."
    )
    cut = candidate("cut", PRESS, 1.0)
    full = candidate("full", whole, 3.0)
    out = consolidate(store, batch([cut, full]))
    assert [it.item_id for it in out.items] == ["full"]


def test_the_exact_pair_search_and_the_shared_shingle_table_agree(store: PolicyStore) -> None:
    """A pair budget just at the exact work (far under the bound the table needs) makes the
    prefix filter find the copies: the same batch as the table gives."""
    copies = [
        candidate(f"copy{i}", f"Reposted from newswire {i}: " + PRESS[: 60 + 20 * i], 1.0 + i)
        for i in range(5)
    ]
    other = candidate("other", "A different passage about pricing tiers and discounts.", 2.5)
    policy, rules = store.get("default@1")
    routed = QueryRouter(policy=policy, rules=rules, tokenizers=TokenizerRegistry()).run(
        batch([*copies, candidate("orig", PRESS, 3.0), other])
    )
    with pytest.raises(LimitError) as info:
        Consolidator(policy=policy, max_pair_checks=1).run(routed)
    exact = Consolidator(policy=policy, max_pair_checks=info.value.size).run(routed)
    table = Consolidator(policy=policy).run(routed)
    assert encode(exact) == encode(table)
    assert len(table.items) < 7  # copies were found


@pytest.mark.parametrize(
    "where",
    ["two documents", "one document, far apart", "two sources of high authority"],
)
def test_identical_text_under_two_chunk_ids_is_one_family(store: PolicyStore, where: str) -> None:
    """A paragraph repeated under a second chunk id is one family, with nothing else in the
    batch near it."""
    text = "Natalie Wood was an American actress who began acting in films at the age of four."
    other = "The film was released in 1961 and directed by Robert Wise, with music by Bernstein."
    kw_a: dict[str, object] = {"doc_id": "d1"}
    kw_b: dict[str, object] = {"doc_id": "d2"}
    if where == "one document, far apart":
        kw_b = {"doc_id": "d1", "span": {"start": 900, "end": 900 + len(text)}}
        kw_a = {"doc_id": "d1", "span": {"start": 0, "end": len(text)}}
    elif where == "two sources of high authority":
        kw_a = {"doc_id": "d1", "source_id": "s1", "authority": 0.95}
        kw_b = {"doc_id": "d2", "source_id": "s2", "authority": 0.95}
    out = consolidate(
        store,
        batch(
            [
                candidate("a", text, 2.0, **kw_a),
                candidate("b", text, 1.0, **kw_b),
                candidate("c", other, 1.5),
            ]
        ),
    )
    assert sorted(it.chunk_ids for it in out.items) == [("a", "b"), ("c",)]
    assert [(f.chunk_id, f.reason) for f in out.dropped] == [("b", "duplicate")]


def _routed(store: PolicyStore, b: CandidateBatch) -> tuple[Consolidator, RoutedBatch]:
    policy, rules = store.get("default@1")
    routed = QueryRouter(policy=policy, rules=rules, tokenizers=TokenizerRegistry()).run(b)
    return Consolidator(policy=policy), routed


def _every_pair(
    self: Consolidator,
    units: list[Any],
    repeated: dict[int, int],
    cands: Any,
    exact: list[str],
) -> DisjointSets:
    """The reference: every unit paired with every other, as consolidation always decided."""
    nd = self.policy.near_duplicate
    sets = DisjointSets(len(units))
    for a in range(len(units)):
        for b in range(a + 1, len(units)):
            sa, sb = units[a].shingle_set, units[b].shingle_set
            near = bool(sa & sb) and (
                jaccard(sa, sb) >= nd.jaccard or containment(sa, sb) >= nd.containment
            )
            if exact[a] == exact[b] or (near and not self._independent(units[a], units[b], cands)):
                sets.union(a, b)
    return sets


BASES = [
    "The gateway rotates API keys every ninety days and keeps the old key for a day.",
    "Install the command line tool with the package manager, then log in with your key.",
    "Error 502 means the upstream service did not answer before the proxy timed out.",
    "Straße und Brücke: die Stadt erneuert im Sommer die Übergänge am Fluss.",
]


def _variant(rng: random.Random, text: str) -> str:
    roll = rng.random()
    if roll < 0.35:
        return text  # identical
    if roll < 0.5:
        return text.upper()  # same normalised text
    if roll < 0.75:
        words = text.split()
        words[rng.randrange(len(words))] = "changed"
        return " ".join(words)  # near-identical
    return text + " " + " ".join(f"extra{rng.randrange(5)}" for _ in range(rng.randrange(1, 8)))


def _hostile_batch(rng: random.Random) -> CandidateBatch:
    cands: list[Candidate] = []
    for i in range(rng.randrange(2, 40)):
        extra: dict[str, Any] = {"source_id": rng.choice(["kb", "wiki", "blog", "forum", "news"])}
        authority = rng.choice([None, 0.95, 0.95, 0.3])
        if authority is not None:
            extra["authority"] = authority
        cands.append(
            candidate(f"c{i}", _variant(rng, rng.choice(BASES)), rng.choice([1.0, 2.0]), **extra)
        )
    return batch(cands)


def test_consolidation_decides_as_pairing_every_unit_with_every_unit(
    store: PolicyStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Collapsing identical shingle sets first changes no family, no fate and no byte."""
    rng = random.Random(7)
    for _ in range(150):
        consolidator, routed = _routed(store, _hostile_batch(rng))
        fast = encode(consolidator.run(routed))
        with monkeypatch.context() as m:
            m.setattr(Consolidator, "_join_copies", _every_pair)
            slow = encode(consolidator.run(routed))
        assert fast == slow


def test_identical_passages_cost_no_pairwise_work(
    store: PolicyStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """3,000 copies of one passage: one family, and the near-duplicate join sees one set."""
    seen: list[int] = []
    monkeypatch.setattr(near_duplicates_mod, "check_pair_work", lambda n, limit: seen.append(n))
    cands = [candidate(f"c{i}", BASES[0], source_id=f"s{i % 7}") for i in range(3000)]
    consolidator, routed = _routed(store, batch(cands))
    out = consolidator.run(routed)
    assert len(out.items) == 1 and len(out.items[0].chunk_ids) == 3000
    assert {f.reason for f in out.dropped} == {"duplicate"}
    assert seen == []


def test_many_near_identical_passages_exceed_the_work_budget(pipeline: Pipeline) -> None:
    """600 passages that differ in one word each would pair quadratically: a LimitError."""
    cands = [candidate(f"c{i}", f"{BASES[0] * 3} variant{i}") for i in range(600)]
    with pytest.raises(LimitError, match="max_pair_checks") as info:
        pipeline.run(batch(cands))
    assert info.value.size > info.value.allowed == 2_000_000


def test_a_matrix_of_embeddings_counts_against_the_work_budget(store: PolicyStore) -> None:
    """Cosine pairs are every pair: the budget is checked before the matrix is made."""
    cands = [
        candidate(f"c{i}", f"passage number {i} about item {i}", embedding=(1.0, float(i)))
        for i in range(60)
    ]
    policy, rules = store.get("default@1")
    routed = QueryRouter(policy=policy, rules=rules, tokenizers=TokenizerRegistry()).run(
        batch(cands)
    )
    with pytest.raises(LimitError, match="max_pair_checks"):
        Consolidator(policy=policy, max_pair_checks=1000).run(routed)
    Consolidator(policy=policy, max_pair_checks=1770).run(routed)


def test_a_long_document_in_many_chunks_merges_into_one_text(store: PolicyStore) -> None:
    """2,000 touching spans of one document merge in order (the text built once)."""
    text = "".join(f"w{i:04d} " for i in range(2000))
    cands = [
        candidate(
            f"c{i:04d}",
            text[i * 6 : i * 6 + 6],
            doc_id="doc",
            span={"start": i * 6, "end": i * 6 + 6},
        )
        for i in range(2000)
    ]
    consolidator, routed = _routed(store, batch(cands))
    (item,) = consolidator.run(routed).items
    assert item.text == text and len(item.pieces) == 2000
