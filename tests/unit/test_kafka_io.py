"""Reading a topic without a broker (ctxbudget.kafka.io): read_topic's offset and time window,
a missing topic, and assign_all waiting for metadata."""

from __future__ import annotations

import pytest

from tests.unit.kafka_fakes import FakeConsumer, Rec, poll_result

# -- reading a topic ----------------------------------------------------------------------------


def _rec(partition: int, offset: int, ts_s: int) -> Rec:
    return Rec("t", partition, offset, b"k", f"{partition}:{offset}".encode(), ts_s * 1000)


def test_read_topic_filters_by_offset_and_time_and_closes() -> None:
    """read_topic seeks each partition, keeps records in the offset and time window, closes."""
    pytest.importorskip("kafka")
    from ctxbudget.kafka.io import read_topic

    consumer = FakeConsumer(
        [
            poll_result(_rec(1, 5, 100), _rec(0, 5, 100), _rec(0, 6, 200)),
            poll_result(_rec(0, 7, 300), _rec(1, 9, 300)),
        ]
    )
    got = list(read_topic(consumer, "t", from_offset=5, to_offset=8, since=150, until=300))
    assert [r.where for r in got] == ["t[0]@6", "t[0]@7"]
    assert got[0].timestamp == 200_000 and got[0].value == b"0:6"
    assert sorted(consumer.seeks) == [(0, 5), (1, 5)]
    assert consumer.closed == 1


def test_read_topic_of_a_missing_topic() -> None:
    """read_topic of a topic without partitions raises TopicNotFoundError and closes."""
    pytest.importorskip("kafka")
    from ctxbudget.kafka.io import TopicNotFoundError, read_topic

    consumer = FakeConsumer([], partitions=set())
    with pytest.raises(TopicNotFoundError, match="topic t does not exist"):
        list(read_topic(consumer, "t"))
    assert consumer.closed == 1


def test_assign_all_asks_again_while_metadata_reaches_no_node() -> None:
    """A look-up that reaches no node answers "no partitions": with wait_s it is repeated."""
    pytest.importorskip("kafka")
    from ctxbudget.kafka.io import assign_all

    answers: list[set[int]] = [set(), set(), {0, 1}]

    class Flaky(FakeConsumer):
        def partitions_for_topic(self, topic: str) -> set[int]:
            return answers.pop(0) if answers else {0, 1}

    consumer = Flaky([])
    tps = assign_all(consumer, ["t"], wait_s=10.0)
    assert [(tp.topic, tp.partition) for tp in tps] == [("t", 0), ("t", 1)]
    assert sorted(consumer.seeks) == [(0, None), (1, None)]


def test_assign_all_names_the_topics_still_missing_after_wait_s() -> None:
    """Without wait_s a missing topic is skipped; with it the missing topic is named."""
    pytest.importorskip("kafka")
    from ctxbudget.kafka.io import assign_all

    consumer = FakeConsumer([], partitions=set())
    assert assign_all(consumer, ["t"]) == []
    with pytest.raises(TimeoutError, match=r"no partitions for \['t'\]"):
        assign_all(consumer, ["t"], wait_s=0.6)
