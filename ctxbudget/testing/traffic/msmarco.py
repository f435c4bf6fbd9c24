"""Multi-passage QA traffic from BEIR-layout retrieval subsets: MS MARCO TREC-DL19
(:func:`from_msmarco`, passages) and DBPedia-Entity (:func:`from_dbpedia`, entity abstracts
with their entity names as titles)."""

from __future__ import annotations

import json
import os
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ctxbudget.schemas import Turn
from ctxbudget.testing.naive import TokenCounter, default_counter
from ctxbudget.testing.traffic.assemble import (
    AS_OF,
    Draft,
    _Context,
    add_awkward,
    plan_awkward,
)
from ctxbudget.testing.traffic.base import (
    MSMARCO_EVIDENCE_FRACTION,
    REPO_ROOT,
    AwkwardRates,
    TrafficError,
)
from ctxbudget.testing.traffic.bm25 import BM25Index, coverage
from ctxbudget.testing.traffic.frame import _check_range, _finish, _originals_cost
from ctxbudget.testing.traffic.ids import _random_date, chunk_id_for, doc_id_for, source_for
from ctxbudget.testing.traffic.truth import GeneratedBatch

MSMARCO_DIRNAME = "msmarco_trecdl19_beir_subset"
DBPEDIA_DIRNAME = "dbpedia_entity_beir_subset"
MIN_ORIGINALS = 6


def default_data_dir() -> Path:
    """``$CTXBUDGET_DATA_DIR`` or the ``shared/data`` folder beside the repository."""
    env = os.environ.get("CTXBUDGET_DATA_DIR")
    return Path(env) if env else REPO_ROOT.parent / "shared" / "data"


def msmarco_dir(data_dir: Path | str | None = None) -> Path:
    """The MS MARCO subset folder, given it or the data folder holding it."""
    return _beir_dir(data_dir, MSMARCO_DIRNAME, "MS MARCO")


def _beir_dir(data_dir: Path | str | None, dirname: str, label: str) -> Path:
    base = Path(data_dir) if data_dir is not None else default_data_dir()
    for candidate in (base, base / dirname):
        if (candidate / "corpus.jsonl").is_file():
            return candidate
    raise TrafficError(
        f"{label} subset not found under {base} (expected corpus.jsonl there or in "
        f"{dirname}/); set CTXBUDGET_DATA_DIR to the folder holding it"
    )


def repair_mojibake(text: str) -> str:
    """Undo UTF-8 read as Latin-1 (MS MARCO's 'â\\x80\\x99'); unchanged when not reversible."""
    if text.isascii():
        return text
    try:
        return text.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return text


@dataclass(frozen=True, slots=True)
class MsMarco:
    """The subset in memory: corpus ids and texts (title and text, as retrieval reads them),
    queries and graded qrels; with ``titled``, also each document's title and text apart
    (the candidates then carry the title as their own field)."""

    ids: tuple[str, ...]
    texts: tuple[str, ...]
    queries: Mapping[str, str]
    qrels: Mapping[str, Mapping[str, int]]
    titles: tuple[str | None, ...] = ()
    bodies: tuple[str, ...] = ()

    @classmethod
    def load(cls, folder: Path, *, repair: bool = True, titled: bool = False) -> MsMarco:
        ids: list[str] = []
        texts: list[str] = []
        titles: list[str | None] = []
        bodies: list[str] = []
        fix = repair_mojibake if repair else str
        with (folder / "corpus.jsonl").open(encoding="utf-8") as f:
            for line in f:
                row = json.loads(line)
                text = " ".join(p for p in (row.get("title") or "", row["text"]) if p)
                ids.append(str(row["_id"]))
                texts.append(fix(text))
                if titled:
                    titles.append(fix(row["title"]) if row.get("title") else None)
                    bodies.append(fix(row["text"]))
        queries: dict[str, str] = {}
        with (folder / "queries.jsonl").open(encoding="utf-8") as f:
            for line in f:
                row = json.loads(line)
                queries[str(row["_id"])] = str(row["text"])
        qrels: dict[str, dict[str, int]] = {}
        with (folder / "qrels" / "test.tsv").open(encoding="utf-8") as f:
            for line in f:
                parts = line.split()
                if len(parts) == 3 and parts[2].lstrip("-").isdigit():
                    qrels.setdefault(parts[0], {})[parts[1]] = int(parts[2])
        return cls(tuple(ids), tuple(texts), queries, qrels, tuple(titles), tuple(bodies))


