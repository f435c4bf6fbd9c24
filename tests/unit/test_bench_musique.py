"""MuSiQue traffic (bench/musique.py), read from the shared data folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import musique
from bench.quality_suite import in_half
from ctxbudget.testing.traffic import GeneratedBatch, TrafficError, default_data_dir


def _folder() -> Path:
    return default_data_dir() / musique.MUSIQUE_DIRNAME


@pytest.fixture(scope="module")
def corpus() -> musique.MusiqueCorpus:
    if not _folder().is_dir():
        pytest.skip(f"MuSiQue sample not found at {_folder()}")
    return musique.MusiqueCorpus.load(_folder())


@pytest.fixture(scope="module")
def tight(corpus: musique.MusiqueCorpus) -> list[GeneratedBatch]:
    return musique.from_musique(_folder(), budget="tight", awkward=True, corpus=corpus)


def test_one_batch_per_question_with_the_supporting_paragraphs_as_relevant(
    corpus: musique.MusiqueCorpus, tight: list[GeneratedBatch]
) -> None:
    """Every question gives a batch whose relevant ids are its supporting paragraphs, all
    among at least 20 candidates, and the hop count as its question type."""
    questions = musique.load_musique(_folder())
    assert len(tight) == len(questions) == 100
    for q, g in zip(questions, tight, strict=True):
        ids = {c.chunk_id for c in g.batch.candidates}
        assert g.batch.labels is not None
        relevant = set(g.batch.labels.relevant_chunk_ids)
        assert len(relevant) == sum(p[3] for p in q.paragraphs) and relevant <= ids
        assert len(g.batch.candidates) >= 20
        assert g.truth.qtype == f"{len(q.hops)}hop"


def test_hop_sentences_are_sentences_of_the_supporting_paragraphs(
    tight: list[GeneratedBatch],
) -> None:
    """The support the truth names lies verbatim in its paragraph, only for relevant ids,
    and most supporting paragraphs have a sentence that names their hop's answer."""
    with_support = 0
    total = 0
    for g in tight:
        texts = {c.chunk_id: c.text for c in g.batch.candidates}
        assert g.batch.labels is not None
        relevant = set(g.batch.labels.relevant_chunk_ids)
        assert set(g.truth.support) <= relevant
        for cid, sents in g.truth.support.items():
            assert all(s in texts[cid] for s in sents)
        total += len(relevant)
        with_support += len(g.truth.support)
    assert with_support >= 0.8 * total


def test_the_same_seed_gives_the_same_bytes(corpus: musique.MusiqueCorpus) -> None:
    """Two runs with one seed write identical batches."""
    a = musique.from_musique(_folder(), budget="moderate", corpus=corpus)
    b = musique.from_musique(_folder(), budget="moderate", corpus=corpus)
    assert [g.batch.model_dump_json() for g in a] == [g.batch.model_dump_json() for g in b]


def test_the_converter_refuses_to_write_inside_the_repository(tmp_path: Path) -> None:
    """Derived data never lands in the repository."""
    inside = Path(musique.__file__).resolve().parents[1] / "musique-out.jsonl"
    assert musique.main(["--budget", "tight", "--out", str(inside)]) == 2
    assert not inside.exists()


def test_a_missing_folder_is_named(tmp_path: Path) -> None:
    """Without the data the error says where it looked."""
    with pytest.raises(TrafficError, match="MuSiQue sample not found"):
        musique.musique_dir(tmp_path)


def test_the_two_halves_split_the_questions() -> None:
    """Every question falls in exactly one half."""
    questions = [f"question {k}?" for k in range(200)]
    a = [q for q in questions if in_half(q, "a")]
    b = [q for q in questions if in_half(q, "b")]
    assert sorted(a + b) == sorted(questions) and 60 < len(a) < 140
