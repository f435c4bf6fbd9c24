"""The four stages composed in-process: what `ctxbudget pack`, the tests and benchmarks run.

The Kafka workers run the very same stage objects one hop at a time, so a pack is
byte-identical whichever way it was made.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ctxbudget.extractive import SentenceAnalysis
from ctxbudget.limits import DEFAULT_MAX_PAIR_CHECKS
from ctxbudget.memo import BoundedMemo
from ctxbudget.policy import Policy, PolicyStore, RoutingRules
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
from ctxbudget.stages.compress import PackCompressor
from ctxbudget.stages.consolidate import Consolidator
from ctxbudget.stages.route import QueryRouter
from ctxbudget.stages.select import EvidenceSelector
from ctxbudget.text import ShingleCache
from ctxbudget.tokens import TokenizerRegistry
from ctxbudget.trace import (
    CompressResult,
    compress_trace,
    consolidate_trace,
    route_trace,
    select_trace,
)

if TYPE_CHECKING:  # annotations only: importing the filters loads the conformal package
    from ctxbudget.filters import EvidenceFilter

Clock = Callable[[], float]


@dataclass(frozen=True, slots=True)
class PipelineResult:
    """Everything one run made: each stage's output, the Pack, the four traces, and how long
    each stage took (milliseconds, from the caller's clock; zeros without one)."""

    routed: RoutedBatch
    consolidated: ConsolidatedBatch
    packed: PackedBatch
    compressed: CompressResult
    traces: tuple[TraceEvent, ...]
    stage_ms: tuple[float, float, float, float]

    @property
    def pack(self) -> Pack:
        """The Pack (``compressed.pack``)."""
        return self.compressed.pack

    @property
    def finished(self) -> CompressResult:
        """Deprecated name of :attr:`compressed` (the compress stage's result)."""
        warnings.warn(
            "PipelineResult.finished is deprecated: use PipelineResult.compressed",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.compressed


class Pipeline:
    """Router → consolidator → selector → compressor, for one policy."""

    def __init__(
        self,
        *,
        policy: Policy,
        rules: RoutingRules,
        tokenizers: TokenizerRegistry,
        evidence_filter: EvidenceFilter | None = None,
        max_pair_checks: int = DEFAULT_MAX_PAIR_CHECKS,
    ) -> None:
        self.policy = policy
        self.router = QueryRouter(policy=policy, rules=rules, tokenizers=tokenizers)
        shingles = ShingleCache()
        self.consolidator = Consolidator(
            policy=policy, max_pair_checks=max_pair_checks, shingles=shingles
        )
        analyses: BoundedMemo[str, SentenceAnalysis] = BoundedMemo()
        self.selector = EvidenceSelector(
            policy=policy, evidence_filter=evidence_filter, analyses=analyses, shingles=shingles
        )
        self.compressor = PackCompressor(policy=policy, tokenizers=tokenizers, analyses=analyses)

    @classmethod
    def from_store(
        cls,
        store: PolicyStore,
        ref: str | PolicyRef,
        *,
        tokenizers: TokenizerRegistry | None = None,
        max_pair_checks: int = DEFAULT_MAX_PAIR_CHECKS,
    ) -> Pipeline:
        """The pipeline of policy ``ref`` (``name@version``) in ``store``, with the evidence
        filter its calibration file gives. :class:`~ctxbudget.errors.ConfigError` for an unknown
        policy, :class:`~ctxbudget.conformal.CalibrationError` for a calibration that is
        missing, invalid or does not fit."""
        from ctxbudget.filters import filter_for

        policy, rules = store.get(ref)
        return cls(
            policy=policy,
            rules=rules,
            tokenizers=tokenizers or TokenizerRegistry(),
            evidence_filter=filter_for(policy, store.root),
            max_pair_checks=max_pair_checks,
        )

    def run(
        self,
        batch: CandidateBatch,
        *,
        lane: Lane = "live",
        cohort: str = "baseline",
        clock: Clock | None = None,
    ) -> PipelineResult:
        """Pack one batch. ``clock`` (seconds) only feeds the traces' latency figures."""
        tick = clock or (lambda: 0.0)
        t0 = tick()
        routed = self.router.run(batch, lane=lane, cohort=cohort)
        t1 = tick()
        consolidated = self.consolidator.run(routed)
        t2 = tick()
        packed = self.selector.run(consolidated)
        t3 = tick()
        compressed = self.compressor.run(packed)
        t4 = tick()
        ms = ((t1 - t0) * 1000, (t2 - t1) * 1000, (t3 - t2) * 1000, (t4 - t3) * 1000)
        traces = (
            route_trace(routed, ms[0]),
            consolidate_trace(consolidated, ms[1]),
            select_trace(packed, ms[2]),
            compress_trace(compressed, packed, ms[3]),
        )
        return PipelineResult(
            routed=routed,
            consolidated=consolidated,
            packed=packed,
            compressed=compressed,
            traces=traces,
            stage_ms=ms,
        )
