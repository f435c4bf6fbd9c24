"""``ctxbudget calibrate`` and ``ctxbudget evaluate``: the conformal filter's tooling.

Both read labelled ``ctx.candidate_batch.v1`` JSONL. A bad line is reported on stderr with its
line number and error, counted, and skipped; the command still finishes, and exits with status 1.
The lead registers ``calibrate_cmd`` and ``evaluate_cmd`` on the ``ctxbudget`` group.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

import click
from pydantic import ValidationError

from ctxbudget.cli.common import UsageFailure
from ctxbudget.codec import encode
from ctxbudget.conformal import (
    DEFAULT_MIN_PER_CLASS,
    SCORER_NAMES,
    CalibrationError,
    CalibrationFile,
    batches_sha256,
    calibrate,
    load_calibration,
    save_calibration,
    scorer_from_name,
    split_by_query,
)
from ctxbudget.evaluation import DEFAULT_TOLERANCE, evaluate, render_table
from ctxbudget.labels import LABEL_SOURCES, Label, LabelSource, with_label
from ctxbudget.models import describe_validation
from ctxbudget.schemas import CandidateBatch

FALLBACK_CLASS = "point_lookup"


@dataclass(frozen=True, slots=True)
class LabelledInput:
    batches: tuple[CandidateBatch, ...]
    lines: dict[str, list[str]]  # request_id -> raw lines, to write a held-out split unchanged
    n_bad: int


def read_labelled(path: Path) -> LabelledInput:
    """Read JSONL batches; report each bad line on stderr and go on."""
    batches: list[CandidateBatch] = []
    lines: dict[str, list[str]] = {}
    n_bad = 0
    try:
        fh = path.open("r", encoding="utf-8")
    except OSError as e:
        raise UsageFailure(f"{path}: cannot read: {e.strerror or e}") from e
    with fh:
        for lineno, raw in enumerate(fh, start=1):
            text = raw.strip()
            if not text:
                continue
            try:
                batch = CandidateBatch.model_validate_json(text)
            except ValidationError as e:
                n_bad += 1
                problem = describe_validation(e, limit=1)
                click.echo(f"{path}:{lineno}: bad batch: {problem}", err=True)
                continue
            except UnicodeDecodeError as e:  # pragma: no cover - decoded by open() already
                n_bad += 1
                click.echo(f"{path}:{lineno}: bad batch: {e}", err=True)
                continue
            batches.append(batch)
            lines.setdefault(batch.request_id, []).append(text)
    if n_bad:
        click.echo(f"{path}: {n_bad} bad line(s) skipped", err=True)
    return LabelledInput(tuple(batches), lines, n_bad)


def join_labels(
    batches: Sequence[CandidateBatch],
    path: Path,
    *,
    sources: Collection[LabelSource] = LABEL_SOURCES,
    last_per_request: bool = False,
) -> tuple[list[CandidateBatch], int]:
    """Each Label line of ``path`` (of one of ``sources``) joined with its request's batch,
    which then carries that label, in the labels' order; with ``last_per_request`` only the
    last label of each request, at its place. A bad line or a label whose request has no
    batch is reported on stderr and counted."""
    by_id = {b.request_id: b for b in batches}
    joined: list[tuple[str, CandidateBatch]] = []
    n_bad = 0
    try:
        lines = path.read_bytes().splitlines()
    except OSError as e:
        raise UsageFailure(f"{path}: cannot read: {e.strerror or e}") from e
    for lineno, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            label = Label.model_validate_json(raw)
        except ValidationError as e:
            n_bad += 1
            click.echo(f"{path}:{lineno}: bad label: {describe_validation(e, limit=1)}", err=True)
            continue
        if label.source not in sources:
            continue
        batch = by_id.get(label.request_id)
        if batch is None:
            n_bad += 1
            click.echo(f"{path}:{lineno}: no batch for request {label.request_id!r}", err=True)
            continue
        joined.append((label.request_id, with_label(batch, label)))
    if last_per_request:
        last = {rid: i for i, (rid, _) in enumerate(joined)}
        joined = [pair for i, pair in enumerate(joined) if last[pair[0]] == i]
    return [b for _, b in joined], n_bad


def resolve_classifier() -> Callable[[CandidateBatch], str]:
    """``query.class_hint`` when set, else the class the shipped routing rules give."""
    from ctxbudget.stages.route import default_classifier

    routed = default_classifier()

    def classify(batch: CandidateBatch) -> str:
        return batch.query.class_hint or routed(batch)

    return classify


def _parse_alphas(
    ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
) -> tuple[float, ...]:
    """Each ``--alpha`` as a float strictly between 0 and 1; else one line and exit 2."""
    out = []
    for v in values:
        try:
            alpha = float(v)
        except ValueError:
            raise UsageFailure(f"--alpha: {v!r} is not a number") from None
        if not 0.0 < alpha < 1.0:
            raise UsageFailure(f"--alpha: must be strictly between 0 and 1, got {v}")
        out.append(alpha)
    return tuple(out)


def _parse_date(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is None:
        return None
    try:
        return datetime.date.fromisoformat(value).isoformat()
    except ValueError:
        raise click.BadParameter(f"{value!r} is not an ISO date (YYYY-MM-DD)") from None


def _summary(cal: CalibrationFile) -> str:
    out = [
        f"calibration {cal.name}@{cal.version}: scorer {cal.scorer} "
        f"(requested {cal.scorer_requested}), {cal.n_queries} queries, {cal.n_relevant} relevant "
        f"passages ({cal.n_queries_without_relevant} queries without a relevant candidate, "
        f"{cal.n_relevant_unscored} relevant unscored, {cal.n_queries_unlabelled} unlabelled)"
    ]
    for key, e in cal.pooled.items():
        thr = f"{e.threshold:.6g}" if e.threshold is not None else "inf (keep all)"
        out.append(f"  alpha={key}: pooled threshold {thr} (rank {e.rank} of n={e.n})")
    for cls, info in cal.class_info.items():
        out.append(
            f"  class {cls}: {info.n_queries} queries, {info.n_relevant} relevant -> bin {info.bin}"
            + (f" ({info.reason})" if info.reason else "")
        )
    return "\n".join(out)


def _labelled_by(
    data: LabelledInput, labels_path: Path, label_sources: Sequence[LabelSource]
) -> tuple[tuple[CandidateBatch, ...], int]:
    """The batches as the labels file labels them (the last label of each request)."""
    sources = tuple(label_sources) or ("analyst", "replay")
    if "verify" in sources:
        click.echo(
            "warning: verify labels name only passages the filter kept; a threshold "
            "calibrated on them keeps fewer relevant passages than it promises",
            err=True,
        )
    joined, n_bad = join_labels(data.batches, labels_path, sources=sources, last_per_request=True)
    click.echo(f"{len(joined)} batches labelled by {labels_path} ({', '.join(sources)})")
    return tuple(joined), n_bad


def _write_split(
    path: Path, test: Sequence[CandidateBatch], data: LabelledInput, *, relabelled: bool
) -> None:
    """The held-out batches: their lines unchanged, or as labelled by a labels file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        if relabelled:
            for b in sorted(test, key=lambda b: b.request_id):
                fh.write(encode(b).decode("utf-8") + "\n")
        else:
            for rid in sorted({b.request_id for b in test}):
                for line in data.lines[rid]:
                    fh.write(line + "\n")
    click.echo(f"wrote {len(test)} held-out batches to {path}")


