"""Watching the coverage guarantee on labelled live traffic, and recalibrating when it drifts.

The conformal filter keeps at least ``1 - alpha`` of relevant passages only while live traffic is
exchangeable with the calibration set. :class:`CoverageMonitor` reads labelled requests in the
order a label stream delivers them and keeps three things:

* **Coverage**: for each relevant passage that was a scored candidate, whether the threshold in
  force kept it; per query class and pooled, over fixed windows of labelled requests, with a
  Wilson interval. The coverage alert fires when the 95% lower bound over the last
  ``alert_passages`` relevant passages falls below ``1 - alpha - tolerance`` (checked at each
  window's end, once that many have been seen: over fewer, the interval is wider than the
  tolerance and the alert would fire on chance alone).
* **A drift test** that needs no window: each relevant passage's conformal p-value against the
  calibration scores, ``p = (1 + #{calibration scores >= s}) / (n + 1)``, is super-uniform while
  the traffic is exchangeable with calibration, and small when relevant passages score worse
  than they did. A mixture of linear betting functions ``1 + k * (1 - 2p)`` (each a decreasing
  density on [0, 1]) turns each p-value into an e-value whose expectation is at most 1 under
  exchangeability. (Power functions ``eps * p**(eps - 1)`` put most of their mass on p-values
  below ``1 / (n + 1)``, which a calibration of a few hundred passages cannot produce: on WikiQA
  they grew about half as fast on a rescaled retriever.) The e-values of one
  request are averaged (an average of e-values is an e-value whatever their dependence, so
  several relevant passages of one question are not counted as independent evidence), and the
  Shiryaev-Roberts statistic ``R_t = (1 + R_{t-1}) * e_t`` declares drift when it reaches
  ``alarm_level``. Under exchangeability ``E[R_t] <= t``, so the mean time to a false alarm is
  at least ``alarm_level`` labelled requests (Pollak 1987; the conformal-martingale view is
  Vovk's). One correction makes that hold for the calibration a worker actually has: the
  p-values of one fixed calibration sample are uniform only on average over samples, and the
  Shiryaev-Roberts sum grows geometrically on even a slight bias (seen on synthetic traffic: a
  false alarm within 300 requests for one calibration draw in five). Each p-value is therefore
  raised by the Dvoretzky-Kiefer-Wolfowitz margin ``sqrt(ln(2 / eta) / (2 n))``: with
  probability ``1 - eta`` over the calibration sample, the raised p-values are super-uniform for
  that very sample. A calibration file without stored scores (made before they were stored)
  falls back to betting on misses alone (``1 + lam * (miss - alpha)``): valid, slower to fire.
* **Recalibration** (``adaptive=True``): after an alarm, the relevant passages of the requests
  since the estimated change point (where the CUSUM of log e-values last stood at zero) start a
  new calibration set. While it holds fewer than ``recalibration_size`` scores the threshold is
  its conformal quantile (online conformal on the post-change requests), or every candidate is
  kept when it is too small for a finite one; once full it is frozen, monitoring starts again
  against it, and the state is recorded as a recalibration. Pooled only: a class-wise
  recalibration would need that many passages per class.

**Adaptive conformal inference** (``aci_gamma > 0``, Gibbs & Candes 2021) is the other way to
hold coverage: the alpha the threshold is taken at moves after every labelled request,
``alpha_t+1 = alpha_t + gamma * (alpha - miss_t)`` (``miss_t`` the share of its relevant
passages the threshold missed), over the calibration's stored scores. It needs no alarm and
holds long-run coverage whatever the drift, at the price of the thresholds it can reach (a
shift beyond the calibration's scores means keeping everything). Each outcome records its
``alpha_t``.

Selection bias: a label that comes from citations can only name passages the filter kept, so
coverage measured on such labels is 1 by construction. Feed the monitor analyst labels, or
labels of an exploration cohort packed without the filter (``label_source`` says which), and
read a figure from citation labels as an upper bound.

Pure: no clock, no I/O; every ordering is the input order.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from ctxbudget.conformal._common import POOLED
from ctxbudget.conformal.calibration_file import CalibrationFile
from ctxbudget.conformal.filter import ConformalFilter
from ctxbudget.conformal.quantile import conformal_threshold, min_calibration_size
from ctxbudget.conformal.scorers import bind_scorer
from ctxbudget.schemas import CandidateBatch

__all__ = [
    "BETTING_SLOPES",
    "CoverageMonitor",
    "LabelJoin",
    "MonitorConfig",
    "MonitorReport",
    "RequestOutcome",
    "ScoredRequest",
    "WindowCoverage",
    "betting_e_value",
    "conformal_p_value",
    "dkw_margin",
    "wilson_interval",
]

#: The slopes of the linear betting functions, mixed with equal weight: steep ones grow fast on a
#: clear shift, the gentle one loses little on traffic that only looks shifted for a while.
BETTING_SLOPES: tuple[float, ...] = (0.5, 0.75, 0.95)
#: The bets on a miss when no calibration scores are stored (fractions of the largest safe bet).
_MISS_BETS: tuple[float, ...] = (0.25, 0.5, 0.75, 0.95)
#: z for a two-sided 95% Wilson interval.
_Z95 = 1.959963984540054


def conformal_p_value(sorted_scores: Sequence[float], score: float, margin: float = 0.0) -> float:
    """``(1 + #{calibration scores >= score}) / (n + 1)``, plus ``margin`` (at most 1): small
    when ``score`` is unusually bad."""
    n = len(sorted_scores)
    at_least = n - bisect.bisect_left(sorted_scores, score)
    return min(1.0, (1 + at_least) / (n + 1) + margin)


def dkw_margin(n: int, eta: float) -> float:
    """``sqrt(ln(2 / eta) / (2 n))``: how far an empirical CDF of n draws may sit from the true
    one, except with probability ``eta`` (Dvoretzky-Kiefer-Wolfowitz, Massart's constant)."""
    return math.sqrt(math.log(2.0 / eta) / (2.0 * n)) if n else 1.0


def betting_e_value(p: float, slopes: Sequence[float] = BETTING_SLOPES) -> float:
    """The mixture of linear betting functions ``1 + k * (1 - 2p)`` at ``p`` (each a density)."""
    p = min(max(p, 0.0), 1.0)
    return sum(1.0 + k * (1.0 - 2.0 * p) for k in slopes) / len(slopes)


def _miss_e_value(miss: bool, alpha: float) -> float:
    """A bet that misses are more frequent than ``alpha``; expectation <= 1 when they are not."""
    x = 1.0 if miss else 0.0
    top = 1.0 / (1.0 - alpha)
    return sum(1.0 + b * top * (x - alpha) for b in _MISS_BETS) / len(_MISS_BETS)


def _quantile_at(sorted_scores: Sequence[float], alpha: float) -> float:
    """The split-conformal threshold of sorted scores at any real ``alpha``: keep everything at
    or below 0, nothing at or above 1 (what adaptive conformal inference needs of it)."""
    if alpha <= 0.0:
        return math.inf
    if alpha >= 1.0:
        return -math.inf
    n = len(sorted_scores)
    k = math.ceil((n + 1) * (1.0 - alpha))
    return math.inf if k > n else sorted_scores[max(k, 1) - 1]


def wilson_interval(kept: int, n: int, z: float = _Z95) -> tuple[float, float]:
    """The Wilson score interval of a proportion ``kept / n`` (``(0, 1)`` when ``n == 0``)."""
    if n == 0:
        return 0.0, 1.0
    phat = kept / n
    denom = 1 + z * z / n
    centre = (phat + z * z / (2 * n)) / denom
    half = z * math.sqrt(phat * (1 - phat) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True, slots=True)
class MonitorConfig:
    """How the monitor judges coverage and drift."""

    alpha: float
    #: The coverage alert fires when a window's Wilson lower bound is below 1 - alpha - tolerance.
    tolerance: float = 0.03
    #: Labelled requests per coverage window.
    window: int = 50
    #: Shiryaev-Roberts level: the mean time to a false alarm is at least this many requests.
    alarm_level: float = 20_000.0
    #: Recalibrate after an alarm (else only report).
    adaptive: bool = False
    #: Relevant passages a recalibration collects before it is frozen.
    recalibration_size: int = 500
    #: Relevant passages the coverage alert's interval covers.
    alert_passages: int = 2000
    #: Chance that a calibration sample's p-values are not super-uniform after the margin.
    eta: float = 0.01
    #: Adaptive conformal inference step (Gibbs & Candes 2021); 0 keeps alpha fixed.
    aci_gamma: float = 0.0

    def __post_init__(self) -> None:
        if not 0.0 < self.alpha < 1.0:
            raise ValueError(f"alpha must be strictly between 0 and 1, got {self.alpha!r}")
        if not 0.0 <= self.tolerance < 1.0:
            raise ValueError(f"tolerance must be in [0, 1), got {self.tolerance!r}")
        if self.window < 1:
            raise ValueError(f"window must be >= 1, got {self.window!r}")
        if not self.alarm_level > 1.0:
            raise ValueError(f"alarm_level must be > 1, got {self.alarm_level!r}")
        if not 0.0 <= self.aci_gamma < 1.0:
            raise ValueError(f"aci_gamma must be in [0, 1), got {self.aci_gamma!r}")
        if self.aci_gamma and self.adaptive:
            raise ValueError("choose one adaptive mode: recalibration (adaptive) or aci_gamma")
        if self.alert_passages < 1:
            raise ValueError(f"alert_passages must be >= 1, got {self.alert_passages!r}")
        if not 0.0 < self.eta < 1.0:
            raise ValueError(f"eta must be strictly between 0 and 1, got {self.eta!r}")
        if self.recalibration_size < min_calibration_size(self.alpha):
            raise ValueError(
                f"recalibration_size must be >= {min_calibration_size(self.alpha)} at "
                f"alpha={self.alpha}, got {self.recalibration_size!r}"
            )


@dataclass(frozen=True, slots=True)
class ScoredRequest:
    """A request as the monitor keeps it until its label arrives: class and scores only."""

    request_id: str
    query_class: str | None
    scores: tuple[tuple[str, float | None], ...]


@dataclass(frozen=True, slots=True)
class RequestOutcome:
    """What one labelled request told the monitor."""

    index: int
    request_id: str
    query_class: str | None
    n_relevant: int
    n_kept: int
    n_candidates: int
    n_candidates_kept: int
    threshold: float
    #: the alpha the threshold was taken at (moves only with adaptive conformal inference)
    alpha_t: float
    e_value: float
    statistic: float
    alarm: bool


@dataclass(frozen=True, slots=True)
class WindowCoverage:
    """Coverage over one window of labelled requests (``end`` is the last request's index)."""

    end: int
    coverage: float | None
    lower: float
    upper: float
    n_relevant: int
    kept_fraction: float | None

    def as_dict(self) -> dict[str, object]:
        """The JSON form ``ctxbudget monitor`` prints."""
        return {
            "end": self.end,
            "coverage": self.coverage,
            "lower": round(self.lower, 6),
            "upper": round(self.upper, 6),
            "n_relevant": self.n_relevant,
            "kept_fraction": self.kept_fraction,
        }


@dataclass(frozen=True, slots=True)
class MonitorReport:
    """The monitor's summary of a whole stream."""

    n_requests: int
    alarm_at: int | None
    alarms: tuple[int, ...]
    change_point: int | None
    coverage_alert_at: int | None
    recalibrations: tuple[int, ...]
    coverage_by_window: tuple[WindowCoverage, ...]
    coverage_by_class: dict[str, float | None]
    final_coverage: float | None
    final_kept_fraction: float | None
    test: str

    def as_dict(self) -> dict[str, object]:
        """The JSON form ``ctxbudget monitor --json`` prints."""
        return {
            "n_requests": self.n_requests,
            "alarm_at": self.alarm_at,
            "alarms": list(self.alarms),
            "change_point": self.change_point,
            "coverage_alert_at": self.coverage_alert_at,
            "recalibrations": list(self.recalibrations),
            "coverage_by_window": [w.as_dict() for w in self.coverage_by_window],
            "coverage_by_class": dict(sorted(self.coverage_by_class.items())),
            "final_coverage": self.final_coverage,
            "final_kept_fraction": self.final_kept_fraction,
            "test": self.test,
        }


def _ratio(a: int, b: int) -> float | None:
    return round(a / b, 6) if b else None


@dataclass(slots=True)
class _Recalibration:
    """Scores collected since the estimated change point, and the threshold they give."""

    scores: list[float] = field(default_factory=list)
    frozen: bool = False


class CoverageMonitor:
    """Feed labelled requests in stream order with :meth:`observe`; read :meth:`report`."""

    def __init__(
        self,
        calibration: CalibrationFile,
        config: MonitorConfig,
        *,
        classify: Callable[[CandidateBatch], str] | None = None,
    ) -> None:
        self._config = config
        self._filter = ConformalFilter(calibration, alpha=config.alpha)
        self._classify = classify
        self._scores = {k: tuple(sorted(v)) for k, v in calibration.relevant_scores.items()}
        self._test = "conformal_p_values" if self._scores else "misses"
        # drift statistics
        self._sr = 0.0
        self._cusum = 0.0
        self._since_zero = 0  # index of the first request after the CUSUM last stood at zero
        self._alarms: list[int] = []
        self._change_point: int | None = None
        # recalibration
        self._recal: _Recalibration | None = None
        self._recal_scores: tuple[float, ...] | None = None  # frozen recalibrated set
        self._recalibrations: list[int] = []
        self._history: list[tuple[int, list[float]]] = []  # (index, relevant scores), bounded
        # coverage
        self._outcomes: list[RequestOutcome] = []
        self._class_kept: dict[str, list[int]] = {}
        self._alpha_t = config.alpha
        self._coverage_alert_at: int | None = None

    # ------------------------------------------------------------ thresholds

    def _threshold(self, query_class: str | None) -> tuple[float, tuple[float, ...] | None]:
        """The threshold in force for a class and the sorted scores its p-values use."""
        if self._recal is not None and not self._recal.frozen:
            collected = self._recal.scores
            if len(collected) < min_calibration_size(self._config.alpha):
                return math.inf, None
            return conformal_threshold(collected, self._config.alpha).threshold, None
        if self._recal_scores is not None:
            thr = conformal_threshold(self._recal_scores, self._config.alpha).threshold
            return thr, self._recal_scores
        choice = self._filter.threshold_for(query_class)
        scores = self._scores.get(choice.bin) or self._scores.get(POOLED)
        if self._config.aci_gamma and scores:
            return _quantile_at(scores, self._alpha_t), scores
        return choice.threshold, scores

    # ------------------------------------------------------------ observation

    def scores_of(self, batch: CandidateBatch) -> ScoredRequest:
        """What the monitor needs of a batch, taken as it passes (before its label arrives):
        the query class and each candidate's non-conformity score, in candidate order."""
        cls = batch.query.class_hint or (self._classify(batch) if self._classify else None)
        scorer = bind_scorer(self._filter.scorer, batch)
        return ScoredRequest(
            request_id=batch.request_id,
            query_class=cls,
            scores=tuple((c.chunk_id, scorer.score(batch.query, c)) for c in batch.candidates),
        )

    def observe(self, batch: CandidateBatch) -> RequestOutcome | None:
        """Take one labelled request; None (and nothing counted) when it carries no labels."""
        if batch.labels is None:
            return None
        return self.observe_scored(self.scores_of(batch), batch.labels.relevant_chunk_ids)

    def observe_scored(self, request: ScoredRequest, relevant_ids: Iterable[str]) -> RequestOutcome:
        """Take one request's scores (:meth:`scores_of`) with its label's relevant ids."""
        index = len(self._outcomes)
        cls = request.query_class
        threshold, cal_scores = self._threshold(cls)
        relevant = set(relevant_ids)
        rel_scores: list[float] = []
        n_rel = n_kept = n_cand_kept = 0
        for chunk_id, s in request.scores:
            kept = s is None or s <= threshold
            n_cand_kept += kept
            if chunk_id in relevant:
                n_rel += 1
                n_kept += kept
                if s is not None:
                    rel_scores.append(s)
        collecting = self._recal is not None and not self._recal.frozen
        self._history.append((index, rel_scores))
        if len(self._history) > 4 * self._config.recalibration_size:
            del self._history[: len(self._history) - 4 * self._config.recalibration_size]
        if collecting:
            # a new calibration is being collected: nothing to test against until it is full
            e, alarm = 1.0, False
            assert self._recal is not None
            self._recal.scores.extend(rel_scores)
            self._freeze_if_full(index)
        else:
            e = self._e_value(rel_scores, cal_scores, threshold)
            alarm = self._update_statistics(index, e)
        alpha_used = self._alpha_t
        if self._config.aci_gamma and n_rel:
            miss = (n_rel - n_kept) / n_rel
            self._alpha_t += self._config.aci_gamma * (self._config.alpha - miss)
        if n_rel and cls is not None:
            tally = self._class_kept.setdefault(cls, [0, 0])
            tally[0] += n_kept
            tally[1] += n_rel
        out = RequestOutcome(
            index=index,
            request_id=request.request_id,
            query_class=cls,
            n_relevant=n_rel,
            n_kept=n_kept,
            n_candidates=len(request.scores),
            n_candidates_kept=n_cand_kept,
            threshold=threshold,
            alpha_t=alpha_used,
            e_value=e,
            statistic=self._sr,
            alarm=alarm,
        )
        self._outcomes.append(out)
        self._check_coverage_alert()
        return out

    def _e_value(
        self, rel_scores: Sequence[float], cal_scores: tuple[float, ...] | None, threshold: float
    ) -> float:
        """The request's e-value: the mean of its relevant passages' e-values (1 without any)."""
        if not rel_scores:
            return 1.0
        if cal_scores:
            margin = dkw_margin(len(cal_scores), self._config.eta)
            es = [betting_e_value(conformal_p_value(cal_scores, s, margin)) for s in rel_scores]
        else:
            es = [_miss_e_value(s > threshold, self._config.alpha) for s in rel_scores]
        return sum(es) / len(es)

    def _update_statistics(self, index: int, e: float) -> bool:
        self._sr = (1.0 + self._sr) * e
        log_e = math.log(e) if e > 0 else -math.inf
        self._cusum = max(0.0, self._cusum + log_e)
        if self._cusum == 0.0:
            self._since_zero = index + 1
        if self._sr < self._config.alarm_level:
            return False
        self._alarms.append(index)
        if self._change_point is None:
            self._change_point = min(self._since_zero, index)
        start = min(self._since_zero, index)
        self._sr = 0.0
        self._cusum = 0.0
        self._since_zero = index + 1
        if self._config.adaptive:
            self._start_recalibration(start, index)
        return True

    def _start_recalibration(self, start: int, index: int) -> None:
        recal = _Recalibration()
        for i, scores in self._history:
            if i >= start:
                recal.scores.extend(scores)
        self._recal = recal
        self._recal_scores = None
        self._freeze_if_full(index)

    def _freeze_if_full(self, index: int) -> None:
        recal = self._recal
        if recal is None or recal.frozen or len(recal.scores) < self._config.recalibration_size:
            return
        recal.frozen = True
        self._recal_scores = tuple(sorted(recal.scores))
        self._recalibrations.append(index)
        self._sr = 0.0
        self._cusum = 0.0
        self._since_zero = index + 1

    @property
    def recalibrated_scores(self) -> tuple[float, ...] | None:
        """The frozen recalibration set (sorted relevant scores), once there is one."""
        return self._recal_scores

    # ------------------------------------------------------------ coverage

    def recent_coverage(self) -> tuple[int, int]:
        """(kept, relevant) over the last ``alert_passages`` relevant passages (or all so far)."""
        need = self._config.alert_passages
        n = kept = 0
        for o in reversed(self._outcomes):
            if n >= need:
                break
            n += o.n_relevant
            kept += o.n_kept
        return kept, n

    def _check_coverage_alert(self) -> None:
        w = self._config.window
        if self._coverage_alert_at is not None or len(self._outcomes) % w:
            return
        kept, n = self.recent_coverage()
        if n < self._config.alert_passages:
            return
        lower, _ = wilson_interval(kept, n)
        if lower < 1.0 - self._config.alpha - self._config.tolerance:
            self._coverage_alert_at = self._outcomes[-1].index

    @property
    def config(self) -> MonitorConfig:
        """The settings the monitor was built with."""
        return self._config

    @property
    def recalibrations(self) -> tuple[int, ...]:
        """The labelled requests at which a recalibration was frozen, in order."""
        return tuple(self._recalibrations)

    @property
    def statistic(self) -> float:
        """The Shiryaev-Roberts statistic now (drift is declared at ``alarm_level``)."""
        return self._sr

    def windows(self) -> tuple[WindowCoverage, ...]:
        """Coverage per window of ``config.window`` requests (the last one may be shorter)."""
        w = self._config.window
        out: list[WindowCoverage] = []
        for start in range(0, len(self._outcomes), w):
            chunk = self._outcomes[start : start + w]
            n = sum(o.n_relevant for o in chunk)
            kept = sum(o.n_kept for o in chunk)
            cands = sum(o.n_candidates for o in chunk)
            lower, upper = wilson_interval(kept, n)
            out.append(
                WindowCoverage(
                    end=chunk[-1].index,
                    coverage=_ratio(kept, n),
                    lower=lower,
                    upper=upper,
                    n_relevant=n,
                    kept_fraction=_ratio(sum(o.n_candidates_kept for o in chunk), cands),
                )
            )
        return tuple(out)

    def report(self) -> MonitorReport:
        """The summary so far; ``final_*`` cover the last third of the requests."""
        tail = self._outcomes[len(self._outcomes) - len(self._outcomes) // 3 :]
        if len(self._outcomes) < 3:
            tail = self._outcomes
        return MonitorReport(
            n_requests=len(self._outcomes),
            alarm_at=self._alarms[0] if self._alarms else None,
            alarms=tuple(self._alarms),
            change_point=self._change_point,
            coverage_alert_at=self._coverage_alert_at,
            recalibrations=tuple(self._recalibrations),
            coverage_by_window=self.windows(),
            coverage_by_class={k: _ratio(v[0], v[1]) for k, v in self._class_kept.items()},
            final_coverage=_ratio(sum(o.n_kept for o in tail), sum(o.n_relevant for o in tail)),
            final_kept_fraction=_ratio(
                sum(o.n_candidates_kept for o in tail), sum(o.n_candidates for o in tail)
            ),
            test=self._test,
        )


class LabelJoin:
    """Joins a stream of batches with a later stream of labels, by request id, in bounded memory.

    A batch is kept as its :class:`ScoredRequest` (class and scores, no text) until its label
    arrives or ``max_requests`` newer batches push it out (oldest first); a label that arrives
    before its batch waits, up to ``max_waiting`` labels (oldest dropped first). Each drop is
    counted, never silent.
    """

    def __init__(self, monitor: CoverageMonitor, *, max_requests: int, max_waiting: int) -> None:
        if max_requests < 1 or max_waiting < 0:
            raise ValueError(
                f"max_requests must be >= 1 and max_waiting >= 0, got {max_requests}, {max_waiting}"
            )
        self.monitor = monitor
        self.max_requests = max_requests
        self.max_waiting = max_waiting
        self._scored: dict[str, ScoredRequest] = {}
        self._waiting: dict[str, tuple[str, ...]] = {}
        #: batches pushed out before a label came, labels dropped while waiting for their batch
        self.expired_batches = 0
        self.expired_labels = 0

    def batch(self, batch: CandidateBatch) -> RequestOutcome | None:
        """Take a batch; its outcome when its label was already waiting."""
        relevant = self._waiting.pop(batch.request_id, None)
        scored = self.monitor.scores_of(batch)
        if relevant is not None:
            return self.monitor.observe_scored(scored, relevant)
        self._scored.pop(batch.request_id, None)  # a redelivered batch moves to the newest place
        self._scored[batch.request_id] = scored
        while len(self._scored) > self.max_requests:
            del self._scored[next(iter(self._scored))]
            self.expired_batches += 1
        return None

    def label(self, request_id: str, relevant_chunk_ids: Sequence[str]) -> RequestOutcome | None:
        """Take a label; its outcome when its batch has been seen, else it waits."""
        scored = self._scored.pop(request_id, None)
        if scored is not None:
            return self.monitor.observe_scored(scored, relevant_chunk_ids)
        self._waiting.pop(request_id, None)
        self._waiting[request_id] = tuple(relevant_chunk_ids)
        while len(self._waiting) > self.max_waiting:
            del self._waiting[next(iter(self._waiting))]
            self.expired_labels += 1
        return None

    @property
    def sizes(self) -> tuple[int, int]:
        """(batches held, labels waiting)."""
        return len(self._scored), len(self._waiting)
