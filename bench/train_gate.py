"""Train the injection gate's sentence model and write it as package data.

    python -m bench.train_gate [--part train|all] [--out ctxbudget/safety/injection_model.json]

Logistic regression on the features of :mod:`ctxbudget.safety.model` (words, word pairs, the
opening word, inside-a-document), fitted by full-batch Adam with an L2 penalty on the
development data of :mod:`bench.injection_data`:

- positives: the sentences of each attack instruction (BIPIA train attacks as placed in their
  contexts, deepset injections, hand-written attacks); an attack of several sentences is a bag,
  and after a first fit only its best-scoring sentences stay positive (the rest of a deepset
  prompt is often an innocent question);
- negatives: every sentence of the benign units (BIPIA clean contexts, deepset and NotInject
  benign prompts, hand-written look-alikes, MS MARCO, HotpotQA, MuSiQue and WikiQA passages).

Each source carries the same total weight, so 5,000 MS MARCO passages do not drown 113 NotInject
prompts. The second fit weighs the retrieval passages that the first one scored above
:data:`HARD_LOGIT` :data:`HARD_WEIGHT` times more (hard negatives: song lyrics and forum posts
that talk to the reader), so one odd passage does not hold the strong threshold up. Features
seen fewer than twice are dropped, and weights below :data:`PRUNE` after the fit, which keeps
the file small. ``--part train`` fits on the training part only (for the held-out estimate of
``python -m bench.injection --model``); the shipped model is fitted on every part. The development
data includes the tuning corpora of :data:`bench.injection_data.TUNE_CORPORA` (everyday documents
addressed to people in many languages, and instructions for an AI put into them), without which
the common short words of other languages weigh as attack words. The fit is
deterministic: same data, same file.

The thresholds written with the weights are the probabilities at which the gate counts a
passage's best sentence as a weak (0.5 point) or a strong (2 points, enough alone) sign, and
``offtopic``, from which a best sentence that shares no content word with the rest of its
document counts as strong (a planted task: "What is the capital of Brazil?" in a shipping
notice). A share (:data:`CALIBRATION_SHARE` of 256) of the retrieval passages is kept out of the
fit, so the thresholds see traffic the weights were not fitted to: ``strong`` is above the
highest benign retrieval passage (MS MARCO, HotpotQA, MuSiQue, WikiQA; fitted or kept out) by
:data:`MARGIN`, ``weak`` at the 99th percentile of all benign units, ``offtopic``
:data:`OFFTOPIC_LIFT` below ``strong`` unless an off-topic retrieval passage needs it higher.
"""

from __future__ import annotations

import argparse
import math
import os
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bench.injection_data import Unit, all_units, held_out
from ctxbudget.safety.model import (
    MODEL_FILE,
    SCALE,
    Feature,
    LinearModel,
    _key_text,
    features,
    passage_features,
    sentences,
)
from ctxbudget.safety.normalization import normalize

PRUNE = 0.05
L2 = float(os.environ.get("GATE_L2", "1e-5"))
STEPS = int(os.environ.get("GATE_STEPS", "1000"))
#: Extra weight of retrieval traffic among the negatives (it must never be withheld).
TRAFFIC_WEIGHT = float(os.environ.get("GATE_TW", "10"))
RATE = 0.05
#: Logit margin of the strong threshold over the highest retrieval passage.
MARGIN = float(os.environ.get("GATE_MARGIN", "0.5"))
#: How far below the strong threshold (in logit) the weak one sits, at most.
WEAK_GAP = float(os.environ.get("GATE_WEAK_GAP", "1.5"))
#: How far below the strong threshold (in logit) the off-topic one sits, at most.
OFFTOPIC_LIFT = float(os.environ.get("GATE_OFFTOPIC_LIFT", "1.0"))
#: Sources of retrieval traffic, which the strong threshold must clear.
TRAFFIC = frozenset(("msmarco", "hotpotqa", "musique", "wikiqa"))
#: Retrieval passages scoring above this logit after the first fit are hard negatives: the
#: second fit weighs them this many times more.
HARD_LOGIT = float(os.environ.get("GATE_HARD_LOGIT", "0.0"))
HARD_WEIGHT = float(os.environ.get("GATE_HARD_WEIGHT", "20"))
#: Share (of 256) of retrieval passages kept out of the fit and only used to set the thresholds.
CALIBRATION_SHARE = int(os.environ.get("GATE_CALIB", "32"))


