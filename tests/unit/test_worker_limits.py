"""A worker's record path under hostile input, without a broker: limits, output sizes,
refusals by the broker, skipped records and scratch folders."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import orjson
import pytest

from ctxbudget.kafka import scratch
from ctxbudget.kafka.delivery import deliver, deliver_alone, handle_safely, refuses_record
from ctxbudget.kafka.handlers import (
    Context,
    Metrics,
    Output,
    Pipelines,
    build_handler,
    record_size,
    static_assignment,
)
from ctxbudget.kafka.limits import KAFKA_DEFAULT_MAX_MESSAGE_BYTES, load_specs, topic_limits
from ctxbudget.kafka.settings import TopicNames, WorkerSettings
from ctxbudget.kafka.topics import TopicSpec
from ctxbudget.limit_settings import LimitSettings
from ctxbudget.limits import InputLimits
from tests.paths import REPO

TOPICS = TopicNames()
EXAMPLE = (REPO / "examples" / "batches.jsonl").read_bytes().splitlines()[0]


@pytest.fixture(scope="module")
def pipelines() -> Pipelines:
    return Pipelines(REPO / "policies")


def _ctx(pipelines: Pipelines, **kw: Any) -> Context:
    return Context(
        pipelines=pipelines,
        topics=TOPICS,
        metrics=Metrics(),
        assign=static_assignment("default@1"),
        **kw,
    )


def _dead(out: Output) -> dict[str, Any]:
    assert out.topic == TOPICS.deadletter
    value: dict[str, Any] = orjson.loads(out.value)
    return value


# ---------------------------------------------------------------- handlers


def test_a_batch_over_an_input_limit_is_a_dead_letter_naming_it(pipelines: Pipelines) -> None:
    """Refused at the door, keyed by its request id, counted by limit."""
    ctx = _ctx(pipelines, limits=InputLimits(max_candidates=2))
    for stage in ("route", "fused"):
        (out,) = build_handler(stage, ctx).handle(EXAMPLE, source="in", offset=3)
        dl = _dead(out)
        assert dl["error_type"] == "LimitError" and "(max_candidates)" in dl["error"]
        assert out.key == b"req-0001"
    assert ctx.metrics.snapshot()["limit.max_candidates"] == 2


def test_an_output_over_its_topic_limit_becomes_a_dead_letter(pipelines: Pipelines) -> None:
    """The routed batch is larger than its topic takes: nothing else is produced."""
    ctx = _ctx(pipelines, topic_limits={TOPICS.routed: 2000, TOPICS.deadletter: 1 << 20})
    outs = build_handler("route", ctx).handle(EXAMPLE, source="in")
    (out,) = outs
    dl = _dead(out)
    assert dl["error_type"] == "LimitError"
    assert f"output to {TOPICS.routed}" in dl["error"] and "max.message.bytes" in dl["error"]
    assert "2,000 bytes" in dl["error"] and dl["raw"].encode() == EXAMPLE
    assert out.key == b"req-0001"
    assert ctx.metrics.snapshot()["limit.output_bytes"] == 1


def test_outputs_within_their_limits_are_untouched(pipelines: Pipelines) -> None:
    """The shipped limits leave the examples' outputs as they were."""
    tops = topic_limits(WorkerSettings(), LimitSettings(), load_specs(WorkerSettings()))
    plain = build_handler("fused", _ctx(pipelines)).handle(EXAMPLE)
    held = build_handler("fused", _ctx(pipelines, topic_limits=tops)).handle(EXAMPLE)
    assert [o.topic for o in plain] == [o.topic for o in held]
    assert [o.value for o in plain if o.topic != TOPICS.audit] == [
        o.value for o in held if o.topic != TOPICS.audit
    ]  # traces differ in their latency only
    assert all(record_size(o) <= tops[o.topic] for o in held)


def test_a_dead_letter_is_cut_to_fit_the_dead_letter_topic(pipelines: Pipelines) -> None:
    """The excerpt shrinks; the sha256 and size still describe the whole input."""
    raw = b'{"request_id": "r-9", "junk": "' + b"x" * 20_000 + b'"}'
    ctx = _ctx(pipelines, topic_limits={TOPICS.deadletter: 3000})
    (out,) = build_handler("route", ctx).handle(raw)
    dl = _dead(out)
    assert record_size(out) <= 3000
    assert 0 < len(dl["raw"]) < len(raw) and dl["original_bytes"] == len(raw)
    assert out.key == b"r-9"


