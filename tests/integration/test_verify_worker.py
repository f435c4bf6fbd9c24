"""The verify worker on the embedded broker: answers joined with packs and traces, answers
that come before their pack, poison and orphan answers, and a kill -9 half-way through:
every answer gets its verdict, equal to the in-process one, duplicates byte-identical."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import orjson
import pytest

from ctxbudget.codec import encode
from ctxbudget.kafka.topic_admin import apply_topics
from ctxbudget.kafka.topics import TopicSpec
from ctxbudget.pipeline import Pipeline
from ctxbudget.policy import PolicyStore
from ctxbudget.schemas import Pack
from ctxbudget.testing.traffic import synthetic
from ctxbudget.verification import Answer, AnswerVerifier, facts_from_traces
from tests.integration.lab import Lab
from tests.paths import REPO

pytestmark = [pytest.mark.broker, pytest.mark.slow]

PIPE = Pipeline.from_store(PolicyStore.load(REPO / "policies"), "default@1")


def _answer(pack: Pack, n: int) -> Answer:
    """A cited answer: one sentence of the first passage, and one with a changed number."""
    if not pack.evidence:
        return Answer(request_id=pack.request_id, text="The evidence does not say.")
    e = pack.evidence[0]
    first = e.text.split(". ")[0].rstrip(".")
    text = f"{first} [{e.evidence_id}]. It happened in {1000 + n} [{e.evidence_id}]."
    return Answer(request_id=pack.request_id, text=text)


def _verify_topics(lab: Lab) -> tuple[str, str]:
    answers, verdicts = f"ctx.answers.v1.{lab.suffix}", f"ctx.verdicts.v1.{lab.suffix}"
    specs = [
        TopicSpec(name=n, description="test", partitions=4, replication_factor=1, config={})
        for n in (answers, verdicts)
    ]
    apply_topics(lab.broker.bootstrap, specs)
    lab.env_overrides.update(
        CTXBUDGET_VERIFY_ANSWERS_TOPIC=answers,
        CTXBUDGET_VERIFY_VERDICTS_TOPIC=verdicts,
        CTXBUDGET_VERIFY_WINDOW_S="8",
    )
    return answers, verdicts


def test_every_answer_gets_one_verdict_through_a_kill_9(lab: Lab, tmp_path: Path) -> None:
    """120 answers (40 before their packs), a poison answer and one without a pack; the first
    worker is killed with SIGKILL mid-stream and a second takes over."""
    answers_topic, verdicts_topic = _verify_topics(lab)
    results = [PIPE.run(g.batch) for g in synthetic(120, seed=21)]
    answers = {r.pack.request_id: _answer(r.pack, i) for i, r in enumerate(results)}
    verifier = AnswerVerifier()
    expected = {
        r.pack.request_id: encode(
            verifier.run(answers[r.pack.request_id], r.pack, facts=facts_from_traces(r.traces))
        )
        for r in results
    }
    producer = lab.producer()

    def send_answers(rs: list[object]) -> None:
        for r in rs:
            rid = r.pack.request_id  # type: ignore[attr-defined]
            producer.send(answers_topic, key=rid.encode(), value=encode(answers[rid]))

    def send_packs(rs: list[object]) -> None:
        for r in rs:
            pack, traces = r.pack, r.traces  # type: ignore[attr-defined]
            producer.send(lab.topics.packs, key=pack.request_id.encode(), value=encode(pack))
            for t in traces:
                producer.send(lab.topics.audit, key=pack.request_id.encode(), value=encode(t))

    send_answers(results[:40])  # these answers come before their packs
    producer.send(answers_topic, key=b"poison", value=b'{"schema": "ctx.answer.v1"')
    orphan = Answer(request_id="orphan", text="Keys expire after 90 days [abc].")
    producer.send(answers_topic, key=b"orphan", value=encode(orphan))
    producer.flush()
    first = lab.start("verify", log_dir=tmp_path)
    time.sleep(4)
    send_packs(results)
    send_answers(results[40:80])
    producer.flush()
    got: dict[str, list[bytes]] = {}
    dead: list[dict[str, object]] = []
    consumer = lab.consumer(verdicts_topic, lab.topics.deadletter)

    def drain(until: float, want: int) -> None:
        while time.monotonic() < until and len(got) < want:
            for msg in consumer:
                if msg.topic == lab.topics.deadletter:
                    dead.append(orjson.loads(msg.value))
                else:
                    got.setdefault(msg.key.decode(), []).append(msg.value)

    drain(time.monotonic() + 90, 20)
    first.send_signal(signal.SIGKILL)
    first.wait(10)
    send_answers(results[80:])
    producer.flush()
    producer.close()
    lab.start("verify", log_dir=tmp_path)
    drain(time.monotonic() + 150, len(expected))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(dead) < 2:
        drain(time.monotonic() + 2, len(expected) + 1)
    consumer.close()
    assert set(got) == set(expected)
    for rid, values in got.items():
        assert all(v == expected[rid] for v in values), rid
    reasons = {str(d.get("request_id")): str(d["error"]) for d in dead}
    assert "orphan" in reasons and "no pack for request 'orphan'" in reasons["orphan"]
    assert any(d.get("request_id") is None and d["stage"] == "verify" for d in dead)
    audit = lab.consumer(lab.topics.audit)
    events = {
        orjson.loads(m.value)["request_id"] for m in audit if b'"ctx.verdict_event.v1"' in m.value
    }
    audit.close()
    assert set(expected) <= events


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(port: int, path: str) -> tuple[int, str]:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError as e:
        return 0, str(e)


def test_the_verify_worker_serves_metrics_and_readiness(lab: Lab, tmp_path: Path) -> None:
    """With CTXBUDGET_METRICS_PORT the verify worker is ready once its group is joined, and its
    /metrics count the answers settled and the verdicts and dead letters written."""
    answers_topic, verdicts_topic = _verify_topics(lab)
    port = _free_port()
    lab.env_overrides["CTXBUDGET_METRICS_PORT"] = str(port)
    results = [PIPE.run(g.batch) for g in synthetic(5, seed=33)]
    producer = lab.producer()
    for r in results:
        rid = r.pack.request_id.encode()
        producer.send(lab.topics.packs, key=rid, value=encode(r.pack))
        for t in r.traces:
            producer.send(lab.topics.audit, key=rid, value=encode(t))
    producer.flush()
    lab.start("verify", log_dir=tmp_path)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and _get(port, "/readyz")[0] != 200:
        time.sleep(0.5)
    assert _get(port, "/readyz")[0] == 200, _get(port, "/readyz")[1]
    for i, r in enumerate(results):
        answer = _answer(r.pack, i)
        producer.send(answers_topic, key=r.pack.request_id.encode(), value=encode(answer))
    producer.send(answers_topic, key=b"poison", value=b"{not json")
    producer.flush()
    producer.close()

    def count(body: str, series: str) -> float:
        return sum(
            float(line.rsplit(" ", 1)[1]) for line in body.splitlines() if line.startswith(series)
        )

    body = ""
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        body = _get(port, "/metrics")[1]
        if count(body, 'ctxbudget_records_in_total{stage="verify"}') >= 6:
            break
        time.sleep(0.5)
    assert count(body, 'ctxbudget_records_in_total{stage="verify"}') == 6
    verdicts = f'ctxbudget_records_out_total{{stage="verify",topic="{verdicts_topic}"}}'
    assert count(body, verdicts) == 5
    assert count(body, 'ctxbudget_dead_letters_total{error_type="InputError",stage="verify"}') == 1
    assert _get(port, "/healthz")[0] == 200
