"""Build the pre-admission evidence filter a policy names (the conformal filter)."""

from __future__ import annotations

from pathlib import Path

from ctxbudget.policy import Policy
from ctxbudget.select import EvidenceFilter


def filter_for(policy: Policy, root: Path) -> EvidenceFilter | None:
    """None when the policy names no calibration."""
    if policy.calibration is None:
        return None
    raise NotImplementedError("conformal calibration files are not wired yet")