@click.command("calibrate")
@click.argument("labelled", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--alpha",
    "alphas",
    multiple=True,
    callback=_parse_alphas,
    help="target miss rate in (0, 1) (repeat)",
)
@click.option("--by-class", is_flag=True, help="also calibrate per query class (Mondrian)")
@click.option(
    "--labels",
    "labels_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Label v1 JSONL (the labels topic's records): calibrate on the batches of LABELLED "
    "these label, with the last label of each request",
)
@click.option(
    "--label-source",
    "label_sources",
    multiple=True,
    type=click.Choice(LABEL_SOURCES),
    help="with --labels: the sources to use (repeat; default analyst and replay: verify "
    "labels name only passages the filter kept, and would lower the threshold's coverage)",
)
@click.option("--scorer", type=click.Choice(SCORER_NAMES), default="auto", show_default=True)
@click.option("--calib-fraction", type=float, default=1.0, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--split-test",
    type=click.Path(dir_okay=False, path_type=Path),
    help="write the held-out queries (1 - calib-fraction) here, lines unchanged",
)
@click.option("--min-per-class", type=int, default=DEFAULT_MIN_PER_CLASS, show_default=True)
@click.option("--name", default=None, help="calibration name (default: the output file's stem)")
@click.option("--version", "version_", default="1", show_default=True)
@click.option("--created", callback=_parse_date, help="ISO date to record (default: today)")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True)
@click.pass_context
def calibrate_cmd(
    ctx: click.Context,
    labelled: Path,
    alphas: tuple[float, ...],
    by_class: bool,
    labels_path: Path | None,
    label_sources: tuple[LabelSource, ...],
    scorer: str,
    calib_fraction: float,
    seed: int,
    split_test: Path | None,
    min_per_class: int,
    name: str | None,
    version_: str,
    created: str | None,
    output: Path,
) -> None:
    """Calibrate conformal thresholds on LABELLED (JSONL of labelled candidate batches)."""
    alphas = alphas or (0.05, 0.1, 0.2)
    if not 0.0 < calib_fraction <= 1.0:
        raise click.BadParameter("must be in (0, 1]", param_hint="--calib-fraction")
    if split_test is not None and calib_fraction >= 1.0:
        raise click.UsageError("--split-test needs --calib-fraction below 1 (e.g. 0.5)")
    if label_sources and labels_path is None:
        raise click.UsageError("--label-source needs --labels")
    data = read_labelled(labelled)
    batches, n_bad = data.batches, data.n_bad
    if labels_path is not None:
        batches, n_bad_labels = _labelled_by(data, labels_path, label_sources)
        n_bad += n_bad_labels
    split = split_by_query(batches, calib_fraction=calib_fraction, seed=seed)
    if calib_fraction < 1.0 and split_test is None:
        click.echo(
            f"warning: {len(split.test)} held-out batches are not written (no --split-test)",
            err=True,
        )
    try:
        cal = calibrate(
            split.calibration,
            alphas=alphas,
            scorer=scorer_from_name(scorer),
            by_class=by_class,
            classify=resolve_classifier() if by_class else None,
            min_per_class=min_per_class,
            data_hash=batches_sha256(split.calibration),
            created=created or datetime.date.today().isoformat(),
            name=name or output.stem,
            version=version_,
        )
    except ValueError as e:
        raise click.ClickException(str(e)) from e
    save_calibration(cal, output)
    click.echo(_summary(cal))
    click.echo(f"wrote {output}")
    if split_test is not None:
        _write_split(split_test, split.test, data, relabelled=labels_path is not None)
    if n_bad:
        ctx.exit(1)


