"""``ctxbudget monitor``: replay a labelled stream through the coverage monitor.

Reads labelled ``ctx.candidate_batch.v1`` JSONL in file order, as a label stream would deliver
them (or unlabelled batches and a ``--labels`` file of Label v1 lines, joined by request id in
the order of the labels), and prints the monitor's report: coverage per window, the request
at which drift was declared and, with ``--adaptive``, where it recalibrated.
``--write-calibration`` writes the recalibration as a new calibration file version, to be
rolled out like any policy change (shadow, compare, cohort, kill switch): the monitor never
changes what a worker serves.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import click

from ctxbudget.cli.common import UsageFailure
from ctxbudget.cli.conformal_cmds import (
    FALLBACK_CLASS,
    join_labels,
    read_labelled,
    resolve_classifier,
)
from ctxbudget.conformal import (
    CalibrationError,
    CalibrationFile,
    load_calibration,
    recalibrate,
    save_calibration,
)
from ctxbudget.conformal.monitor import CoverageMonitor, MonitorConfig, MonitorReport


def _next_version(version: str) -> str:
    return str(int(version) + 1) if version.isdigit() else f"{version}.1"


def _summary(report: MonitorReport, alpha: float) -> str:
    lines = [
        f"monitor: {report.n_requests} labelled requests, target coverage {1 - alpha:.3f} "
        f"(test: {report.test})",
        f"drift declared at request {report.alarm_at}"
        if report.alarm_at is not None
        else "no drift declared",
    ]
    if report.recalibrations:
        lines.append(f"recalibrated at request(s) {', '.join(map(str, report.recalibrations))}")
    if report.coverage_alert_at is not None:
        lines.append(f"coverage alert at request {report.coverage_alert_at}")
    lines.append("window_end  coverage  [95% interval]  kept_fraction")
    for w in report.coverage_by_window:
        cov = "-" if w.coverage is None else f"{w.coverage:.3f}"
        kept = "-" if w.kept_fraction is None else f"{w.kept_fraction:.3f}"
        lines.append(f"{w.end:>10}  {cov:>8}  [{w.lower:.3f}, {w.upper:.3f}]  {kept:>13}")
    final = "-" if report.final_coverage is None else f"{report.final_coverage:.3f}"
    lines.append(f"final coverage (last third): {final}")
    return "\n".join(lines)


@click.command("monitor")
@click.argument("labelled", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--calibration",
    "calibration_path",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
)
@click.option("--alpha", type=float, required=True, help="the alpha the filter serves")
@click.option("--adaptive", is_flag=True, help="recalibrate after declared drift")
@click.option("--window", type=int, default=50, show_default=True, help="requests per window")
@click.option("--tolerance", type=float, default=0.03, show_default=True)
@click.option(
    "--alarm-level",
    type=float,
    default=20_000.0,
    show_default=True,
    help="drift level: mean requests between false alarms is at least this",
)
@click.option("--recalibration-size", type=int, default=500, show_default=True)
@click.option(
    "--aci-gamma",
    type=float,
    default=0.0,
    show_default=True,
    help="adaptive conformal inference step (instead of --adaptive); 0: off",
)
@click.option(
    "--write-calibration",
    type=click.Path(dir_okay=False, path_type=Path),
    help="with --adaptive: write the first recalibration as a new calibration file version",
)
@click.option(
    "--labels",
    "labels_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Label v1 JSONL: join each label with its batch, in the labels' order",
)
@click.option("--json", "as_json", is_flag=True, help="print the report as JSON")
@click.option(
    "--follow",
    is_flag=True,
    help="live: read the candidates and labels topics, export metrics, run until stopped",
)
@click.option("--brokers", envvar="CTXBUDGET_BROKERS", help="with --follow: bootstrap servers")
@click.option(
    "--metrics-port", type=int, default=9108, show_default=True, help="with --follow (0: none)"
)
@click.option(
    "--calibration-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="with --follow --adaptive: write each recalibration here as NAME@VERSION.json",
)
@click.option(
    "--max-requests",
    type=click.IntRange(min=1),
    default=200_000,
    show_default=True,
    help="with --follow: batches held while their label is awaited",
)
@click.option("--until-idle", type=float, default=None, hidden=True)
@click.pass_context
def monitor_cmd(
    ctx: click.Context,
    labelled: Path,
    calibration_path: Path,
    alpha: float,
    adaptive: bool,
    window: int,
    tolerance: float,
    alarm_level: float,
    recalibration_size: int,
    aci_gamma: float,
    write_calibration: Path | None,
    labels_path: Path | None,
    as_json: bool,
    follow: bool,
    brokers: str | None,
    metrics_port: int,
    calibration_dir: Path | None,
    max_requests: int,
    until_idle: float | None,
) -> None:
    """Watch the conformal filter's coverage on LABELLED batches, in order, and detect drift.

    With --follow, read the candidates topic and the labels topic instead (no LABELLED), join
    each label with its batch, and export coverage and the drift test on --metrics-port.
    """
    if follow == (labelled is not None):
        raise UsageFailure("give LABELLED, or --follow to read the topics (not both)")
    if write_calibration is not None and not adaptive:
        raise UsageFailure("--write-calibration needs --adaptive")
    try:
        cal = load_calibration(calibration_path)
        config = MonitorConfig(
            alpha=alpha,
            tolerance=tolerance,
            window=window,
            alarm_level=alarm_level,
            adaptive=adaptive,
            recalibration_size=recalibration_size,
            aci_gamma=aci_gamma,
        )
        classify = resolve_classifier() if cal.by_class else (lambda b: FALLBACK_CLASS)
        monitor = CoverageMonitor(cal, config, classify=classify)
    except (CalibrationError, ValueError) as e:
        raise UsageFailure(str(e)) from e
    if follow:
        _follow(monitor, cal, brokers, metrics_port, calibration_dir, max_requests, until_idle)
        return
    assert labelled is not None
    data = read_labelled(labelled)
    stream = list(data.batches)
    n_bad = data.n_bad
    if labels_path is not None:
        stream, n_bad_labels = join_labels(data.batches, labels_path)
        n_bad += n_bad_labels
    labelled_batches = []
    for batch in stream:
        if monitor.observe(batch) is not None:
            labelled_batches.append(batch)
    report = monitor.report()
    if as_json:
        click.echo(json.dumps(report.as_dict(), indent=2))
    else:
        click.echo(_summary(report, alpha))
    if write_calibration is not None:
        _write_recalibration(cal, monitor, report, write_calibration)
    if n_bad:
        ctx.exit(1)


def _follow(
    monitor: CoverageMonitor,
    cal: CalibrationFile,
    brokers: str | None,
    metrics_port: int,
    calibration_dir: Path | None,
    max_requests: int,
    until_idle: float | None,
) -> None:
    from prometheus_client import start_http_server

    from ctxbudget.cli.common import worker_settings
    from ctxbudget.conformal.monitor import LabelJoin
    from ctxbudget.kafka import io
    from ctxbudget.kafka.coverage import CoverageMetrics, CoverageService

    settings = worker_settings()
    names = settings.topics
    where = brokers or settings.brokers
    metrics = CoverageMetrics(1.0 - monitor.config.alpha)
    if metrics_port:
        try:
            start_http_server(metrics_port, registry=metrics.registry)
        except OSError as e:
            raise UsageFailure(
                f"cannot serve metrics on port {metrics_port}: {e.strerror or e}"
            ) from e
    service = CoverageService(
        monitor=monitor,
        join=LabelJoin(monitor, max_requests=max_requests, max_waiting=max_requests),
        metrics=metrics,
        candidates_topic=names.candidates,
        labels_topic=names.labels,
        calibration=cal,
        write_calibration=calibration_dir,
        emit=lambda line: click.echo(line, err=True),
    )
    topics = [names.candidates, names.labels]
    click.echo(f"monitor: following {', '.join(topics)} at {where}", err=True)
    try:
        with io.reaching(where, doing="reach", value_errors=False):
            source = io.KafkaSource(io.consumer_config(settings, where), topics, {})
    except io.BrokerUnreachableError as e:
        raise UsageFailure(str(e)) from e
    try:
        service.run(source, until_idle=until_idle)
    finally:
        source.close()
    report = monitor.report()
    click.echo(
        f"monitor: {report.n_requests} labelled requests joined, drift declared at "
        f"{report.alarm_at}, recalibrated at {list(report.recalibrations)}",
        err=True,
    )


def _write_recalibration(
    cal: CalibrationFile, monitor: CoverageMonitor, report: MonitorReport, path: Path
) -> None:
    """The monitor's first frozen recalibration as the next version of the calibration file."""
    scores = monitor.recalibrated_scores
    if not report.recalibrations or report.change_point is None or scores is None:
        raise click.ClickException("no recalibration completed: nothing written")
    new = recalibrate(
        cal,
        scores,
        version=_next_version(cal.version),
        created=datetime.date.today().isoformat(),
        n_queries=report.recalibrations[0] - report.change_point + 1,
    )
    save_calibration(new, path)
    click.echo(
        f"wrote {path}: {new.name}@{new.version} from {len(scores)} relevant passages of "
        f"requests {report.change_point}..{report.recalibrations[0]}",
        err=True,
    )