def test_a_record_that_cannot_even_be_dead_lettered_is_skipped_and_counted(
    pipelines: Pipelines,
) -> None:
    """A dead-letter topic too small for any dead letter: nothing produced, never a crash."""
    ctx = _ctx(pipelines, topic_limits={TOPICS.deadletter: 200})
    assert build_handler("route", ctx).handle(b"{nope") == []
    assert ctx.metrics.snapshot()["skipped"] == 1


def test_a_handler_that_raises_is_dead_lettered_without_its_bytes(pipelines: Pipelines) -> None:
    """A bug in making a dead letter still ends in one (or a counted skip)."""
    handler = build_handler("route", _ctx(pipelines))

    def broken(*args: Any, **kw: Any) -> list[Output]:
        raise RuntimeError("bug")

    handler.handle = broken  # type: ignore[method-assign]
    (out,) = handle_safely(handler, EXAMPLE, source="in", offset=1)
    assert _dead(out)["error"] == "bug" and _dead(out)["original_bytes"] == 0
    handler.dead = broken  # type: ignore[method-assign]
    assert handle_safely(handler, EXAMPLE, source="in", offset=1) == []
    assert handler.metrics.snapshot()["skipped"] == 1


# ---------------------------------------------------------------- the broker refuses


class MessageSizeTooLargeError(Exception):
    """Named as aiokafka's: the broker refuses the record."""


class KafkaConnectionError(Exception):
    """Named as aiokafka's: the broker cannot be reached."""


class ProducerSendError(Exception):
    """faust's wrapper of a send error."""


class FakeProducer:
    """Acks everything but the topics in ``refuse``. Records sent before the acks are awaited
    travel in one broker batch: with ``batch_fails``, a refusal fails all of them."""

    def __init__(self, refuse: set[str], *, batch_fails: bool = False, down: bool = False):
        self.refuse, self.batch_fails, self.down = refuse, batch_fails, down
        self.sent: list[Output] = []
        self.pending: list[tuple[Output, asyncio.Future[None]]] = []

    async def send(
        self, topic: str, key: bytes | None, value: bytes | None, *args: Any
    ) -> Awaitable[None]:
        if self.down:
            raise ProducerSendError("send failed") from KafkaConnectionError("no broker")
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        if not self.pending:
            loop.call_soon(self._flush)
        self.pending.append((Output(topic, key, value or b""), fut))
        return fut

    def _flush(self) -> None:
        batch, self.pending = self.pending, []
        failed = self.batch_fails and any(o.topic in self.refuse for o, _ in batch)
        for out, fut in batch:
            if failed or out.topic in self.refuse:
                fut.set_exception(MessageSizeTooLargeError("[Error 10] too large"))
            else:
                fut.set_result(None)
                self.sent.append(out)


def _results(pipelines: Pipelines) -> tuple[Any, list[list[Output]]]:
    handler = build_handler("route", _ctx(pipelines))
    lines = (REPO / "examples" / "batches.jsonl").read_bytes().splitlines()[:3]
    return handler, [handler.handle(raw) for raw in lines]


def test_refusals_are_told_from_unavailability() -> None:
    """By the error's class, through faust's wrapper."""
    assert refuses_record(MessageSizeTooLargeError())
    wrapped = ProducerSendError("x")
    wrapped.__cause__ = MessageSizeTooLargeError()
    assert refuses_record(wrapped)
    assert not refuses_record(KafkaConnectionError())
    assert not refuses_record(RuntimeError("unknown"))