@dataclass(frozen=True, slots=True)
class _Retrieval:
    order: np.ndarray
    scores: np.ndarray


class _MsMarcoBuilder:
    def __init__(self, data: MsMarco, prefix: str = "msmarco", min_grade: int = 2) -> None:
        self.data = data
        #: What ids, sources and seeds are named by (``msmarco``, ``dbpedia``).
        self.prefix = prefix
        #: The qrels grade from which a document is needed.
        self.min_grade = min_grade
        self.index = BM25Index(data.texts, k1=0.9, b=0.4)
        self.alt = BM25Index(data.texts, k1=1.6, b=0.9)
        self.row = {pid: i for i, pid in enumerate(data.ids)}
        ranks = sorted(range(len(data.ids)), key=lambda i: data.ids[i])
        self.tie = np.empty(len(ranks), dtype=np.int64)
        self.tie[np.asarray(ranks, dtype=np.int64)] = np.arange(len(ranks), dtype=np.int64)
        self.query_ids = sorted(data.queries)

    def retrieve(self, query: str) -> _Retrieval:
        scores = self.index.score_all(query)
        return _Retrieval(order=np.lexsort((self.tie, -scores)), scores=scores)

    def pick_rows(self, qid: str, hits: _Retrieval, n: int, min_relevant: int) -> list[int]:
        """Top-n rows, deeper relevant rows swapped in if fewer than ``min_relevant``."""
        grades = self.data.qrels[qid]
        rows = [int(r) for r in hits.order[:n]]

        def relevant(r: int) -> bool:
            return grades.get(self.data.ids[r], 0) >= self.min_grade

        missing = min_relevant - sum(relevant(r) for r in rows)
        if missing > 0:
            deeper = [int(r) for r in hits.order[n:] if relevant(int(r))][:missing]
            for r in deeper:
                drop = next(i for i in range(len(rows) - 1, -1, -1) if not relevant(rows[i]))
                rows.pop(drop)
                rows.append(r)
        return rows

    def originals(
        self, qid: str, query: str, hits: _Retrieval, rows: Sequence[int], rng: random.Random
    ) -> list[Draft]:
        grades = self.data.qrels[qid]
        alt = [self.alt.score_text(query, self.data.texts[r]) for r in rows]
        top_alt = max(max(alt), 1e-9)
        drafts: list[Draft] = []
        titled = bool(self.data.titles)
        for r, a in zip(rows, alt, strict=True):
            pid, text = self.data.ids[r], self.data.texts[r]
            source = source_for(self.prefix, pid)
            drafts.append(
                Draft(
                    chunk_id=chunk_id_for(self.prefix, pid),
                    doc_id=doc_id_for(self.prefix, pid),
                    source_id=source,
                    text=self.data.bodies[r] if titled else text,
                    title=self.data.titles[r] if titled else None,
                    retrieval=float(hits.scores[r]),
                    rerank=0.6 * a / top_alt + 0.4 * coverage(query, text),
                    relevant=grades.get(pid, 0) >= self.min_grade,
                    version=rng.choice(("1", "1", "1", "2")),
                    published_at=_random_date(rng, 2016, 2025).isoformat(),
                    retriever=rng.choice(("bm25", "hybrid")),
                )
            )
        return drafts

    def pool_texts(self, qid: str, hits: _Retrieval, rows: Sequence[int]) -> list[str]:
        """Judged passages of the query that were not retrieved, best BM25 first."""
        taken = set(rows)
        judged = {self.row[p] for p in self.data.qrels[qid] if p in self.row}
        ranked = [int(r) for r in hits.order if int(r) in judged and int(r) not in taken]
        if len(ranked) < 3:
            deeper = (int(r) for r in hits.order[len(rows) : len(rows) + 10])
            ranked += [r for r in deeper if r not in taken and r not in ranked]
        texts = self.data.bodies or self.data.texts
        return [texts[r] for r in ranked[:6]]

    def turns(self, rng: random.Random, n: int) -> list[Turn]:
        out: list[Turn] = []
        for i in range(n):
            if i % 2 == 0:
                qid = rng.choice(self.query_ids)
                text = self.data.queries[qid].strip().capitalize() + "?"
                out.append(Turn(role="user", text=text))
            else:
                text = self.data.texts[rng.randrange(len(self.data.texts))]
                out.append(Turn(role="assistant", text=text))
        return out


