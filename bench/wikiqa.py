"""WikiQA (castorini layout) -> labelled ``ctx.candidate_batch.v1`` JSONL for conformal calibration.

One batch per question (``request_id = "wikiqa-<split>-<qid>"``), one candidate per sentence of
the question's Wikipedia summary paragraph (``chunk_id = "<qid>-<i>"``, ``i`` = its position in
the paragraph), ``labels.relevant_chunk_ids`` = the sentences labelled 1.

Scores (written here, deterministic, numpy-free):

* ``retrieval_score``: Okapi BM25 (k1=1.2, b=0.75) of the sentence against the question's content
  words, with IDF and average length computed corpus-wide over every distinct sentence of the
  TRAIN split (label free) for every split, so that the score is one and the same function on
  calibration and test data, as a production retriever's index statistics would be. (IDF over
  each split's own sentences, ``--idf-corpus own``, makes BM25 a different function per split:
  N is 8.6k sentences in train but 2.3k in test, the test scores shrink, and a threshold
  calibrated on train then misses: measured 62% coverage at a 70% target.) This is the
  "retriever": raw lexical match, on a scale that varies from query to query, and 0 for the
  many answer sentences that share no content word with the question.
* ``rerank_score``: a better, still lexical "reranker" built from signals of the candidate set:

      rel_bm25 (BM25 / the best BM25 in this candidate set, so the scale is per-query)
      + 0.25 * idf-weighted share of the question's content words found in the sentence
      + 0.40 * answer-type cue (when/what year -> a year or month; how many/much/... -> a number)
      + 0.40 * definition cue (what/who is|are|was|were -> "is a / was the ..." sentences)
      - 0.50 * log(1 + position in the paragraph)          (only with --rerank lexical+position)

  The position term is a document-structure prior (the lead sentence of a Wikipedia summary
  defines the subject), available to any production reranker as the chunk's position in its
  document; ``--rerank lexical`` leaves it out. The weights were chosen on the DEV split only,
  so neither the calibration (train) nor the evaluation (test) data tuned the score.

The data licence (Microsoft Research Data License) forbids redistributing derived files: the
output goes where the user says, and never inside the repository.

    python -m bench.wikiqa --split train --out /tmp/wikiqa-train.jsonl
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ctxbudget.schemas import CandidateBatch

SPLITS = ("train", "dev", "test")
RerankMode = Literal["lexical", "lexical+position"]
IdfCorpus = Literal["train", "own"]
REPO_ROOT = Path(__file__).resolve().parents[1]

K1, B = 1.2, 0.75
W_OVERLAP, W_ANSWER_TYPE, W_DEFINITION, W_POSITION = 0.25, 0.40, 0.40, 0.50

_STOPWORDS_TEXT = """
    a an the of in on at to for from by with and or but nor is are was were be been being
    am do does did done doing how what who whom whose which when where why that this these those
    it its as into than then there their theirs they them he she his her hers him i you we our
    ours your yours my me us 's 're 've 'd 'll n't has have had having not no can could will
    would shall should may might must also such about over under between after before during
    up down out off so if else all any each both few more most other some own same too very
    just now only one whats"""
STOPWORDS = frozenset(_STOPWORDS_TEXT.split())
_NUMBER = re.compile(r"^\d[\d,.]*(?:st|nd|rd|th|s)?$")
_YEAR = re.compile(r"^(?:1[0-9]|20)\d\d(?:s)?$")
_MONTHS_TEXT = (
    "january february march april may june july august september october november december"
)
_MONTHS = frozenset(_MONTHS_TEXT.split())
_QUANTITY_TEXT = "many much long old tall big far fast large high deep wide heavy often short small"
_QUANTITY_WORDS = frozenset(_QUANTITY_TEXT.split())
_DEFINITION_Q = re.compile(r"^(?:what|who) (?:is|are|was|were) ")
_DEFINITION_S = re.compile(r"\b(?:is|was|are|were) (?:a|an|the|one)\b")


@dataclass(frozen=True, slots=True)
class Question:
    qid: str
    text: str
    sentences: tuple[str, ...]
    labels: tuple[int, ...]


def default_data_dir() -> Path:
    """``$CTXBUDGET_DATA_DIR/wikiqa_castorini``, else ``shared/data`` beside the repository."""
    base = os.environ.get("CTXBUDGET_DATA_DIR")
    root = Path(base) if base else REPO_ROOT.parent / "shared" / "data"
    return root / "wikiqa_castorini"


def read_split(data_dir: Path, split: str) -> list[Question]:
    """The questions of one split, in file order, each with its sentences in paragraph order."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")
    folder = data_dir / split
    columns = {}
    for name in ("id.txt", "sim.txt", "a.toks", "b.toks"):
        path = folder / name
        try:
            columns[name] = path.read_text(encoding="utf-8").rstrip("\n").split("\n")
        except OSError as e:
            raise FileNotFoundError(f"{path}: cannot read WikiQA file ({e.strerror})") from e
    lengths = {name: len(lines) for name, lines in columns.items()}
    if len(set(lengths.values())) != 1:
        raise ValueError(f"{folder}: the four files are not line-aligned: {lengths}")
    order: list[str] = []
    rows: dict[str, tuple[str, list[str], list[int]]] = {}
    for qid, label, question, sentence in zip(
        columns["id.txt"], columns["sim.txt"], columns["a.toks"], columns["b.toks"], strict=True
    ):
        qid = qid.strip()
        if qid not in rows:
            rows[qid] = (question.strip(), [], [])
            order.append(qid)
        if label.strip() not in ("0", "1"):
            raise ValueError(f"{folder}/sim.txt: label {label!r} for question {qid} is not 0/1")
        rows[qid][1].append(sentence.strip())
        rows[qid][2].append(int(label))
    return [Question(q, rows[q][0], tuple(rows[q][1]), tuple(rows[q][2])) for q in order]


