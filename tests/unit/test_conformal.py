"""Unit tests of the conformal filter, its calibration file and the CLI."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from ctxbudget.cli.conformal_cmds import calibrate_cmd, evaluate_cmd
from ctxbudget.conformal import (
    POOLED,
    AutoScorer,
    CalibrationError,
    ConformalFilter,
    EmbeddingScorer,
    RerankScorer,
    RetrievalScorer,
    batches_sha256,
    bind_scorer,
    calibrate,
    conformal_rank,
    conformal_threshold,
    load_calibration,
    min_calibration_size,
    query_embedding_of,
    resolve_scorer,
    save_calibration,
    split_by_query,
)
from ctxbudget.evaluation import evaluate
from ctxbudget.schemas import CandidateBatch
from tests.unit.conformal_batches import HASH, batch, by_hint, simple_calibration

# ---------------------------------------------------------------- the quantile


def test_threshold_is_the_ceil_n_plus_1_rank_on_hand_computed_cases() -> None:
    """The threshold is the ceil((n+1)(1-alpha))-th smallest score, checked by hand."""
    scores = [5.0, 1.0, 3.0, 2.0, 4.0]
    assert conformal_threshold(scores, 0.5).threshold == 3.0  # ceil(6 * 0.5) = 3
    assert conformal_threshold(scores, 0.4).threshold == 4.0  # ceil(3.6) = 4
    r = conformal_threshold(scores, 0.2)  # ceil(4.8) = 5
    assert (r.threshold, r.rank, r.n, r.finite) == (5.0, 5, 5, True)


def test_rank_uses_the_decimal_alpha_not_its_binary_approximation() -> None:
    """alpha=0.7, n=9 gives rank 3; float arithmetic (10 * (1 - 0.7)) would round up to 4."""
    assert math.ceil((9 + 1) * (1 - 0.7)) == 4  # the trap: 1 - 0.7 == 0.30000000000000004
    assert conformal_rank(9, 0.7) == 3
    assert conformal_rank(19, 0.7) == 6
    assert conformal_rank(9, 0.3) == 7
    assert conformal_rank(9, 0.1) == 9
    assert conformal_rank(19, 0.05) == 19
    assert conformal_rank(99, 0.01) == 99


def test_rank_above_n_means_keep_everything() -> None:
    """Too few calibration passages for alpha: +inf threshold, flagged as not finite."""
    r = conformal_threshold([1.0, 2.0, 3.0, 4.0, 5.0], 0.1)  # ceil(5.4) = 6 > 5
    assert r.rank == 6
    assert r.finite is False
    assert math.isinf(r.threshold)


def test_single_score_is_finite_only_from_alpha_one_half() -> None:
    """With n=1 the rank ceil(2(1-alpha)) is 1 only when alpha >= 0.5."""
    assert conformal_threshold([7.0], 0.5).threshold == 7.0
    assert conformal_threshold([7.0], 0.9).threshold == 7.0
    assert conformal_threshold([7.0], 0.4).finite is False


def test_min_calibration_size_is_where_the_threshold_turns_finite() -> None:
    """min_calibration_size(alpha) is the smallest n whose rank does not exceed n."""
    for alpha in (0.01, 0.05, 0.1, 0.2, 0.3, 0.33, 0.5, 0.9):
        n_min = min_calibration_size(alpha)
        assert conformal_rank(n_min, alpha) <= n_min
        if n_min > 1:
            assert conformal_rank(n_min - 1, alpha) > n_min - 1
    assert (min_calibration_size(0.05), min_calibration_size(0.1)) == (19, 9)


def test_ties_are_kept_together() -> None:
    """The threshold lands on a tied value and every tied passage satisfies score <= tau."""
    r = conformal_threshold([1.0, 1.0, 1.0, 2.0], 0.4)  # ceil(3) = 3 -> 1.0
    assert r.threshold == 1.0
    assert sum(s <= r.threshold for s in [1.0, 1.0, 1.0, 2.0]) == 3


def test_alpha_near_zero_keeps_all_and_near_one_keeps_the_best() -> None:
    """Extreme alphas: near 0 the rank exceeds n; near 1 it is the minimum score."""
    scores = [float(i) for i in range(100)]
    assert conformal_threshold(scores, 1e-9).finite is False
    assert conformal_threshold(scores, 0.999999).threshold == 0.0


@pytest.mark.parametrize("alpha", [0.0, 1.0, -0.1, 1.5, float("nan"), float("inf")])
def test_alpha_outside_the_open_unit_interval_is_refused(alpha: float) -> None:
    """alpha must be strictly between 0 and 1."""
    with pytest.raises(ValueError, match="alpha"):
        conformal_threshold([1.0, 2.0], alpha)


def test_bad_scores_are_refused() -> None:
    """No scores (n=0), NaN scores and a boolean alpha are clear errors."""
    with pytest.raises(ValueError, match="n >= 1"):
        conformal_threshold([], 0.1)
    with pytest.raises(ValueError, match="NaN"):
        conformal_threshold([1.0, float("nan")], 0.1)
    with pytest.raises(ValueError, match="alpha"):
        conformal_threshold([1.0], True)


def test_numpy_cross_check_on_hand_cases() -> None:
    """np.quantile's inverted_cdf at (n+1)(1-alpha)/n agrees; MAPIE's "higher" is never lower
    and at most one order statistic higher (numpy's "higher" indexes ceil(q(n-1)))."""
    rng = np.random.default_rng(0)
    s = rng.normal(size=19)
    srt = np.sort(s)
    for alpha in (0.5, 0.25, 0.1):
        n = len(s)
        ours = conformal_threshold(s.tolist(), alpha)
        q = (n + 1) * (1 - alpha) / n
        assert ours.threshold == np.quantile(s, q, method="inverted_cdf")
        higher = float(np.quantile(s, q, method="higher"))
        assert ours.threshold <= higher <= srt[min(ours.rank, n - 1)]
    # n=19, alpha=0.5: ours is the 10th smallest, numpy "higher" the 11th.
    assert np.quantile(srt, 10 / 19, method="higher") == srt[10]
    assert conformal_threshold(srt.tolist(), 0.5).threshold == srt[9]


# ---------------------------------------------------------------- scorers


def test_score_scorers_negate_and_return_none_when_missing() -> None:
    """Rerank and retrieval scorers are minus the score; a missing score is None."""
    b = batch("q", [2.0, None], retrieval=[None, 3.0])
    c0, c1 = b.candidates
    assert RerankScorer().score(b.query, c0) == -2.0
    assert RerankScorer().score(b.query, c1) is None
    assert RetrievalScorer().score(b.query, c0) is None
    assert RetrievalScorer().score(b.query, c1) == -3.0


def test_embedding_scorer_reads_the_query_embedding_from_candidate_metadata() -> None:
    """1 - cosine against metadata["query_embedding"]; None without it or on a bad vector."""
    b = batch(
        "q",
        [None, None, None, None],
        embeddings=[[1.0, 0.0], [0.0, 2.0], [1.0, 1.0, 1.0], [0.0, 0.0]],
        query_embedding=[3.0, 0.0],
    )
    assert query_embedding_of(b) == (3.0, 0.0)
    bound = bind_scorer(EmbeddingScorer(), b)
    scores = [bound.score(b.query, c) for c in b.candidates]
    assert scores[0] == pytest.approx(0.0)
    assert scores[1] == pytest.approx(1.0)
    assert scores[2] is None  # dimension mismatch
    assert scores[3] is None  # zero vector
    no_query = batch("r", [None], embeddings=[[1.0, 0.0]])
    assert (
        bind_scorer(EmbeddingScorer(), no_query).score(no_query.query, no_query.candidates[0])
        is None
    )


def test_auto_scorer_binds_to_rerank_when_present_else_retrieval() -> None:
    """auto picks rerank for a batch with rerank scores and retrieval otherwise."""
    with_rerank = batch("a", [1.0, None], retrieval=[5.0, 5.0])
    without = batch("b", [None, None], retrieval=[5.0, 4.0])
    assert bind_scorer(AutoScorer(), with_rerank).name == "rerank"
    assert bind_scorer(AutoScorer(), without).name == "retrieval"


def test_auto_resolves_once_per_data_set_and_refuses_a_mix() -> None:
    """Calibration never pools rerank and retrieval scores into one quantile."""
    r, n = batch("a", [1.0]), batch("b", [None], retrieval=[1.0])
    assert resolve_scorer(AutoScorer(), [r, r]).name == "rerank"
    assert resolve_scorer(AutoScorer(), [n]).name == "retrieval"
    with pytest.raises(ValueError, match="ambiguous"):
        resolve_scorer(AutoScorer(), [r, n])


# ---------------------------------------------------------------- split


def test_split_is_by_query_reproducible_and_independent_of_input_order() -> None:
    """No request id on both sides, same seed -> same split, shuffled input -> same split."""
    batches = [batch(f"q{i:03d}", [1.0], [0]) for i in range(50)]
    batches.append(batch("q007", [2.0], [0]))  # a second batch of one request stays with it
    a = split_by_query(batches, calib_fraction=0.5, seed=3)
    b = split_by_query(list(reversed(batches)), calib_fraction=0.5, seed=3)
    ids_a = ({x.request_id for x in a.calibration}, {x.request_id for x in a.test})
    ids_b = ({x.request_id for x in b.calibration}, {x.request_id for x in b.test})
    assert ids_a == ids_b
    assert not ids_a[0] & ids_a[1]
    assert len(ids_a[0]) == 25 and len(ids_a[1]) == 25
    assert len(a.calibration) + len(a.test) == 51
    c = split_by_query(batches, calib_fraction=0.5, seed=4)
    assert {x.request_id for x in c.calibration} != ids_a[0]


def test_split_fraction_is_validated() -> None:
    """calib_fraction must lie in (0, 1]; 1.0 puts everything in calibration."""
    batches = [batch("q1", [1.0], [0])]
    for bad in (0.0, -1.0, 1.5):
        with pytest.raises(ValueError, match="calib_fraction"):
            split_by_query(batches, calib_fraction=bad, seed=0)
    assert split_by_query(batches, calib_fraction=1.0, seed=0).test == ()


# ---------------------------------------------------------------- calibrate


def test_calibrate_pools_relevant_scores_and_counts_what_it_cannot_use() -> None:
    """Pooled thresholds come from relevant passages only; gaps are counted, not dropped."""
    batches = [
        batch("a", [3.0, 1.0], [0]),
        batch("b", [2.0, 0.5], [0, 1]),
        batch("c", [9.0], []),  # no relevant passage
        batch("d", [9.0], [0], labelled=False),  # unlabelled
        batch("e", [None, 4.0], [0]),  # relevant but unscored
    ]
    cal = calibrate(
        batches, alphas=[0.5], scorer=RerankScorer(), data_hash=HASH, created="2025-01-02"
    )
    assert cal.n_relevant == 3
    assert cal.n_queries == 5
    assert cal.n_queries_without_relevant == 1
    assert cal.n_queries_unlabelled == 1
    assert cal.n_relevant_unscored == 1
    expected = conformal_threshold([-3.0, -2.0, -0.5], 0.5)
    assert cal.pooled["0.5"].threshold == expected.threshold
    assert cal.scorer == "rerank"
    assert cal.created == "2025-01-02"


def test_calibrate_with_nothing_relevant_is_an_error() -> None:
    """Calibration without a single scored relevant passage says why."""
    with pytest.raises(ValueError, match="nothing to calibrate"):
        calibrate(
            [batch("a", [1.0], [])],
            alphas=[0.1],
            scorer=RerankScorer(),
            data_hash=HASH,
            created="2025-01-01",
        )


def test_mondrian_uses_a_class_bin_only_with_enough_passages_and_records_the_fallback() -> None:
    """A class under min_per_class falls back to pooled, and the file says so per class."""
    big = [batch(f"h{i}", [float(i)], [0], class_hint="how_to") for i in range(30)]
    small = [batch(f"c{i}", [100.0 + i], [0], class_hint="comparison") for i in range(3)]
    cal = calibrate(
        big + small,
        alphas=[0.1, 0.5],
        scorer=RerankScorer(),
        by_class=True,
        classify=by_hint,
        min_per_class=20,
        data_hash=HASH,
        created="2025-01-01",
    )
    assert cal.class_info["how_to"].bin == "how_to"
    assert cal.class_info["comparison"].bin == POOLED
    assert "min_per_class 20" in (cal.class_info["comparison"].reason or "")
    assert cal.by_class["comparison"]["0.1"].bin == POOLED
    assert cal.by_class["comparison"]["0.1"].threshold == cal.pooled["0.1"].threshold
    own = conformal_threshold([-float(i) for i in range(30)], 0.1)
    assert cal.by_class["how_to"]["0.1"].threshold == own.threshold
    f = ConformalFilter(cal, alpha=0.1)
    assert f.threshold_for("how_to").bin == "how_to"
    assert f.threshold_for("comparison").bin == POOLED
    assert f.threshold_for("aggregation").bin == POOLED  # a class never seen
    assert "pooled" in (f.coverage("comparison").reason or "")


def test_by_class_needs_a_classifier() -> None:
    """by_class without classify is a clear error."""
    with pytest.raises(ValueError, match="classify"):
        simple_calibration(by_class=True)


def test_baselines_are_tuned_on_the_calibration_split() -> None:
    """top-k is the smallest k reaching 1 - alpha; the fixed cutoff maximises F1."""
    batches = [batch(f"q{i}", [3.0, 2.0, 1.0], [i % 3]) for i in range(9)]  # ranks 1, 2, 3
    cal = calibrate(
        batches, alphas=[0.1, 0.5, 0.7], scorer=RerankScorer(), data_hash=HASH, created="2025-01-01"
    )
    assert cal.baselines is not None
    assert cal.baselines.top_k == {"0.1": 3, "0.5": 2, "0.7": 1}
    assert cal.baselines.fixed_threshold is not None


# ---------------------------------------------------------------- file


def test_calibration_file_round_trips(tmp_path: Path) -> None:
    """save then load gives an equal model, with the schema under its wire name."""
    cal = simple_calibration()
    path = save_calibration(cal, tmp_path / "sub" / "cal.json")
    assert json.loads(path.read_text())["schema"] == "ctx.calibration.v1"
    assert load_calibration(path) == cal
    assert cal.pooled["0.05"].finite is False  # n=10 < 19: keep all
    assert json.loads(path.read_text())["pooled"]["0.05"]["threshold"] is None


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    """A missing file names the path and says it is not found."""
    path = tmp_path / "nope.json"
    with pytest.raises(CalibrationError, match=r"nope\.json: calibration file not found"):
        load_calibration(path)


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("", "empty"),
        ("{not json", "invalid calibration file"),
        ('{"schema": "ctx.other.v1"}', "invalid calibration file"),
        ("[1, 2]", "invalid calibration file"),
    ],
)
def test_corrupt_file_is_a_clear_error(tmp_path: Path, content: str, problem: str) -> None:
    """Empty, malformed, wrong-schema and wrong-shape files are refused with the path."""
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(CalibrationError, match=problem) as info:
        load_calibration(path)
    assert str(path) in str(info.value)


