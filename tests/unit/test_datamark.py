"""Datamarking: every word of evidence carries a marker, the count stays exact, the budget holds,
and the shipped guarded@1 policy packs the same bytes on every path."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from ctxbudget.codec import decode_batch, encode
from ctxbudget.envelope import datamark_instruction, parse, render
from ctxbudget.errors import ConfigError
from ctxbudget.escaping import datamark, escape_text, unescape, unmark
from ctxbudget.kafka.handlers import Context, Metrics, Pipelines, build_handler, static_assignment
from ctxbudget.kafka.settings import TopicNames
from ctxbudget.limits import InputLimits
from ctxbudget.pipeline import Pipeline
from ctxbudget.policy import PolicyStore, load_policy
from ctxbudget.schemas import EvidenceItem, EvidenceSpan
from ctxbudget.testing import batch, candidate
from ctxbudget.tokens import TiktokenCounter
from tests.paths import REPO

MARK = "\u02c6"
EXAMPLES = (REPO / "examples" / "batches.jsonl").read_bytes().splitlines()
COUNTER = TiktokenCounter("cl100k_base")


def _marking(pipeline: Pipeline, marker: str = MARK) -> Pipeline:
    return Pipeline(
        policy=pipeline.policy.model_copy(
            update={"envelope_marking": "datamark", "datamark": marker}
        ),
        rules=pipeline.router.rules,
        tokenizers=pipeline.router.tokenizers,
    )


def _item(text: str, title: str | None = None) -> EvidenceItem:
    return EvidenceItem(
        evidence_id="k7m",
        chunk_ids=("c",),
        doc_id="d",
        source_id="s",
        title=title,
        version=None,
        trust="normal",
        text=text,
        spans=(EvidenceSpan(chunk_id="c", start=0, end=len(text)),),
        tokens=0,
        compressed=False,
    )


@pytest.mark.parametrize(
    "text",
    [
        "Keys expire after 90 days.",
        "two  spaces, a\ttab,\nlines\r\nand \u00a0 no-break\u2028separators ",
        f"the marker {MARK} itself, {MARK}{MARK} twice, &#710; as a reference",
        "",
    ],
)
def test_datamarking_undoes_exactly(text: str) -> None:
    """unmark(datamark(x)) == x, whatever whitespace and markers the text holds."""
    marked = datamark(escape_text(text), MARK)
    assert " " not in marked
    assert unescape(unmark(marked, MARK)) == text
    ((_, back),) = parse(render([_item(text, title=f"A {MARK} title")], marker=MARK))
    assert back == text


def test_every_word_is_marked_and_the_block_says_so() -> None:
    """Words of text and title are joined by the marker; the set names it."""
    rendered = render([_item("Keys expire after 90 days.", title="Key policy")], marker=MARK)
    assert f"Keys{MARK}expire{MARK}after{MARK}90{MARK}days." in rendered
    assert f'title="Key{MARK}policy"' in rendered and f'datamark="{MARK}"' in rendered
    ((attrs, text),) = parse(rendered)
    assert text == "Keys expire after 90 days." and attrs["title"] == "Key policy"


@pytest.mark.parametrize("marker", [MARK, "\u00a4"])
def test_datamarked_packs_count_exactly_and_stay_within_budget(
    pipeline: Pipeline, marker: str
) -> None:
    """The tokenizer's count of every datamarked block is its evidence_tokens, never over the
    budget, and the Pack carries the sentence for the system prompt."""
    pipe = _marking(pipeline, marker)
    for raw in EXAMPLES:
        pack = pipe.run(decode_batch(raw)).pack
        assert COUNTER.count(pack.rendered) == pack.evidence_tokens
        assert sum(e.tokens for e in pack.evidence) <= pack.evidence_tokens
        assert pack.evidence_tokens <= max(0, pack.budget.evidence_budget)
        if pack.evidence:
            assert pack.evidence_instruction == datamark_instruction(marker)
            assert [t for _, t in parse(pack.rendered)] == [e.text for e in pack.evidence]


def test_datamarking_under_budget_pressure_never_overflows(pipeline: Pipeline) -> None:
    """A tight budget with many passages: marker tokens are paid for, the pack still fits."""
    cands = [
        candidate(f"c{i}", f"Passage {i} says keys expire after {i} days. " * 6, float(i))
        for i in range(20)
    ]
    pipe = _marking(pipeline)
    for limit in (500, 700, 1100, 2000):
        b = batch(cands, query="when do keys expire?", input_limit=limit, reserve_tokens=300)
        pack = pipe.run(b).pack
        assert COUNTER.count(pack.rendered) == pack.evidence_tokens
        assert pack.evidence_tokens <= max(0, pack.budget.evidence_budget)


def test_default_packs_are_not_marked(pipeline: Pipeline) -> None:
    """The default policy renders plain text and writes no instruction field."""
    pack = pipeline.run(decode_batch(EXAMPLES[0])).pack
    assert pack.evidence_instruction is None and "datamark" not in pack.rendered
    assert "evidence_instruction" not in encode(pack).decode()


@pytest.mark.parametrize("marker", ["a", "7", " ", "<", "&", "\u200b", "\u0301", "ab", ""])
def test_a_marker_that_is_a_word_or_markup_is_refused(tmp_path: Path, marker: str) -> None:
    """The policy names the key when the marker could be read as text or markup."""
    text = (REPO / "policies" / "packing" / "guarded@1.yaml").read_text()
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace('datamark: "\\u02c6"', f"datamark: {json.dumps(marker)}"))
    with pytest.raises(ConfigError, match="datamark"):
        load_policy(bad)


def test_the_guarded_policy_loads_with_both_defences_on() -> None:
    """guarded@1 is default@1 with cutting and datamarking; everything else is the same."""
    guarded = load_policy(REPO / "policies" / "packing" / "guarded@1.yaml")
    default = load_policy(REPO / "policies" / "packing" / "default@1.yaml")
    assert guarded.injection == "cut" and guarded.envelope_marking == "datamark"
    assert guarded.marker == MARK and default.marker is None
    same = {"name", "version", "description", "injection", "envelope_marking"}
    assert guarded.model_dump(exclude=same) == default.model_dump(exclude=same)


@pytest.fixture(scope="module")
def guarded() -> Context:
    return Context(
        pipelines=Pipelines(REPO / "policies"),
        topics=TopicNames(),
        metrics=Metrics(),
        assign=static_assignment("guarded@1"),
        limits=InputLimits(max_message_bytes=1 << 20),
    )


def _main(ctx: Context, stage: str, raw: bytes, topic: str) -> bytes:
    (out,) = [o for o in build_handler(stage, ctx).handle(raw, source="test") if o.topic == topic]
    return out.value


def test_guarded_packs_are_byte_identical_on_every_path(guarded: Context) -> None:
    """Four hops (full and compact intermediate forms), the fused worker and the in-process
    pipeline give the same bytes with cutting and datamarking on."""
    t = guarded.topics
    full = replace(guarded, metrics=Metrics(), compact_intermediate=False)
    store = PolicyStore.load(REPO / "policies")
    pipe = Pipeline.from_store(store, "guarded@1")
    for raw in EXAMPLES:
        expected = encode(pipe.run(decode_batch(raw)).pack)
        for ctx in (guarded, full):
            routed = _main(ctx, "route", raw, t.routed)
            cb = _main(ctx, "consolidate", routed, t.consolidated)
            packed = _main(ctx, "select", cb, t.packed)
            assert _main(ctx, "compress", packed, t.packs) == expected
        assert _main(guarded, "fused", raw, t.packs) == expected
    cut = [pipe.run(decode_batch(raw)).pack.withheld_sentences for raw in EXAMPLES]
    assert any(cut)  # the examples hold a passage with an inserted instruction
