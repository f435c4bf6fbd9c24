"""What each worker does with one record, independent of any Kafka client.

A handler takes the raw bytes of one input record and returns the records to produce: the
stage's output, its TraceEvent for the audit topic, or a dead letter. It never raises for
bad input: undecodable bytes, schema violations, a batch over an input limit and unknown
tokenizers become dead letters; so does an unexpected error (with its type), so one poison
record can never crash-loop a worker. Every record it returns fits its topic: an output
over the topic's ``max.message.bytes`` is replaced by a dead letter naming the topic, the
limit and the size, and a dead letter is cut until it fits the dead-letter topic (a record
that cannot even be dead-lettered is skipped, counted and logged). The faust agents in
:mod:`ctxbudget.kafka.app` only move bytes.

Because the handlers call the very stage objects of :class:`ctxbudget.pipeline.Pipeline`,
a pack made on Kafka is byte-identical to one made by ``ctxbudget pack``.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import structlog
from pydantic import BaseModel

from ctxbudget.codec import (
    DEAD_LETTER_EXCERPT_BYTES,
    dead_letter,
    decode,
    encode,
    encode_compact,
)
from ctxbudget.errors import CtxBudgetError, InputError, LimitError
from ctxbudget.kafka.settings import TopicNames
from ctxbudget.limits import DEFAULT_MAX_PAIR_CHECKS, InputLimits
from ctxbudget.pipeline import Pipeline
from ctxbudget.policy import PolicyStore, default_policies_dir
from ctxbudget.rollout import Assignment, ControlState, live_assignment, shadow_assignment
from ctxbudget.schemas import (
    CandidateBatch,
    ConsolidatedBatch,
    Lane,
    Pack,
    PackedBatch,
    PolicyRef,
    RoutedBatch,
    TraceEvent,
)
from ctxbudget.tokens import TokenizerRegistry
from ctxbudget.trace import compress_trace, consolidate_trace, route_trace, select_trace

STAGES = ("route", "consolidate", "select", "compress", "fused", "shadow")

log = structlog.get_logger("ctxbudget.worker")


@dataclass(frozen=True, slots=True)
class Output:
    """One record to produce: its topic, key (the request id in UTF-8; None for a dead
    letter without one) and value."""

    topic: str
    key: bytes | None
    value: bytes


Assign = Callable[[CandidateBatch], Sequence[Assignment]]


@dataclass
class Metrics:
    """Counters a worker keeps (thread-safe); logged and exposed by the worker."""

    counts: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def inc(self, name: str, n: int = 1) -> None:
        """Add ``n`` to counter ``name``."""
        with self.lock:
            self.counts[name] += n

    def snapshot(self) -> dict[str, int]:
        """A copy of the counters, sorted by name."""
        with self.lock:
            return dict(sorted(self.counts.items()))


class Pipelines:
    """One Pipeline per policy name@version, built on first use and shared."""

    def __init__(
        self, root: Path | None = None, *, max_pair_checks: int = DEFAULT_MAX_PAIR_CHECKS
    ) -> None:
        self.store = PolicyStore.load(root or default_policies_dir())
        self.tokenizers = TokenizerRegistry()
        self.max_pair_checks = max_pair_checks
        self._by_ref: dict[str, Pipeline] = {}
        self._lock = threading.Lock()

    def get(self, ref: str | PolicyRef) -> Pipeline:
        """The pipeline of policy ``ref`` (``name@version``), built on first use; a
        :class:`~ctxbudget.errors.ConfigError` for an unknown policy."""
        key = str(ref)
        with self._lock:
            if key not in self._by_ref:
                self._by_ref[key] = Pipeline.from_store(
                    self.store,
                    key,
                    tokenizers=self.tokenizers,
                    max_pair_checks=self.max_pair_checks,
                )
            return self._by_ref[key]


def static_assignment(policy: str) -> Assign:
    """Every request gets ``policy`` in the live lane; replayed requests go to shadow only."""
    return rollout_assignment(lambda: ControlState(baseline=policy), "live")


def rollout_assignment(state: Callable[[], ControlState], lane: Lane) -> Assign:
    """The lanes a worker packs under the current control state.

    A live worker packs the live lane only; a shadow worker packs the shadow lane only, so
    the live path never waits for a shadow pack. A batch marked as replay is never packed
    live: a live worker packs it in the shadow lane with the baseline.
    """

    def assign(batch: CandidateBatch) -> list[Assignment]:
        current = state()
        if batch.replay is not None:
            if lane == "shadow":
                return []
            return [Assignment(lane="shadow", cohort="replay", policy=current.baseline)]
        if lane == "live":
            return [live_assignment(batch, current)]
        other = shadow_assignment(batch, current)
        return [] if other is None else [other]

    return assign


def _key(request_id: str) -> bytes:
    return request_id.encode("utf-8")


def record_skipped(
    handler: Handler, why: str, source: str, offset: int | None, **fields: object
) -> None:
    """Count and log a record that could be neither processed nor dead-lettered (the
    ``skipped`` counter feeds ``ctxbudget_records_skipped_total``)."""
    handler.metrics.inc("skipped")
    log.error(f"RECORD SKIPPED: {why}", stage=handler.stage, source=source, offset=offset, **fields)


def record_size(out: Output) -> int:
    """What ``out`` weighs in a produce request, as a topic's max.message.bytes counts it."""
    return len(out.value) + len(out.key or b"") + RECORD_OVERHEAD


