"""The verify worker's join: each answer meets its pack (and the pack's traces), in memory.

Packs and trace events are followed from their topics into two bounded tables keyed by
(request_id, lane), validated when they arrive and kept as their record bytes (a decoded pack
and its four traces take about four times the memory of their JSON), decoded again when an
answer needs them; answers wait in arrival order, per partition, until their pack and its
four stage traces are in the tables, then get their verdict (the diagnosis comes from the
traces: the route event holds the labels and the candidates, each stage its drops). An answer
still waiting after ``window_s`` goes to the dead letters naming what did not arrive. A record
that is not an Answer goes to the dead letters at once.

The commit point of a partition is the offset of its oldest waiting answer (or the one after
the last answer resolved): a worker that dies loses nothing, and a redelivered answer gets
the same verdict, byte for byte. No Kafka and no clock here: the caller passes the time.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field

from ctxbudget.codec import dead_letter, decode, encode
from ctxbudget.errors import InputError
from ctxbudget.kafka.handlers import Output
from ctxbudget.labels import label_of_verdict
from ctxbudget.schemas import Lane, Pack, TraceEvent
from ctxbudget.verification import Answer, AnswerVerifier, facts_from_traces
from ctxbudget.verification.models import VerdictEvent

STAGE = "verify"
STAGES_TRACED = frozenset({"route", "consolidate", "select", "compress"})
Key = tuple[str, Lane]


class NoPackError(InputError):
    """An answer whose pack (or the pack's traces) did not arrive within the window."""


@dataclass(frozen=True, slots=True)
class JoinTopics:
    """Where the join's outputs go."""

    answers: str
    verdicts: str
    audit: str
    deadletter: str
    #: Where ``verify`` labels of live answers go (supported citations); None: none written.
    labels: str | None = None


@dataclass(slots=True)
class _Waiting:
    raw: bytes
    since: float
    answer: Answer | None


@dataclass
class VerifyJoin:
    """Answers joined with packs and traces; outputs per resolved answer."""

    topics: JoinTopics
    window_s: float = 60.0
    packs_kept: int = 100_000
    #: Whether the four stage traces must be there too (they give the diagnosis).
    with_traces: bool = True
    verifier: AnswerVerifier = field(default_factory=AnswerVerifier)
    #: Valid Pack records, as their bytes.
    _packs: OrderedDict[Key, bytes] = field(default_factory=OrderedDict)
    #: Valid TraceEvent records per stage, as their bytes.
    _traces: OrderedDict[Key, dict[str, bytes]] = field(default_factory=OrderedDict)
    _waiting: dict[int, OrderedDict[int, _Waiting]] = field(default_factory=dict)
    _next: dict[int, int] = field(default_factory=dict)

    # ------------------------------------------------------------ the tables

    def add_pack(self, raw: bytes) -> None:
        """Remember a pack (an undecodable record is ignored: it is not this stage's input)."""
        try:
            pack = decode(raw, Pack)
        except InputError:
            return
        key = (pack.request_id, pack.lane)
        self._packs[key] = raw
        self._packs.move_to_end(key)
        while len(self._packs) > self.packs_kept:
            self._packs.popitem(last=False)

    def add_trace(self, raw: bytes) -> None:
        """Remember a stage trace event (other audit records are ignored)."""
        if b'"ctx.trace_event.v1"' not in raw:
            return
        try:
            event = decode(raw, TraceEvent)
        except InputError:
            return
        key = (event.request_id, event.lane)
        events = self._traces.setdefault(key, {})
        events[event.stage] = raw
        self._traces.move_to_end(key)
        while len(self._traces) > self.packs_kept:
            self._traces.popitem(last=False)

    # ------------------------------------------------------------ answers

    def add_answer(self, raw: bytes, *, partition: int, offset: int, now: float) -> None:
        """Queue an answer record (resolved by :meth:`resolve`)."""
        try:
            answer: Answer | None = decode(raw, Answer)
        except InputError:
            answer = None
        queue = self._waiting.setdefault(partition, OrderedDict())
        if offset not in queue:
            queue[offset] = _Waiting(raw, now, answer)

    def _ready(self, answer: Answer) -> tuple[Pack, list[TraceEvent]] | None:
        key = (answer.request_id, answer.lane)
        pack = self._packs.get(key)
        if pack is None:
            return None
        events = self._traces.get(key, {})
        if self.with_traces and set(events) != STAGES_TRACED:
            return None
        # both were valid when they arrived: decoding them again cannot fail
        return decode(pack, Pack), [decode(e, TraceEvent) for e in events.values()]

    def _outputs(self, w: _Waiting, offset: int, now: float) -> list[Output] | None:
        answer = w.answer
        if answer is None:
            try:
                decode(w.raw, Answer)
            except InputError as e:
                return [self._dead(w.raw, e, offset)]
            return None  # cannot happen: it failed once
        ready = self._ready(answer)
        if ready is None:
            if now - w.since < self.window_s:
                return None
            what = "pack" if (answer.request_id, answer.lane) not in self._packs else "traces"
            error = NoPackError(
                f"no {what} for request {answer.request_id!r} in lane {answer.lane} "
                f"within {self.window_s:g} s"
            )
            return [self._dead(w.raw, error, offset)]
        pack, events = ready
        facts = facts_from_traces(events) if events else None
        verdict = self.verifier.run(answer, pack, facts=facts)
        key = answer.request_id.encode()
        outputs = [
            Output(self.topics.verdicts, key, encode(verdict)),
            Output(self.topics.audit, key, encode(VerdictEvent.of(verdict))),
        ]
        # live answers only: one label per request, whatever the shadow lane answered
        if self.topics.labels is not None and answer.lane == "live":
            label = label_of_verdict(verdict, pack)
            if label is not None:
                outputs.append(Output(self.topics.labels, key, encode(label)))
        return outputs

    def _dead(self, raw: bytes, error: Exception, offset: int) -> Output:
        letter = dead_letter(raw, error, stage=STAGE, source=self.topics.answers, offset=offset)
        key = letter.request_id.encode() if letter.request_id else None
        return Output(self.topics.deadletter, key, encode(letter))

    def resolve(self, now: float) -> Iterator[tuple[int, int, list[Output]]]:
        """(partition, offset, outputs) of every waiting answer that can be settled now: its
        verdict, or its dead letter. The answers are settled in any order; the commit
        point (:meth:`commit_points`) never passes one still waiting."""
        for partition, queue in self._waiting.items():
            for offset in list(queue):
                outputs = self._outputs(queue[offset], offset, now)
                if outputs is not None:
                    del queue[offset]
                    self._next[partition] = max(self._next.get(partition, 0), offset + 1)
                    yield partition, offset, outputs

    def commit_points(self) -> dict[int, int]:
        """Per partition, the offset up to which every answer is settled."""
        points = {}
        for partition, done in self._next.items():
            queue = self._waiting.get(partition)
            points[partition] = min(queue) if queue else done
        return points

    def forget(self, partitions: set[int]) -> None:
        """Drop the waiting answers of partitions taken away (they come back uncommitted)."""
        for p in partitions:
            self._waiting.pop(p, None)
            self._next.pop(p, None)

    @property
    def waiting(self) -> int:
        """How many answers wait for their pack."""
        return sum(len(q) for q in self._waiting.values())
