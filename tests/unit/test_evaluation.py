"""The conformal evaluation (ctxbudget.evaluation): coverage, removal and tokens on a held-out
set, beside the baselines, and where the token figures come from."""

from __future__ import annotations

from ctxbudget.conformal import ConformalFilter
from ctxbudget.evaluation import evaluate, render_table
from tests.unit.conformal_batches import batch, by_hint, simple_calibration


def test_evaluate_reports_coverage_removal_tokens_and_baselines() -> None:
    """Figures on a tiny held-out set match a hand count."""
    cal = simple_calibration()
    test = [batch("t1", [9.0, 0.0], [0]), batch("t2", [3.0, 8.0], [0])]
    report = evaluate(test, cal, classify=by_hint, alphas=[0.5])
    conf = next(r for r in report.rows if r.method == "conformal")
    tau = ConformalFilter(cal, alpha=0.5).threshold_for(None).threshold  # -4.5 -> -5 (rank 6)
    kept = [s <= tau for s in (-9.0, -0.0, -3.0, -8.0)]
    assert conf.n_relevant == 2
    assert conf.n_relevant_kept == kept[0] + kept[2]
    assert conf.n_removed == 4 - sum(kept)
    assert report.token_estimate.startswith("ceil(len(text)/")
    assert conf.tokens_total == 2 * (2 + 4)
    assert {r.method for r in report.rows} == {"conformal", "top_k", "fixed_threshold"}
    text = render_table(report)
    assert "coverage" in text and "top_k" in text and "fixed_threshold" in text


def test_evaluate_uses_given_token_counts_and_says_so() -> None:
    """candidate.tokens wins over the estimate, and the report states the source."""
    b = batch("t", [1.0], [0])
    b = b.model_copy(update={"candidates": (b.candidates[0].model_copy(update={"tokens": 77}),)})
    report = evaluate([b], simple_calibration(), classify=by_hint, alphas=[0.5])
    assert report.token_estimate == "candidate.tokens"
    assert report.rows[0].tokens_total == 77
