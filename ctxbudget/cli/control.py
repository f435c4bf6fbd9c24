"""`ctxbudget control`: show and change the rollout (cohort, shadow, kill switch), signed."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import click
import orjson

from ctxbudget.cli.common import UsageFailure, load_store, policies_dir, worker_settings
from ctxbudget.errors import ConfigError
from ctxbudget.kafka.control import (
    ControlKeyError,
    ControlTopicError,
    ControlView,
    change_state,
    current_state,
)
from ctxbudget.policy import PolicyStore
from ctxbudget.rollout import ControlState
from ctxbudget.signing import generate_key_pair

#: How many refused records `control show` lists (the count is always given).
SHOWN_REFUSED = 20

_brokers = click.option(
    "--brokers",
    envvar="CTXBUDGET_BROKERS",
    required=True,
    help="Bootstrap servers (or $CTXBUDGET_BROKERS).",
)


def _current(brokers: str) -> ControlView:
    """The state in force (what the workers start from while the control topic is empty);
    a state naming a policy the policies folder lacks does not count, as on a worker."""
    store = load_store(None)

    def loaded(ref: str) -> bool:
        try:
            store.get(ref)
        except ConfigError:
            return False
        return True

    try:
        return current_state(worker_settings(), brokers, policies_dir(None), known_policy=loaded)
    except ControlKeyError as e:
        raise UsageFailure(str(e)) from e
    except ControlTopicError as e:
        raise click.ClickException(str(e)) from e


def _flag_refused(view: ControlView) -> None:
    """On stderr: who signed the state in force, and the records on the topic that were
    passed over (which no worker follows)."""
    state = view.state
    signer = state.key_id if state.signature is not None else "nobody (the starting state)"
    click.echo(f"signed by: {signer}, version {state.version}", err=True)
    if not view.refused:
        return
    click.echo(f"WARNING: {len(view.refused)} control record(s) refused:", err=True)
    for r in view.refused[:SHOWN_REFUSED]:
        v = r.verdict
        click.echo(
            f"  {r.where}: {v.reason}: {v.detail[:200]} "
            f"(claims version {v.version}, key {v.key_id})",
            err=True,
        )


def _show(state: ControlState) -> None:
    click.echo(
        orjson.dumps(
            state.model_dump(mode="json", by_alias=True), option=orjson.OPT_INDENT_2
        ).decode()
    )


def _change(brokers: str, action: str, **update: Any) -> None:
    @cache
    def store() -> PolicyStore:  # loaded after the state in force is read, once
        return load_store(None)

    try:
        after = change_state(
            worker_settings(),
            brokers,
            action,
            update,
            policies=policies_dir(None),
            known_policy=lambda ref: store().get(ref),
        )
    except ControlKeyError as e:
        raise UsageFailure(str(e)) from e
    except (ControlTopicError, ConfigError) as e:
        raise click.ClickException(str(e)) from e
    _show(after)


@click.group("control")
def control_cmd() -> None:
    """Show or change the rollout state on the control topic (workers apply it within 1 s)."""


@control_cmd.command("show")
@_brokers
def show(brokers: str) -> None:
    """Print the rollout state in force: the newest valid signed state (stdout), who signed
    it and every record passed over (stderr)."""
    view = _current(brokers)
    _show(view.state)
    _flag_refused(view)


@control_cmd.command("keygen")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
def keygen(directory: Path) -> None:
    """Write a new Ed25519 key pair into DIRECTORY: control-<id>-private.pem (mode 0600, for
    CTXBUDGET_CONTROL_KEY) and control-<id>-public.pem (for the workers'
    CTXBUDGET_CONTROL_TRUSTED_KEYS)."""
    try:
        private, public = generate_key_pair(directory)
    except ConfigError as e:
        raise UsageFailure(str(e)) from e
    except OSError as e:
        raise UsageFailure(f"cannot write the key pair into {directory}: {e.strerror}") from e
    click.echo(f"private key {private} (keep it secret: CTXBUDGET_CONTROL_KEY)")
    click.echo(f"public key  {public} (give it to the workers: CTXBUDGET_CONTROL_TRUSTED_KEYS)")


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
