"""Hostile input in the pure core: input limits, linear consolidation, bounded caches."""

from __future__ import annotations

import gc
import random
from typing import Any

import orjson
import pytest

import ctxbudget.stages.consolidate as consolidate_mod
from ctxbudget.codec import decode_batch, encode
from ctxbudget.errors import InputError, LimitError, TokenizerError
from ctxbudget.limits import InputLimits
from ctxbudget.pipeline import Pipeline
from ctxbudget.policy import PolicyStore
from ctxbudget.schemas import Candidate, CandidateBatch, RoutedBatch
from ctxbudget.stages.consolidate import Consolidator, _Disjoint
from ctxbudget.stages.route import QueryRouter
from ctxbudget.testing import batch, candidate
from ctxbudget.text import ShingleCache, _Memo, _WordIds, containment, jaccard
from ctxbudget.tokens import TokenizerRegistry
from tests.paths import REPO

EXAMPLE = (REPO / "examples" / "batches.jsonl").read_bytes().splitlines()[0]


def _with(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = orjson.loads(EXAMPLE)
    data.update(changes)
    return data


def _limit_of(raw: bytes, limits: InputLimits | None = None) -> str:
    with pytest.raises(LimitError) as info:
        decode_batch(raw, limits=limits)
    assert info.value.limit in str(info.value)
    return info.value.limit


# ---------------------------------------------------------------- input limits


def test_the_examples_are_within_the_default_limits() -> None:
    """Ordinary traffic never meets a limit."""
    for raw in (REPO / "examples" / "batches.jsonl").read_bytes().splitlines():
        decode_batch(raw)


def test_too_many_candidates_are_refused_before_the_strict_parse() -> None:
    """The count comes from the raw bytes (then orjson), and the error names the limit."""
    data = _with()
    data["candidates"] = [dict(data["candidates"][0], chunk_id=f"c{i}") for i in range(11)]
    raw = orjson.dumps(data)
    assert _limit_of(raw, InputLimits(max_candidates=10)) == "max_candidates"
    decode_batch(raw, limits=InputLimits(max_candidates=11))


def test_escaped_chunk_id_keys_are_still_counted_after_the_parse() -> None:
    """A key spelled with escapes escapes the raw count, not the limit."""
    data = _with()
    data["candidates"] = [dict(data["candidates"][0], chunk_id=f"c{i}") for i in range(11)]
    raw = orjson.dumps(data).replace(b'"chunk_id"', b'"\\u0063hunk_id"')
    assert _limit_of(raw, InputLimits(max_candidates=10)) == "max_candidates"


def test_metadata_holding_chunk_ids_does_not_count_as_candidates() -> None:
    """The raw count is only an upper bound: an exact count decides."""
    data = _with()
    data["candidates"] = [
        dict(c, metadata={"chunk_id": "x", "parent": {"chunk_id": "y"}}) for c in data["candidates"]
    ]
    n = len(data["candidates"])
    decode_batch(orjson.dumps(data), limits=InputLimits(max_candidates=n))


@pytest.mark.parametrize(
    ("where", "field"),
    [("candidates.0.text", "text"), ("candidates.0.title", "title"), ("query.text", "query")],
)
def test_a_text_over_max_text_bytes_is_refused_by_its_utf8_size(where: str, field: str) -> None:
    """64 characters of a 3-byte letter are 192 bytes."""
    data = _with()
    for c in data["candidates"]:
        c.update(text="short text", title=None)
    long = "€" * 64
    if field == "query":
        data["query"]["text"] = long
    else:
        data["candidates"][0][field] = long
    with pytest.raises(LimitError) as info:
        decode_batch(orjson.dumps(data), limits=InputLimits(max_text_bytes=191))
    assert info.value.limit == "max_text_bytes" and where in str(info.value)
    assert info.value.size == 192
    decode_batch(orjson.dumps(data), limits=InputLimits(max_text_bytes=192))


def test_metadata_nested_too_deep_is_refused_naming_the_depth_limit() -> None:
    """Metadata is the one field that can nest; depth counts from the message's top."""
    data = _with()
    deep: Any = "leaf"
    for _ in range(10):
        deep = {"k": deep}
    data["candidates"][0]["metadata"] = deep  # 10 objects from depth 4: depth 13
    raw = orjson.dumps(data)
    assert _limit_of(raw, InputLimits(max_json_depth=12)) == "max_json_depth"
    decode_batch(raw, limits=InputLimits(max_json_depth=13))


def test_json_deeper_than_the_parser_allows_names_the_depth_limit() -> None:
    """An ignored field nested thousands deep is stopped by the parser, named as the limit."""
    raw = EXAMPLE[:-1] + b',"junk":' + b"[" * 5000 + b"]" * 5000 + b"}"
    assert _limit_of(raw) == "max_json_depth"


def test_an_oversize_message_names_the_byte_limit_and_is_not_parsed() -> None:
    """The size check comes first."""
    with pytest.raises(LimitError, match="over the 100-byte limit") as info:
        decode_batch(EXAMPLE, limits=InputLimits(max_message_bytes=100))
    assert info.value.limit == "max_message_bytes"


def test_integers_beyond_64_bits_stay_input_errors() -> None:
    """The integer range check is unchanged."""
    raw = EXAMPLE.replace(b'"tokens":350', b'"tokens":' + b"9" * 30)
    with pytest.raises(InputError, match="beyond 64 bits"):
        decode_batch(raw)


@pytest.mark.parametrize(
    "bad", [{"max_candidates": 0}, {"max_text_bytes": -1}, {"max_json_depth": 3}]
)
def test_limits_must_be_sensible(bad: dict[str, int]) -> None:
    """A limit of zero (or a depth that forbids metadata) is a configuration error."""
    with pytest.raises(ValueError, match=next(iter(bad))):
        InputLimits(**bad)


# ---------------------------------------------------------------- consolidation


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
) -> _Disjoint:
    """The reference: every unit paired with every other, as consolidation always decided."""
    nd = self.policy.near_duplicate
    sets = _Disjoint(len(units))
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
    monkeypatch.setattr(consolidate_mod, "check_pair_work", lambda n, limit: seen.append(n))
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