def test_inconsistent_threshold_entry_is_refused(tmp_path: Path) -> None:
    """finite=true with a null threshold (or alphas not matching keys) fails validation."""
    data = json.loads(simple_calibration().model_dump_json(by_alias=True))
    data["pooled"]["0.5"]["threshold"] = None
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(CalibrationError, match="finite"):
        load_calibration(path)
    data = json.loads(simple_calibration().model_dump_json(by_alias=True))
    data["alphas"] = [0.2, 0.5]
    path.write_text(json.dumps(data))
    with pytest.raises(CalibrationError, match="do not match"):
        load_calibration(path)


def test_directory_instead_of_file_is_a_clear_error(tmp_path: Path) -> None:
    """Pointing at a directory is reported as such."""
    with pytest.raises(CalibrationError, match="directory"):
        load_calibration(tmp_path)


# ---------------------------------------------------------------- filter


def test_filter_keeps_under_threshold_and_keeps_unscored_candidates_counted() -> None:
    """score <= tau is kept, above is dropped, no score is kept and counted."""
    cal = simple_calibration()
    f = ConformalFilter(cal, alpha=0.5)
    tau = f.threshold_for(None)
    assert (
        tau.finite and tau.threshold == conformal_threshold([-i for i in range(10)], 0.5).threshold
    )
    b = batch("x", [-tau.threshold, -tau.threshold - 1.0, None])
    kept = [f.keep(b.query, c, None) for c in b.candidates]
    assert kept == [True, False, True]
    assert f.n_unscored_kept == 1
    out = f.apply(b, None)
    assert out.kept == ("x-0", "x-2") and out.dropped == ("x-1",) and out.unscored == ("x-2",)
    assert out.coverage.guaranteed is True
    assert out.coverage.threshold == tau.threshold
    assert out.coverage.n_calibration == 10


