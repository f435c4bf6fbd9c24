"""Okapi BM25 written with numpy, and query-term coverage: the retrieval signals."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

import numpy as np

_TOKEN_RE = re.compile(r"[a-z0-9]+")
_STOPWORD_TEXT = (
    "a an and are as at be by can did do does for from has have how i in is it its of on or "
    "that the this to was were what when where which who why will with"
)
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())


def bm25_terms(text: str) -> list[str]:
    """Lower-cased alphanumeric terms without a small stop list."""
    return [t for t in _TOKEN_RE.findall(text.lower()) if t not in _STOPWORDS]


class BM25Index:
    """Okapi BM25 over a fixed corpus (Lucene idf), postings as numpy arrays."""

    def __init__(self, texts: Sequence[str], *, k1: float = 0.9, b: float = 0.4) -> None:
        if k1 <= 0:
            raise ValueError(f"k1 must be positive, got {k1!r}")
        if not 0.0 <= b <= 1.0:
            raise ValueError(f"b must be within [0, 1], got {b!r}")
        self.k1, self.b = k1, b
        self.n_docs = len(texts)
        docs: dict[str, list[int]] = {}
        tfs: dict[str, list[int]] = {}
        lengths = np.zeros(self.n_docs, dtype=np.float64)
        for i, text in enumerate(texts):
            terms = bm25_terms(text)
            lengths[i] = len(terms)
            for term, tf in sorted(Counter(terms).items()):
                docs.setdefault(term, []).append(i)
                tfs.setdefault(term, []).append(tf)
        self._lengths = lengths
        self._avgdl = float(lengths.mean()) if self.n_docs and lengths.mean() > 0 else 1.0
        self._postings = {
            t: (np.asarray(docs[t], dtype=np.int64), np.asarray(tfs[t], dtype=np.float64))
            for t in sorted(docs)
        }
        self._idf = {
            t: math.log(1.0 + (self.n_docs - len(d) + 0.5) / (len(d) + 0.5))
            for t, d in docs.items()
        }

    def _saturate(self, tf: np.ndarray, dl: np.ndarray) -> np.ndarray:
        norm = self.k1 * (1.0 - self.b + self.b * dl / self._avgdl)
        result: np.ndarray = tf * (self.k1 + 1.0) / (tf + norm)
        return result

    def score_all(self, query: str) -> np.ndarray:
        """BM25 score of every corpus document for the query."""
        scores = np.zeros(self.n_docs, dtype=np.float64)
        for term in sorted(set(bm25_terms(query))):
            if term not in self._postings:
                continue
            docs, tf = self._postings[term]
            scores[docs] += self._idf[term] * self._saturate(tf, self._lengths[docs])
        return scores

    def score_text(self, query: str, text: str) -> float:
        """BM25 score of an arbitrary text with the corpus statistics."""
        counts = Counter(bm25_terms(text))
        dl = np.asarray([float(sum(counts.values()))])
        total = 0.0
        for term in sorted(set(bm25_terms(query))):
            if term in self._idf and counts[term]:
                tf = np.asarray([float(counts[term])])
                total += self._idf[term] * float(self._saturate(tf, dl)[0])
        return total


def coverage(query: str, text: str) -> float:
    """Fraction of the query's distinct terms present in the text."""
    q = set(bm25_terms(query))
    if not q:
        return 0.0
    return len(q & set(bm25_terms(text))) / len(q)
