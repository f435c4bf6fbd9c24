"""The supporting-sentence figure of ``bench quality`` counts what the reader gets."""

from __future__ import annotations

from bench.quality_suite import support_kept
from ctxbudget.envelope import parse, render
from ctxbudget.escaping import DEFAULT_DATAMARK
from ctxbudget.schemas import EvidenceItem, EvidenceSpan

#: A supporting sentence whose quotes, ampersand and angle bracket the envelope escapes.
ESCAPED = '"The Hukilau Song" is a song by Jack Owens & his band, <1948>.'


def _item(text: str, n: int) -> EvidenceItem:
    return EvidenceItem.model_validate(
        {
            "evidence_id": f"ev-{n}",
            "chunk_ids": (f"c{n}",),
            "doc_id": f"d{n}",
            "source_id": "s",
            "title": None,
            "version": None,
            "trust": "normal",
            "text": text,
            "spans": (EvidenceSpan(chunk_id=f"c{n}", start=0, end=len(text)),),
            "tokens": 0,
            "compressed": False,
        }
    )


def _read_back(texts: list[str], marker: str | None = None) -> list[str]:
    items = [_item(t, n) for n, t in enumerate(texts)]
    return [text for _, text in parse(render(items, marker=marker))]


def test_an_escaped_sentence_in_the_block_counts_as_kept() -> None:
    """Escaping (&quot; &amp; &lt;) and datamarking must not hide a sentence the reader sees."""
    block = [f"Laie is in Hawaii. {ESCAPED} It was a hit.", "Other text."]
    support = {"c0": (ESCAPED,), "c1": ("Other text.",)}
    assert support_kept(support, _read_back(block)) == 2
    assert support_kept(support, _read_back(block, marker=DEFAULT_DATAMARK)) == 2


def test_only_exact_survival_counts() -> None:
    """A sentence cut short, with its quotes retyped or joined over a gap, is not kept."""
    retyped = ESCAPED.replace('"', "\u201c", 1).replace('"', "\u201d", 1)
    texts = _read_back([retyped, ESCAPED[:30] + " [...] " + ESCAPED[30:]])
    assert support_kept({"c0": (ESCAPED,)}, texts) == 0
