"""`ctxbudget control`: show and change the rollout (cohort, shadow, kill switch)."""

from __future__ import annotations

import getpass
import os
import socket
from datetime import UTC, datetime
from typing import Any

import click
import orjson

from ctxbudget.cli.common import load_store, policies_dir, worker_settings
from ctxbudget.errors import ConfigError
from ctxbudget.rollout import ControlState, next_state
from workers.control import read_state, starting_state, write_state

_brokers = click.option(
    "--brokers",
    envvar="CTXBUDGET_BROKERS",
    required=True,
    help="Bootstrap servers (or $CTXBUDGET_BROKERS).",
)


def _default() -> ControlState:
    """What the workers start from while the control topic is empty (same rule as theirs)."""
    try:
        return starting_state(worker_settings(), policies_dir(None))
    except ConfigError as e:
        raise click.ClickException(str(e)) from e


def _current(brokers: str) -> ControlState:
    settings = worker_settings()
    try:
        return read_state(
            brokers.split(","), settings.topics.control, _default(), settings=settings
        )
    except Exception as e:
        raise click.ClickException(f"cannot read the control topic: {e}") from e


def _show(state: ControlState) -> None:
    click.echo(
        orjson.dumps(
            state.model_dump(mode="json", by_alias=True), option=orjson.OPT_INDENT_2
        ).decode()
    )


def _change(brokers: str, action: str, **update: Any) -> None:
    before = _current(brokers)
    store = load_store(None)
    try:
        after = next_state(
            before,
            update,
            known_policy=store.get,
            at=datetime.now(UTC).isoformat(timespec="milliseconds"),
            by=f"{getpass.getuser()}@{socket.gethostname()}:{os.getpid()}",
        )
    except ConfigError as e:
        raise click.ClickException(str(e)) from e
    settings = worker_settings()
    write_state(
        brokers.split(","),
        control_topic=settings.topics.control,
        audit_topic=settings.topics.audit,
        action=action,
        before=before,
        after=after,
        settings=settings,
    )
    _show(after)


@click.group("control")
def control_cmd() -> None:
    """Show or change the rollout state on the control topic (workers apply it within 1 s)."""


@control_cmd.command("show")
@_brokers
def show(brokers: str) -> None:
    """Print the rollout state in force."""
    _show(_current(brokers))


@control_cmd.command("set-rollout")
@_brokers
@click.option(
    "--percent",
    type=click.FloatRange(0, 100),
    required=True,
    help="Share of cohort keys that get the candidate live.",
)
@click.option("--candidate", help="Candidate policy NAME@VERSION (default: keep).")
@click.option("--baseline", help="Baseline policy NAME@VERSION (default: keep).")
@click.option("--cohort-key", type=click.Choice(["tenant", "user", "request"]))
def set_rollout(
    brokers: str,
    percent: float,
    candidate: str | None,
    baseline: str | None,
    cohort_key: str | None,
) -> None:
    """Give the candidate to PERCENT of the cohort keys (sticky: raising only adds members)."""
    update: dict[str, Any] = {"percent": percent}
    if candidate:
        update["candidate"] = candidate
    if baseline:
        update["baseline"] = baseline
    if cohort_key:
        update["cohort_key"] = cohort_key
    _change(brokers, "set-rollout", **update)


@control_cmd.command("kill")
@_brokers
@click.option("--note", help="Why (kept in the state and the audit event).")
def kill(brokers: str, note: str | None) -> None:
    """Kill switch: every request gets the baseline live, at once."""
    _change(brokers, "kill", killed=True, note=note)


@control_cmd.command("unkill")
@_brokers
@click.option("--note")
def unkill(brokers: str, note: str | None) -> None:
    """Lift the kill switch: the cohort gets the candidate again."""
    _change(brokers, "unkill", killed=False, note=note)


@control_cmd.command("shadow")
@_brokers
@click.argument("mode", type=click.Choice(["on", "off"]))
def shadow(brokers: str, mode: str) -> None:
    """Turn shadow packs on or off (written to ctx.shadow.v1 by `ctxbudget worker shadow`)."""
    _change(brokers, f"shadow-{mode}", shadow=mode == "on")
