"""What datamarking costs: tokens added per evidence item, and what fits in a pack.

    python -m bench.datamark [--n 1000] [--markers ˆ,¤] [--no-packs] [--json-out F]

Items: the first ``--n`` MS MARCO passages of the data folder's corpus (title and text, as the
MS MARCO traffic builds them) and every HotpotQA paragraph of the sample (title as the title
attribute), each rendered as one envelope item, plain and datamarked with each marker, and
counted with cl100k_base. Packs: the MS MARCO and HotpotQA traffic packed with ``default@1``
and with the same policy datamarked; every pack is checked for an exact count (the tokenizer's
count of the rendered block equals ``evidence_tokens``) and for the budget.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from bench.common import percentile, table, write_json
from bench.hotpot import from_hotpot, load_corpus, paragraph_text
from ctxbudget.envelope import render_item
from ctxbudget.escaping import DEFAULT_DATAMARK
from ctxbudget.pipeline import Pipeline
from ctxbudget.policy import PolicyStore, default_policies_dir
from ctxbudget.schemas import CandidateBatch, EvidenceItem, EvidenceSpan
from ctxbudget.testing.traffic import from_msmarco
from ctxbudget.testing.traffic.msmarco import msmarco_dir, repair_mojibake
from ctxbudget.tokens import TokenizerRegistry

#: Markers measured by default: the spotlighting paper's (two cl100k tokens) and a one-token one.
DEFAULT_MARKERS = (DEFAULT_DATAMARK, "\u00a4")


def msmarco_passages(n: int) -> list[tuple[str | None, str]]:
    """The first ``n`` passages of the MS MARCO corpus, title and text joined as the traffic
    generator joins them (mojibake repaired)."""
    out: list[tuple[str | None, str]] = []
    with (msmarco_dir() / "corpus.jsonl").open(encoding="utf-8") as f:
        for line in f:
            if len(out) >= n:
                break
            row = json.loads(line)
            text = " ".join(p for p in (row.get("title") or "", row["text"]) if p)
            out.append((None, repair_mojibake(text)))
    return out


def hotpot_passages() -> list[tuple[str | None, str]]:
    """Every paragraph of the HotpotQA sample, with its title."""
    return [(title, paragraph_text(s)) for title, s in sorted(load_corpus().items())]


def _item(i: int, title: str | None, text: str) -> EvidenceItem:
    return EvidenceItem(
        evidence_id="k7m",
        chunk_ids=(f"c{i}",),
        doc_id=f"d{i}",
        source_id="corpus",
        title=title,
        version=None,
        trust="normal",
        text=text,
        spans=(EvidenceSpan(chunk_id=f"c{i}", start=0, end=len(text)),),
        tokens=0,
        compressed=False,
    )


@dataclass(frozen=True)
class ItemCost:
    corpus: str
    marker: str
    items: int
    plain_tokens_mean: float
    added_mean: float
    added_p50: float
    added_p95: float
    added_percent: float
    added_per_word: float


def item_costs(
    corpus: str, passages: Sequence[tuple[str | None, str]], markers: Sequence[str]
) -> list[ItemCost]:
    """Tokens each marker adds to each passage's envelope item."""
    count = TokenizerRegistry().get("cl100k_base").count
    items = [_item(i, t, x) for i, (t, x) in enumerate(passages)]
    plain = [count(render_item(it)) for it in items]
    words = sum(len(it.text.split()) + len((it.title or "").split()) for it in items)
    out = []
    for m in markers:
        added = [count(render_item(it, marker=m)) - p for it, p in zip(items, plain, strict=True)]
        out.append(
            ItemCost(
                corpus=corpus,
                marker=f"U+{ord(m):04X} {m}",
                items=len(items),
                plain_tokens_mean=round(statistics.mean(plain), 1),
                added_mean=round(statistics.mean(added), 1),
                added_p50=percentile(added, 50),
                added_p95=percentile(added, 95),
                added_percent=round(100 * sum(added) / sum(plain), 1),
                added_per_word=round(sum(added) / max(1, words), 2),
            )
        )
    return out


@dataclass(frozen=True)
class PackCost:
    traffic: str
    marking: str
    packs: int
    items_per_pack: float
    evidence_tokens_per_pack: float
    tokens_per_item: float
    over_budget: int
    inexact: int


def pack_costs(
    name: str, batches: Sequence[CandidateBatch], markers: Sequence[str]
) -> list[PackCost]:
    """The traffic packed with default@1, plain and datamarked with each marker."""
    store = PolicyStore.load(default_policies_dir())
    base, rules = store.get("default@1")
    tokenizers = TokenizerRegistry()
    count = tokenizers.get("cl100k_base").count
    out = []
    for marking in ("plain", *markers):
        policy = (
            base
            if marking == "plain"
            else base.model_copy(update={"envelope_marking": "datamark", "datamark": marking})
        )
        pipe = Pipeline(policy=policy, rules=rules, tokenizers=tokenizers)
        packs = [pipe.run(b).pack for b in batches]
        items = sum(len(p.evidence) for p in packs)
        tokens = sum(p.evidence_tokens for p in packs)
        out.append(
            PackCost(
                traffic=name,
                marking=marking if marking == "plain" else f"U+{ord(marking):04X} {marking}",
                packs=len(packs),
                items_per_pack=round(items / max(1, len(packs)), 2),
                evidence_tokens_per_pack=round(tokens / max(1, len(packs)), 1),
                tokens_per_item=round(tokens / max(1, items), 1),
                over_budget=sum(p.evidence_tokens > p.budget.evidence_budget for p in packs),
                inexact=sum(count(p.rendered) != p.evidence_tokens for p in packs),
            )
        )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.datamark", description=__doc__)
    parser.add_argument("--n", type=int, default=1000, help="MS MARCO passages to render")
    parser.add_argument("--markers", default=",".join(DEFAULT_MARKERS))
    parser.add_argument("--no-packs", action="store_true", help="item costs only")
    parser.add_argument("--json-out")
    args = parser.parse_args(argv)
    markers = [m for m in args.markers.split(",") if m]
    costs = [
        *item_costs("msmarco", msmarco_passages(args.n), markers),
        *item_costs("hotpotqa", hotpot_passages(), markers),
    ]
    rows = [
        (
            c.corpus,
            c.marker,
            c.items,
            c.plain_tokens_mean,
            c.added_mean,
            c.added_p50,
            c.added_p95,
            f"{c.added_percent}%",
            c.added_per_word,
        )
        for c in costs
    ]
    print("tokens added per envelope item (cl100k_base)")
    print(
        table(
            ("corpus", "marker", "items", "plain", "added", "p50", "p95", "added %", "per word"),
            rows,
        )
    )
    report: dict[str, Any] = {"items": [asdict(c) for c in costs]}
    if not args.no_packs:
        packs = [
            *pack_costs("msmarco", [g.batch for g in from_msmarco(None, seed=1)], markers),
            *pack_costs("hotpotqa", [g.batch for g in from_hotpot(None, seed=1)], markers),
        ]
        print("\npacks with default@1, plain and datamarked")
        print(
            table(
                ("traffic", "marking", "packs", "items", "tokens", "per item", "over", "inexact"),
                [
                    (
                        p.traffic,
                        p.marking,
                        p.packs,
                        p.items_per_pack,
                        p.evidence_tokens_per_pack,
                        p.tokens_per_item,
                        p.over_budget,
                        p.inexact,
                    )
                    for p in packs
                ],
            )
        )
        report["packs"] = [asdict(p) for p in packs]
    write_json(args.json_out, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