def content_words(text: str) -> list[str]:
    """Whitespace tokens (the data is pre-tokenized, lowercased) minus stopwords and punctuation."""
    return [t for t in text.split() if t not in STOPWORDS and any(ch.isalnum() for ch in t)]


class Bm25:
    """BM25 with document frequencies over the distinct sentences of a split."""

    def __init__(self, sentences: Sequence[str]) -> None:
        docs = sorted(set(sentences))
        self.n_docs = len(docs)
        self.df: Counter[str] = Counter()
        total = 0
        for doc in docs:
            toks = doc.split()
            total += len(toks)
            self.df.update(set(toks))
        self.avgdl = total / self.n_docs if self.n_docs else 1.0

    def idf(self, term: str) -> float:
        df = self.df.get(term, 0)
        return math.log(1.0 + (self.n_docs - df + 0.5) / (df + 0.5))

    def score(self, query_terms: Sequence[str], sentence: str) -> float:
        toks = sentence.split()
        tf = Counter(toks)
        norm = K1 * (1.0 - B + B * len(toks) / self.avgdl)
        return math.fsum(
            self.idf(t) * tf[t] * (K1 + 1.0) / (tf[t] + norm) for t in sorted(set(query_terms))
        )


def answer_type_cue(question: str, sentence: str) -> float:
    """1 when the sentence has the kind of token the question asks for, 0 when it lacks it,
    0.5 when the question type has no cue."""
    q = question.split()
    toks = sentence.split()
    if not q:
        return 0.5
    if q[0] == "when" or " ".join(q[:2]) in ("what year", "what date", "what time", "what day"):
        return 1.0 if any(_YEAR.match(t) or t in _MONTHS for t in toks) else 0.0
    if q[0] == "how" and len(q) > 1 and q[1] in _QUANTITY_WORDS:
        return 1.0 if any(_NUMBER.match(t) for t in toks) else 0.0
    return 0.5


def definition_cue(question: str, sentence: str) -> float:
    """For "what/who is X" questions, 1 for a defining sentence ("X is a ..."), else 0."""
    if not _DEFINITION_Q.match(question):
        return 0.5
    return 1.0 if _DEFINITION_S.search(sentence) else 0.0


