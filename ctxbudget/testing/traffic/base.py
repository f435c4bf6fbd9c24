"""Names every part of the traffic generators shares: tenants and access labels, the kinds
of passage, the error, and the rates of the awkward cases."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ctxbudget.errors import ConfigError

#: The repository root: dataset-derived traffic is never written inside it.
REPO_ROOT = Path(__file__).resolve().parents[3]
TENANT = "acme"
OTHER_TENANT = "globex"
PRINCIPAL_LABELS: tuple[str, ...] = ("public", "internal")
FORBIDDEN_LABELS: tuple[str, ...] = ("restricted", "confidential", "hr-only")

Kind = Literal["original", "copy", "stale", "overlap", "cross_tenant", "unauthorized", "injected"]
KINDS: tuple[Kind, ...] = (
    "original",
    "copy",
    "stale",
    "overlap",
    "cross_tenant",
    "unauthorized",
    "injected",
)


class TrafficError(ConfigError):
    """The traffic could not be generated (missing data, bad arguments, forbidden path)."""


@dataclass(frozen=True, slots=True)
class AwkwardRates:
    """Per-batch probability of each awkward case (copies and overlaps add 1-3 / 1-2)."""

    copies: float = 0.7
    duplicate_id: float = 0.4
    stale: float = 0.45
    cross_tenant: float = 0.35
    unauthorized: float = 0.35
    injected: float = 0.45
    overlap: float = 0.45
    long_conversation: float = 0.3

    def __post_init__(self) -> None:
        for name in self.__slots__:
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"AwkwardRates.{name} must be within [0, 1], got {value!r}")

    @classmethod
    def all_cases(cls) -> AwkwardRates:
        """Every awkward case in every batch (for tests)."""
        return cls(1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.5)


#: Evidence budget target, as a fraction of the token cost of the retrieved originals (the
#: awkward extras excluded). Tuned so that the naive fill keeps about 70-85 % of the relevant
#: passages (MS MARCO seeds 1-3: 0.76-0.81; synthetic seeds 1-2: 0.78-0.79): the awkward
#: extras rank on top and eat the budget a packer that drops them could spend on evidence.
MSMARCO_EVIDENCE_FRACTION = (1.0, 1.2)
SYNTHETIC_EVIDENCE_FRACTION = (0.6, 0.8)