def _source(u: Unit) -> str:
    if u.corpus == "bipia":
        return f"bipia-{u.label}-{u.style if u.label == 'benign' else 'x'}"
    return f"{u.corpus}-{u.label}"


def bags(units: Sequence[Unit]) -> list[tuple[str, int, list[set[str]]]]:
    """(source, label, sentence features) per unit; an inserted instruction is its own bag,
    read as standing inside a document."""
    out = []
    for u in units:
        if u.label == "attack" and u.inserted is not None:
            feats = [features(w, True) for w in sentences(normalize(u.inserted))]
        else:
            text = u.text if not u.title else f"{u.title}\n{u.text}"
            feats = list(passage_features(normalize(text)))
        if feats:
            out.append((_source(u), int(u.label == "attack"), feats))
    return out


class Design:
    """Sparse rows of features as index arrays (CSR), with labels and weights."""

    def __init__(self, rows: list[list[int]], y: list[int], w: list[float], size: int) -> None:
        self.indptr = np.zeros(len(rows) + 1, dtype=np.int64)
        self.indptr[1:] = np.cumsum([len(r) for r in rows])
        self.indices = np.array([i for r in rows for i in r], dtype=np.int64)
        self.row_of = np.repeat(np.arange(len(rows)), [len(r) for r in rows])
        self.y = np.array(y, dtype=np.float64)
        self.w = np.array(w, dtype=np.float64)
        self.size = size

    def logits(self, coef: np.ndarray, bias: float) -> np.ndarray:
        sums = np.bincount(self.row_of, weights=coef[self.indices], minlength=len(self.y))
        return sums + bias


def fit(design: Design) -> tuple[np.ndarray, float]:
    """Weighted logistic regression by full-batch Adam (deterministic)."""
    coef = np.zeros(design.size)
    bias = 0.0
    m = np.zeros(design.size + 1)
    v = np.zeros(design.size + 1)
    wsum = design.w.sum()
    for step in range(1, STEPS + 1):
        z = design.logits(coef, bias)
        p = 1.0 / (1.0 + np.exp(-np.clip(z, -30, 30)))
        g_row = design.w * (p - design.y) / wsum
        g = np.bincount(design.indices, weights=g_row[design.row_of], minlength=design.size)
        g += L2 * coef
        grad = np.append(g, g_row.sum())
        m = 0.9 * m + 0.1 * grad
        v = 0.999 * v + 0.001 * grad * grad
        update = RATE * (m / (1 - 0.9**step)) / (np.sqrt(v / (1 - 0.999**step)) + 1e-8)
        coef -= update[:-1]
        bias -= update[-1]
    return coef, bias