# ---------------------------------------------------------------- caches


def _depth(tb: Any) -> int:
    n = 0
    while tb is not None:
        n, tb = n + 1, tb.tb_next
    return n


def test_an_unavailable_tokenizer_raises_a_fresh_error_each_time() -> None:
    """The registry keeps the message, not the exception: no traceback grows or outlives a
    request (a re-raised cached exception gathers every request's frames)."""
    registry = TokenizerRegistry()
    errors = []
    for _ in range(4):
        with pytest.raises(TokenizerError) as info:
            registry.get("no-such-tokenizer")
        errors.append(info.value)
    assert len({id(e) for e in errors}) == 4
    assert len({_depth(e.__traceback__) for e in errors}) == 1
    assert all(str(e) == str(errors[0]) for e in errors)
    assert all(isinstance(v, str) for v in registry._failures.values())


def test_failing_tokenizer_names_are_remembered_within_a_bound() -> None:
    """Names chosen by senders cannot grow the registry."""
    registry = TokenizerRegistry(max_failures=8)
    for i in range(100):
        with pytest.raises(TokenizerError):
            registry.get(f"nope-{i}")
    with pytest.raises(TokenizerError):
        registry.get("x" * 10_000)
    assert len(registry._failures) == 8


def test_a_failed_request_leaves_nothing_of_itself_behind() -> None:
    """What the frames of a failed request held (the batch, the bytes) is freed with it."""
    import weakref

    class Payload:
        pass

    registry = TokenizerRegistry()
    refs: list[weakref.ref[Payload]] = []

    def request() -> None:
        payload = Payload()
        refs.append(weakref.ref(payload))
        registry.get("no-such-tokenizer")

    for _ in range(3):
        with pytest.raises(TokenizerError):
            request()
    gc.collect()
    assert [r() for r in refs] == [None, None, None]


def test_the_shingle_memo_is_bounded_in_bytes() -> None:
    """Long texts fill the byte bound, not the count; one huge text is not remembered."""
    memo = _Memo(maxsize=2048, max_bytes=1_000_000)
    for i in range(200):
        text = f"text {i} " + "word " * 2000
        memo.put((text, 3), frozenset(range(i, i + 100)))
        assert memo.bytes <= memo.max_bytes
    assert 0 < len(memo) < 200
    huge = "x" * 200_000
    memo.put((huge, 3), frozenset({1}))
    assert memo.get((huge, 3)) is None
    memo.clear()
    assert memo.bytes == 0 and len(memo) == 0


def test_long_words_are_hashed_but_not_remembered() -> None:
    """Encoded blobs (one long 'word') cannot fill the word-id memo."""
    ids = _WordIds()
    assert ids["a" * 10_000] == ids["a" * 10_000]
    assert ids["short"] >= 0
    assert list(ids) == ["short"]


def test_shingling_keeps_no_state_between_pipelines() -> None:
    """Shingle sets and word ids live in a cache the stages own: one pipeline's traffic leaves
    nothing behind in another's, and the results do not depend on the cache."""
    from ctxbudget.text import shingles, words

    text = "the quick brown fox jumps over the lazy dog " * 8
    a, b = ShingleCache(), ShingleCache()
    first = a.text_shingles(text, 3)
    assert len(a.sets) == 1 and len(b.sets) == 0 and not b.word_ids
    assert b.text_shingles(text, 3) == first == shingles(words(text), 3)
    assert a.text_overlaps([text], 3).sets == [first]
