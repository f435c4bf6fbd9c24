"""`ctxbudget monitor --follow` on the embedded broker: batches on the candidates topic, labels
sent by `ctxbudget label`, coverage and the drift alarm read from the metrics endpoint."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from ctxbudget.codec import encode
from ctxbudget.conformal import batches_sha256, calibrate, save_calibration, scorer_from_name
from tests.integration.lab import Lab, produce
from tests.labelled import labelled_stream
from tests.paths import REPO

pytestmark = [pytest.mark.broker, pytest.mark.slow]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _metric(port: int, name: str) -> float | None:
    try:
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read()
    except OSError:
        return None
    for line in body.decode().splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return None


def test_follow_joins_topics_and_exports_coverage_and_drift(lab: Lab, tmp_path: Path) -> None:
    """300 requests, the last 150 rescaled: every label joined, drift counted on /metrics."""
    calib = labelled_stream(300, 1, width=6)
    cal_path = save_calibration(
        calibrate(
            calib,
            alphas=(0.1,),
            scorer=scorer_from_name("rerank"),
            data_hash=batches_sha256(calib),
            created="2026-01-01",
            baselines=False,
        ),
        tmp_path / "cal.json",
    )
    stream = labelled_stream(150, 2, width=6) + labelled_stream(
        150, 3, start=150, width=6, scale=0.5, shift=-0.4
    )
    produce(lab, [(b.request_id, encode(b.model_copy(update={"labels": None}))) for b in stream])
    labels = tmp_path / "labels.jsonl"
    labels.write_bytes(b"".join(encode(b) + b"\n" for b in stream))
    env = lab.env()
    sent = subprocess.run(
        [
            sys.executable,
            "-m",
            "ctxbudget",
            "label",
            str(labels),
            "--brokers",
            lab.broker.bootstrap,
        ],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert sent.returncode == 0, sent.stderr
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ctxbudget",
            "monitor",
            "--follow",
            "--calibration",
            str(cal_path),
            "--alpha",
            "0.1",
            "--brokers",
            lab.broker.bootstrap,
            "--metrics-port",
            str(port),
            "--until-idle",
            "8",
        ],
        env=env,
        cwd=REPO,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        seen = None
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            seen = _metric(port, 'ctxbudget_labels_total{source="analyst"}')
            if seen == 300.0:
                break
            time.sleep(0.5)
        assert seen == 300.0
        assert (_metric(port, "ctxbudget_drift_alarms_total") or 0.0) >= 1.0
        assert _metric(port, "ctxbudget_coverage_target") == pytest.approx(0.9)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "drift declared at labelled request" in err
    assert "300 labelled requests joined" in err