@click.command("evaluate")
@click.argument("labelled", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--calibration",
    "calibration_path",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
)
@click.option(
    "--alpha",
    "alphas",
    multiple=True,
    callback=_parse_alphas,
    help="default: all in the file",
)
@click.option("--tolerance", type=float, default=DEFAULT_TOLERANCE, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="print the report as JSON")
@click.pass_context
def evaluate_cmd(
    ctx: click.Context,
    labelled: Path,
    calibration_path: Path,
    alphas: tuple[float, ...],
    tolerance: float,
    as_json: bool,
) -> None:
    """Evaluate a calibration on held-out LABELLED batches, beside top-k and a fixed cutoff."""
    try:
        cal = load_calibration(calibration_path)
    except CalibrationError as e:  # missing, unreadable or invalid: a usage error (exit 2)
        raise UsageFailure(str(e)) from e
    data = read_labelled(labelled)
    try:
        report = evaluate(
            data.batches,
            cal,
            classify=resolve_classifier() if cal.by_class else (lambda b: FALLBACK_CLASS),
            alphas=alphas or None,
            tolerance=tolerance,
        )
    except (CalibrationError, ValueError) as e:
        raise click.ClickException(str(e)) from e
    if as_json:
        click.echo(report.model_dump_json(by_alias=True, indent=2))
    else:
        click.echo(render_table(report), nl=False)
    if data.n_bad:
        ctx.exit(1)
