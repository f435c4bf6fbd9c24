"""`ctxbudget audit-sink | report | explain`: the audit stream for analysts (`analytics` extra)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ctxbudget.analytics.sink import Progress, Sink
from ctxbudget.analytics.store import AuditDbError, AuditStore
from ctxbudget.cli.common import UsageFailure, one_line, open_in, worker_settings
from ctxbudget.errors import CtxBudgetError


def _readable(paths: tuple[str, ...], what: str) -> None:
    """Every input file can be opened (checked before anything is written)."""
    for path in paths:
        if path != "-":
            open_in(path, what=what).close()


def _existing_db(db: str) -> None:
    """The audit database exists: reading must never create an empty one."""
    if not Path(db).is_file():
        reason = "is a directory" if Path(db).is_dir() else "no such file"
        raise UsageFailure(f"cannot read DB {db!r}: {reason}")


def _db_failure(e: Exception) -> click.ClickException:
    """A database that cannot be read (not DuckDB, not an audit database): one line."""
    return click.ClickException(one_line(e) if not isinstance(e, AuditDbError) else str(e))


@click.command("audit-sink")
@click.option("--to", "db", required=True, type=click.Path(dir_okay=False), help="DuckDB file.")
@click.option(
    "--from-file",
    "trace_files",
    multiple=True,
    type=click.Path(allow_dash=True, dir_okay=False),
    help="TraceEvent JSONL (`ctxbudget pack --trace`); repeatable. Reads files, not Kafka.",
)
@click.option(
    "--packs",
    "pack_files",
    multiple=True,
    type=click.Path(allow_dash=True, dir_okay=False),
    help="Pack JSONL (`ctxbudget pack -o`); repeatable. Reads files, not Kafka.",
)
@click.option(
    "--brokers",
    envvar="CTXBUDGET_BROKERS",
    default=None,
    help="Bootstrap servers (or $CTXBUDGET_BROKERS; default: the worker settings').",
)
@click.option(
    "--until-idle",
    type=click.FloatRange(min=0),
    default=None,
    help="Kafka: exit after this many seconds without a record (default: run until stopped).",
)
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=1000,
    show_default=True,
    help="Records per transaction.",
)
@click.option(
    "--progress-every",
    type=click.FloatRange(min=0),
    default=2.0,
    show_default=True,
    help="Seconds between progress lines on stderr.",
)
def audit_sink_cmd(
    db: str,
    trace_files: tuple[str, ...],
    pack_files: tuple[str, ...],
    brokers: str | None,
    until_idle: float | None,
    batch_size: int,
    progress_every: float,
) -> None:
    """Store trace events, packs, verdicts and labels in DuckDB (tables events, decisions,
    packs, verdicts, labels, rejects, ...; ops/analytics.md).

    Without --from-file/--packs, consumes the audit, packs, shadow and labels topics (names
    from CTXBUDGET_TOPICS__AUDIT, __PACKS, __SHADOW, __LABELS) until SIGTERM or Ctrl-C,
    resuming from the offsets stored in the database. Restarting never loses nor duplicates
    a row. Exit status: 0, or 1 when a file had records that went to the rejects table.
    """
    _readable(trace_files, "--from-file")
    _readable(pack_files, "--packs")
    try:
        store = AuditStore(db)
    except CtxBudgetError as e:
        raise click.ClickException(str(e)) from e
    sink = Sink(store, batch_size=batch_size, progress=Progress(every_s=progress_every))
    try:
        with sink.stop.on_signals():
            if trace_files or pack_files:
                sink.run_files([*trace_files, *pack_files])
            else:
                _run_kafka(sink, brokers, until_idle)
    finally:
        store.close()
    if sink.stop.signal_name:
        click.echo(f"audit-sink: stopped by {sink.stop.signal_name}", err=True)
    if (trace_files or pack_files) and sink.progress.written.rejects:
        sys.exit(1)


def _run_kafka(sink: Sink, brokers: str | None, until_idle: float | None) -> None:
    from ctxbudget.kafka import io

    missing_library = io.missing_client_library()
    if missing_library:
        raise click.ClickException(
            f"reading Kafka needs the `kafka` extra ({missing_library} is missing); "
            "or load files with --from-file / --packs"
        )
    settings = worker_settings()
    names = settings.topics
    topics = [names.audit, names.packs, names.shadow, names.labels]
    where = brokers or settings.brokers
    config = io.consumer_config(settings, where)
    click.echo(f"audit-sink: {', '.join(topics)} from {config['bootstrap_servers']}", err=True)
    try:
        with io.reaching(where, doing="reach", value_errors=False):
            source = io.KafkaSource(config, topics, sink.store.offsets())
    except io.BrokerUnreachableError as e:
        raise UsageFailure(str(e)) from e
    try:
        sink.run_kafka(source, until_idle=until_idle)
        missing = source.missing_topics()
        if missing:
            click.echo(
                f"audit-sink: topics not found on the broker: {', '.join(missing)}", err=True
            )
    finally:
        source.close()


@click.command("report")
@click.argument("db", type=click.Path(dir_okay=False))
@click.option("-o", "--output", default="report.html", show_default=True, type=click.Path())
@click.option("--title", default="ctxbudget audit report", show_default=True)
def report_cmd(db: str, output: str, title: str) -> None:
    """Write a self-contained HTML report of DB (figures also written beside it as PNG)."""
    import duckdb

    from ctxbudget.analytics.report import build_report

    _existing_db(db)
    if Path(output).is_dir():
        raise UsageFailure(f"cannot write report {output!r}: is a directory")
    try:
        written = build_report(db, Path(output), title=title)
    except (AuditDbError, duckdb.Error) as e:
        raise _db_failure(e) from e
    except OSError as e:
        raise UsageFailure(f"cannot write report {output!r}: {e.strerror or one_line(e)}") from e
    click.echo(f"report: {written.html} ({len(written.figures)} figures in {written.figure_dir})")


@click.command("explain")
@click.argument("request_id")
@click.option("--db", required=True, type=click.Path(dir_okay=False))
def explain_cmd(request_id: str, db: str) -> None:
    """Print every candidate of REQUEST_ID with its fate per lane, the budget, and both packs."""
    import duckdb

    from ctxbudget.analytics.explain import explain

    _existing_db(db)
    try:
        text = explain(db, request_id)
    except (AuditDbError, duckdb.Error) as e:
        raise _db_failure(e) from e
    if text is None:
        raise click.ClickException(f"request {request_id!r} is not in {db}")
    click.echo(text, nl=False)
