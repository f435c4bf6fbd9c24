"""The verify worker's join without Kafka: an answer waits for its pack and traces, gets its
verdict once they arrive, goes to the dead letters after the window naming what is missing,
and the commit point never passes an answer still waiting."""

from __future__ import annotations

import orjson

from ctxbudget.codec import encode
from ctxbudget.kafka.verify_join import JoinTopics, VerifyJoin
from ctxbudget.pipeline import Pipeline
from ctxbudget.schemas import Labels
from ctxbudget.testing import batch, candidate

TOPICS = JoinTopics(answers="a", verdicts="v", audit="audit", deadletter="dl")
TEXT = "API keys for the Acme gateway expire after 90 days and can be rotated."


def _made(pipeline: Pipeline, rid: str) -> tuple[bytes, list[bytes], str]:
    b = batch([candidate("keys", TEXT, 9.0)], query="when do keys expire?", request_id=rid)
    b = b.model_copy(update={"labels": Labels(relevant_chunk_ids=("keys", "gone"))})
    result = pipeline.run(b)
    return (
        encode(result.pack),
        [encode(t) for t in result.traces],
        result.pack.evidence[0].evidence_id,
    )


def _answer(rid: str, eid: str) -> bytes:
    return orjson.dumps(
        {
            "schema": "ctx.answer.v1",
            "request_id": rid,
            "text": f"Keys expire after 90 days [{eid}].",
        }
    )


def test_an_answer_waits_for_its_pack_and_traces_then_gets_its_verdict(pipeline: Pipeline) -> None:
    """Before the pack: nothing settled, nothing committed; after pack and traces: verdict and
    audit record, with the diagnosis from the traces, and the commit point moves on."""
    pack, traces, eid = _made(pipeline, "r1")
    join = VerifyJoin(topics=TOPICS, window_s=10)
    join.add_answer(_answer("r1", eid), partition=0, offset=5, now=0.0)
    assert list(join.resolve(1.0)) == [] and join.commit_points() == {}
    join.add_pack(pack)
    assert list(join.resolve(2.0)) == []  # the traces are not there yet
    for t in traces:
        join.add_trace(t)
    settled = list(join.resolve(3.0))
    assert [(p, o, [x.topic for x in out]) for p, o, out in settled] == [(0, 5, ["v", "audit"])]
    verdict = orjson.loads(settled[0][2][0].value)
    assert [c["status"] for c in verdict["claims"]] == ["supported"]
    assert [e["outcome"] for e in verdict["expected"]] == ["used", "retrieval_miss"]
    event = orjson.loads(settled[0][2][1].value)
    assert event["schema"] == "ctx.verdict_event.v1" and "text" not in event["claims"][0]
    assert join.commit_points() == {0: 6}


def test_an_answer_without_a_pack_goes_to_the_dead_letters_after_the_window() -> None:
    """The dead letter names the request, the lane and the window; a later answer of the
    same partition cannot be committed past an earlier one that waits."""
    join = VerifyJoin(topics=TOPICS, window_s=10, with_traces=False)
    join.add_answer(_answer("lost", "x"), partition=1, offset=0, now=0.0)
    join.add_answer(b"{not json", partition=1, offset=1, now=0.0)
    settled = list(join.resolve(1.0))
    assert [(o, out[0].topic) for _, o, out in settled] == [(1, "dl")]
    assert join.commit_points() == {1: 0}
    settled = list(join.resolve(11.0))
    letter = orjson.loads(settled[0][2][0].value)
    assert letter["stage"] == "verify" and letter["request_id"] == "lost"
    assert "no pack for request 'lost' in lane live within 10 s" in letter["error"]
    assert join.commit_points() == {1: 2}


def test_a_redelivered_answer_gets_byte_identical_outputs(pipeline: Pipeline) -> None:
    """Two joins (a worker and the one after its crash) write the same bytes."""
    pack, traces, eid = _made(pipeline, "r2")
    outs = []
    for _ in range(2):
        join = VerifyJoin(topics=TOPICS)
        join.add_pack(pack)
        for t in traces:
            join.add_trace(t)
        join.add_answer(_answer("r2", eid), partition=0, offset=0, now=0.0)
        outs.append([(o.topic, o.key, o.value) for _, _, out in join.resolve(0.0) for o in out])
    assert outs[0] == outs[1] and outs[0]


def test_the_pack_table_is_bounded_and_forgets_the_oldest(pipeline: Pipeline) -> None:
    """With room for one pack, the first is forgotten when the second arrives."""
    join = VerifyJoin(topics=TOPICS, packs_kept=1, with_traces=False, window_s=1)
    first, _, eid = _made(pipeline, "p1")
    second, _, _ = _made(pipeline, "p2")
    join.add_pack(first)
    join.add_pack(second)
    join.add_answer(_answer("p1", eid), partition=0, offset=0, now=0.0)
    assert list(join.resolve(0.5)) == []
    assert orjson.loads(next(iter(join.resolve(2.0)))[2][0].value)["stage"] == "verify"


def test_with_a_labels_topic_a_supported_citation_becomes_a_verify_label(
    pipeline: Pipeline,
) -> None:
    """The cited chunk (not the labelled one the pack lacks) is the label, source verify;
    an answer citing nothing it supports writes no label."""
    pack, traces, eid = _made(pipeline, "r3")
    join = VerifyJoin(topics=JoinTopics("a", "v", "audit", "dl", labels="lab"))
    join.add_pack(pack)
    for t in traces:
        join.add_trace(t)
    join.add_answer(_answer("r3", eid), partition=0, offset=0, now=0.0)
    unsupported = orjson.dumps(
        {
            "schema": "ctx.answer.v1",
            "request_id": "r3",
            "text": f"Keys expire after 7 days [{eid}].",
        }
    )
    join.add_answer(unsupported, partition=0, offset=1, now=0.0)
    settled = list(join.resolve(0.0))
    assert [[o.topic for o in out] for _, _, out in settled] == [
        ["v", "audit", "lab"],
        ["v", "audit"],
    ]
    label = orjson.loads(settled[0][2][2].value)
    assert label == {
        "schema": "ctx.label.v1",
        "request_id": "r3",
        "relevant_chunk_ids": ["keys"],
        "source": "verify",
    }


def test_an_invalid_pack_record_leaves_the_valid_one_in_place(pipeline: Pipeline) -> None:
    """Records are validated on arrival: a broken record for the same request and lane does
    not displace its valid pack, and the verdict equals the one of a join that never saw it."""
    pack, traces, eid = _made(pipeline, "r3")
    broken = orjson.dumps({**orjson.loads(pack), "evidence": "not a list"})
    outs = []
    for extra in ([], [broken]):
        join = VerifyJoin(topics=TOPICS)
        join.add_pack(pack)
        for raw in extra:
            join.add_pack(raw)
            join.add_trace(b'{"schema": "ctx.trace_event.v1", "broken": true}')
        for t in traces:
            join.add_trace(t)
        join.add_answer(_answer("r3", eid), partition=0, offset=0, now=0.0)
        outs.append([(o.topic, o.value) for _, _, out in join.resolve(0.0) for o in out])
    assert [topic for topic, _ in outs[1]] == ["v", "audit"]
    assert outs[0] == outs[1]
