"""Forged control records written by a plain producer, on the embedded broker: none is followed.

The producer is kafka-python with no credentials, as anyone who can reach the broker could
use it. Each forged record of the attack table is written after the operator's kill; the
worker must stay on the operator's state, count and audit each refusal, and the operator's
commands must still work afterwards, for a worker running then and one started later.
"""

from __future__ import annotations

import time
from pathlib import Path

import orjson
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from kafka import KafkaProducer
from prometheus_client.parser import text_string_to_metric_families

from ctxbudget.codec import encode
from ctxbudget.rollout import ControlState
from ctxbudget.signing import key_id, load_private_key, sign_state
from tests.integration.control_checks import audit_events, policies_of, run_cli, wait_applied, warm
from tests.integration.endpoints import free_port, http_get
from tests.integration.lab import Lab, batches, collect, produce

pytestmark = [pytest.mark.broker, pytest.mark.slow]

REFUSED = "ctx.control_refused.v1"


def _forged(operator_record: bytes, operator_key: Ed25519PrivateKey) -> list[tuple[str, bytes]]:
    """The attack table, as (what, record) after the operator's kill at ``operator_record``."""
    signed = ControlState.model_validate_json(operator_record)
    v = signed.version
    plain = signed.model_copy(update={"key_id": None, "signature": None, "updated_by": "mallory"})
    stranger = Ed25519PrivateKey.generate()
    modified = orjson.loads(operator_record)
    modified.update(killed=False, candidate="lean@1", percent=100.0, version=v + 1)
    return [
        (
            "rollout 100% to lean@1, unsigned",
            encode(plain.model_copy(update={"percent": 100.0, "killed": False, "version": v + 1})),
        ),
        ("kill lifted with the same version", encode(plain.model_copy(update={"killed": False}))),
        ("baseline ghost@1, unsigned", encode(plain.model_copy(update={"baseline": "ghost@1"}))),
        (
            # signed by the trusted key itself: only the policy check stops it
            "baseline ghost@1, signed",
            encode(
                sign_state(
                    plain.model_copy(update={"baseline": "ghost@1", "version": v + 1}),
                    operator_key,
                )
            ),
        ),
        (
            "version 10^12, baseline swapped",
            encode(plain.model_copy(update={"version": 10**12, "baseline": "lean@1"})),
        ),
        (
            "900 KB record",
            encode(plain.model_copy(update={"note": "x" * 900_000, "version": v + 1})),
        ),
        (
            "3 MB record",
            encode(plain.model_copy(update={"note": "y" * 3_000_000, "version": v + 2})),
        ),
        (
            "signed by an untrusted key",
            encode(
                sign_state(plain.model_copy(update={"killed": False, "version": v + 1}), stranger)
            ),
        ),
        ("valid signature over a modified payload", orjson.dumps(modified)),
    ]


EXPECTED = {
    "unsigned": 4,
    "unknown_policy": 1,
    "oversize": 2,
    "untrusted_key": 1,
    "bad_signature": 1,
}


def _control_record(lab: Lab, version: int) -> bytes:
    consumer = lab.consumer(lab.topics.control)
    found = [m.value for m in consumer if orjson.loads(m.value).get("version") == version]
    consumer.close()
    assert found, f"no control record of version {version}"
    return found[-1]


def _refusals(lab: Lab, worker_count: int, per_worker: int, timeout_s: float = 60) -> list[dict]:
    deadline = time.monotonic() + timeout_s
    got: list[dict[str, object]] = []
    while time.monotonic() < deadline:
        got = audit_events(lab, REFUSED)
        by_worker: dict[object, int] = {}
        for e in got:
            by_worker[e["worker"]] = by_worker.get(e["worker"], 0) + 1
        if len(by_worker) >= worker_count and all(n >= per_worker for n in by_worker.values()):
            return got
        time.sleep(0.5)
    raise AssertionError(f"refusals audited: {len(got)}")


def _refused_counts(port: int) -> dict[str, float]:
    status, body = http_get(port, "/metrics")
    assert status == 200
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(body.decode()):
        if family.name == "ctxbudget_control_refused":
            for sample in family.samples:
                if sample.name.endswith("_total"):
                    out[sample.labels["reason"]] = sample.value
    return out


