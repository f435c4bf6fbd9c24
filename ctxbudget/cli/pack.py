"""`ctxbudget pack`, `ctxbudget schema`, `ctxbudget policies`."""

from __future__ import annotations

import sys
import time
from typing import cast

import click
import orjson
from pydantic import BaseModel

from ctxbudget.cli.common import count_lines, load_store, open_out, read_lines
from ctxbudget.codec import dead_letter, decode_batch, encode
from ctxbudget.errors import CtxBudgetError, InputError
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

SCHEMAS: dict[str, type[BaseModel]] = {
    "candidate_batch": CandidateBatch,
    "routed_batch": RoutedBatch,
    "consolidated_batch": ConsolidatedBatch,
    "packed_batch": PackedBatch,
    "pack": Pack,
    "trace": TraceEvent,
    "dead_letter": DeadLetter,
}


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

    Exit status: 0 when every line packed, 1 when some lines went to the dead letters.
    """
    store = load_store(policies_opt)
    try:
        pipeline = Pipeline.from_store(store, policy_ref)
    except CtxBudgetError as e:
        raise click.ClickException(str(e)) from e
    show = sys.stderr.isatty() if progress is None else progress
    total = count_lines(batches) if show else None
    n_batches = n_packs = n_dead = tokens = 0
    bar = None
    if show:
        from tqdm import tqdm

        bar = tqdm(total=total, unit="batch", file=sys.stderr, dynamic_ncols=True)
    with open_out(output) as out, open_out(trace_path) as tr, open_out(dead_path) as dl:
        for line_no, raw in read_lines(batches):
            n_batches += 1
            try:
                batch = decode_batch(raw)
                result = pipeline.run(
                    batch,
                    lane=cast(Lane, lane),
                    cohort=cohort,
                    clock=time.perf_counter,
                )
            except InputError as e:
                n_dead += 1
                click.echo(f"line {line_no}: {e}", err=True)
                if dl is not None:
                    dl.write(
                        encode(dead_letter(raw, e, stage="pack", source=batches, line=line_no))
                        + b"\n"
                    )
            else:
                n_packs += 1
                tokens += result.pack.evidence_tokens
                assert out is not None
                out.write(encode(result.pack) + b"\n")
                if tr is not None:
                    tr.write(b"".join(encode(t) + b"\n" for t in result.traces))
            if bar is not None:
                bar.update(1)
    if bar is not None:
        bar.close()
    mean = tokens / n_packs if n_packs else 0.0
    click.echo(
        f"pack: {n_batches} batches, {n_packs} packs, {n_dead} dead letters, "
        f"mean evidence tokens {mean:.1f}",
        err=True,
    )
    if n_dead:
        sys.exit(1)


@click.command("schema")
@click.argument("name", type=click.Choice(sorted(SCHEMAS)))
def schema_cmd(name: str) -> None:
    """Print the JSON Schema of a wire message."""
    schema = SCHEMAS[name].model_json_schema(by_alias=True)
    click.echo(orjson.dumps(schema, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode())


@click.command("policies")
@click.option("--policies", "policies_opt", help="Policies folder (default: ./policies).")
def policies_cmd(policies_opt: str | None) -> None:
    """Validate the policies folder and list the policies in it."""
    store = load_store(policies_opt)
    for name in store.names():
        policy, rules = store.get(name)
        click.echo(
            f"{name}\t{len(rules.rules)} routing rules\t"
            f"calibration={policy.calibration or '-'}\t{policy.description}"
        )
