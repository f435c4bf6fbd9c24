"""The conformal evidence filter: a threshold per query class, and its coverage statement."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, NamedTuple

from ctxbudget.conformal._common import POOLED, CalibrationError
from ctxbudget.conformal.calibration_file import CalibrationFile
from ctxbudget.conformal.quantile import alpha_key, min_calibration_size
from ctxbudget.conformal.scorers import NonconformityScorer, bind_scorer, scorer_from_name
from ctxbudget.schemas import Candidate, CandidateBatch, Coverage, Query

# ---------------------------------------------------------------- the filter


class ThresholdChoice(NamedTuple):
    """The threshold that applies to one query class (``math.inf`` when not finite)."""

    threshold: float
    n: int
    bin: str
    finite: bool


@dataclass(frozen=True, slots=True)
class Decision:
    """Why one candidate was kept or not."""

    chunk_id: str
    kept: bool
    score: float | None
    threshold: float
    reason: Literal["within_threshold", "above_threshold", "unscored"]


@dataclass(frozen=True, slots=True)
class FilterOutcome:
    """The filter's verdict on one batch; ids in candidate order."""

    kept: tuple[str, ...]
    dropped: tuple[str, ...]
    unscored: tuple[str, ...]
    decisions: tuple[Decision, ...]
    coverage: Coverage


class ConformalFilter:
    """Keeps a candidate when its non-conformity score is at most the calibrated threshold.

    Built from a calibration file, one alpha and the scorer the file was calibrated with
    (``None`` or ``"auto"`` means "the file's scorer"; another scorer is a CalibrationError).
    A candidate without a score is kept and counted in ``n_unscored_kept``.
    """

    def __init__(
        self,
        calibration: CalibrationFile,
        *,
        alpha: float,
        scorer: NonconformityScorer | str | None = None,
    ) -> None:
        key = calibration.key_for(alpha)
        if scorer is None or scorer == "auto":
            scorer = scorer_from_name(calibration.scorer)
        elif isinstance(scorer, str):
            scorer = scorer_from_name(scorer)
        if scorer.name != calibration.scorer:
            raise CalibrationError(
                f"calibration {calibration.name}@{calibration.version} was made with scorer "
                f"{calibration.scorer!r}; its thresholds do not apply to scorer {scorer.name!r}"
            )
        self._calibration = calibration
        self._alpha = next(a for a in calibration.alphas if alpha_key(a) == key)
        self._scorer: NonconformityScorer = scorer
        self._pooled = calibration.pooled[key]
        self._by_class = {cls: entries[key] for cls, entries in calibration.by_class.items()}
        #: Candidates kept by ``keep`` because the scorer gave them no score (running count).
        self.n_unscored_kept = 0

    @property
    def alpha(self) -> float:
        """The alpha the filter holds, as the calibration file states it."""
        return self._alpha

    @property
    def scorer(self) -> NonconformityScorer:
        """The scorer of the thresholds (bound to one batch in a filter from :meth:`for_batch`)."""
        return self._scorer

    @property
    def calibration(self) -> CalibrationFile:
        """The calibration file the thresholds come from."""
        return self._calibration

    def for_batch(self, batch: CandidateBatch) -> ConformalFilter:
        """A filter whose scorer is bound to this batch (needed by the embedding scorer)."""
        bound = ConformalFilter.__new__(ConformalFilter)
        bound._calibration = self._calibration
        bound._alpha = self._alpha
        bound._scorer = bind_scorer(self._scorer, batch)
        bound._pooled = self._pooled
        bound._by_class = self._by_class
        bound.n_unscored_kept = 0
        return bound

    def threshold_for(self, query_class: str | None) -> ThresholdChoice:
        """The threshold for a class: its Mondrian bin when calibrated, else the pooled one."""
        entry = self._by_class.get(query_class) if query_class is not None else None
        if entry is not None:
            thr = entry.threshold if entry.threshold is not None else math.inf
            return ThresholdChoice(thr, entry.n, entry.bin, entry.finite)
        p = self._pooled
        return ThresholdChoice(
            p.threshold if p.threshold is not None else math.inf, p.n, POOLED, p.finite
        )

    def decide(self, query: Query, candidate: Candidate, query_class: str | None) -> Decision:
        """The decision for one candidate, without touching any counter."""
        choice = self.threshold_for(query_class)
        s = self._scorer.score(query, candidate)
        if s is None:
            return Decision(candidate.chunk_id, True, None, choice.threshold, "unscored")
        kept = s <= choice.threshold
        reason: Literal["within_threshold", "above_threshold"] = (
            "within_threshold" if kept else "above_threshold"
        )
        return Decision(candidate.chunk_id, kept, s, choice.threshold, reason)

    def keep(self, query: Query, candidate: Candidate, query_class: str | None) -> bool:
        """True when the candidate stays; an unscored candidate stays and is counted."""
        d = self.decide(query, candidate, query_class)
        if d.reason == "unscored":
            self.n_unscored_kept += 1
        return d.kept

    def coverage(self, query_class: str | None) -> Coverage:
        """The coverage statement for a pack; ``guaranteed`` only with a finite threshold."""
        choice = self.threshold_for(query_class)
        reasons: list[str] = []
        if not choice.finite:
            reasons.append(
                f"no finite threshold: {choice.n} relevant calibration passages < "
                f"{min_calibration_size(self._alpha)} needed at alpha={self._alpha}; "
                "every candidate kept"
            )
        if query_class is not None and self._by_class and choice.bin == POOLED:
            info = self._calibration.class_info.get(query_class)
            why = info.reason if info is not None and info.reason else "class not calibrated"
            reasons.append(f"class {query_class!r} uses the pooled threshold ({why})")
        return Coverage(
            alpha=self._alpha,
            threshold=choice.threshold if choice.finite else None,
            n_calibration=choice.n,
            bin=choice.bin,
            guaranteed=choice.finite,
            reason="; ".join(reasons) or None,
        )

    def apply(self, batch: CandidateBatch, query_class: str | None) -> FilterOutcome:
        """Decide every candidate of a batch (binding the scorer to it first)."""
        bound = self.for_batch(batch)
        decisions = tuple(bound.decide(batch.query, c, query_class) for c in batch.candidates)
        return FilterOutcome(
            kept=tuple(d.chunk_id for d in decisions if d.kept),
            dropped=tuple(d.chunk_id for d in decisions if not d.kept),
            unscored=tuple(d.chunk_id for d in decisions if d.reason == "unscored"),
            decisions=decisions,
            coverage=self.coverage(query_class),
        )
