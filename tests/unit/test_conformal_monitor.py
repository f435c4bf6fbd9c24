"""Unit tests of the coverage monitor: p-values, e-values, drift alarms, recalibration, the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from ctxbudget.cli.monitor_cmd import monitor_cmd
from ctxbudget.conformal import (
    POOLED,
    CalibrationFile,
    batches_sha256,
    calibrate,
    save_calibration,
    scorer_from_name,
)
from ctxbudget.conformal.monitor import (
    CoverageMonitor,
    MonitorConfig,
    betting_e_value,
    conformal_p_value,
    wilson_interval,
)
from ctxbudget.labels import Label
from ctxbudget.schemas import CandidateBatch
from ctxbudget.testing import batch, candidate
from tests.labelled import labelled_stream

ALPHA = 0.1


def _stream(n: int, seed: int, scale: float = 1.0, shift: float = 0.0) -> list[CandidateBatch]:
    """Requests of 8 passages, 2 of them relevant."""
    return labelled_stream(n, seed, scale=scale, shift=shift)


def _calibration(batches: list[CandidateBatch]) -> CalibrationFile:
    return calibrate(
        batches,
        alphas=(ALPHA,),
        scorer=scorer_from_name("rerank"),
        data_hash=batches_sha256(batches),
        created="2026-01-01",
        baselines=False,
    )


@pytest.fixture(scope="module")
def cal() -> CalibrationFile:
    """A calibration on 300 synthetic labelled requests."""
    return _calibration(_stream(300, seed=1))


def test_p_value_counts_calibration_scores_at_least_as_bad() -> None:
    """p = (1 + #{s_i >= s}) / (n + 1): the worst score gets the smallest p-value."""
    scores = (1.0, 2.0, 3.0)
    assert conformal_p_value(scores, 0.0) == 1.0
    assert conformal_p_value(scores, 2.0) == 3 / 4
    assert conformal_p_value(scores, 9.0) == 1 / 4


@given(st.floats(min_value=0.0, max_value=1.0), st.floats(min_value=0.0, max_value=1.0))
def test_e_value_never_increases_with_the_p_value(a: float, b: float) -> None:
    """The betting function is decreasing, so it bets only on relevant passages scoring worse."""
    lo, hi = sorted((a, b))
    assert betting_e_value(lo) >= betting_e_value(hi) >= 0.0


def test_e_value_has_mean_one_on_uniform_p_values() -> None:
    """Each linear betting function is a density on [0, 1]: its mean over a uniform grid is 1."""
    grid = [(i + 0.5) / 1000 for i in range(1000)]
    assert sum(betting_e_value(p) for p in grid) / len(grid) == pytest.approx(1.0)


def test_wilson_interval_brackets_the_proportion() -> None:
    """The 95% Wilson interval holds the observed share and narrows with more data."""
    lo, hi = wilson_interval(90, 100)
    assert lo < 0.9 < hi
    lo2, hi2 = wilson_interval(900, 1000)
    assert hi2 - lo2 < hi - lo
    assert wilson_interval(0, 0) == (0.0, 1.0)


def test_calibration_stores_the_sorted_relevant_scores(cal: CalibrationFile) -> None:
    """The file keeps what the p-values need: every relevant score, sorted, per bin."""
    scores = cal.relevant_scores[POOLED]
    assert len(scores) == cal.n_relevant == 600
    assert list(scores) == sorted(scores)


def test_exchangeable_traffic_raises_no_alarm_and_keeps_coverage(cal: CalibrationFile) -> None:
    """Traffic drawn like the calibration: no drift declared, coverage near 1 - alpha."""
    monitor = CoverageMonitor(cal, MonitorConfig(alpha=ALPHA))
    for b in _stream(2000, seed=2):
        monitor.observe(b)
    report = monitor.report()
    assert report.alarm_at is None
    assert report.final_coverage is not None
    assert abs(report.final_coverage - (1 - ALPHA)) < 0.03
    assert report.test == "conformal_p_values"


def test_a_rescaled_retriever_is_detected_within_50_requests(cal: CalibrationFile) -> None:
    """Scores rescaled mid-stream (x -> 0.5x - 0.4): alarm soon after the change, none before."""
    stream = _stream(300, seed=3) + _stream(300, seed=4, scale=0.5, shift=-0.4)
    monitor = CoverageMonitor(cal, MonitorConfig(alpha=ALPHA))
    for b in stream:
        monitor.observe(b)
    report = monitor.report()
    assert report.alarm_at is not None
    assert 300 <= report.alarm_at < 350
    assert report.final_coverage is not None and report.final_coverage < 1 - ALPHA - 0.1


def test_recalibration_brings_coverage_back_at_the_new_calibrations_size(
    cal: CalibrationFile,
) -> None:
    """With adaptive=True, coverage after the change returns to 1 - alpha (mean of five streams:
    one recalibration of 500 passages alone varies by about 0.013), the kept share within 10% of
    what a fresh calibration on the new traffic gives."""
    finals, kept, reference = [], [], []
    fresh_cal = _calibration(_stream(300, seed=7, scale=0.5, shift=-0.4))
    for s in range(5):
        stream = _stream(300, seed=20 + s) + _stream(900, seed=30 + s, scale=0.5, shift=-0.4)
        monitor = CoverageMonitor(cal, MonitorConfig(alpha=ALPHA, adaptive=True))
        fresh = CoverageMonitor(fresh_cal, MonitorConfig(alpha=ALPHA))
        for b in stream:
            monitor.observe(b)
            fresh.observe(b)
        report = monitor.report()
        assert report.recalibrations and report.recalibrations[0] > 300
        assert report.final_coverage is not None and report.final_kept_fraction is not None
        finals.append(report.final_coverage)
        kept.append(report.final_kept_fraction)
        reference.append(fresh.report().final_kept_fraction or 0.0)
    assert abs(sum(finals) / 5 - (1 - ALPHA)) <= 0.03
    assert sum(kept) <= 1.1 * sum(reference)


def test_a_file_without_scores_falls_back_to_betting_on_misses(cal: CalibrationFile) -> None:
    """An older calibration file (no stored scores) is still monitored, on misses alone."""
    old = cal.model_copy(update={"relevant_scores": {}})
    stream = _stream(100, seed=8) + _stream(400, seed=9, scale=0.5, shift=-0.4)
    monitor = CoverageMonitor(old, MonitorConfig(alpha=ALPHA))
    for b in stream:
        monitor.observe(b)
    report = monitor.report()
    assert report.test == "misses"
    assert report.alarm_at is not None and report.alarm_at >= 100


def test_unlabelled_requests_are_not_counted(cal: CalibrationFile) -> None:
    """A batch without labels says nothing about coverage: observe returns None."""
    monitor = CoverageMonitor(cal, MonitorConfig(alpha=ALPHA))
    plain = batch([candidate("a", "x", rerank_score=1.0)])
    assert monitor.observe(plain) is None
    assert monitor.report().n_requests == 0


def test_observing_never_mutates_the_batch(cal: CalibrationFile) -> None:
    """The monitor reads batches only: their JSON is the same before and after."""
    b = _stream(1, seed=10)[0]
    before = b.model_dump_json()
    CoverageMonitor(cal, MonitorConfig(alpha=ALPHA, adaptive=True)).observe(b)
    assert b.model_dump_json() == before


def test_config_rejects_bad_values() -> None:
    """Each bad setting is refused with the value in the message."""
    with pytest.raises(ValueError, match="alpha"):
        MonitorConfig(alpha=1.5)
    with pytest.raises(ValueError, match="window"):
        MonitorConfig(alpha=ALPHA, window=0)
    with pytest.raises(ValueError, match="recalibration_size"):
        MonitorConfig(alpha=ALPHA, recalibration_size=3)


def _write(path: Path, batches: list[CandidateBatch]) -> Path:
    path.write_text("".join(b.model_dump_json(by_alias=True) + "\n" for b in batches))
    return path


def test_monitor_command_prints_the_documented_json(tmp_path: Path, cal: CalibrationFile) -> None:
    """`ctxbudget monitor --json` prints alarm_at, coverage_by_window and final_coverage, and
    `--write-calibration` writes the recalibration as the next version."""
    cal_path = save_calibration(cal, tmp_path / "cal.json")
    stream = _stream(200, seed=11) + _stream(700, seed=12, scale=0.5, shift=-0.4)
    data = _write(tmp_path / "labelled.jsonl", stream)
    out = tmp_path / "recal.json"
    args = [str(data), "--calibration", str(cal_path), "--alpha", "0.1", "--adaptive", "--json"]
    res = CliRunner().invoke(monitor_cmd, [*args, "--write-calibration", str(out)])
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert 200 <= report["alarm_at"] < 250
    assert {"end", "coverage"} <= set(report["coverage_by_window"][0])
    assert abs(report["final_coverage"] - 0.9) <= 0.03
    new = CalibrationFile.model_validate_json(out.read_text())
    assert new.version == "2" and new.name == cal.name


def test_monitor_command_names_a_missing_calibration(tmp_path: Path) -> None:
    """A calibration file that is not there is one Error line and exit status 2."""
    data = _write(tmp_path / "labelled.jsonl", _stream(3, seed=13))
    missing = str(tmp_path / "nope.json")
    res = CliRunner().invoke(monitor_cmd, [str(data), "--calibration", missing, "--alpha", "0.1"])
    assert res.exit_code == 2
    assert "nope.json" in res.output


def test_monitor_joins_a_label_file_with_unlabelled_batches(
    tmp_path: Path, cal: CalibrationFile
) -> None:
    """--labels: each Label v1 line joins its batch by request id, in the labels' order; a label
    for an unknown request is reported and makes the exit status 1."""
    cal_path = save_calibration(cal, tmp_path / "cal.json")
    labelled = _stream(60, seed=14)
    plain = [b.model_copy(update={"labels": None}) for b in labelled]
    data = _write(tmp_path / "batches.jsonl", plain)
    labels = [
        Label(
            request_id=b.request_id,
            relevant_chunk_ids=b.labels.relevant_chunk_ids,
            source="analyst",
        )
        for b in reversed(labelled)
        if b.labels is not None
    ]
    lines = [lab.model_dump_json(by_alias=True) for lab in labels]
    lines.append(Label(request_id="nope", source="analyst").model_dump_json(by_alias=True))
    (tmp_path / "labels.jsonl").write_text("\n".join(lines) + "\n")
    args = [str(data), "--calibration", str(cal_path), "--alpha", "0.1", "--json"]
    res = CliRunner().invoke(monitor_cmd, [*args, "--labels", str(tmp_path / "labels.jsonl")])
    assert res.exit_code == 1
    assert "no batch for request 'nope'" in res.stderr
    assert json.loads(res.stdout)["n_requests"] == 60
    direct = CoverageMonitor(cal, MonitorConfig(alpha=ALPHA), classify=lambda b: "point_lookup")
    for b in reversed(labelled):
        direct.observe(b)
    assert json.loads(res.stdout) == direct.report().as_dict()


def test_aci_moves_alpha_toward_the_target_miss_rate(cal: CalibrationFile) -> None:
    """With aci_gamma, alpha_t falls while the threshold misses too much (after a rescale) and
    the request-level miss rate over the shifted stream comes back near alpha."""
    stream = _stream(100, seed=40) + _stream(2000, seed=41, scale=0.5, shift=-0.4)
    monitor = CoverageMonitor(cal, MonitorConfig(alpha=ALPHA, aci_gamma=0.01))
    outcomes = [monitor.observe(b) for b in stream]
    alphas = [o.alpha_t for o in outcomes if o is not None]
    assert alphas[0] == ALPHA and min(alphas[100:]) < ALPHA
    misses = [
        (o.n_relevant - o.n_kept) / o.n_relevant for o in outcomes[100:] if o and o.n_relevant
    ]
    assert abs(sum(misses) / len(misses) - ALPHA) < 0.02


def test_aci_and_recalibration_are_not_combined() -> None:
    """One adaptive mode at a time: both together is a clear error."""
    with pytest.raises(ValueError, match="one adaptive mode"):
        MonitorConfig(alpha=ALPHA, adaptive=True, aci_gamma=0.01)


def test_calibrate_from_a_labels_file_equals_calibrating_the_labelled_batches(
    tmp_path: Path,
) -> None:
    """`calibrate BATCHES --labels L` (unlabelled batches, the labels topic's records) writes
    the same thresholds as calibrating the labelled batches; the last label of a request wins,
    and verify labels are left out unless asked for."""
    from ctxbudget.cli.conformal_cmds import calibrate_cmd

    labelled = _stream(120, seed=15)
    plain = _write(
        tmp_path / "plain.jsonl", [b.model_copy(update={"labels": None}) for b in labelled]
    )
    full = _write(tmp_path / "full.jsonl", labelled)
    lines = []
    for b in labelled:
        assert b.labels is not None
        lines.append(Label(request_id=b.request_id, relevant_chunk_ids=(), source="analyst"))
        lines.append(
            Label(
                request_id=b.request_id,
                relevant_chunk_ids=b.labels.relevant_chunk_ids,
                source="analyst",
            )
        )
        lines.append(Label(request_id=b.request_id, relevant_chunk_ids=(), source="verify"))
    (tmp_path / "labels.jsonl").write_text(
        "".join(lab.model_dump_json(by_alias=True) + "\n" for lab in lines)
    )
    common = ["--alpha", "0.1", "--created", "2026-01-01", "--name", "c"]
    a = CliRunner().invoke(calibrate_cmd, [str(full), *common, "-o", str(tmp_path / "a.json")])
    b = CliRunner().invoke(
        calibrate_cmd,
        [
            str(plain),
            *common,
            "--labels",
            str(tmp_path / "labels.jsonl"),
            "-o",
            str(tmp_path / "b.json"),
        ],
    )
    assert a.exit_code == 0 and b.exit_code == 0, a.output + b.output
    assert "120 batches labelled" in b.output
    got_a = CalibrationFile.model_validate_json((tmp_path / "a.json").read_text())
    got_b = CalibrationFile.model_validate_json((tmp_path / "b.json").read_text())
    assert got_a.model_dump(exclude={"data_hash"}) == got_b.model_dump(exclude={"data_hash"})
    v = CliRunner().invoke(
        calibrate_cmd,
        [
            str(plain),
            *common,
            "--labels",
            str(tmp_path / "labels.jsonl"),
            "--label-source",
            "verify",
            "-o",
            str(tmp_path / "v.json"),
        ],
    )
    assert "verify labels name only passages the filter kept" in v.stderr