#: What a record adds to its key and value in a produce request (see ctxbudget.kafka.limits).
RECORD_OVERHEAD = 128


@dataclass(frozen=True)
class Context:
    """What every handler of a worker shares.

    ``limits`` are the input limits, the largest input record among them (the decoders check
    each record against them before parsing). ``topic_limits`` maps a topic name
    to the largest record it takes (key + value + RECORD_OVERHEAD); a topic not in it is
    not checked.
    """

    pipelines: Pipelines
    topics: TopicNames
    metrics: Metrics
    assign: Assign
    write_intermediate: bool = False
    compact_intermediate: bool = True
    limits: InputLimits = field(default_factory=InputLimits)
    topic_limits: Mapping[str, int] = field(default_factory=dict)


class Handler:
    """Base: decode, run, encode; every failure becomes a dead letter."""

    stage: str = ""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.pipelines = ctx.pipelines
        self.topics = ctx.topics
        self.metrics = ctx.metrics
        self.limits = ctx.limits

    def handle(
        self, raw: bytes | None, *, source: str = "", offset: int | None = None
    ) -> list[Output]:
        """The records to produce for one input record (never raises for bad input)."""
        if raw is None:
            raw = b""
        try:
            outputs = self.run(raw)
        except LimitError as e:
            self.metrics.inc(f"limit.{e.limit}")
            return self.dead(raw, e, source, offset)
        except InputError as e:
            return self.dead(raw, e, source, offset)
        except CtxBudgetError as e:  # configuration trouble met at run time: keep the input
            return self.dead(raw, e, source, offset)
        except Exception as e:  # a bug must not crash-loop the worker: keep the input
            self.metrics.inc("errors")
            return self.dead(raw, e, source, offset)
        too_large = self._too_large(outputs)
        if too_large is not None:
            self.metrics.inc("limit.output_bytes")
            return self.dead(raw, too_large, source, offset)
        self.metrics.inc(f"{self.stage}.ok")
        return outputs

    def run(self, raw: bytes) -> list[Output]:
        """The records made from one input's bytes; raises on bad input (:meth:`handle` turns any
        error into a dead letter). Each stage's handler implements it."""
        raise NotImplementedError

    def fits(self, out: Output) -> bool:
        """Whether ``out`` is within its topic's record limit."""
        limit = self.ctx.topic_limits.get(out.topic)
        return limit is None or record_size(out) <= limit

    def _too_large(self, outputs: Sequence[Output]) -> LimitError | None:
        for out in outputs:
            if not self.fits(out):
                limit = self.ctx.topic_limits[out.topic]
                size = record_size(out)
                return LimitError(
                    f"output to {out.topic}: a record of {size:,} bytes is over the topic's "
                    f"limit of {limit:,} bytes (max.message.bytes); nothing of this input "
                    "was produced",
                    limit=f"max.message.bytes of {out.topic}",
                    size=size,
                    allowed=limit,
                )
        return None

    def dead(
        self, raw: bytes, error: BaseException, source: str, offset: int | None
    ) -> list[Output]:
        """The dead letter for ``raw``, its excerpt cut until it fits the dead-letter topic;
        nothing (the record is skipped, counted and logged) when not even that fits."""
        excerpt = DEAD_LETTER_EXCERPT_BYTES
        while True:
            dl = dead_letter(
                raw, error, stage=self.stage, source=source, offset=offset, excerpt_bytes=excerpt
            )
            key = _key(dl.request_id) if dl.request_id else None
            out = Output(self.topics.deadletter, key, encode(dl))
            if self.fits(out):
                self.metrics.inc("dead_letters")
                return [out]
            if excerpt == 0:
                break
            excerpt = min(excerpt // 2, max(0, len(raw) // 2))
        record_skipped(
            self,
            "not even its dead letter fits the dead-letter topic",
            source,
            offset,
            error=f"{type(error).__name__}: {str(error)[:300]}",
            dead_letter_bytes=record_size(out),
            limit=self.ctx.topic_limits.get(out.topic),
        )
        return []

    def _emit(self, topic: str, model: BaseModel, request_id: str) -> Output:
        # intermediate batches travel compact unless configured otherwise (derivable item
        # fields left out); every other model encodes exactly as ``encode`` does
        write = encode_compact if self.ctx.compact_intermediate else encode
        return Output(topic, _key(request_id), write(model))

    def _trace(self, trace: TraceEvent) -> Output:
        return self._emit(self.topics.audit, trace, trace.request_id)

    def pack_output(self, pack: Pack) -> Output:
        """Live packs go to the packs topic; shadow and replayed packs never do."""
        live = pack.lane == "live" and pack.replay is None
        return self._emit(self.topics.packs if live else self.topics.shadow, pack, pack.request_id)


def _ms(t0: float) -> float:
    return (time.perf_counter() - t0) * 1000


class RouteHandler(Handler):
    """Stage 1 on Kafka: a CandidateBatch in; per lane assigned, a RoutedBatch and its trace out."""

    stage = "route"

    def run(self, raw: bytes) -> list[Output]:
        """The RoutedBatch and the route trace of each lane the batch is assigned."""
        batch = decode(raw, CandidateBatch, limits=self.limits)
        out: list[Output] = []
        for a in self.ctx.assign(batch):
            t0 = time.perf_counter()
            routed = self.pipelines.get(a.policy).router.run(batch, lane=a.lane, cohort=a.cohort)
            latency = _ms(t0)
            out.append(self._emit(self.topics.routed, routed, routed.request_id))
            out.append(self._trace(route_trace(routed, latency)))
        return out


class ConsolidateHandler(Handler):
    """Stage 2 on Kafka: a RoutedBatch in, a ConsolidatedBatch and its trace out."""

    stage = "consolidate"

    def run(self, raw: bytes) -> list[Output]:
        """The ConsolidatedBatch, under the routed batch's policy, and the consolidate trace."""
        routed = decode(raw, RoutedBatch, limits=self.limits)
        t0 = time.perf_counter()
        consolidated = self.pipelines.get(routed.policy).consolidator.run(routed)
        latency = _ms(t0)
        return [
            self._emit(self.topics.consolidated, consolidated, consolidated.request_id),
            self._trace(consolidate_trace(consolidated, latency)),
        ]


class SelectHandler(Handler):
    """Stage 3 on Kafka: a ConsolidatedBatch in, a PackedBatch and its trace out."""

    stage = "select"

    def run(self, raw: bytes) -> list[Output]:
        """The PackedBatch, under the batch's policy, and the select trace."""
        consolidated = decode(raw, ConsolidatedBatch, limits=self.limits)
        t0 = time.perf_counter()
        packed = self.pipelines.get(consolidated.routed.policy).selector.run(consolidated)
        latency = _ms(t0)
        return [
            self._emit(self.topics.packed, packed, packed.request_id),
            self._trace(select_trace(packed, latency)),
        ]


class CompressHandler(Handler):
    """Stage 4 on Kafka: a PackedBatch in, the Pack and its trace out."""

    stage = "compress"

    def run(self, raw: bytes) -> list[Output]:
        """The Pack (to the packs topic, or to shadow for a shadow or replayed
        pack) and the compress trace."""
        packed = decode(raw, PackedBatch, limits=self.limits)
        t0 = time.perf_counter()
        compressed = self.pipelines.get(packed.consolidated.routed.policy).compressor.run(packed)
        latency = _ms(t0)
        return [
            self.pack_output(compressed.pack),
            self._trace(compress_trace(compressed, packed, latency)),
        ]


class FusedHandler(Handler):
    """All four stages in one hop; the intermediate topics only when asked."""

    stage = "fused"

    def run(self, raw: bytes) -> list[Output]:
        """For each lane the batch is assigned: the intermediate batches when
        ``write_intermediate`` is set, then the Pack and the four traces."""
        batch = decode(raw, CandidateBatch, limits=self.limits)
        out: list[Output] = []
        for a in self.ctx.assign(batch):
            pipe = self.pipelines.get(a.policy)
            result = pipe.run(batch, lane=a.lane, cohort=a.cohort, clock=time.perf_counter)
            if self.ctx.write_intermediate:
                out.append(self._emit(self.topics.routed, result.routed, batch.request_id))
                out.append(
                    self._emit(self.topics.consolidated, result.consolidated, batch.request_id)
                )
                out.append(self._emit(self.topics.packed, result.packed, batch.request_id))
            out.append(self.pack_output(result.pack))
            out.extend(self._trace(t) for t in result.traces)
        return out


HANDLERS: dict[str, type[Handler]] = {
    "route": RouteHandler,
    "consolidate": ConsolidateHandler,
    "select": SelectHandler,
    "compress": CompressHandler,
    "fused": FusedHandler,
    "shadow": FusedHandler,
}


def build_handler(stage: str, ctx: Context) -> Handler:
    """The handler of ``stage``, one of :data:`STAGES` (``shadow`` is the fused handler under its
    own name); a ValueError for any other."""
    if stage not in HANDLERS:
        raise ValueError(f"unknown stage {stage!r}; expected one of {', '.join(STAGES)}")
    handler = HANDLERS[stage](ctx)
    handler.stage = stage
    return handler


def input_topic(stage: str, topics: TopicNames) -> str:
    """The topic ``stage`` (one of :data:`STAGES`) consumes."""
    return {
        "route": topics.candidates,
        "consolidate": topics.routed,
        "select": topics.consolidated,
        "compress": topics.packed,
        "fused": topics.candidates,
        "shadow": topics.candidates,
    }[stage]