def train(units: Sequence[Unit]) -> LinearModel:
    """Fit the sentence model on ``units`` and set its thresholds."""
    fitted = [u for u in units if not _calibration(u)]
    data = bags(fitted)
    df: Counter[Feature] = Counter()
    for _src, _label, feats in data:
        for sent in feats:
            df.update(set(sent))
    kept = sorted((f for f, n in df.items() if n >= 2), key=_key_text)
    vocab = {f: i for i, f in enumerate(kept)}
    mass: dict[str, int] = defaultdict(int)
    for src, _label, feats in data:
        mass[src] += len(feats)
    positives = sum(1 for s in mass if s.endswith("-attack"))
    negatives = len(mass) - positives
    keep: list[set[int] | None] = [None] * len(data)
    hard = [False] * len(data)
    coef = np.zeros(len(vocab))
    bias = 0.0
    for round_ in range(2):
        rows, ys, ws = [], [], []
        for b, (src, label, feats) in enumerate(data):
            chosen = keep[b]
            share = (1.0 / positives if label else 1.0 / negatives) / mass[src]
            if src.split("-")[0] in TRAFFIC:
                share *= TRAFFIC_WEIGHT * (HARD_WEIGHT if hard[b] else 1.0)
            for k, sent in enumerate(feats):
                if chosen is not None and k not in chosen:
                    continue
                rows.append(sorted(vocab[f] for f in sent if f in vocab))
                ys.append(label)
                ws.append(share * (len(feats) / len(chosen) if chosen else 1.0))
        design = Design(rows, ys, ws, len(vocab))
        coef, bias = fit(design)
        if round_ == 0:
            keep = [
                _best_sentences(feats, vocab, coef, bias) if label else None
                for _src, label, feats in data
            ]
            hard = [
                src.split("-")[0] in TRAFFIC and _top(feats, vocab, coef, bias) >= HARD_LOGIT
                for src, _label, feats in data
            ]
    inv = {i: f for f, i in vocab.items()}
    weights = {inv[i]: float(c) for i, c in enumerate(coef) if abs(c) >= PRUNE}
    model = LinearModel.from_floats(float(bias), weights, 1.0, 1.0)
    strong, weak, offtopic = thresholds(model, units)
    return LinearModel.from_floats(float(bias), weights, strong, weak, offtopic)


def _calibration(u: Unit) -> bool:
    """Whether ``u`` is a retrieval passage kept out of the fit for the thresholds."""
    return u.corpus in TRAFFIC and held_out(f"calibration-{u.id}", CALIBRATION_SHARE)


def _top(
    feats: list[list[Feature]], vocab: dict[Feature, int], coef: np.ndarray, bias: float
) -> float:
    return max(bias + sum(coef[vocab[f]] for f in s if f in vocab) for s in feats)


def _best_sentences(
    feats: list[list[Feature]], vocab: dict[Feature, int], coef: np.ndarray, bias: float
) -> set[int]:
    scores = [bias + sum(coef[vocab[f]] for f in s if f in vocab) for s in feats]
    top = max(scores)
    return {k for k, s in enumerate(scores) if s >= 0.0 or s == top}


def thresholds(model: LinearModel, units: Sequence[Unit]) -> tuple[float, float, float]:
    """(strong, weak, offtopic) from the benign units: strong clears every retrieval passage's
    best sentence by :data:`MARGIN` in logit; weak is the 99th percentile of all benign units;
    offtopic sits :data:`OFFTOPIC_LIFT` below strong, or higher where a retrieval passage whose
    best sentence is off its topic needs it (by :data:`MARGIN`), and never below weak."""
    traffic, benign, off = [], [], [-math.inf]
    for u in units:
        if u.label != "benign":
            continue
        text = normalize(u.text if not u.title else f"{u.title}\n{u.text}")
        z = model.logit(text)
        benign.append(z)
        if u.corpus in TRAFFIC:
            traffic.append(z)
            if model.off_topic(text):
                off.append(z)
    strong_z = max(traffic) + MARGIN
    weak_z = max(float(np.percentile(benign, 99.0)), strong_z - WEAK_GAP)
    off_z = min(strong_z, max(strong_z - OFFTOPIC_LIFT, max(off) + MARGIN, weak_z))
    return round(_sigmoid(strong_z), 6), round(_sigmoid(weak_z), 6), round(_sigmoid(off_z), 6)


def _sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z))


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.train_gate", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--part", choices=("train", "all"), default="all")
    ap.add_argument("--out", type=Path, default=MODEL_FILE)
    args = ap.parse_args(argv)
    units = [u for u in all_units() if args.part == "all" or u.part == "train"]
    model = train(units)
    args.out.write_text(model.to_json() + "\n", encoding="utf-8")
    print(
        f"wrote {args.out}: {len(model.weights)} weights, bias {model.bias / SCALE:.3f}, "
        f"strong {model.strong:.4f}, weak {model.weak:.4f}, offtopic {model.offtopic:.4f} "
        f"({len(units)} units)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
