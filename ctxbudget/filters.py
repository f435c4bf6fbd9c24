"""The pre-admission evidence filter: what selection asks of one, and the filter a policy names.

Selection sees a filter through :class:`EvidenceFilter` (bound to a batch, it says whether a
candidate passes, and states the coverage it holds). The one the package builds is the
conformal filter: a policy names one calibration file (relative to the policies folder) and,
per query class, the ``alpha`` to hold. Classes without an alpha are not filtered. A missing,
unreadable or mismatched calibration is a :class:`~ctxbudget.conformal.CalibrationError` at
load time, never a silent pass-through.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from ctxbudget.conformal import CalibrationError, ConformalFilter, load_calibration
from ctxbudget.policy import Policy
from ctxbudget.schemas import Candidate, CandidateBatch, Coverage


class BoundEvidenceFilter(Protocol):
    """An evidence filter bound to one batch."""

    def keep(self, candidate: Candidate, query_class: str) -> bool:
        """Whether ``candidate`` passes the filter of ``query_class``."""
        ...


class EvidenceFilter(Protocol):
    """A pre-admission filter with a coverage statement (the conformal filter)."""

    def bind(self, batch: CandidateBatch) -> BoundEvidenceFilter:
        """The filter bound to ``batch`` (a scorer may need the whole batch)."""
        ...

    def applies_to(self, query_class: str) -> bool:
        """Whether ``query_class`` is filtered."""
        ...

    def coverage(self, query_class: str) -> Coverage | None:
        """The coverage statement of ``query_class``; None when the class is not filtered."""
        ...


class BoundFilter:
    """The per-class filters bound to one batch."""

    def __init__(self, filters: dict[str, ConformalFilter], batch: CandidateBatch) -> None:
        self._filters = {cls: f.for_batch(batch) for cls, f in filters.items()}
        self._query = batch.query

    def keep(self, candidate: Candidate, query_class: str) -> bool:
        """Whether ``candidate`` passes the filter of ``query_class`` (True when it has none)."""
        f = self._filters.get(query_class)
        return True if f is None else f.decide(self._query, candidate, query_class).kept


class PolicyFilter:
    """Conformal filters for the classes of one policy that set an ``alpha``."""

    def __init__(self, filters: dict[str, ConformalFilter]) -> None:
        self._filters = filters

    def bind(self, batch: CandidateBatch) -> BoundFilter:
        """The filters bound to ``batch`` (a scorer may need the whole batch)."""
        return BoundFilter(self._filters, batch)

    def applies_to(self, query_class: str) -> bool:
        """Whether the policy sets an ``alpha`` for ``query_class``."""
        return query_class in self._filters

    def coverage(self, query_class: str) -> Coverage | None:
        """The coverage statement of ``query_class``; None when the class is not filtered."""
        f = self._filters.get(query_class)
        return None if f is None else f.coverage(query_class)


def filter_for(policy: Policy, root: Path) -> PolicyFilter | None:
    """None when the policy names no calibration; an error when it names a bad one."""
    if policy.calibration is None:
        alphas = [c for c, rules in policy.classes.items() if rules.alpha is not None]
        if alphas:
            raise CalibrationError(
                f"policy {policy.ref}: classes {', '.join(alphas)} set alpha but the policy "
                "names no calibration file"
            )
        return None
    calibration = load_calibration(root / policy.calibration)
    filters: dict[str, ConformalFilter] = {}
    for cls, rules in sorted(policy.classes.items()):
        if rules.alpha is None:
            continue
        try:
            filters[cls] = ConformalFilter(calibration, alpha=rules.alpha)
        except (KeyError, StopIteration, ValueError) as e:
            raise CalibrationError(
                f"policy {policy.ref}: class {cls} asks for alpha {rules.alpha}, which "
                f"{root / policy.calibration} does not hold (alphas {list(calibration.alphas)})"
            ) from e
    return PolicyFilter(filters) if filters else None
