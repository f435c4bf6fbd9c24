"""Producing the outputs of a unit of work, and what a refusal by the broker leads to.

A worker acks an input only once every record made from it is on the broker. What happens
when the producer fails depends on what failed:

- **The broker refuses a record** (too large for the topic, corrupt, a bad timestamp: the
  errors in :data:`REFUSED`): sending it again, or after a restart, would be refused the
  same way, so exiting would only stop the partition for good (the record comes back after
  every restart). The records of the input whose output was refused are sent again on
  their own (a refusal fails the broker's whole batch, which may hold other inputs'
  records); those that are refused again are replaced by their bounded dead letter, and an
  input whose dead letter is refused too is skipped: counted (``skipped``) and logged, and
  its offset acked. The worker goes on.
- **Anything else** (the broker unreachable or timing out, no leader, not authorized, an
  error of unknown kind) is raised: the caller exits without acking, and the inputs are
  redelivered after the restart or to the worker that takes the partitions over, which is
  what a retry of a broker outage needs.

Outputs are checked against the topics' limits before they are sent
(:meth:`ctxbudget.kafka.handlers.Handler.handle`), so a refusal here means the topic's real limit
is lower than its spec says, or the broker refused for another reason of the record's own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from typing import Any, Protocol

import structlog

from ctxbudget.errors import KafkaEdgeError
from ctxbudget.kafka.handlers import Handler, Output, record_skipped

log = structlog.get_logger("ctxbudget.worker")

#: Broker and client errors that refuse one record for what it is (aiokafka and kafka-python
#: class names): resending cannot succeed.
REFUSED = frozenset(
    {
        "MessageSizeTooLargeError",
        "RecordListTooLargeError",
        "RecordTooLargeError",
        "CorruptRecordException",
        "CorruptRecordError",
        "InvalidTimestampError",
        "UnsupportedForMessageFormatError",
        "InvalidRecordError",
    }
)


class Producer(Protocol):
    """What faust's producer offers: ``send`` schedules a record, its result is the ack."""

    async def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        partition: int | None,
        timestamp: float | None,
        headers: Any,
    ) -> Awaitable[Any]:
        """Schedule one record; the awaitable returned resolves once the broker
        acks it, or raises its refusal."""
        ...


class OutputRefused(KafkaEdgeError):
    """The broker refused an output of this record (what its dead letter says)."""


def refuses_record(error: BaseException) -> bool:
    """Whether ``error`` (or what it wraps: faust's ProducerSendError) refuses the record
    itself rather than saying the broker cannot take records now."""
    seen: BaseException | None = error
    for _ in range(8):
        if seen is None:
            return False
        if any(cls.__name__ in REFUSED for cls in type(seen).__mro__):
            return True
        seen = seen.__cause__
    return False


def handle_safely(
    handler: Handler, raw: bytes | None, *, source: str, offset: int | None
) -> list[Output]:
    """``handler.handle``, which never raises for bad input; should it raise all the same (a
    bug in making a dead letter), the input is dead-lettered without its bytes, or skipped
    (counted and logged) when even that fails: never a crash loop."""
    try:
        return handler.handle(raw, source=source, offset=offset)
    except Exception as e:
        handler.metrics.inc("errors")
        try:
            return handler.dead(b"", e, source, offset)
        except Exception as again:
            record_skipped(
                handler,
                "it could not be handled nor dead-lettered",
                source,
                offset,
                error=f"{type(e).__name__}: {str(e)[:300]}",
                dead_letter_error=f"{type(again).__name__}: {str(again)[:300]}",
            )
            return []


async def deliver(
    producer: Producer, results: Sequence[Sequence[Output]]
) -> dict[int, BaseException]:
    """Send every output and wait for every ack; return the inputs (by index) whose output
    was refused, with the first refusal. Any other failure is raised."""
    pending: list[tuple[int, Awaitable[Any]]] = []
    refused: dict[int, BaseException] = {}
    for i, outputs in enumerate(results):
        for o in outputs:
            try:
                pending.append((i, await producer.send(o.topic, o.key, o.value, None, None, None)))
            except Exception as e:
                if not refuses_record(e):
                    raise
                refused.setdefault(i, e)
    acks = await asyncio.gather(*(ack for _, ack in pending), return_exceptions=True)
    for (i, _), ack in zip(pending, acks, strict=True):
        if isinstance(ack, BaseException):
            if not isinstance(ack, Exception) or not refuses_record(ack):
                raise ack
            refused.setdefault(i, ack)
    return refused


async def _send_each(producer: Producer, outputs: Sequence[Output]) -> BaseException | None:
    """Send ``outputs`` one at a time; the first refusal, or None when all went through."""
    for o in outputs:
        try:
            await (await producer.send(o.topic, o.key, o.value, None, None, None))
        except Exception as e:
            if not refuses_record(e):
                raise
            return e
    return None


async def deliver_alone(
    producer: Producer,
    handler: Handler,
    *,
    raw: bytes | None,
    source: str,
    offset: int | None,
    outputs: Sequence[Output],
    first: BaseException,
) -> str:
    """Deliver one input's outputs after a refusal: ``"delivered"`` (alone they went
    through), ``"dead_lettered"`` or ``"skipped"``. Only unavailability is raised."""
    refusal = await _send_each(producer, outputs)
    if refusal is None:
        return "delivered"
    handler.metrics.inc("refused_by_broker")
    error = OutputRefused(
        f"the broker refused an output of this record: {type(refusal).__name__}: "
        f"{str(refusal)[:500]} (first refusal: {type(first).__name__})"
    )
    letters = handler.dead(raw or b"", error, source, offset)
    if letters and await _send_each(producer, letters) is None:
        return "dead_lettered"
    if letters:  # the dead letter was refused too (dead() counted it as a dead letter)
        record_skipped(
            handler,
            "the broker refused its outputs and its dead letter",
            source,
            offset,
            error=str(error)[:300],
        )
    return "skipped"
