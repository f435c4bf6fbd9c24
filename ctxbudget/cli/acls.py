"""`ctxbudget acls`: the ACLs of every role as kafka-acls commands or JSON, or applied."""

from __future__ import annotations

import click

from ctxbudget.cli.common import UsageFailure, worker_settings
from ctxbudget.kafka import (
    ROLES,
    acl_plan,
    apply_acls,
    plan_json,
    render_acl_commands,
    verify_access,
)


@click.command("acls")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["commands", "json"]),
    default="commands",
    show_default=True,
    help="kafka-acls.sh commands, or the plan as JSON.",
)
@click.option(
    "--prefix",
    default="ctxbudget-",
    show_default=True,
    help="Principal names are User:PREFIX<role>.",
)
@click.option(
    "--role",
    "roles",
    multiple=True,
    type=click.Choice(ROLES),
    help="Only these roles (repeatable; default: all).",
)
@click.option(
    "--write-intermediate",
    is_flag=True,
    help="The fused worker also writes the intermediate topics (CTXBUDGET_WRITE_INTERMEDIATE).",
)
@click.option(
    "--apply",
    "do_apply",
    is_flag=True,
    help="Make the cluster hold exactly this plan for these principals (admin API; the "
    "CTXBUDGET_* credentials must be a super user's or may alter ACLs).",
)
@click.option(
    "--prune/--no-prune",
    default=True,
    show_default=True,
    help="With --apply: delete the principals' grants that are not in the plan.",
)
@click.option("--brokers", envvar="CTXBUDGET_BROKERS", help="Bootstrap servers for --apply.")
def acls_cmd(
    fmt: str,
    prefix: str,
    roles: tuple[str, ...],
    write_intermediate: bool,
    do_apply: bool,
    prune: bool,
    brokers: str | None,
) -> None:
    """The ACLs of one principal per role, deny by default (see ops/security.md).

    Topic names and the consumer-group prefix come from the CTXBUDGET_* settings (the
    answers and verdicts topics, and whether the verify worker writes labels, from
    CTXBUDGET_VERIFY_*), so the plan matches the workers
    that run with the same environment.
    """
    settings = worker_settings()
    if brokers:
        settings = settings.model_copy(update={"brokers": brokers})
    verify_topics, verify_labels = verify_access()
    plan = acl_plan(
        settings,
        prefix=prefix,
        roles=roles or ROLES,
        write_intermediate=write_intermediate,
        verify_topics=verify_topics,
        verify_labels=verify_labels,
    )
    if not do_apply:
        click.echo(plan_json(plan, prefix=prefix) if fmt == "json" else render_acl_commands(plan))
        return
    if not brokers and not settings.brokers:
        raise UsageFailure("--apply needs --brokers or CTXBUDGET_BROKERS")
    from ctxbudget.kafka import io

    try:
        with io.reaching(settings.brokers):
            admin = io.client("admin", settings, client_id="ctxbudget-acls")
    except io.BrokerUnreachableError as e:
        raise UsageFailure(str(e)) from e
    try:
        report = apply_acls(admin, plan, prune=prune)
    except Exception as e:
        raise click.ClickException(f"could not apply the ACLs: {e}") from e
    finally:
        admin.close()
    for b in report.created:
        click.echo(f"created  {b.principal} {b.operation} {b.resource_type} {b.resource}")
    for b in report.deleted:
        click.echo(f"deleted  {b.principal} {b.operation} {b.resource_type} {b.resource}")
    click.echo(
        f"acls: {len(report.created)} created, {len(report.deleted)} deleted, "
        f"{report.kept} already in place"
    )
