"""`ctxbudget pack`, `ctxbudget schema`, `ctxbudget policies`."""

from __future__ import annotations

import os
import stat
import sys
import time
from contextlib import ExitStack
from dataclasses import dataclass
from typing import IO, Any, cast

import click
import orjson
from pydantic import BaseModel

from ctxbudget.cli.common import (
    UsageFailure,
    count_lines,
    env_input_limits,
    iter_lines,
    load_store,
    open_in,
    open_out,
)
from ctxbudget.codec import dead_letter, decode_batch, encode
from ctxbudget.errors import CtxBudgetError, one_line
from ctxbudget.labels import Label
from ctxbudget.limits import InputLimits
from ctxbudget.pipeline import Pipeline
from ctxbudget.schemas import (
    CandidateBatch,
    ConsolidatedBatch,
    DeadLetter,
    Lane,
    Pack,
    PackedBatch,
    RoutedBatch,
    TraceEvent,
)
from ctxbudget.verification.models import Answer, Verdict

SCHEMAS: dict[str, type[BaseModel]] = {
    "candidate_batch": CandidateBatch,
    "label": Label,
    "routed_batch": RoutedBatch,
    "consolidated_batch": ConsolidatedBatch,
    "packed_batch": PackedBatch,
    "pack": Pack,
    "trace": TraceEvent,
    "dead_letter": DeadLetter,
    "answer": Answer,
    "verdict": Verdict,
}

#: Exit statuses of ``ctxbudget pack`` (documented in its --help).
EXIT_PACKED, EXIT_DEAD_LETTERS, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3


class InternalFailure(click.ClickException):
    """A failure outside the lines (the output broke, a bug): one line, exit status 3."""

    exit_code = EXIT_INTERNAL


@dataclass
class _Tally:
    batches: int = 0
    packs: int = 0
    dead: int = 0
    tokens: int = 0


@dataclass
class _Packer:
    """Turns one line into its output bytes; never writes, so a bad line leaves no trace."""

    pipeline: Pipeline
    lane: Lane
    cohort: str
    limits: InputLimits | None = None

    def __call__(self, raw: bytes) -> tuple[bytes, bytes, int]:
        batch = decode_batch(raw, limits=self.limits)
        result = self.pipeline.run(
            batch, lane=self.lane, cohort=self.cohort, clock=time.perf_counter
        )
        pack = encode(result.pack) + b"\n"
        traces = b"".join(encode(t) + b"\n" for t in result.traces)
        return pack, traces, result.pack.evidence_tokens


def _pack_lines(
    src: IO[bytes],
    packer: _Packer,
    outs: tuple[IO[bytes] | None, IO[bytes] | None, IO[bytes] | None],
    source: str,
    tally: _Tally,
    bar: Any,
) -> None:
    out, tr, dl = outs
    assert out is not None
    for line_no, raw in iter_lines(src):
        tally.batches += 1
        try:
            pack, traces, tokens = packer(raw)
        except Exception as e:  # any failure of one line is that line's dead letter
            click.echo(f"line {line_no}: {one_line(e)}", err=True)
            if dl is not None:
                letter = dead_letter(raw, e, stage="pack", source=source, line=line_no)
                dl.write(encode(letter) + b"\n")
            tally.dead += 1
        else:
            out.write(pack)
            if tr is not None:
                tr.write(traces)
            tally.packs += 1
            tally.tokens += tokens
        if bar is not None:
            bar.update(1)


def _total(src: IO[bytes], path: str) -> int | None:
    """The number of lines to come, when the input is a regular file (for the progress bar)."""
    try:
        regular = stat.S_ISREG(os.fstat(src.fileno()).st_mode)
    except (OSError, ValueError, AttributeError):
        regular = False
    return count_lines(path) if regular and path != "-" else None


