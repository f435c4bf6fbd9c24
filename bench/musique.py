"""MuSiQue-Ans (composed 2-4 hop questions) -> labelled ``ctx.candidate_batch.v1`` traffic.

A MuSiQue question is composed of 2 to 4 single-hop questions, each answered by one
paragraph; the answer of hop k (the bridge entity) is usually named in the *text* of the
paragraph of hop k+1, not in its title, and the later hops' paragraphs rank low under a
lexical retrieval by the whole question. That makes it the test of whether a packer follows
a chain of evidence hop by hop.

How a batch is made, as a BM25-only deployment over one Wikipedia index would produce it
(the same frame as :mod:`bench.hotpot`):

* one :class:`ctxbudget.testing.traffic.BM25Index` over every deduplicated paragraph of the corpus
  (1,890 here), each indexed as ``title + " " + text``;
* the candidates of a question are its own 20 paragraphs (2-4 supporting, the rest chosen to
  share the question's words) topped up with the best BM25 hits of the rest of the corpus, up
  to a per-question count drawn from 20..28 (seeded);
* ``retrieval_score`` is the BM25 score, no reranker; one source ``"wikipedia"``; every
  paragraph is one chunk of its own document section (titles repeat: several paragraphs of
  one article), ids are stable hashes of title and text, version ``"1"``; about 60 % of the
  candidates declare their ``cl100k_base`` token count;
* ``labels.relevant_chunk_ids`` are the supporting paragraphs (``is_supporting``); the truth
  record names the hop count as the question type (``2hop``, ``3hop``, ``4hop``).

MuSiQue labels paragraphs, not sentences. The truth's ``support`` names, per supporting
paragraph, the sentences that carry its hop, found from the decomposition: the first sentence
naming the hop's answer (the asked-for attribute) and, from the second hop on, the first
sentence naming the previous hop's answer (the bridge entity). Names are matched
case-insensitively on word boundaries, answer aliases included; a hop whose answer its
paragraph does not spell out contributes no sentence. Sentences are cut by
:func:`ctxbudget.text.sentences`, the splitter the packer itself uses.

Two budget settings: ``moderate`` is a 1,600-token model with 300 reserved for the answer
(about 1,200 evidence tokens, four or five paragraphs whole), ``tight`` an 800-token model
with 120 reserved (about 570, three or four paragraphs whole: a 3-4 hop chain fits only as
excerpts). With ``awkward=True`` the cases of :mod:`ctxbudget.testing.traffic` are mixed in as for
HotpotQA.

Output is byte-identical for the same seed. MuSiQue is CC BY 4.0 (Trivedi et al., 2022):
derived files are written only outside the repository.

    python -m bench.musique --budget moderate --awkward --out /tmp/musique-moderate-awk.jsonl
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.hotpot import (
    HOTPOT_RATES,
    POOL_SIZE,
    SOURCE_ID,
    SYSTEM_PROMPT,
    BudgetSetting,
    _candidate,
    _dated_docs,
    _read_json,
    _with_foreign_titles,
    summarize,
)
from ctxbudget.schemas import (
    AnswerContract,
    CandidateBatch,
    Instructions,
    Labels,
    ModelSpec,
    Principal,
    Query,
)
from ctxbudget.testing.naive import TokenCounter, default_counter
from ctxbudget.testing.traffic import (
    PRINCIPAL_LABELS,
    REPO_ROOT,
    TENANT,
    AwkwardRates,
    BatchTruth,
    BM25Index,
    Draft,
    GeneratedBatch,
    TrafficError,
    _Context,
    _inside_repo,
    add_awkward,
    chunk_id_for,
    default_data_dir,
    doc_id_for,
    plan_awkward,
    truth_path_for,
    write_traffic,
)
from ctxbudget.text import sentences

MUSIQUE_DIRNAME = "musique_train100"
QUESTIONS_FILE = "musique_train.json"
CORPUS_FILE = "musique_train_corpus.json"
ID_NAMESPACE = "musique"
CANDIDATES_PER_QUERY: tuple[int, int] = (20, 28)

BUDGETS: Mapping[str, BudgetSetting] = {
    "moderate": BudgetSetting("chat-1600", 1600, "short_fact", 300),
    "tight": BudgetSetting("chat-800", 800, "short_fact", 120),
}


# ---------------------------------------------------------------- data


@dataclass(frozen=True, slots=True)
class Hop:
    """One single-hop question of the decomposition, in hop order."""

    question: str
    answer: str
    paragraph: int


@dataclass(frozen=True, slots=True)
class MusiqueQuestion:
    """One MuSiQue-Ans record."""

    qid: str
    question: str
    answer: str
    aliases: tuple[str, ...]
    #: ``(idx, title, text, is_supporting)`` per paragraph, in file order.
    paragraphs: tuple[tuple[int, str, str, bool], ...]
    hops: tuple[Hop, ...]

    @property
    def hop_class(self) -> str:
        """``2hop``, ``3hop`` or ``4hop`` (the id's prefix without its variant digit)."""
        return f"{len(self.hops)}hop"

    def text_of(self, idx: int) -> str:
        for i, _, text, _ in self.paragraphs:
            if i == idx:
                return text
        raise KeyError(idx)

    def names_of(self, k: int) -> tuple[str, ...]:
        """What hop ``k``'s answer is called: the answer, and for the last hop the aliases."""
        names = [self.hops[k].answer]
        if k == len(self.hops) - 1:
            names += [self.answer, *self.aliases]
        return tuple(dict.fromkeys(n.strip() for n in names if n.strip()))

    def support(self) -> dict[int, tuple[str, ...]]:
        """Paragraph idx -> the sentences that carry its hop (the module docstring)."""
        out: dict[int, list[str]] = {}
        for k, hop in enumerate(self.hops):
            text = self.text_of(hop.paragraph)
            found = out.setdefault(hop.paragraph, [])
            wanted = [self.names_of(k)] + ([self.names_of(k - 1)] if k else [])
            for names in wanted:
                sentence = _first_naming(text, names)
                if sentence is not None and sentence not in found:
                    found.append(sentence)
        return {idx: tuple(s) for idx, s in sorted(out.items()) if s}


def _first_naming(text: str, names: Sequence[str]) -> str | None:
    """The first sentence of ``text`` that names one of ``names`` (word boundaries, any case)."""
    patterns = [re.compile(rf"(?<!\w){re.escape(n)}(?!\w)", re.I) for n in names]
    for start, end in sentences(text):
        sentence = text[start:end]
        if any(p.search(sentence) for p in patterns):
            return sentence
    return None


def musique_dir(data_dir: Path | str | None = None) -> Path:
    """The MuSiQue folder, given it or the data folder holding it."""
    base = Path(data_dir) if data_dir is not None else default_data_dir()
    for candidate in (base, base / MUSIQUE_DIRNAME):
        if (candidate / QUESTIONS_FILE).is_file() and (candidate / CORPUS_FILE).is_file():
            return candidate
    raise TrafficError(
        f"MuSiQue sample not found under {base} (expected {QUESTIONS_FILE} and {CORPUS_FILE} "
        f"there or in {MUSIQUE_DIRNAME}/); pass --data-dir or set CTXBUDGET_DATA_DIR to the "
        "folder holding it"
    )


def _question(row: Mapping[str, Any]) -> MusiqueQuestion:
    return MusiqueQuestion(
        qid=str(row["id"]),
        question=str(row["question"]),
        answer=str(row["answer"]),
        aliases=tuple(str(a) for a in row.get("answer_aliases") or ()),
        paragraphs=tuple(
            (int(p["idx"]), str(p["title"]), str(p["paragraph_text"]), bool(p["is_supporting"]))
            for p in row["paragraphs"]
        ),
        hops=tuple(
            Hop(str(h["question"]), str(h["answer"]), int(h["paragraph_support_idx"]))
            for h in row["question_decomposition"]
        ),
    )


def load_musique(data_dir: Path | str | None = None) -> list[MusiqueQuestion]:
    """The questions of the sample, in file order."""
    path = musique_dir(data_dir) / QUESTIONS_FILE
    rows = _read_json(path)
    if not isinstance(rows, list):
        raise TrafficError(f"{path}: expected a JSON array of questions")
    try:
        return [_question(row) for row in rows]
    except (KeyError, TypeError, ValueError) as e:
        raise TrafficError(f"{path}: not in the MuSiQue format ({e!r})") from e


class MusiqueCorpus:
    """Every paragraph with one BM25 index over ``title + " " + text`` (file order)."""

    def __init__(self, passages: Sequence[tuple[str, str]]) -> None:
        self.titles: tuple[str, ...] = tuple(t for t, _ in passages)
        self.texts: tuple[str, ...] = tuple(x for _, x in passages)
        self.row = {p: i for i, p in enumerate(passages)}
        self.index = BM25Index([f"{t} {x}" for t, x in passages])

    @classmethod
    def load(cls, data_dir: Path | str | None = None) -> MusiqueCorpus:
        path = musique_dir(data_dir) / CORPUS_FILE
        rows = _read_json(path)
        if not isinstance(rows, list):
            raise TrafficError(f"{path}: expected a JSON array of {{title, text}} passages")
        try:
            return cls([(str(r["title"]), str(r["text"])) for r in rows])
        except (KeyError, TypeError) as e:
            raise TrafficError(f"{path}: not a list of {{title, text}} passages ({e!r})") from e

    def ranking(self, query: str) -> tuple[np.ndarray, np.ndarray]:
        """(rows best first, ties by row; scores by row)."""
        scores = self.index.score_all(query)
        ties = np.arange(len(self.titles), dtype=np.int64)
        return np.lexsort((ties, -scores)), scores


# ---------------------------------------------------------------- batches


def _draft(title: str, text: str, score: float, relevant: bool) -> Draft:
    return Draft(
        chunk_id=chunk_id_for(ID_NAMESPACE, title, text),
        doc_id=doc_id_for(ID_NAMESPACE, title, text),
        source_id=SOURCE_ID,
        text=text,
        retrieval=score,
        rerank=score,
        relevant=relevant,
        title=title,
        version="1",
        published_at=None,
        retriever="bm25",
    )


def _batch(
    q: MusiqueQuestion,
    corpus: MusiqueCorpus,
    *,
    seed: int,
    budget: str,
    awkward: bool,
    rates: AwkwardRates,
    counter: TokenCounter,
) -> GeneratedBatch:
    setting = BUDGETS[budget]
    request_id = f"musique-{budget}-{'awk' if awkward else 'clean'}-{q.qid}"
    rng = random.Random(f"musique|{seed}|{q.qid}")
    lo, hi = CANDIDATES_PER_QUERY
    total = rng.randint(lo, hi)
    order, scores = corpus.ranking(q.question)
    own: dict[tuple[str, str], bool] = {}
    for _, title, text, supporting in q.paragraphs:
        key = (title, text)
        if key not in corpus.row:
            raise TrafficError(f"question {q.qid}: paragraph {title!r} not in the corpus")
        own[key] = own.get(key, False) or supporting
    taken = {corpus.row[k] for k in own}
    rest = [int(r) for r in order if int(r) not in taken]
    n_extra = max(0, total - len(own))
    pool_rows = rest[n_extra : n_extra + POOL_SIZE]
    originals = [
        _draft(title, text, float(scores[corpus.row[(title, text)]]), supporting)
        for (title, text), supporting in own.items()
    ] + [_draft(corpus.titles[r], corpus.texts[r], float(scores[r]), False) for r in rest[:n_extra]]
    drafts = list(originals)
    awk_rng = random.Random(f"musique|awk|{seed}|{q.qid}")
    ctx = _Context(f"musique-{q.qid}", seed, q.question, awk_rng, counter)
    if awkward:
        plan = plan_awkward(ctx.rng, rates)
        drafts = add_awkward(ctx, originals, plan, [corpus.texts[r] for r in pool_rows])
        drafts = _with_foreign_titles(drafts, [corpus.titles[r] for r in pool_rows])
    dated = _dated_docs(drafts)
    ordered = sorted(drafts, key=lambda d: (-round(d.retrieval, 4), d.chunk_id))
    candidates = tuple(_candidate(d, seed, dated, counter) for d in ordered)
    relevant = sorted({d.chunk_id for d in drafts if d.relevant and d.kind == "original"})
    by_idx = {i: (title, text) for i, title, text, _ in q.paragraphs}
    support = {
        chunk_id_for(ID_NAMESPACE, *by_idx[idx]): sents for idx, sents in q.support().items()
    }
    batch = CandidateBatch(
        request_id=request_id,
        tenant_id=TENANT,
        principal=Principal(tenant_id=TENANT, access_labels=PRINCIPAL_LABELS),
        query=Query(text=q.question),
        conversation=(),
        instructions=Instructions(text=SYSTEM_PROMPT, tokens=None),
        model=ModelSpec(
            name=setting.model, input_limit=setting.input_limit, tokenizer="cl100k_base"
        ),
        answer_contract=AnswerContract(
            kind=setting.answer_kind, reserve_tokens=setting.reserve_tokens
        ),
        candidates=candidates,
        labels=Labels(relevant_chunk_ids=tuple(relevant)),
    )
    truth = BatchTruth(
        request_id=request_id,
        kinds={d.chunk_id: d.kind for d in drafts},
        families={d.chunk_id: d.family for d in drafts if d.family is not None},
        support=support,
        qtype=q.hop_class,
    )
    return GeneratedBatch(batch=batch, truth=truth)


def from_musique(
    data_dir: Path | str | None = None,
    *,
    seed: int = 1,
    budget: str = "moderate",
    awkward: bool = False,
    counter: TokenCounter | None = None,
    rates: AwkwardRates | None = None,
    corpus: MusiqueCorpus | None = None,
) -> list[GeneratedBatch]:
    """One batch per question, in file order; byte-identical for the same arguments."""
    if budget not in BUDGETS:
        raise ValueError(f"budget must be one of {sorted(BUDGETS)}, got {budget!r}")
    questions = load_musique(data_dir)
    index = corpus if corpus is not None else MusiqueCorpus.load(data_dir)
    tc = counter if counter is not None else default_counter()
    awkward_rates = rates if rates is not None else HOTPOT_RATES
    return [
        _batch(q, index, seed=seed, budget=budget, awkward=awkward, rates=awkward_rates, counter=tc)
        for q in questions
    ]


# ---------------------------------------------------------------- command line


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench.musique",
        description="MuSiQue -> labelled CandidateBatch v1 JSONL traffic and its truth file.",
    )
    parser.add_argument("--budget", choices=sorted(BUDGETS), required=True)
    parser.add_argument("--awkward", action="store_true", help="mix in the awkward cases")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, required=True, help="output JSONL (outside the repo)")
    parser.add_argument("--truth-out", type=Path, default=None, help="default: OUT.truth.jsonl")
    parser.add_argument(
        "--data-dir", type=Path, default=None, help="default: $CTXBUDGET_DATA_DIR or ../shared/data"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    truth_out: Path = args.truth_out or truth_path_for(args.out)
    started = time.perf_counter()
    try:
        for path in (args.out, truth_out):
            if _inside_repo(path):
                raise TrafficError(
                    f"refusing to write MuSiQue-derived traffic inside the repository ({path}); "
                    f"choose a path outside {REPO_ROOT}, e.g. /tmp"
                )
        generated = from_musique(
            args.data_dir, seed=args.seed, budget=args.budget, awkward=args.awkward
        )
    except (TrafficError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    n, truth = write_traffic(generated, args.out, truth_out)
    elapsed = time.perf_counter() - started
    print(
        f"wrote {n} batches to {args.out} and their truth to {truth} in {elapsed:.1f}s: "
        f"{summarize(generated)}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