def from_msmarco(
    data_dir: Path | str | None = None,
    *,
    seed: int,
    candidates_per_query: tuple[int, int] = (10, 25),
    rates: AwkwardRates | None = None,
    evidence_fraction: tuple[float, float] = MSMARCO_EVIDENCE_FRACTION,
    variants_per_query: int = 1,
    min_relevant: int = 2,
    repair_text: bool = True,
    counter: TokenCounter | None = None,
) -> list[GeneratedBatch]:
    """Multi-passage QA traffic over the judged TREC-DL19 queries (one batch per variant)."""
    data = MsMarco.load(msmarco_dir(data_dir), repair=repair_text)
    return _from_beir(
        _MsMarcoBuilder(data),
        seed=seed,
        candidates_per_query=candidates_per_query,
        rates=rates,
        evidence_fraction=evidence_fraction,
        variants_per_query=variants_per_query,
        min_relevant=min_relevant,
        counter=counter,
    )


def from_dbpedia(
    data_dir: Path | str | None = None,
    *,
    seed: int,
    candidates_per_query: tuple[int, int] = (10, 25),
    rates: AwkwardRates | None = None,
    evidence_fraction: tuple[float, float] = MSMARCO_EVIDENCE_FRACTION,
    min_relevant: int = 2,
    counter: TokenCounter | None = None,
) -> list[GeneratedBatch]:
    """Entity-search traffic over the judged DBPedia-Entity queries (keyword queries, natural
    questions and list searches): the entity abstracts BM25 finds, their entity names as
    titles, and the highly relevant ones (grade 2) as the needed evidence."""
    data = MsMarco.load(_beir_dir(data_dir, DBPEDIA_DIRNAME, "DBPedia-Entity"), titled=True)
    return _from_beir(
        _MsMarcoBuilder(data, prefix="dbpedia"),
        seed=seed,
        candidates_per_query=candidates_per_query,
        rates=rates,
        evidence_fraction=evidence_fraction,
        variants_per_query=1,
        min_relevant=min_relevant,
        counter=counter,
    )


def _from_beir(
    builder: _MsMarcoBuilder,
    *,
    seed: int,
    candidates_per_query: tuple[int, int],
    rates: AwkwardRates | None,
    evidence_fraction: tuple[float, float],
    variants_per_query: int,
    min_relevant: int,
    counter: TokenCounter | None,
) -> list[GeneratedBatch]:
    lo, hi = candidates_per_query
    if not MIN_ORIGINALS <= lo <= hi:
        raise ValueError(f"candidates_per_query must satisfy {MIN_ORIGINALS} <= lo <= hi")
    _check_range("evidence_fraction", evidence_fraction, 0.0, 3.0)
    if variants_per_query < 1:
        raise ValueError(f"variants_per_query must be >= 1, got {variants_per_query}")
    awkward = rates if rates is not None else AwkwardRates()
    tc = counter if counter is not None else default_counter()
    data, prefix = builder.data, builder.prefix
    out: list[GeneratedBatch] = []
    for qid in sorted(q for q in data.qrels if q in data.queries):
        for variant in range(variants_per_query):
            rng = random.Random(f"{prefix}|{seed}|{qid}|{variant}")
            query = data.queries[qid]
            total = rng.randint(lo, hi)
            plan = plan_awkward(rng, awkward).shrink_to(total - MIN_ORIGINALS)
            hits = builder.retrieve(query)
            rows = builder.pick_rows(qid, hits, total - plan.total, min_relevant)
            originals = builder.originals(qid, query, hits, rows, rng)
            ctx = _Context(f"{prefix}-{qid}-{variant}", seed, query, rng, tc)
            drafts = add_awkward(ctx, originals, plan, builder.pool_texts(qid, hits, rows))
            cost = _originals_cost(originals, tc)
            as_of = AS_OF if rng.random() < 0.2 else None
            out.append(
                _finish(ctx, drafts, cost, awkward, evidence_fraction, builder.turns, as_of=as_of)
            )
    return out