def test_a_refused_record_is_dead_lettered_and_the_others_go_through(
    pipelines: Pipelines,
) -> None:
    """One input's refused output: its dead letter instead; innocent inputs whose records
    failed in the same broker batch are sent again on their own."""
    handler, results = _results(pipelines)
    poisoned = [*results[:2], [Output("ctx.tiny", b"k", b"v"), *results[2]]]

    async def run() -> tuple[dict[int, BaseException], list[str]]:
        producer = FakeProducer({"ctx.tiny"}, batch_fails=True)
        refused = await deliver(producer, poisoned)
        fates = []
        for i, first in sorted(refused.items()):
            producer.batch_fails = False
            fates.append(
                await deliver_alone(
                    producer,
                    handler,
                    raw=b"{}",
                    source="s",
                    offset=i,
                    outputs=poisoned[i],
                    first=first,
                )
            )
        return refused, fates

    refused, fates = asyncio.run(run())
    assert sorted(refused) == [0, 1, 2]  # the whole batch failed
    assert fates == ["delivered", "delivered", "dead_lettered"]
    assert handler.metrics.snapshot()["refused_by_broker"] == 1


def test_a_record_whose_dead_letter_is_refused_too_is_skipped(pipelines: Pipelines) -> None:
    """Nothing of it can be written: skipped, counted, logged; never an exit."""
    handler, results = _results(pipelines)

    async def run() -> str:
        producer = FakeProducer({TOPICS.routed, TOPICS.deadletter})
        refused = await deliver(producer, results[:1])
        return await deliver_alone(
            producer, handler, raw=b"{}", source="s", offset=0, outputs=results[0], first=refused[0]
        )

    assert asyncio.run(run()) == "skipped"
    assert handler.metrics.snapshot()["skipped"] == 1


def test_an_unreachable_broker_is_raised_so_the_worker_exits_unacked(
    pipelines: Pipelines,
) -> None:
    """Retrying after a restart is right for an outage: the error reaches the caller."""
    _, results = _results(pipelines)
    with pytest.raises(ProducerSendError):
        asyncio.run(deliver(FakeProducer(set(), down=True), results))


# ---------------------------------------------------------------- limits from the specs


def _spec(name: str, limit: int | None) -> TopicSpec:
    config = {} if limit is None else {"max.message.bytes": str(limit)}
    return TopicSpec(name=name, description="t", partitions=1, replication_factor=1, config=config)


def test_topic_limits_follow_the_role_of_a_renamed_topic() -> None:
    """ctx.routed.v1's spec applies to the routed topic whatever its name; no spec means
    Kafka's default; nothing is over the producer's request limit."""
    settings = WorkerSettings(topics=TopicNames(routed="my.routed"))
    limits = LimitSettings(max_message_bytes=1 << 20)
    specs = [_spec("ctx.routed.v1", 5000), _spec("ctx.packs.v1", 1 << 30)]
    tops = topic_limits(settings, limits, specs)
    assert tops["my.routed"] == 5000
    assert tops[TOPICS.packs] == (1 << 20) + 65536
    assert tops[TOPICS.audit] == KAFKA_DEFAULT_MAX_MESSAGE_BYTES
    held = limits.input_limits(cap=tops["my.routed"])
    assert held.max_message_bytes == 5000


def test_the_shipped_specs_state_every_limit_and_the_input_limit_is_the_smaller() -> None:
    """The candidates topic (4 MiB) caps CTXBUDGET_MAX_MESSAGE_BYTES (8 MiB)."""
    settings, limits = WorkerSettings(), LimitSettings()
    tops = topic_limits(settings, limits, load_specs(settings))
    held = limits.input_limits(cap=tops[TOPICS.candidates])
    assert held.max_message_bytes == 4 * 1024 * 1024
    assert tops[TOPICS.routed] >= 2 * held.max_message_bytes  # a stage output embeds its input


# ---------------------------------------------------------------- scratch folders


def test_scratch_folders_of_dead_owners_are_swept(tmp_path: Path) -> None:
    """A killed worker's folder goes at the next start; live and unowned ones stay."""
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from ctxbudget.kafka import scratch; import sys; "
            f"print(scratch.make('fused', __import__('pathlib').Path({str(tmp_path)!r}))[0])",
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    out, _ = child.communicate(timeout=60)
    dead = Path(out.strip())
    assert dead.is_dir()  # its owner exited without removing it (as a SIGKILL would)
    unowned = tmp_path / f"{scratch.PREFIX}other-x"
    unowned.mkdir()
    mine, removed = scratch.make("route", tmp_path)
    assert removed == [dead] and not dead.exists()
    assert mine.is_dir() and unowned.is_dir()
    assert (mine / scratch.OWNER_FILE).read_text().startswith(f"{os.getpid()} ")
    assert scratch.sweep(tmp_path) == []
