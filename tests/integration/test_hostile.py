"""Hostile input against worker processes on the embedded broker: no record stops, stalls
or bloats a stage, every request gets an answer, a killed worker's scratch folder goes."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import orjson
import pytest
import yaml
from kafka import KafkaAdminClient, KafkaProducer

from bench import hostile
from ctxbudget.codec import encode
from ctxbudget.pipeline import Pipeline
from ctxbudget.policy import PolicyStore
from ctxbudget.testing.traffic import synthetic
from tests.integration.lab import Lab, collect, produce
from tests.paths import REPO

pytestmark = [pytest.mark.broker, pytest.mark.slow]

PIPE = Pipeline.from_store(PolicyStore.load(REPO / "policies"), "default@1")
#: The routed topic's limit in these tests: 400 passages of 700 characters do not fit it.
ROUTED_LIMIT = 300_000


def _low_limit_specs(tmp_path: Path) -> Path:
    """The shipped topic specs with ctx.routed.v1 limited to ROUTED_LIMIT bytes."""
    folder = tmp_path / "topics"
    folder.mkdir()
    for spec in (REPO / "topics").glob("*.yaml"):
        data = yaml.safe_load(spec.read_text())
        if data["name"] == "ctx.routed.v1":
            data["config"]["max.message.bytes"] = ROUTED_LIMIT
        (folder / spec.name).write_text(yaml.safe_dump(data))
    return folder


def _produce_large(lab: Lab, items: list[tuple[str, bytes]]) -> None:
    """``produce``, with room for records up to 8 MiB (the lab producer allows 1 MiB)."""
    producer = KafkaProducer(
        bootstrap_servers=lab.broker.bootstrap, acks="all", max_request_size=8 << 20
    )
    for rid, raw in items:
        producer.send(lab.topics.candidates, key=rid.encode(), value=raw)
    producer.flush()
    producer.close()


def _scratch_of(pid: int) -> list[Path]:
    found = []
    for owner in Path("/tmp").glob("ctxbudget-worker-*/owner"):
        try:
            if owner.read_text().split(" ")[0] == str(pid):
                found.append(owner.parent)
        except OSError:
            continue
    return found


def _wait_for(predicate: object, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.2)
    return False


def test_hostile_batches_become_dead_letters_and_the_stage_goes_on(
    lab: Lab, tmp_path: Path
) -> None:
    """A batch too large for the routed topic, too many candidates, an oversize message, an
    unavailable tokenizer and near-identical passages are answered on the dead-letter topic
    naming their limit; identical passages are packed; traffic before and after is packed
    byte for byte as in process, by the same worker, which never exits."""
    lab.env_overrides = {
        "CTXBUDGET_TOPIC_SPECS": str(_low_limit_specs(tmp_path)),
        "CTXBUDGET_MAX_CANDIDATES": "1600",
        "CTXBUDGET_MAX_PAIR_CHECKS": "200000",
    }
    worker = lab.start("all", log_dir=tmp_path)
    before = [(g.batch.request_id, g.batch) for g in synthetic(20, seed=81)]
    after = [(g.batch.request_id, g.batch) for g in synthetic(20, seed=82)]
    big = hostile.batch(
        "h-routed",
        [hostile.cand(i, hostile.PASSAGE + f" number {i} " * 60) for i in range(400)],
    )
    assert len(big) < 4 << 20  # a valid input: only its routed batch is too large
    wanted = {
        "h-routed": (big, "max.message.bytes"),
        "h-many": (hostile.tiny(2000, rid="h-many"), "(max_candidates)"),
        "h-oversize": (hostile.oversize(1, size=5 << 20, rid="h-oversize"), "(max_message_bytes)"),
        "h-tok": (hostile.bad_tokenizer(1, rid="h-tok"), "o200k_base"),
        "h-near": (hostile.near_identical(300, rid="h-near"), "(max_pair_checks)"),
    }
    identical = hostile.identical(500, rid="h-identical")
    produce(lab, [(rid, encode(b)) for rid, b in before])
    _produce_large(
        lab, [(rid, raw) for rid, (raw, _) in wanted.items()] + [("h-identical", identical)]
    )
    produce(lab, [(rid, encode(b)) for rid, b in after])

    normal = {rid for rid, _ in before + after}
    got, dead = collect(lab, lab.topics.packs, normal | {"h-identical"}, timeout_s=240)
    assert worker.poll() is None, "the worker exited"
    assert set(got) == normal | {"h-identical"}
    for rid, b in before + after:
        assert got[rid][0] == encode(PIPE.run(b).pack)
    assert orjson.loads(got["h-identical"][0])["dropped"] == {"duplicate": 499}

    by_id = {d["request_id"]: d for d in dead}
    assert set(wanted) <= set(by_id), sorted(by_id)
    for rid, (raw, limit) in wanted.items():
        dl = by_id[rid]
        assert limit in dl["error"], (rid, dl["error"])
        assert len(dl["raw"]) <= 64 * 1024
        if rid == "h-near":  # the work budget is met in consolidation, on the routed batch
            assert dl["stage"] == "consolidate" and dl["original_bytes"] > len(raw)
        else:
            assert dl["stage"] == "route" and dl["original_bytes"] == len(raw)
    routed = by_id["h-routed"]
    assert f"output to {lab.topics.routed}" in routed["error"]
    assert f"{ROUTED_LIMIT:,} bytes" in routed["error"]
    audit = lab.consumer(lab.topics.audit)
    traced = {orjson.loads(m.value).get("request_id") for m in audit}
    audit.close()
    assert "h-routed" not in traced  # nothing of a refused input was produced

    # a killed worker's scratch folder is removed by the next worker that starts
    folders = _scratch_of(worker.pid)
    assert len(folders) == 1
    worker.send_signal(signal.SIGKILL)
    worker.wait(30)
    assert folders[0].exists()
    lab.start("all", log_dir=tmp_path)
    assert _wait_for(lambda: not folders[0].exists(), 60)


def test_a_worker_refuses_to_start_while_a_topic_it_writes_is_missing(
    lab: Lab, tmp_path: Path
) -> None:
    """The broker would create the topic with its own defaults: the worker exits with 78
    and says which topic to create, and creates nothing."""
    missing = f"missing.packs.{lab.suffix}"
    lab.env_overrides = {"CTXBUDGET_TOPICS__PACKS": missing}
    worker = lab.start("fused", log_dir=tmp_path)
    assert worker.wait(90) == 78
    log = lab.logs[-1].read_text(errors="replace")
    assert missing in log and "ctxbudget topics apply" in log
    admin = KafkaAdminClient(bootstrap_servers=lab.broker.bootstrap)
    assert missing not in admin.list_topics()
    admin.close()
    assert _scratch_of(worker.pid) == []