def score_question(
    question: Question, bm25: Bm25, *, rerank: RerankMode
) -> list[tuple[float, float]]:
    """(retrieval_score, rerank_score) per sentence, in paragraph order."""
    terms = content_words(question.text)
    weights = {t: bm25.idf(t) for t in set(terms)}
    weight_total = math.fsum(weights.values())
    raw = [bm25.score(terms, s) for s in question.sentences]
    best = max(raw, default=0.0)
    out = []
    for position, (sentence, bm) in enumerate(zip(question.sentences, raw, strict=True)):
        present = set(sentence.split())
        overlap = (
            math.fsum(w for t, w in weights.items() if t in present) / weight_total
            if weight_total > 0
            else 0.0
        )
        rerank_score = (
            (bm / best if best > 0 else 0.0)
            + W_OVERLAP * overlap
            + W_ANSWER_TYPE * answer_type_cue(question.text, sentence)
            + W_DEFINITION * definition_cue(question.text, sentence)
        )
        if rerank == "lexical+position":
            rerank_score -= W_POSITION * math.log1p(position)
        out.append((round(bm, 6), round(rerank_score, 6)))
    return out


def batch_dict(
    split: str, question: Question, scores: Sequence[tuple[float, float]]
) -> dict[str, Any]:
    """The wire form of one question's candidate batch."""
    candidates = [
        {
            "chunk_id": f"{question.qid}-{i}",
            "doc_id": f"wikiqa-{split}-{question.qid}",
            "source_id": "wikipedia",
            "text": sentence,
            "retrieval_score": retrieval,
            "rerank_score": rerank,
            "tenant_id": "wikiqa",
            "metadata": {"dataset": "wikiqa", "split": split, "position": i},
        }
        for i, (sentence, (retrieval, rerank)) in enumerate(
            zip(question.sentences, scores, strict=True)
        )
    ]
    relevant = [f"{question.qid}-{i}" for i, label in enumerate(question.labels) if label == 1]
    return {
        "schema": "ctx.candidate_batch.v1",
        "request_id": f"wikiqa-{split}-{question.qid}",
        "tenant_id": "wikiqa",
        "principal": {"tenant_id": "wikiqa", "access_labels": []},
        "query": {"text": question.text},
        "model": {"name": "gpt-4o-mini", "input_limit": 8192, "tokenizer": "cl100k_base"},
        "answer_contract": {"kind": "short_fact"},
        "candidates": candidates,
        "labels": {"relevant_chunk_ids": relevant},
    }


def convert_split(
    data_dir: Path,
    split: str,
    *,
    rerank: RerankMode = "lexical+position",
    idf_corpus: IdfCorpus = "train",
) -> list[tuple[CandidateBatch, str]]:
    """Every question of the split as a validated batch and its JSON line."""
    questions = read_split(data_dir, split)
    reference = (
        questions if idf_corpus == "own" or split == "train" else read_split(data_dir, "train")
    )
    bm25 = Bm25([s for q in reference for s in q.sentences])
    out = []
    for q in questions:
        line = json.dumps(batch_dict(split, q, score_question(q, bm25, rerank=rerank)))
        out.append((CandidateBatch.model_validate_json(line), line))
    return out


def _inside_repo(path: Path) -> bool:
    try:
        path.resolve().relative_to(REPO_ROOT)
    except ValueError:
        return False
    return True


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.wikiqa", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--split", choices=SPLITS, required=True)
    parser.add_argument("--out", type=Path, required=True, help="output JSONL (outside the repo)")
    parser.add_argument("--data-dir", type=Path, default=None, help="the wikiqa_castorini folder")
    parser.add_argument(
        "--rerank", choices=("lexical", "lexical+position"), default="lexical+position"
    )
    parser.add_argument(
        "--idf-corpus",
        choices=("train", "own"),
        default="train",
        help="BM25 statistics from the train split (default) or from the split itself",
    )
    args = parser.parse_args(argv)
    if _inside_repo(args.out):
        parser.error(f"{args.out}: WikiQA-derived files must not be written inside {REPO_ROOT}")
    data_dir = args.data_dir or default_data_dir()
    try:
        rows = convert_split(data_dir, args.split, rerank=args.rerank, idf_corpus=args.idf_corpus)
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", encoding="utf-8") as fh:
        for _, line in rows:
            fh.write(line + "\n")
    n_cand = sum(len(b.candidates) for b, _ in rows)
    n_rel = sum(len(b.labels.relevant_chunk_ids) for b, _ in rows if b.labels is not None)
    print(
        f"wrote {len(rows)} batches, {n_cand} candidates, {n_rel} relevant "
        f"(split {args.split}, rerank {args.rerank}, idf {args.idf_corpus}) to {args.out}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