def test_infinite_threshold_keeps_all_and_is_not_guaranteed() -> None:
    """With too few calibration passages the coverage says why and guaranteed is False."""
    f = ConformalFilter(simple_calibration(), alpha=0.05)
    cov = f.coverage(None)
    assert cov.threshold is None and cov.guaranteed is False
    assert "19" in (cov.reason or "")
    b = batch("x", [-1e9])
    assert f.keep(b.query, b.candidates[0], None) is True


def test_filter_refuses_another_scorer_and_an_uncalibrated_alpha() -> None:
    """Thresholds apply only to their scorer and their alphas."""
    cal = simple_calibration()
    with pytest.raises(CalibrationError, match="scorer 'rerank'"):
        ConformalFilter(cal, alpha=0.5, scorer=RetrievalScorer())
    with pytest.raises(CalibrationError, match=r"alpha=0\.2"):
        ConformalFilter(cal, alpha=0.2)
    assert ConformalFilter(cal, alpha=0.5, scorer="auto").scorer.name == "rerank"


def test_filter_with_embedding_scorer_binds_to_each_batch() -> None:
    """apply() picks up the batch's query embedding; keep() on an unbound scorer keeps all."""
    calib = [
        batch(
            f"q{i}",
            [None, None],
            [0],
            embeddings=[[1.0, 0.1 * i], [0.0, 1.0]],
            query_embedding=[1.0, 0.0],
        )
        for i in range(20)
    ]
    cal = calibrate(
        calib, alphas=[0.5], scorer=EmbeddingScorer(), data_hash=HASH, created="2025-01-01"
    )
    assert cal.scorer == "embedding" and cal.n_relevant == 20
    f = ConformalFilter(cal, alpha=0.5)
    test = batch("t", [None, None], embeddings=[[1.0, 0.0], [0.0, 1.0]], query_embedding=[1.0, 0.0])
    assert f.apply(test, None).kept == ("t-0",)
    assert f.keep(test.query, test.candidates[1], None) is True  # unbound: unscored, kept
    assert f.n_unscored_kept == 1


