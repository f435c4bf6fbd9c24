"""The calibration file: its pydantic model, loading and saving."""

from __future__ import annotations

import math
import os
from datetime import date
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from ctxbudget.conformal._common import CALIBRATION_SCHEMA, QUANTILE_RULE, CalibrationError
from ctxbudget.conformal.quantile import ThresholdResult, alpha_key
from ctxbudget.models import NonNegInt, WireModel, describe_validation

# ---------------------------------------------------------------- the calibration file

#: A count in the file: an integer >= 0.
NonNeg = NonNegInt


class ThresholdEntry(WireModel):
    """One threshold; ``threshold`` is null (JSON has no infinity) exactly when not finite."""

    threshold: float | None
    n: NonNeg
    finite: bool
    rank: int | None = None

    @model_validator(mode="after")
    def _consistent(self) -> ThresholdEntry:
        if self.finite != (self.threshold is not None):
            raise ValueError("'finite' must be true exactly when 'threshold' is a number")
        if self.threshold is not None and not math.isfinite(self.threshold):
            raise ValueError("a finite threshold must be a finite number")
        return self

    @classmethod
    def of(cls, result: ThresholdResult) -> ThresholdEntry:
        """The entry of a calibrated threshold; one that is not finite is stored as null."""
        return cls(
            threshold=result.threshold if result.finite else None,
            n=result.n,
            finite=result.finite,
            rank=result.rank,
        )


class ClassThresholdEntry(ThresholdEntry):
    """A class's threshold and the bin it came from: the class itself, or ``pooled``."""

    bin: str
    n_class: NonNeg = 0


class ClassInfo(WireModel):
    """How one query class was calibrated: its queries and relevant passages, the bin its
    thresholds come from (the class itself, or ``pooled``) and, when pooled, why."""

    n_queries: NonNeg
    n_relevant: NonNeg
    bin: str
    reason: str | None = None


class Baselines(WireModel):
    """Heuristic filters tuned on the same calibration split, for the evaluation's comparison."""

    top_k: dict[str, Annotated[int, Field(ge=1)]]
    top_k_calibration_coverage: dict[str, float]
    top_k_rule: str = "smallest k whose coverage on the calibration split reaches 1 - alpha"
    fixed_threshold: float | None
    fixed_threshold_calibration_coverage: float | None = None
    fixed_threshold_rule: str = (
        "one score threshold for every alpha: the cutoff that maximises F1 of "
        "'score <= t' against the relevance labels on the calibration split"
    )


class CalibrationFile(WireModel):
    """``ctx.calibration.v1``: conformal thresholds for one scorer, per alpha, pooled and
    optionally per query class, with the counts needed to judge them."""

    schema_: Literal["ctx.calibration.v1"] = Field(default="ctx.calibration.v1", alias="schema")
    name: Annotated[str, Field(min_length=1)]
    version: Annotated[str, Field(min_length=1)]
    method: str = "split_conformal"
    quantile: str = QUANTILE_RULE
    scorer: Annotated[str, Field(min_length=1)]
    scorer_requested: str | None = None
    alphas: tuple[float, ...]
    pooled: dict[str, ThresholdEntry]
    by_class: dict[str, dict[str, ClassThresholdEntry]] = Field(default_factory=dict)
    class_info: dict[str, ClassInfo] = Field(default_factory=dict)
    min_per_class: Annotated[int, Field(ge=1)] | None = None
    n_queries: NonNeg
    n_queries_unlabelled: NonNeg = 0
    n_queries_without_relevant: NonNeg
    n_relevant: NonNeg
    n_relevant_unscored: NonNeg = 0
    n_relevant_not_retrieved: NonNeg = 0
    n_candidates: NonNeg = 0
    data_sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
    created: str
    baselines: Baselines | None = None
    #: The relevant calibration scores per bin (``pooled`` and each Mondrian class), sorted:
    #: what the drift monitor's conformal p-values are computed against. Files made before
    #: they were stored have none; the monitor then tests misses alone.
    relevant_scores: dict[str, tuple[float, ...]] = Field(default_factory=dict)

    @field_validator("created")
    @classmethod
    def _iso_date(cls, v: str) -> str:
        try:
            date.fromisoformat(v)
        except ValueError:
            raise ValueError(f"'created' must be an ISO date (YYYY-MM-DD), got {v!r}") from None
        return v

    @model_validator(mode="after")
    def _alphas_match(self) -> CalibrationFile:
        if not self.alphas:
            raise ValueError("'alphas' must not be empty")
        for a in self.alphas:
            if not 0.0 < a < 1.0:
                raise ValueError(f"alpha {a!r} is not strictly between 0 and 1")
        if list(self.alphas) != sorted(set(self.alphas)):
            raise ValueError("'alphas' must be sorted and distinct")
        keys = {alpha_key(a) for a in self.alphas}
        if set(self.pooled) != keys:
            raise ValueError(
                f"'pooled' keys {sorted(self.pooled)} do not match alphas {sorted(keys)}"
            )
        for cls, entries in self.by_class.items():
            if set(entries) != keys:
                raise ValueError(f"'by_class.{cls}' keys {sorted(entries)} do not match alphas")
        return self

    def key_for(self, alpha: float) -> str:
        """The key of ``alpha`` in this file, or a CalibrationError listing the alphas it has."""
        for a in self.alphas:
            if math.isclose(a, alpha, rel_tol=1e-9, abs_tol=0.0):
                return alpha_key(a)
        raise CalibrationError(
            f"calibration {self.name}@{self.version} has no threshold for alpha={alpha!r}; "
            f"it was calibrated for alpha in {list(self.alphas)}"
        )


def load_calibration(path: str | os.PathLike[str]) -> CalibrationFile:
    """Read and validate a calibration file; any problem is a CalibrationError naming the path."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise CalibrationError(f"{p}: calibration file not found") from None
    except IsADirectoryError:
        raise CalibrationError(f"{p}: is a directory, not a calibration file") from None
    except OSError as e:
        raise CalibrationError(f"{p}: cannot read calibration file: {e.strerror or e}") from e
    if not raw.strip():
        raise CalibrationError(f"{p}: calibration file is empty")
    try:
        return CalibrationFile.model_validate_json(raw)
    except ValidationError as e:
        raise CalibrationError(
            f"{p}: invalid calibration file ({CALIBRATION_SCHEMA}): {describe_validation(e)}"
        ) from e


def save_calibration(calibration: CalibrationFile, path: str | os.PathLike[str]) -> Path:
    """Write the file atomically (temporary file, then rename); returns the path."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(calibration.model_dump_json(by_alias=True, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, p)
    return p
