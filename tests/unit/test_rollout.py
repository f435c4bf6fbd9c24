"""Cohorts, lanes and the kill switch; compare and replay on files."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxbudget.codec import decode_batch, encode
from ctxbudget.compare import compare, order_distance
from ctxbudget.pipeline import Pipeline
from ctxbudget.policy import PolicyStore
from ctxbudget.rollout import (
    ControlState,
    bucket,
    in_cohort,
    live_assignment,
    load_rollout,
    shadow_assignment,
)
from ctxbudget.schemas import Pack
from ctxbudget.testing import batch, candidate
from tests.paths import REPO

STATE = ControlState(baseline="default@1", candidate="lean@1", percent=30, shadow=True)


def test_the_shipped_rollout_file_loads() -> None:
    """policies/rollout.yaml is valid, names shipped policies, and starts with nothing live."""
    state = load_rollout(REPO / "policies" / "rollout.yaml")
    store = PolicyStore.load(REPO / "policies")
    assert (state.baseline, state.candidate) == ("default@1", "lean@1")
    assert {state.baseline, state.candidate} <= set(store.names())
    baseline, _ = store.get(state.baseline)
    assert f"{baseline.name}@{baseline.version}" == state.baseline
    assert state.percent == 0 and not state.shadow and not state.killed


def test_the_split_is_within_one_percent_over_100k_keys() -> None:
    """A 5% rollout gives 5% ± 1% of 100,000 tenants."""
    for percent in (1.0, 5.0, 50.0):
        members = sum(bucket(f"tenant:t{i}") < percent for i in range(100_000))
        assert abs(members / 1000 - percent) < 1.0


@settings(max_examples=200)
@given(st.text(min_size=1), st.floats(0, 100), st.floats(0, 100))
def test_raising_the_percentage_only_adds_members(key: str, p1: float, p2: float) -> None:
    """Stickiness: a member at p stays a member at every higher p."""
    lo, hi = sorted((p1, p2))
    b = batch([], request_id="r")
    b = b.model_copy(update={"principal": b.principal.model_copy(update={"tenant_id": key})})
    at_lo = in_cohort(b, STATE.model_copy(update={"percent": lo}))
    at_hi = in_cohort(b, STATE.model_copy(update={"percent": hi}))
    assert not at_lo or at_hi


def test_the_same_key_always_gets_the_same_lane() -> None:
    """Deterministic: no process seed is involved."""
    code = "from ctxbudget.rollout import bucket; print(bucket('tenant:acme'))"
    outs = {
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout
        for _ in range(2)
    }
    assert len(outs) == 1 and float(outs.pop()) == bucket("tenant:acme")


def test_lanes_for_members_non_members_and_the_kill_switch() -> None:
    """Members get the candidate live and the baseline in shadow; kill sends all to baseline."""
    full = STATE.model_copy(update={"percent": 100.0})
    b = batch([])
    assert live_assignment(b, full).policy == "lean@1"
    shadow = shadow_assignment(b, full)
    assert shadow is not None and shadow.policy == "default@1"
    none = STATE.model_copy(update={"percent": 0.0})
    assert live_assignment(b, none).policy == "default@1"
    shadow = shadow_assignment(b, none)
    assert shadow is not None and shadow.policy == "lean@1"
    killed = full.model_copy(update={"killed": True})
    assert live_assignment(b, killed).policy == "default@1"
    assert live_assignment(b, killed).cohort == "baseline"
    no_shadow = full.model_copy(update={"shadow": False})
    assert shadow_assignment(b, no_shadow) is None


def test_user_cohorts_fall_back_to_the_request_without_a_user_id() -> None:
    """The contract has an optional principal.user_id; without it the request decides."""
    by_user = STATE.model_copy(update={"cohort_key": "user", "percent": 50.0})
    b = batch([], request_id="r-1")
    with_user = b.model_copy(
        update={"principal": b.principal.model_copy(update={"user_id": "u-7"})}
    )
    assert in_cohort(with_user, by_user) == (bucket("user:u-7") < 50)
    assert in_cohort(b, by_user) == (bucket("request:r-1") < 50)


def _packs(policy: str) -> list[Pack]:
    pipe = Pipeline.from_store(PolicyStore.load(REPO / "policies"), policy)
    lines = (REPO / "examples" / "batches.jsonl").read_bytes().splitlines()
    return [pipe.run(decode_batch(x)).pack for x in lines]


def test_compare_a_known_pair_of_policies() -> None:
    """lean@1 has lower ceilings: never more tokens, and identical where budgets were small."""
    live, shadow = _packs("default@1"), _packs("lean@1")
    result = compare(live, shadow, noise=list(zip(live, live, strict=True)))
    assert result.pairs == 7 and result.shadow_policy == ["lean@1"]
    assert result.overall.tokens_delta_mean <= 0
    assert result.noise_floor is not None and result.noise_floor.identical == 7
    same = compare(live, live)
    assert same.overall.jaccard_mean == 1.0 and same.overall.identical == 7


def test_order_distance() -> None:
    """0 for the same order, 1 reversed, shared ids only."""
    assert order_distance(["a", "b", "c"], ["a", "b", "c"]) == 0.0
    assert order_distance(["a", "b", "c"], ["c", "b", "a"]) == 1.0
    assert order_distance(["a", "x"], ["a", "y"]) == 0.0


def test_replay_reproduces_the_original_packs_in_the_shadow_lane(tmp_path: Path) -> None:
    """Same traffic, same policy: the same packs, marked as replay, never live."""
    out = tmp_path / "shadow.jsonl"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "ctxbudget",
            "replay",
            "examples/batches.jsonl",
            "--policy",
            "default@1",
            "--run-id",
            "run-7",
            "--out",
            str(out),
        ],
        cwd=REPO,
        capture_output=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    replayed = [orjson.loads(x) for x in out.read_bytes().splitlines()]
    originals = [orjson.loads(encode(p)) for p in _packs("default@1")]
    assert len(replayed) == len(originals) == 7
    for r, o in zip(replayed, originals, strict=True):
        assert r["lane"] == "shadow" and r["replay"] == {"run_id": "run-7"}
        assert r["cohort"] == "replay"
        r.update(lane=o["lane"], cohort=o["cohort"], replay=o["replay"])
        assert orjson.dumps(r) == orjson.dumps(o)


def test_a_candidate_not_in_the_cohort_never_sees_the_candidate_live() -> None:
    """A live assignment uses exactly one policy per request."""
    b = batch([candidate("a", "text")])
    lanes = {
        live_assignment(b, STATE.model_copy(update={"percent": p})).policy for p in (0.0, 100.0)
    }
    assert lanes == {"default@1", "lean@1"}


def test_a_control_change_bumps_the_version_and_checks_the_policies() -> None:
    """The rule lives in the library: version + 1, who and when, known policies only."""
    from ctxbudget.errors import ConfigError
    from ctxbudget.rollout import next_state

    known = {"default@1", "lean@1"}

    def check(ref: str) -> None:
        if ref not in known:
            raise ConfigError(f"unknown policy {ref}")

    before = STATE.model_copy(update={"version": 4, "candidate": None, "percent": 0.0})
    after = next_state(
        before, {"candidate": "lean@1", "percent": 5.0}, known_policy=check, at="T", by="me"
    )
    assert (after.version, after.candidate, after.percent) == (5, "lean@1", 5.0)
    assert (after.updated_at, after.updated_by) == ("T", "me")
    with pytest.raises(ConfigError, match="unknown policy"):
        next_state(before, {"candidate": "nope@9"}, known_policy=check, at="T", by="me")
    with pytest.raises(ConfigError, match="needs a candidate"):
        next_state(before, {"percent": 5.0}, known_policy=check, at="T", by="me")
