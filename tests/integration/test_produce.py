"""`ctxbudget produce` on the embedded broker: the README's walk, broker -> topics -> workers
-> produce -> read packs, on private topics of the session broker."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from ctxbudget.codec import decode_batch, encode
from ctxbudget.pipeline import Pipeline
from ctxbudget.policy import PolicyStore
from tests.integration.lab import Lab
from tests.integration.lab import collect as _collect
from tests.paths import REPO

pytestmark = [pytest.mark.broker, pytest.mark.slow]

EXAMPLES = REPO / "examples" / "batches.jsonl"


def _produce(lab: Lab, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctxbudget", "produce", *args],
        env=lab.env(),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _requests() -> dict[str, bytes]:
    return {
        orjson.loads(line)["request_id"]: line
        for line in EXAMPLES.read_bytes().splitlines()
        if line.strip()
    }


def test_produced_batches_come_back_as_packs(lab: Lab, tmp_path: Path) -> None:
    """Every example line on the candidates topic, keyed by request id, packed by a worker."""
    lab.start("fused", log_dir=tmp_path)
    proc = _produce(lab, str(EXAMPLES), "--brokers", lab.broker.bootstrap, "--verbose")
    assert proc.returncode == 0, proc.stderr
    wanted = _requests()
    summary = proc.stderr.strip().splitlines()[-1]
    assert summary.startswith(f"produce: {len(wanted)} lines, {len(wanted)} sent to ")
    assert lab.topics.candidates in summary and "0 refused, 0 not acknowledged" in summary

    consumer = lab.consumer(lab.topics.candidates)
    records = {msg.key.decode(): msg.value for msg in consumer}
    consumer.close()
    assert records == wanted  # keys are the request ids, values the lines unchanged

    got, dead = _collect(lab, lab.topics.packs, set(wanted), timeout_s=120)
    pipeline = Pipeline.from_store(PolicyStore.load(REPO / "policies"), "default@1")
    assert set(got) == set(wanted) and not dead
    for rid, raw in wanted.items():
        assert got[rid][0] == encode(pipeline.run(decode_batch(raw)).pack)


def test_bad_lines_are_refused_with_line_numbers_and_not_sent(lab: Lab, tmp_path: Path) -> None:
    """Bad lines are dead letters naming their line numbers; only the two good ones are sent."""
    lines = EXAMPLES.read_bytes().splitlines()[:2]
    bad = tmp_path / "mixed.jsonl"
    bad.write_bytes(
        b"\n".join(
            [
                lines[0],
                b'{"not": "a batch"}',
                b"{oops",
                lines[0].replace(b'"tenant_id":"acme"', b'"tenant_id":"evil"', 1),
                lines[1],
            ]
        )
        + b"\n"
    )
    dead = tmp_path / "refused.jsonl"
    proc = _produce(
        lab, str(bad), "--brokers", lab.broker.bootstrap, "--dead-letter", str(dead), "--rate", "50"
    )
    assert proc.returncode == 1, proc.stderr
    for n in (2, 3, 4):
        assert f"line {n}: " in proc.stderr
    assert "2 sent to" in proc.stderr and "3 refused" in proc.stderr
    letters = [orjson.loads(x) for x in dead.read_bytes().splitlines()]
    assert [(d["line"], d["stage"]) for d in letters] == [
        (2, "produce"),
        (3, "produce"),
        (4, "produce"),
    ]
    consumer = lab.consumer(lab.topics.candidates)
    keys = sorted(msg.key.decode() for msg in consumer)
    consumer.close()
    assert keys == sorted(orjson.loads(x)["request_id"] for x in lines[:2])


def test_a_missing_topic_or_broker_is_a_usage_error(lab: Lab) -> None:
    """A missing topic or an unreachable broker is one error line, exit 2, naming which."""
    proc = _produce(
        lab, str(EXAMPLES), "--brokers", lab.broker.bootstrap, "--topic", "no.such.topic"
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"Error: topic no.such.topic does not exist on {lab.broker.bootstrap}: "
        "create it with `ctxbudget topics apply`"
    ]
    proc = _produce(lab, str(EXAMPLES), "--brokers", "127.0.0.1:1", "--timeout", "2")
    assert proc.returncode == 2
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("Error: cannot reach the broker at 127.0.0.1:1: ")


def test_label_sends_label_records_keyed_by_request_id(lab: Lab, tmp_path: Path) -> None:
    """`ctxbudget label` turns labelled batches into Label v1 records on the labels topic, sends
    Label lines as they are, and refuses a batch without labels by its line number."""
    rows = [orjson.loads(line) for line in EXAMPLES.read_bytes().splitlines()[:2]]
    first = {**rows[0], "labels": {"relevant_chunk_ids": [rows[0]["candidates"][0]["chunk_id"]]}}
    given = {
        "schema": "ctx.label.v1",
        "request_id": "req-label-2",
        "relevant_chunk_ids": ["c-9"],
        "source": "replay",
    }
    unlabelled = {k: v for k, v in rows[1].items() if k != "labels"}
    path = tmp_path / "labels.jsonl"
    path.write_bytes(b"\n".join(orjson.dumps(r) for r in (first, given, unlabelled)) + b"\n")
    proc = subprocess.run(
        [sys.executable, "-m", "ctxbudget", "label", str(path), "--brokers", lab.broker.bootstrap],
        env=lab.env(),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr  # the unlabelled batch is refused
    assert "line 3: ValueError: the batch carries no labels" in proc.stderr
    consumer = lab.consumer(lab.topics.labels)
    records = {msg.key.decode(): orjson.loads(msg.value) for msg in consumer}
    consumer.close()
    assert records[first["request_id"]] == {
        "schema": "ctx.label.v1",
        "request_id": first["request_id"],
        "relevant_chunk_ids": first["labels"]["relevant_chunk_ids"],
        "source": "analyst",
    }
    assert records["req-label-2"] == given
    assert len(records) == 2