def _silence_stdout() -> None:
    """After stdout broke, point it at /dev/null so the exit does not complain again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


def _load_pipeline(
    policies_opt: str | None, policy_ref: str, limits: InputLimits | None = None
) -> Pipeline:
    """The pipeline of the policy; a policy that cannot be had is a usage error."""
    store = load_store(policies_opt, usage=True)
    try:
        if limits is None:
            return Pipeline.from_store(store, policy_ref)
        return Pipeline.from_store(store, policy_ref, max_pair_checks=limits.max_pair_checks)
    except CtxBudgetError as e:
        raise UsageFailure(str(e)) from e
    except OSError as e:
        raise UsageFailure(f"cannot load policy {policy_ref!r}: {one_line(e)}") from e


@click.command("pack")
@click.argument("batches", type=click.Path(allow_dash=True))
@click.option(
    "-o", "--output", default="-", show_default=True, help="Pack v1 JSONL output ('-' for stdout)."
)
@click.option("--trace", "trace_path", help="Write TraceEvent v1 JSONL here.")
@click.option("--dead-letter", "dead_path", help="Write bad lines here (DeadLetter v1 JSONL).")
@click.option(
    "--policy", "policy_ref", default="default@1", show_default=True, help="Policy as NAME@VERSION."
)
@click.option("--policies", "policies_opt", help="Policies folder (default: ./policies).")
@click.option("--lane", type=click.Choice(["live", "shadow"]), default="live", show_default=True)
@click.option("--cohort", default="baseline", show_default=True)
@click.option(
    "--progress/--no-progress",
    default=None,
    help="Progress bar (default: when stderr is a terminal).",
)
def pack_cmd(
    batches: str,
    output: str,
    trace_path: str | None,
    dead_path: str | None,
    policy_ref: str,
    policies_opt: str | None,
    lane: str,
    cohort: str,
    progress: bool | None,
) -> None:
    """Pack each CandidateBatch v1 line of BATCHES ('-' for stdin) into a Pack v1 line.

    A line that cannot be packed, whatever the reason, becomes one DeadLetter v1 record
    (with its line number) and the run goes on: every line gives exactly one pack or one
    dead letter, and the packs come out in the order of their lines. Lines are held to the
    workers' input limits (CTXBUDGET_MAX_MESSAGE_BYTES, _CANDIDATES, _TEXT_BYTES,
    _JSON_DEPTH, _PAIR_CHECKS; the defaults when unset).

    \b
    Exit status:
      0  every line was packed
      1  one or more lines went to the dead letters (the others were packed)
      2  usage error: a bad option, BATCHES cannot be read, an unknown policy or
         policies folder, an output file that cannot be written
      3  internal failure outside any one line (e.g. the output stream broke);
         the output so far may be incomplete
    """
    src = open_in(batches, what="BATCHES")
    try:
        limits = env_input_limits()
        try:
            pipeline = _load_pipeline(policies_opt, policy_ref, limits)
        except click.ClickException:
            raise
        except Exception as e:  # not a usage error: a bug or a broken installation
            raise InternalFailure(f"internal failure loading the policy: {one_line(e)}") from e
        paths = (output, trace_path, dead_path)
        tally = _run(src, batches, pipeline, paths, lane, cohort, progress, limits)
    finally:
        if src is not sys.stdin.buffer:
            src.close()
    mean = tally.tokens / tally.packs if tally.packs else 0.0
    click.echo(
        f"pack: {tally.batches} batches, {tally.packs} packs, {tally.dead} dead letters, "
        f"mean evidence tokens {mean:.1f}",
        err=True,
    )
    if tally.dead:
        sys.exit(EXIT_DEAD_LETTERS)


def _run(
    src: IO[bytes],
    batches: str,
    pipeline: Pipeline,
    paths: tuple[str, str | None, str | None],
    lane: str,
    cohort: str,
    progress: bool | None,
    limits: InputLimits | None = None,
) -> _Tally:
    """Open the outputs and pack every line; a failure outside the lines is exit status 3."""
    tally = _Tally()
    packer = _Packer(pipeline, cast(Lane, lane), cohort, limits)
    output, trace_path, dead_path = paths
    bar = None
    try:
        with ExitStack() as stack:
            out = stack.enter_context(open_out(output, what="output"))
            tr = stack.enter_context(open_out(trace_path, what="--trace file"))
            dl = stack.enter_context(open_out(dead_path, what="--dead-letter file"))
            show = sys.stderr.isatty() if progress is None else progress
            if show:
                from tqdm import tqdm

                bar = tqdm(
                    total=_total(src, batches), unit="batch", file=sys.stderr, dynamic_ncols=True
                )
            _pack_lines(src, packer, (out, tr, dl), batches, tally, bar)
    except click.ClickException:
        raise
    except Exception as e:
        if isinstance(e, BrokenPipeError) and output == "-":
            _silence_stdout()
        raise InternalFailure(
            f"internal failure after {tally.batches} lines ({tally.packs} packs, "
            f"{tally.dead} dead letters): {one_line(e)}"
        ) from e
    finally:
        if bar is not None:
            bar.close()
    return tally


@click.command("schema")
@click.argument("name", type=click.Choice(sorted(SCHEMAS)))
def schema_cmd(name: str) -> None:
    """Print the JSON Schema of a wire message."""
    schema = SCHEMAS[name].model_json_schema(by_alias=True)
    click.echo(orjson.dumps(schema, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode())


@click.command("policies")
@click.option("--policies", "policies_opt", help="Policies folder (default: ./policies).")
def policies_cmd(policies_opt: str | None) -> None:
    """Validate the policies folder and list the policies in it.

    Every policy is loaded as a worker loads it: its routing rules, and its calibration
    file when it names one (a missing or unreadable file, or an alpha the file does not
    hold, is an error naming the file). rollout.yaml, when present, must name known
    policies. Exit status 1 when anything is wrong.
    """
    from ctxbudget.filters import filter_for
    from ctxbudget.rollout import load_rollout

    store = load_store(policies_opt)
    problems: list[str] = []
    for name in store.names():
        policy, rules = store.get(name)
        try:
            filter_for(policy, store.root)
        except CtxBudgetError as e:
            problems.append(f"{name}: {one_line(e)}")
            continue
        click.echo(
            f"{name}\t{len(rules.rules)} routing rules\t"
            f"calibration={policy.calibration or '-'}\t{policy.description}"
        )
    rollout = store.root / "rollout.yaml"
    if rollout.exists():
        try:
            state = load_rollout(rollout)
            for ref in (state.baseline, state.candidate):
                if ref is not None:
                    store.get(ref)
        except CtxBudgetError as e:
            problems.append(f"{rollout}: {one_line(e)}")
    for problem in problems:
        click.echo(f"Error: {problem}", err=True)
    if problems:
        sys.exit(1)
