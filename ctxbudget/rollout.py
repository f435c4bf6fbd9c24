"""Rollout: which policy packs a request live, which one runs beside it in shadow.

The control state names a baseline and a candidate policy, a cohort percentage, the cohort
key (tenant, user or request), whether shadow packs are made, and the kill switch. Cohorts
are sticky: a stable hash of the cohort key gives each key a bucket in [0, 100), and a key
is in the cohort while its bucket is below the percentage, so raising the percentage only
adds members and a member never flips back and forth. The kill switch sends every request
to the baseline at once; shadow packs may go on.

Pure functions of (batch, state): the same request gets the same lanes everywhere.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field

from ctxbudget.errors import ConfigError
from ctxbudget.models import NonNegInt, WireModel, read_yaml, validate_config
from ctxbudget.schemas import CandidateBatch, Lane

CohortKey = Literal["tenant", "user", "request"]
_REF = r"^[A-Za-z0-9_.-]+@[A-Za-z0-9_.-]+$"


class ControlState(WireModel):
    """The rollout control state, as carried on the compacted control topic (key "rollout")."""

    schema_: Literal["ctx.control_state.v1"] = Field(default="ctx.control_state.v1", alias="schema")
    baseline: Annotated[str, Field(pattern=_REF)]
    candidate: Annotated[str, Field(pattern=_REF)] | None = None
    percent: Annotated[float, Field(ge=0.0, le=100.0)] = 0.0
    cohort_key: CohortKey = "tenant"
    shadow: bool = False
    killed: bool = False
    #: Increases by one with every change; workers keep the highest they have seen.
    version: NonNegInt = 0
    updated_at: str | None = None
    updated_by: str | None = None
    note: str | None = None
    #: The signing key (``ed25519:<16 hex>``) and the signature (:mod:`ctxbudget.signing`).
    key_id: str | None = None
    signature: str | None = None


def next_state(
    before: ControlState,
    update: dict[str, object],
    *,
    known_policy: Callable[[str], object],
    at: str,
    by: str,
) -> ControlState:
    """The control state after one change: ``update`` applied, the version one higher, who
    and when recorded. Every named policy must load (``known_policy`` raises ConfigError for
    one that does not), and a cohort percentage needs a candidate; a ConfigError says why
    not. The caller supplies the clock and the identity (this module reads neither)."""
    candidate = update.get("candidate", before.candidate)
    baseline = update.get("baseline", before.baseline)
    for ref in (baseline, candidate):
        if isinstance(ref, str):
            known_policy(ref)
    percent = update.get("percent", 0)
    if isinstance(percent, int | float) and percent and candidate is None:
        raise ConfigError("a cohort percentage needs a candidate policy (--candidate)")
    stamp = {"version": before.version + 1, "updated_at": at, "updated_by": by}
    after = before.model_copy(update={**update, **stamp, "key_id": None, "signature": None})
    return ControlState.model_validate(after.model_dump(by_alias=True))


class ControlEvent(WireModel):
    """An audit record of one control change (written to the audit topic)."""

    schema_: Literal["ctx.control_event.v1"] = Field(default="ctx.control_event.v1", alias="schema")
    action: str
    before: ControlState | None
    after: ControlState


class Assignment(WireModel):
    """One lane of one request: which policy packs it, and the cohort it is counted in."""

    lane: Lane
    cohort: str
    policy: str


def load_rollout(path: Path) -> ControlState:
    """The file default (policies/rollout.yaml); the control topic overrides it at run time."""
    data = read_yaml(path)
    if isinstance(data, dict):
        data = {**data, "schema": "ctx.control_state.v1"}
    state = validate_config(ControlState, path, data)
    if state.candidate is None and state.percent > 0:
        raise ConfigError(f"{path}: percent: {state.percent} set without a candidate policy")
    return state


def bucket(key: str) -> float:
    """A stable position in [0, 100) for a cohort key (blake2b, no process seed)."""
    digest = hashlib.blake2b(
        key.encode("utf-8"), digest_size=8, person=b"ctxbudget-cohort"
    ).digest()
    return int.from_bytes(digest, "big") / 2**64 * 100.0


def cohort_key(batch: CandidateBatch, kind: CohortKey) -> str:
    """The value the cohort is decided on; 'user' falls back to the request id when absent."""
    if kind == "tenant":
        return f"tenant:{batch.principal.tenant_id}"
    if kind == "user" and batch.principal.user_id:
        return f"user:{batch.principal.user_id}"
    return f"request:{batch.request_id}"


def in_cohort(batch: CandidateBatch, state: ControlState) -> bool:
    """Whether the batch's cohort key falls in the candidate's rollout share (never with no
    candidate, with the kill switch on, or at 0 %)."""
    if state.candidate is None or state.killed or state.percent <= 0:
        return False
    return bucket(cohort_key(batch, state.cohort_key)) < state.percent


def live_assignment(batch: CandidateBatch, state: ControlState) -> Assignment:
    """The live lane: the candidate for cohort members, else (and when killed) the baseline."""
    if in_cohort(batch, state):
        assert state.candidate is not None
        return Assignment(lane="live", cohort="candidate", policy=state.candidate)
    return Assignment(lane="live", cohort="baseline", policy=state.baseline)


def shadow_assignment(batch: CandidateBatch, state: ControlState) -> Assignment | None:
    """The shadow lane: the policy the request did not get live, when shadow is on."""
    if not state.shadow or state.candidate is None:
        return None
    live = live_assignment(batch, state)
    other = state.baseline if live.policy == state.candidate else state.candidate
    if other == live.policy:
        return None
    return Assignment(lane="shadow", cohort=live.cohort, policy=other)


class ControlApplied(WireModel):
    """A worker's report that it applied a control state (for propagation figures)."""

    schema_: Literal["ctx.control_applied.v1"] = Field(
        default="ctx.control_applied.v1", alias="schema"
    )
    worker: str
    version: int
    lag_ms: float
    killed: bool
    #: Who signed the state applied, and the states before and after it.
    key_id: str | None = None
    before: ControlState | None = None
    after: ControlState | None = None


class ControlRefused(WireModel):
    """A worker's report that it refused a control record (the state in force stays)."""

    schema_: Literal["ctx.control_refused.v1"] = Field(
        default="ctx.control_refused.v1", alias="schema"
    )
    worker: str
    #: One of :data:`ctxbudget.signing.REFUSAL_REASONS`.
    reason: str
    detail: str
    #: What the record claimed (unverified), and where it was read.
    key_id: str | None = None
    version: int | None = None
    size: int
    where: str
    #: The state that keeps serving.
    held_version: int
    held_key_id: str | None = None
