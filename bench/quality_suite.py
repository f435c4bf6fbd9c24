"""``python -m bench quality``: packing quality side by side with the naive assembler.

For each traffic set (HotpotQA two-hop and MuSiQue composed 2-4 hop questions at a moderate
and a tight budget, with and without the awkward cases; MS MARCO TREC-DL19 with its awkward
cases), the batches are packed with a policy and filled by the naive assembler (sort by
score, fill the same evidence budget), and the table shows, overall, per question type and
per routed query class:

* ``needed``: the share of labelled relevant passages admitted (representative or merged
  member of an admitted item);
* ``support``: the share of labelled supporting sentences present verbatim in the rendered
  block. HotpotQA labels its supporting sentences; MuSiQue labels paragraphs only, so its
  truth names the sentences that carry each hop (the one naming the hop's answer, and the
  one naming the previous hop's answer: see :mod:`bench.musique`). The naive assembler
  renders whole passages, so a sentence is kept when its passage is admitted;
* ``all``: the share of queries with every needed passage admitted;
* ``tokens``: mean evidence tokens used, and ``budget``: mean evidence budget;
* ``markup/item``: the policy's envelope cost, the tokens of each rendered item minus the
  tokens of its text alone, averaged over items (the set's frame not included).

The rows under a set are the question types the traffic knows (HotpotQA's bridge and
comparison, MuSiQue's hop count: ``2hop``, ``3hop``, ``4hop``), then the classes the router
gave (``-> point_lookup``, ...); without a known type, the routed classes alone.

``--half a`` or ``--half b`` keeps one half of the questions (by a hash of the question, the
same halves for every set and seed): tune on one half, check the other.

Below each set: the routing of each question type, and the safety counts of
:mod:`bench.quality` (over budget, cross-tenant, injected, families twice, older versions)
for the policy and for naive.

Data is read from ``../shared/data`` (or ``$CTXBUDGET_DATA_DIR``); a missing data set is
skipped with a note. Nothing is written unless ``--json-out`` is given.
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.quality import (
    admission_from_naive,
    admission_from_pack,
    evaluate,
)
from ctxbudget.envelope import escape_text, parse
from ctxbudget.pipeline import Pipeline
from ctxbudget.policy import PolicyStore, default_policies_dir
from ctxbudget.schemas import CandidateBatch, Pack
from ctxbudget.testing.naive import default_counter, naive_assemble
from ctxbudget.testing.traffic import (
    BatchTruth,
    GeneratedBatch,
    TrafficError,
    from_dbpedia,
    from_msmarco,
)


@dataclass(slots=True)
class _Tally:
    needed: int = 0
    needed_kept: int = 0
    support: int = 0
    support_kept: int = 0
    queries: int = 0
    all_needed: int = 0
    tokens: int = 0
    budget: int = 0
    items: int = 0
    markup: int = 0

    def add(
        self, needed: int, kept: int, support: int, support_kept: int, tokens: int, budget: int
    ) -> None:
        self.queries += 1
        self.needed += needed
        self.needed_kept += kept
        self.all_needed += int(kept == needed)
        self.support += support
        self.support_kept += support_kept
        self.tokens += tokens
        self.budget += budget

    def row(self) -> dict[str, Any]:
        q = max(self.queries, 1)
        return {
            "queries": self.queries,
            "needed": round(self.needed_kept / self.needed, 4) if self.needed else None,
            "support": round(self.support_kept / self.support, 4) if self.support else None,
            "all": round(self.all_needed / q, 4),
            "tokens": round(self.tokens / q, 1),
            "budget": round(self.budget / q, 1),
            "markup_per_item": round(self.markup / self.items, 2) if self.items else None,
        }


@dataclass(slots=True)
class SetResult:
    """The figures of one traffic set."""

    name: str
    policy: dict[str, dict[str, Any]] = field(default_factory=dict)
    naive: dict[str, dict[str, Any]] = field(default_factory=dict)
    routing: dict[str, dict[str, int]] = field(default_factory=dict)
    safety: dict[str, dict[str, Any]] = field(default_factory=dict)
    seconds: float = 0.0


def rendered_texts(pack: Pack) -> list[str]:
    """The evidence texts as the prompt shows them (read back from the rendered block)."""
    return [text for _, text in parse(pack.rendered)]


def support_kept(support: Mapping[str, Sequence[str]], texts: Sequence[str]) -> int:
    """How many of the labelled supporting sentences (chunk id -> sentences) appear whole and
    exactly, as one substring, in one of ``texts``: the evidence as the reader gets it. For a
    pack these are :func:`rendered_texts`, read back from the block and so unescaped and
    unmarked (an ``&amp;`` or a datamark never hides a kept sentence); for the naive fill,
    the admitted passages' own texts. A sentence cut short, reworded or joined across a gap
    of an excerpt is not kept."""
    return sum(1 for sents in support.values() for s in sents if any(s in t for t in texts))


def _class_of(batch: CandidateBatch, truth: BatchTruth | None, pack: Pack) -> str:
    if truth is not None and truth.qtype:
        return truth.qtype
    return pack.query_class


def run_set(name: str, generated: Sequence[GeneratedBatch], pipeline: Pipeline) -> SetResult:
    """Pack every batch and fill it naively; tally both per class."""
    counter = default_counter()
    result = SetResult(name=name)
    started = time.perf_counter()
    ours: dict[str, _Tally] = defaultdict(_Tally)
    theirs: dict[str, _Tally] = defaultdict(_Tally)
    routing: dict[str, Counter[str]] = defaultdict(Counter)
    pack_adm = {}
    naive_adm = {}
    for g in generated:
        batch, truth = g.batch, g.truth
        pack = pipeline.run(batch).pack
        cls = _class_of(batch, truth, pack)
        keys = ["all"]
        if cls != pack.query_class or (truth is not None and truth.qtype):
            keys.append(cls)
        keys.append(f"-> {pack.query_class}")
        naive = naive_assemble(batch, counter)
        pack_adm[batch.request_id] = admission_from_pack(pack)
        naive_adm[batch.request_id] = admission_from_naive(naive)
        needed = set(batch.labels.relevant_chunk_ids) if batch.labels else set()
        routing[cls][pack.query_class] += 1
        support = truth.support if truth is not None else {}
        n_support = sum(len(v) for v in support.values())
        admitted = {cid for e in pack.evidence for cid in e.chunk_ids}
        texts = rendered_texts(pack)
        by_id = {c.chunk_id: c for c in batch.candidates}
        naive_ids = set(naive.admitted_chunk_ids)
        naive_texts = [by_id[c].text for c in naive.admitted_chunk_ids if c in by_id]
        items = len(pack.evidence)
        markup = sum(e.tokens - counter.count(escape_text(e.text)) for e in pack.evidence)
        for key in keys:
            ours[key].items += items
            ours[key].markup += markup
        for tally, kept, sk, tokens, budget in (
            (
                ours,
                len(needed & admitted),
                support_kept(support, texts),
                pack.evidence_tokens,
                pack.budget.evidence_budget,
            ),
            (
                theirs,
                len(needed & naive_ids),
                support_kept(support, naive_texts),
                naive.evidence_tokens,
                naive.budget.evidence_budget,
            ),
        ):
            for key in keys:
                tally[key].add(len(needed), kept, n_support, sk, tokens, budget)
    result.seconds = time.perf_counter() - started
    batches = [g.batch for g in generated]
    truths = {g.batch.request_id: g.truth for g in generated}
    for label, adm in (("policy", pack_adm), ("naive", naive_adm)):
        report = evaluate(batches, adm, truths, source=label)
        result.safety[label] = {
            "over_budget": report.over_budget,
            "cross_tenant": report.cross_tenant_admitted,
            "unauthorized": report.unauthorized_admitted,
            "injected": report.injected_admitted,
            "families_twice": report.families_admitted_twice,
            "older_versions": report.older_versions_admitted,
        }
    result.policy = {k: v.row() for k, v in sorted(ours.items(), key=_all_first)}
    result.naive = {k: v.row() for k, v in sorted(theirs.items(), key=_all_first)}
    result.routing = {k: dict(sorted(v.items())) for k, v in sorted(routing.items())}
    return result


def _all_first(kv: tuple[str, Any]) -> tuple[int, str]:
    return (0 if kv[0] == "all" else 2 if kv[0].startswith("->") else 1, kv[0])


def _hotpot_builder(
    data_dir: Path | None, seed: int, budget: str, awkward: bool
) -> Callable[[], list[GeneratedBatch]]:
    from bench.hotpot import from_hotpot

    return lambda: from_hotpot(data_dir, seed=seed, budget=budget, awkward=awkward)


def _musique_builder(
    data_dir: Path | None, seed: int, budget: str, awkward: bool
) -> Callable[[], list[GeneratedBatch]]:
    from bench.musique import from_musique

    return lambda: from_musique(data_dir, seed=seed, budget=budget, awkward=awkward)


def in_half(question: str, half: str | None) -> bool:
    """Whether a question belongs to ``half`` (``"a"`` or ``"b"``, by a hash of its text;
    ``None`` keeps every question)."""
    if half is None:
        return True
    digest = hashlib.sha256(question.encode("utf-8")).digest()
    return (digest[0] & 1) == (0 if half == "a" else 1)


def traffic_sets(
    seed: int,
    *,
    hotpot: bool = True,
    musique: bool = True,
    msmarco: bool = True,
    data_dir: Path | None = None,
) -> list[tuple[str, Callable[[], list[GeneratedBatch]]]]:
    """The traffic sets of the benchmark, built lazily (name, builder)."""
    out: list[tuple[str, Callable[[], list[GeneratedBatch]]]] = []
    for prefix, wanted, builder in (
        ("hotpot", hotpot, _hotpot_builder),
        ("musique", musique, _musique_builder),
    ):
        if not wanted:
            continue
        for budget in ("moderate", "tight"):
            for awkward in (False, True):
                name = f"{prefix}-{budget}{'-awkward' if awkward else ''}"
                out.append((name, builder(data_dir, seed, budget, awkward)))
    if msmarco:
        out.append(("msmarco-awkward", lambda: from_msmarco(data_dir, seed=seed)))
        out.append(("dbpedia-awkward", lambda: from_dbpedia(data_dir, seed=seed)))
    return out


def run(
    policy_ref: str,
    *,
    seed: int = 1,
    sets: Sequence[str] | None = None,
    policies_dir: Path | None = None,
    data_dir: Path | None = None,
    progress: Callable[[str], None] | None = None,
    half: str | None = None,
    built: dict[str, list[GeneratedBatch]] | None = None,
) -> list[SetResult]:
    """Pack the sets with ``policy_ref``; ``built`` keeps the traffic built for another
    policy (name -> batches), so a comparison builds each set once."""
    store = PolicyStore.load(policies_dir or default_policies_dir())
    pipeline = Pipeline.from_store(store, policy_ref)
    cache = built if built is not None else {}
    results = []
    for name, build in traffic_sets(seed, data_dir=data_dir):
        if sets and name not in sets:
            continue
        if name not in cache:
            try:
                cache[name] = build()
            except TrafficError as e:
                if progress:
                    progress(f"{name}: skipped ({e})")
                continue
        generated = [g for g in cache[name] if in_half(g.batch.query.text, half)]
        if progress:
            progress(f"{name}: {len(generated)} batches ...")
        results.append(run_set(name, generated, pipeline))
    return results


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}" if value <= 1.0 else f"{value:.0f}"
    return str(value)


def _pair(ours: Mapping[str, Any], theirs: Mapping[str, Any], key: str) -> str:
    return f"{_cell(ours[key]):>6}/{_cell(theirs[key]):<6}"


def format_results(policy_ref: str, results: Sequence[SetResult]) -> str:
    lines = []
    head = (
        f"{'set / class':<30} {'n':>4}  {'needed':>13}  {'support':>13}  {'all needed':>13}"
        f"  {'tokens':>11}  {'budget':>6}  {'markup/item':>11}"
    )
    lines.append(f"packing quality: {policy_ref} vs naive (sort by score, fill the same budget)")
    lines.append("cells are policy / naive")
    lines.append(head)
    lines.append("-" * len(head))
    for r in results:
        for cls, row in r.policy.items():
            nv = r.naive[cls]
            label = r.name if cls == "all" else f"  {cls}"
            lines.append(
                f"{label:<30} {row['queries']:>4}  {_pair(row, nv, 'needed')}  "
                f"{_pair(row, nv, 'support')}  {_pair(row, nv, 'all')}  "
                f"{_cell(row['tokens']):>5}/{_cell(nv['tokens']):<5}  "
                f"{_cell(row['budget']):>6}  {row['markup_per_item'] or 0:>11.1f}"
            )
        routed = "; ".join(
            f"{cls} -> " + ", ".join(f"{k} {v}" for k, v in to.items())
            for cls, to in r.routing.items()
        )
        lines.append(f"  routing: {routed}")
        p, n = r.safety["policy"], r.safety["naive"]
        lines.append(
            "  safety (policy / naive): "
            + ", ".join(f"{k} {p[k]}/{n[k]}" for k in p)
            + f"; packed in {r.seconds:.1f} s"
        )
    return "\n".join(lines)
