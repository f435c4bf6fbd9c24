"""The live side of the coverage monitor: the label join and the metrics service, with fakes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from ctxbudget.codec import encode
from ctxbudget.conformal import (
    CalibrationFile,
    batches_sha256,
    calibrate,
    load_calibration,
    scorer_from_name,
)
from ctxbudget.conformal.monitor import CoverageMonitor, LabelJoin, MonitorConfig
from ctxbudget.kafka.coverage import CoverageMetrics, CoverageService
from ctxbudget.labels import Label
from ctxbudget.schemas import CandidateBatch
from tests.labelled import labelled_stream
from tests.unit.kafka_fakes import SlicedSource

ALPHA = 0.1


def _stream(
    n: int, seed: int, start: int = 0, scale: float = 1.0, shift: float = 0.0
) -> list[CandidateBatch]:
    """Requests of 6 passages, 2 of them relevant."""
    return labelled_stream(n, seed, start=start, width=6, scale=scale, shift=shift)


@pytest.fixture(scope="module")
def cal() -> CalibrationFile:
    """A calibration on 300 synthetic requests."""
    batches = _stream(300, seed=1)
    return calibrate(
        batches,
        alphas=(ALPHA,),
        scorer=scorer_from_name("rerank"),
        data_hash=batches_sha256(batches),
        created="2026-01-01",
        baselines=False,
    )


def _join(cal: CalibrationFile, **kw: int) -> LabelJoin:
    monitor = CoverageMonitor(cal, MonitorConfig(alpha=ALPHA))
    return LabelJoin(
        monitor, max_requests=kw.get("max_requests", 100), max_waiting=kw.get("max_waiting", 100)
    )


def test_a_label_joins_its_batch_whichever_comes_first(cal: CalibrationFile) -> None:
    """Batch then label, or label then batch: one outcome each, the same counts."""
    a, b = _stream(2, seed=2)
    join = _join(cal)
    assert join.batch(a.model_copy(update={"labels": None})) is None
    first = join.label(a.request_id, a.labels.relevant_chunk_ids if a.labels else ())
    assert first is not None and first.n_relevant == 2
    assert join.label(b.request_id, ("q1-0", "q1-1")) is None
    second = join.batch(b.model_copy(update={"labels": None}))
    assert second is not None and second.request_id == "q1"
    assert join.sizes == (0, 0)


def test_the_join_is_bounded_and_counts_what_it_drops(cal: CalibrationFile) -> None:
    """Past max_requests the oldest batch goes; past max_waiting the oldest label goes; counted."""
    join = _join(cal, max_requests=3, max_waiting=2)
    for b in _stream(5, seed=3):
        join.batch(b)
    assert join.sizes[0] == 3 and join.expired_batches == 2
    assert join.label("q0", ("q0-0",)) is None  # its batch was pushed out: the label waits
    for rid in ("x1", "x2"):
        join.label(rid, ())
    assert join.sizes[1] == 2 and join.expired_labels == 1


@dataclass(frozen=True)
class _Rec:
    topic: str
    value: bytes | None


def _value(metrics: CoverageMetrics, name: str, **labels: str) -> float:
    v = metrics.registry.get_sample_value(name, labels or None)
    assert v is not None, name
    return v


def test_service_exports_zeros_first_then_coverage_and_a_drift_alarm(
    cal: CalibrationFile, tmp_path: Path
) -> None:
    """Every series is 0 before any record; after a drifting stream the alarm counter counts the
    alarms (none before the change; without recalibration drift keeps being declared), and
    the relevant/kept counters add up to what the monitor saw; bad records are counted."""
    monitor = CoverageMonitor(cal, MonitorConfig(alpha=ALPHA))
    metrics = CoverageMetrics(1 - ALPHA)
    text = metrics.exposition().decode()
    assert "ctxbudget_drift_alarms_total 0.0" in text
    assert 'ctxbudget_monitor_dropped_total{reason="bad_label"} 0.0' in text
    assert 'ctxbudget_coverage_relevant_total{query_class="point_lookup"} 0.0' in text
    events: list[str] = []
    service = CoverageService(
        monitor=monitor,
        join=LabelJoin(monitor, max_requests=1000, max_waiting=1000),
        metrics=metrics,
        candidates_topic="cands",
        labels_topic="labels",
        calibration=cal,
        emit=events.append,
    )
    stream = _stream(200, seed=4) + _stream(200, seed=5, start=200, scale=0.5, shift=-0.4)
    records = [_Rec("cands", b"{not json"), _Rec("labels", b"{}")]
    for b in stream:
        records.append(_Rec("cands", encode(b.model_copy(update={"labels": None}))))
        label = Label(
            request_id=b.request_id,
            relevant_chunk_ids=b.labels.relevant_chunk_ids if b.labels else (),
            source="analyst",
        )
        records.append(_Rec("labels", label.model_dump_json(by_alias=True).encode()))
    service.run(SlicedSource(records), until_idle=0.0)
    report = monitor.report()
    assert report.n_requests == 400 and report.alarm_at is not None and report.alarm_at >= 200
    assert min(report.alarms) >= 200
    assert _value(metrics, "ctxbudget_drift_alarms_total") == len(report.alarms)
    assert _value(metrics, "ctxbudget_monitor_dropped_total", reason="bad_batch") == 1.0
    assert _value(metrics, "ctxbudget_monitor_dropped_total", reason="bad_label") == 1.0
    assert _value(metrics, "ctxbudget_labels_total", source="analyst") == 400.0
    assert _value(metrics, "ctxbudget_coverage_relevant_total", query_class="none") == 800.0
    assert any("drift declared" in e for e in events)


def test_adaptive_service_writes_each_recalibration_as_the_next_version(
    cal: CalibrationFile, tmp_path: Path
) -> None:
    """With adaptive=True and a folder, the frozen recalibration is written as NAME@2.json."""
    monitor = CoverageMonitor(cal, MonitorConfig(alpha=ALPHA, adaptive=True))
    metrics = CoverageMetrics(1 - ALPHA)
    service = CoverageService(
        monitor=monitor,
        join=LabelJoin(monitor, max_requests=1000, max_waiting=1000),
        metrics=metrics,
        candidates_topic="cands",
        labels_topic="labels",
        calibration=cal,
        write_calibration=tmp_path,
        emit=lambda line: None,
    )
    for b in _stream(100, seed=6) + _stream(500, seed=7, start=100, scale=0.5, shift=-0.4):
        service.handle("cands", encode(b))
        service.handle(
            "labels",
            Label(
                request_id=b.request_id,
                relevant_chunk_ids=b.labels.relevant_chunk_ids if b.labels else (),
                source="replay",
            )
            .model_dump_json(by_alias=True)
            .encode(),
        )
    assert monitor.recalibrations
    written = load_calibration(tmp_path / f"{cal.name}@2.json")
    assert written.relevant_scores["pooled"] == monitor.recalibrated_scores
    assert _value(metrics, "ctxbudget_recalibrations_total") == 1.0
    assert _value(metrics, "ctxbudget_labels_total", source="replay") == 600.0


def test_coverage_alerts_are_documented_and_name_the_exported_series() -> None:
    """Each coverage alert has a summary, a description and a runbook section that exists, and
    its expression reads series the monitor exports."""
    import re

    import yaml

    repo = Path(__file__).resolve().parents[2]
    doc = yaml.safe_load((repo / "ops/alerts/ctxbudget-coverage-rules.yaml").read_text())
    rules = [r for g in doc["groups"] for r in g["rules"]]
    exported = CoverageMetrics(0.9).exposition().decode()
    runbook = (repo / "ops/runbooks/coverage.md").read_text()
    anchors = {
        re.sub(r"[^a-z0-9 -]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
        for line in runbook.splitlines()
        if line.startswith("#")
    }
    assert {r["alert"] for r in rules} == {
        "CtxbudgetCoverageDrift",
        "CtxbudgetCoverageBelowTarget",
        "CtxbudgetLabelsNotJoined",
    }
    for rule in rules:
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]
        assert rule["annotations"]["runbook_url"].partition("#")[2] in anchors
        for series in re.findall(r"ctxbudget_[a-z_]+", rule["expr"]):
            assert f"\n{series}" in exported or exported.startswith(series), series
