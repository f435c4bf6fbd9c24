"""A worker's side of the signed control topic: what it applies, counts, logs and says."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest
from structlog.testing import capture_logs

from ctxbudget.codec import encode
from ctxbudget.kafka.control_follower import (
    ROLLOUT_KEY,
    ControlFollower,
    ControlHolder,
    RefusalLog,
    refusal_counter,
)
from ctxbudget.kafka.settings import WorkerSettings
from ctxbudget.rollout import ControlState
from ctxbudget.signing import REFUSAL_REASONS, KeyRing, Verdict, sign_state
from tests.paths import REPO

KEY = Ed25519PrivateKey.generate()
START = ControlState(baseline="default@1", candidate="lean@1")


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _follower(refusals: RefusalLog | None = None) -> tuple[ControlFollower, list[tuple[int, int]]]:
    applied: list[tuple[int, int]] = []
    follower = ControlFollower(
        bootstrap=["k1:1"],
        topic="c",
        holder=ControlHolder(START),
        keys=KeyRing([KEY.public_key()]),
        known_policy={"default@1", "lean@1"}.__contains__,
        on_apply=lambda before, after, lag: applied.append((before.version, after.version)),
        refusals=refusals,
    )
    follower.caught_up.set()
    return follower, applied


def _signed(version: int, **update: object) -> bytes:
    return encode(sign_state(START.model_copy(update={"version": version, **update}), KEY))


def test_the_refusal_counter_exports_every_reason_at_zero_from_the_start() -> None:
    """So increase() sees the first refusal of each reason."""
    registry = CollectorRegistry()
    refusal_counter(registry)
    text = generate_latest(registry).decode()
    for reason in REFUSAL_REASONS:
        assert f'ctxbudget_control_refused_total{{reason="{reason}"}} 0.0' in text


def test_the_follower_applies_signed_newer_states_and_reports_before_and_after() -> None:
    """v1 then v2 applied, each reported with the state it replaced; a replayed v1 is not."""
    registry = CollectorRegistry()
    follower, applied = _follower(RefusalLog(counter=refusal_counter(registry)))
    follower._apply(ROLLOUT_KEY, _signed(1, percent=100.0), 0, "c[0]@0")
    follower._apply(ROLLOUT_KEY, _signed(2, killed=True), 0, "c[0]@1")
    follower._apply(ROLLOUT_KEY, _signed(1, percent=100.0), 0, "c[0]@2")
    follower._apply(ROLLOUT_KEY, _signed(2, killed=False), 0, "c[0]@3")
    assert applied == [(0, 1), (1, 2)]
    assert follower.holder.get().killed
    text = generate_latest(registry).decode()
    assert 'ctxbudget_control_refused_total{reason="stale"} 1.0' in text
    assert 'ctxbudget_control_refused_total{reason="same_version"} 1.0' in text


def test_refusals_are_logged_once_per_reason_then_once_a_window_with_a_count() -> None:
    """A flood of forged records is one line per reason per minute, every one counted and
    reported."""
    clock = _Clock()
    reported: list[Verdict] = []
    log = RefusalLog(report=lambda v, where, size: reported.append(v), every_s=60.0, clock=clock)
    unsigned = Verdict(reason="unsigned", detail="no signature")
    with capture_logs() as logs:
        for _ in range(50):
            log.refused(unsigned, "c[0]@1", 10)
        log.refused(Verdict(reason="oversize", detail="big"), "c[0]@2", 10**6)
        clock.now = 61.0
        log.refused(unsigned, "c[0]@3", 10)
    assert [(e["reason"], e.get("more_since_last_line")) for e in logs] == [
        ("unsigned", None),
        ("oversize", None),
        ("unsigned", 49),
    ]
    assert len(reported) == 52


def test_a_worker_without_a_trusted_key_runs_the_baseline_and_says_so(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """No CTXBUDGET_CONTROL_TRUSTED_KEYS: baseline only, one line at start, readiness says it."""
    pytest.importorskip("faust")
    from ctxbudget.kafka.app import NO_TRUSTED_KEY, WorkerApp

    monkeypatch.chdir(tmp_path)
    app = WorkerApp(WorkerSettings(policies=REPO / "policies"), ["fused"])
    try:
        state = app.holder.get()
        assert (state.baseline, state.candidate, state.percent, state.shadow) == (
            "default@1",
            None,
            0.0,
            False,
        )
        with capture_logs() as logs:
            app.start_control()
        assert [e["event"] for e in logs] == [NO_TRUSTED_KEY]
        assert app.follower is None
        app.obs.joined(True)
        app.obs.broker_answered()
        ok, why = app.obs.ready()
        assert ok and NO_TRUSTED_KEY in why
    finally:
        app.executor.shutdown()


def test_a_worker_given_unreadable_trusted_keys_does_not_start(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A trusted keys path that holds no key stops the worker command with one Error line."""
    pytest.importorskip("faust")
    from click.testing import CliRunner

    from ctxbudget.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "keys").mkdir()
    result = CliRunner().invoke(
        main,
        ["worker", "fused"],
        env={
            "CTXBUDGET_CONTROL_TRUSTED_KEYS": str(tmp_path / "keys"),
            "CTXBUDGET_POLICIES": str(REPO / "policies"),
        },
    )
    assert result.exit_code == 2
    assert result.output.strip().startswith("Error: ") and "no public key files" in result.output