# ---------------------------------------------------------------- CLI


def _write_jsonl(path: Path, batches: Sequence[CandidateBatch], extra: Sequence[str] = ()) -> None:
    lines = [b.model_dump_json(by_alias=True) for b in batches]
    path.write_text("\n".join([*lines[:2], *extra, *lines[2:]]) + "\n")


def test_cli_calibrate_and_evaluate_report_bad_lines_and_exit_1(tmp_path: Path) -> None:
    """Bad lines are reported with their number and counted; the run finishes; exit status 1."""
    batches = [batch(f"q{i:02d}", [float(i), -1.0], [0]) for i in range(40)]
    data = tmp_path / "labelled.jsonl"
    _write_jsonl(data, batches, extra=["{broken", '{"schema": "ctx.candidate_batch.v1"}'])
    out, held = tmp_path / "cal" / "demo.json", tmp_path / "held.jsonl"
    runner = CliRunner()
    res = runner.invoke(
        calibrate_cmd,
        [
            str(data),
            "--alpha",
            "0.1",
            "--alpha",
            "0.5",
            "--calib-fraction",
            "0.5",
            "--split-test",
            str(held),
            "--created",
            "2025-01-01",
            "-o",
            str(out),
        ],
    )
    assert res.exit_code == 1, res.output
    assert f"{data}:3: bad batch: (top level): Invalid JSON: " in res.stderr
    assert f"{data}:4: bad batch: request_id: Field required; ... and " in res.stderr
    cal = load_calibration(out)
    assert cal.name == "demo" and cal.n_queries == 20
    held_ids = {json.loads(line)["request_id"] for line in held.read_text().splitlines()}
    assert len(held_ids) == 20
    calib_split = split_by_query(batches, calib_fraction=0.5, seed=0)
    assert cal.data_sha256 == batches_sha256(calib_split.calibration)
    assert held_ids == {b.request_id for b in calib_split.test}

    res = runner.invoke(evaluate_cmd, [str(held), "--calibration", str(out), "--json"])
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert report["schema"] == "ctx.conformal_evaluation.v1"
    res = runner.invoke(evaluate_cmd, [str(data), "--calibration", str(tmp_path / "x.json")])
    assert res.exit_code == 2 and "calibration file not found" in res.output