def test_no_forged_control_record_is_followed(lab: Lab, tmp_path: Path) -> None:
    """Every record of the attack table is refused, counted and audited; the operator's kill,
    unkill and rollout still work, for the running worker and for one started afterwards."""
    port = free_port()
    lab.env_overrides["CTXBUDGET_METRICS_PORT"] = str(port)
    lab.start("fused", log_dir=tmp_path)
    warm(lab, seed=80)
    assert _refused_counts(port) == dict.fromkeys(EXPECTED | {"malformed": 0, "stale": 0,
                                                              "same_version": 0}, 0.0)  # fmt: skip
    assert (
        run_cli(lab, "control", "set-rollout", "--percent", "0", "--candidate", "lean@1").returncode
        == 0
    )
    proc = run_cli(lab, "control", "kill", "--note", "before the attack")
    assert proc.returncode == 0, proc.stderr.decode()
    wait_applied(lab, 2, workers=1)
    assert lab.private_key is not None
    operator_key = load_private_key(lab.private_key)
    attack = _forged(_control_record(lab, 2), operator_key)

    mallory = KafkaProducer(
        bootstrap_servers=lab.broker.bootstrap, acks="all", max_request_size=8 * 1024 * 1024
    )
    for _, record in attack:
        mallory.send(lab.topics.control, key=b"rollout", value=record).get(timeout=30)
    mallory.close()

    refusals = _refusals(lab, worker_count=1, per_worker=len(attack))
    reasons: dict[str, int] = {}
    for e in refusals:
        reasons[str(e["reason"])] = reasons.get(str(e["reason"]), 0) + 1
    print("refused by reason:", reasons)
    assert reasons == EXPECTED
    assert all(e["held_version"] == 2 for e in refusals)
    counted = _refused_counts(port)
    assert {r: n for r, n in counted.items() if n} == {r: float(n) for r, n in EXPECTED.items()}

    # followed: none. The kill stays on: every pack is the baseline's.
    items = batches(10, seed=81)
    produce(lab, items)
    got, _ = collect(lab, lab.topics.packs, {r for r, _ in items}, timeout_s=60)
    assert policies_of({r: got[r] for r, _ in items}) == {"default@1"}
    assert [e["version"] for e in audit_events(lab, "ctx.control_applied.v1")] == [1, 2]

    # the operator still sees its own state, who signed it, and every refused record
    shown = run_cli(lab, "control", "show")
    assert shown.returncode == 0, shown.stderr.decode()
    state = orjson.loads(shown.stdout)
    kid = key_id(operator_key.public_key())
    assert (state["version"], state["killed"], state["key_id"]) == (2, True, kid)
    assert f"signed by: {kid}, version 2" in shown.stderr.decode()
    assert f"{len(attack)} control record(s) refused" in shown.stderr.decode()

    # and its commands still work: unkill, a full rollout, then the kill sends traffic to
    # the operator's baseline, not the forged one
    assert run_cli(lab, "control", "unkill").returncode == 0
    proc = run_cli(lab, "control", "set-rollout", "--percent", "100")
    assert proc.returncode == 0, proc.stderr.decode()
    applied = wait_applied(lab, 4, workers=1)
    assert applied[-1]["key_id"] == kid and applied[-1]["before"]["version"] == 3
    items = batches(10, seed=82)
    produce(lab, items)
    got, _ = collect(lab, lab.topics.packs, {r for r, _ in items}, timeout_s=60)
    assert policies_of({r: got[r] for r, _ in items}) == {"lean@1"}

    lab.env_overrides["CTXBUDGET_METRICS_PORT"] = str(free_port())
    lab.start("fused", log_dir=tmp_path)  # reads the whole topic, forged records included
    proc = run_cli(lab, "control", "kill", "--note", "after the attack")
    assert proc.returncode == 0, proc.stderr.decode()
    wait_applied(lab, 5, workers=1)
    refusals = _refusals(lab, worker_count=2, per_worker=len(attack))
    assert len(refusals) == 2 * len(attack)
    time.sleep(2)
    items = batches(20, seed=83)
    produce(lab, items)
    got, _ = collect(lab, lab.topics.packs, {r for r, _ in items}, timeout_s=90)
    assert policies_of({r: got[r] for r, _ in items}) == {"default@1"}
    for log in lab.logs:
        text = log.read_text(errors="replace")
        # one line per reason (the rate limit), not one per record
        assert text.count("control record refused") == len(EXPECTED)


def test_a_flood_of_forged_records_does_not_hold_back_the_kill(lab: Lab, tmp_path: Path) -> None:
    """5,000 unsigned records written just before the operator's kill: the kill is applied
    within seconds, the flood is one log line and 5,000 counted refusals."""
    flood = 5000
    lab.start("fused", log_dir=tmp_path)
    warm(lab, seed=84)
    assert (
        run_cli(
            lab, "control", "set-rollout", "--percent", "100", "--candidate", "lean@1"
        ).returncode
        == 0
    )
    wait_applied(lab, 1, workers=1)
    forged = encode(ControlState(baseline="lean@1", killed=False, version=10**9))
    mallory = KafkaProducer(bootstrap_servers=lab.broker.bootstrap, acks=1, linger_ms=20)
    for _ in range(flood):
        mallory.send(lab.topics.control, key=b"rollout", value=forged)
    mallory.flush()
    mallory.close()
    started = time.monotonic()
    proc = run_cli(lab, "control", "kill", "--note", "under a flood")
    assert proc.returncode == 0, proc.stderr.decode()
    lag_ms = float(wait_applied(lab, 2, workers=1, timeout_s=60)[-1]["lag_ms"])  # type: ignore[arg-type]
    took = time.monotonic() - started
    print(f"kill after {flood} forged records: applied {lag_ms:.0f} ms after its record "
          f"({took:.1f} s including the command)")  # fmt: skip
    assert lag_ms < 10_000
    refusals = _refusals(lab, worker_count=1, per_worker=flood)
    assert len(refusals) == flood
    text = lab.logs[-1].read_text(errors="replace")
    assert text.count("control record refused") == 1
