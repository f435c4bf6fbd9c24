"""The control topic from the command line (ctxbudget.kafka.control): a change is the rule
applied to the state in force, signed and written; refusals and bad records; a bad setting
names its variable."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ctxbudget.codec import encode
from ctxbudget.errors import ConfigError
from ctxbudget.policy import PolicyStore
from ctxbudget.rollout import ControlState
from tests.paths import REPO
from tests.unit.kafka_fakes import FakeConsumer, Rec, poll_result

# -- the control topic --------------------------------------------------------------------------


def _operator_settings(tmp_path: Path) -> Any:
    """Settings with a freshly made operator key."""
    from ctxbudget.kafka import WorkerSettings
    from ctxbudget.signing import generate_key_pair

    private, _ = generate_key_pair(tmp_path / "keys")
    return WorkerSettings(control_key=private)


def test_a_control_change_reads_applies_the_rule_and_writes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The change is the rule applied to the state in force, signed, then written."""
    from ctxbudget.kafka import control
    from ctxbudget.signing import judge, load_private_key

    monkeypatch.chdir(tmp_path)
    settings = _operator_settings(tmp_path)
    in_force = ControlState(baseline="default@1", candidate="lean@1", version=4)
    written: dict[str, Any] = {}
    monkeypatch.setattr(
        control, "read_control", lambda *a, **k: control.ControlView(state=in_force)
    )
    monkeypatch.setattr(control, "write_state", lambda *a, **k: written.update(k, bootstrap=a[0]))
    store = PolicyStore.load(REPO / "policies")
    after = control.change_state(
        settings,
        "k1:9093,k2:9093",
        "kill",
        {"killed": True, "note": "bad"},
        policies=REPO / "policies",
        known_policy=store.get,
    )
    assert (after.version, after.killed, after.note) == (5, True, "bad")
    assert after.updated_by == control.operator() and after.updated_at is not None
    assert written["before"] == in_force and written["after"] == after
    ring = control.operator_keys(settings)
    public = load_private_key(settings.control_key).public_key()
    assert ring.ids() == [after.key_id] and after.signature is not None
    verdict = judge(encode(after), keys=ring, held=in_force, known_policy=lambda r: True)
    assert verdict.state == after and public is not None
    assert written["action"] == "kill" and written["bootstrap"] == ["k1:9093", "k2:9093"]
    assert (written["control_topic"], written["audit_topic"]) == ("ctx.control.v1", "ctx.audit.v1")
    with pytest.raises(ConfigError, match="nope@9"):
        control.change_state(
            settings,
            "k1:9093",
            "set-rollout",
            {"percent": 10.0, "candidate": "nope@9"},
            policies=REPO / "policies",
            known_policy=store.get,
        )


def test_an_unreadable_control_topic_is_one_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A failure reading the control topic is one ControlTopicError carrying the cause."""
    from ctxbudget.kafka import control

    def down(*args: object, **kwargs: object) -> ControlState:
        raise OSError("connection refused")

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(control, "read_control", down)
    with pytest.raises(control.ControlTopicError, match="cannot read the control topic: conn"):
        control.current_state(_operator_settings(tmp_path), "k1:9093", REPO / "policies")


def test_a_change_without_the_operator_key_is_refused_before_any_read(tmp_path: Path) -> None:
    """No CTXBUDGET_CONTROL_KEY: a ControlKeyError naming it, nothing read or written."""
    from ctxbudget.kafka import WorkerSettings, control

    with pytest.raises(control.ControlKeyError, match="CTXBUDGET_CONTROL_KEY is not set"):
        control.change_state(
            WorkerSettings(), "k1:9093", "kill", {"killed": True}, policies=REPO / "policies",
            known_policy=lambda ref: None,
        )  # fmt: skip
    with pytest.raises(control.ControlKeyError, match="no key to verify"):
        control.operator_keys(WorkerSettings())


def test_a_bad_control_record_is_passed_over_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Reading the state in force keeps the newest valid signed state and lists, with where
    and why, every record passed over: unsigned (though newer), not a state."""
    pytest.importorskip("kafka")
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from ctxbudget.kafka import control
    from ctxbudget.signing import KeyRing, sign_state

    key = Ed25519PrivateKey.generate()
    good = encode(sign_state(ControlState(baseline="default@1", version=3), key))
    forged = encode(ControlState(baseline="default@1", candidate="lean@1", percent=100, version=9))
    records = [
        Rec("c", 0, 0, b"rollout", good, 1000),
        Rec("c", 0, 1, b"rollout", b'{"baseline": "default@1", "version": "x"}', 2000),
        Rec("c", 0, 2, b"rollout", forged, 3000),
    ]
    consumer = FakeConsumer([poll_result(*records)], partitions={0})
    monkeypatch.setattr(control, "client", lambda *a, **k: consumer)
    with caplog.at_level("WARNING", logger="ctxbudget.control"):
        view = control.read_control(
            ["k1:9093"], "c", ControlState(baseline="default@1"), keys=KeyRing([key.public_key()])
        )
    assert view.state.version == 3 and view.state.percent == 0
    assert [(r.where, r.verdict.reason) for r in view.refused] == [
        ("c[0]@1", "unsigned"),
        ("c[0]@2", "unsigned"),
    ]
    assert caplog.messages == [
        "control record passed over at c[0]@1: unsigned: no signature",
        "control record passed over at c[0]@2: unsigned: no signature",
    ]


def test_a_worker_logs_a_refused_control_record_in_one_line() -> None:
    """The follower refuses a record that is not a state and logs it once, in one line; the
    state in force stays."""
    from structlog.testing import capture_logs

    from ctxbudget.kafka.control_follower import ROLLOUT_KEY, ControlFollower, ControlHolder

    holder = ControlHolder(ControlState(baseline="default@1"))
    follower = ControlFollower(bootstrap=["k1:9093"], topic="c", holder=holder)
    with capture_logs() as logs:
        follower._apply(ROLLOUT_KEY, b"[1, 2]", 0, "c[0]@7")
        follower._apply(ROLLOUT_KEY, b"[1, 2]", 0, "c[0]@8")
    assert logs == [
        {
            "event": "control record refused; the state in force stays",
            "reason": "malformed",
            "detail": "a JSON list, not an object",
            "claimed_key_id": None,
            "claimed_version": None,
            "where": "c[0]@7",
            "size": 6,
            "log_level": "error",
        }
    ]
    assert holder.get() == ControlState(baseline="default@1")


def test_a_bad_setting_names_its_environment_variable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Each bad CTXBUDGET_* value is named by its variable, with what was found, in one line."""
    from ctxbudget.cli.common import UsageFailure, worker_settings

    monkeypatch.chdir(tmp_path)  # no .env file
    monkeypatch.setenv("CTXBUDGET_CONCURRENCY", "0")
    monkeypatch.setenv("CTXBUDGET_LOG_LEVEL", "loud")
    with pytest.raises(UsageFailure) as caught:
        worker_settings()
    assert caught.value.message == (
        "bad setting: CTXBUDGET_CONCURRENCY: Input should be greater than or equal to 1 "
        "(found '0'); CTXBUDGET_LOG_LEVEL: Input should be 'DEBUG', 'INFO', 'WARNING' or "
        "'ERROR' (found 'loud')"
    )