def test_cli_refuses_split_test_without_a_fraction(tmp_path: Path) -> None:
    """--split-test with calib-fraction 1.0 would write nothing: a usage error."""
    data = tmp_path / "d.jsonl"
    _write_jsonl(data, [batch("q", [1.0], [0])])
    res = CliRunner().invoke(
        calibrate_cmd,
        [str(data), "--split-test", str(tmp_path / "h"), "-o", str(tmp_path / "c.json")],
    )
    assert res.exit_code == 2
    assert "--split-test needs --calib-fraction below 1" in res.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.jsonl"]  # nothing written


@pytest.mark.parametrize(
    ("alpha", "message"),
    [
        ("0", "--alpha: must be strictly between 0 and 1, got 0"),
        ("1.5", "--alpha: must be strictly between 0 and 1, got 1.5"),
        ("1", "--alpha: must be strictly between 0 and 1, got 1"),
        ("x", "--alpha: 'x' is not a number"),
    ],
)
def test_cli_bad_alpha_is_one_line_and_exit_2(tmp_path: Path, alpha: str, message: str) -> None:
    """A bad --alpha is a usage error: one line, exit 2, before any input is read."""
    data = tmp_path / "d.jsonl"
    _write_jsonl(data, [batch("q", [1.0], [0])])
    for cmd, extra in (
        (calibrate_cmd, ["-o", str(tmp_path / "c.json")]),
        (evaluate_cmd, ["--calibration", str(tmp_path / "c.json")]),
    ):
        res = CliRunner().invoke(cmd, [str(data), "--alpha", alpha, *extra])
        assert res.exit_code == 2, res.output
        assert res.output.strip().splitlines() == [f"Error: {message}"]
    assert not (tmp_path / "c.json").exists()


