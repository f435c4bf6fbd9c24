"""The verify benchmark's labelled answers: every kind of edit is written from real packs
and the verifier finds what the labels say, on the development and the held-out sets."""

from __future__ import annotations

from collections import Counter

import pytest

from bench import verify as bv
from ctxbudget.pipeline import Pipeline
from tests.paths import data_dir

pytestmark = pytest.mark.skipif(
    not all((data_dir() / d).is_dir() for d in ("hotpotqa_train100", "musique_train100")),
    reason=f"HotpotQA / MuSiQue samples not found under {data_dir()}",
)


def test_labelled_answers_from_hotpot_packs_are_checked_as_labelled(pipeline: Pipeline) -> None:
    """Dev phrasing on HotpotQA packs: all six kinds appear and at least 95% are found."""
    batches = bv.hotpot_batches(data_dir())[:30]
    answers = bv.labelled_answers(batches, pipeline, style="dev", seed=3)
    kinds = Counter(k for a in answers for k in a.kinds)
    assert set(kinds) == set(bv.KINDS)
    verdicts, _, _ = bv._timed(answers, 1)
    s = bv.score(answers, verdicts)
    assert sum(s.found.values()) >= 0.95 * sum(s.claims.values())
    assert s.found["fabricated"] == s.claims["fabricated"]


def test_the_held_out_set_is_built_from_musique_with_its_labels(pipeline: Pipeline) -> None:
    """MuSiQue batches carry their supporting paragraphs as labels; answers diagnose them."""
    batches = bv.musique_batches(data_dir())[:15]
    assert all(b.labels is not None and b.labels.relevant_chunk_ids for b in batches)
    answers = bv.labelled_answers(batches, pipeline, style="heldout", seed=3, per_pack=2)
    verdicts, _, _ = bv._timed(answers, 1)
    s = bv.score(answers, verdicts)
    assert s.diagnosed == len(answers)
    assert s.diagnosis_equal >= 0.9 * s.diagnosed