def test_cli_missing_files_are_one_line_and_exit_2(tmp_path: Path) -> None:
    """A missing calibration file or labelled input: one line, exit 2."""
    data = tmp_path / "d.jsonl"
    _write_jsonl(data, [batch("q", [1.0], [0])])
    missing = tmp_path / "nope.json"
    res = CliRunner().invoke(evaluate_cmd, [str(data), "--calibration", str(missing)])
    assert res.exit_code == 2
    assert res.output.strip().splitlines() == [f"Error: {missing}: calibration file not found"]
    res = CliRunner().invoke(calibrate_cmd, [str(tmp_path / "no.jsonl"), "-o", str(missing)])
    assert res.exit_code == 2
    assert len(res.output.strip().splitlines()) == 1 and "cannot read" in res.output


# ---------------------------------------------------------------- real data


def _wikiqa_dir() -> Path:
    env = os.environ.get("CTXBUDGET_DATA_DIR")
    base = Path(env) if env else Path(__file__).resolve().parents[3] / "shared" / "data"
    return base / "wikiqa_castorini"


@pytest.mark.slow
def test_wikiqa_train_calibration_holds_coverage_on_the_test_split() -> None:
    """On real data (WikiQA), thresholds from train keep >= 1 - alpha - 0.03 of test answers."""
    data_dir = _wikiqa_dir()
    if not (data_dir / "train" / "sim.txt").is_file() or not (data_dir / "test").is_dir():
        pytest.skip(f"WikiQA data not found at {data_dir} (set CTXBUDGET_DATA_DIR)")
    wikiqa = pytest.importorskip("bench.wikiqa", reason="bench/ is not importable")
    train = [b for b, _ in wikiqa.convert_split(data_dir, "train")]
    test = [b for b, _ in wikiqa.convert_split(data_dir, "test")]
    alphas = (0.05, 0.1, 0.2, 0.3, 0.4)
    cal = calibrate(
        train,
        alphas=alphas,
        scorer=AutoScorer(),
        data_hash=batches_sha256(train),
        created="2025-01-01",
    )
    report = evaluate(test, cal, classify=by_hint)
    rows = {r.alpha: r for r in report.rows if r.method == "conformal" and r.group == "all"}
    for alpha in alphas:
        coverage = rows[alpha].coverage
        assert coverage is not None
        assert coverage >= 1 - alpha - 0.03, (alpha, rows[alpha])
    assert rows[0.2].removal >= 0.25
