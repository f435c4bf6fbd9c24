"""`ctxbudget verify`: answers checked against their packs, offline, into Verdict v1 lines."""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Iterator
from contextlib import ExitStack
from typing import IO

import click

from ctxbudget.cli.common import open_in, open_out
from ctxbudget.codec import dead_letter, decode, encode
from ctxbudget.errors import InputError
from ctxbudget.jsonl import iter_lines
from ctxbudget.schemas import CandidateBatch, Lane, Pack, TraceEvent
from ctxbudget.verification import (
    Answer,
    AnswerVerifier,
    RequestFacts,
    Verdict,
    facts_from_batch,
    facts_from_traces,
)
from ctxbudget.verification.summary import render_summary, summarise

STAGE = "verify"
Key = tuple[str, Lane]


def _records(path: str, what: str) -> Iterator[tuple[str, bytes]]:
    """(``path:line``, raw line) of every non-blank line of a JSONL input."""
    with open_in(path, what=what) as fh:
        for n, raw in iter_lines(fh):
            yield f"{path}:{n}", raw


def _packs(path: str) -> dict[Key, Pack]:
    out: dict[Key, Pack] = {}
    for where, raw in _records(path, "packs"):
        try:
            pack = decode(raw, Pack)
        except InputError as e:
            click.echo(f"{where}: skipped: {e}", err=True)
            continue
        out.setdefault((pack.request_id, pack.lane), pack)
    return out


def _traces(path: str | None) -> dict[Key, list[TraceEvent]]:
    out: dict[Key, list[TraceEvent]] = defaultdict(list)
    if path is None:
        return out
    for where, raw in _records(path, "trace"):
        try:
            t = decode(raw, TraceEvent)
        except InputError as e:
            click.echo(f"{where}: skipped: {e}", err=True)
            continue
        out[(t.request_id, t.lane)].append(t)
    return out


def _batches(path: str | None) -> dict[str, CandidateBatch]:
    out: dict[str, CandidateBatch] = {}
    if path is None:
        return out
    for where, raw in _records(path, "batches"):
        try:
            b = decode(raw, CandidateBatch)
        except InputError as e:
            click.echo(f"{where}: skipped: {e}", err=True)
            continue
        out.setdefault(b.request_id, b)
    return out


def _facts(
    key: Key, batches: dict[str, CandidateBatch], traces: dict[Key, list[TraceEvent]]
) -> RequestFacts | None:
    batch = batches.get(key[0])
    events = traces.get(key, [])
    if batch is not None:
        return facts_from_batch(batch, events)
    return facts_from_traces(events) if events else None


def _write(fh: IO[bytes] | None, data: bytes) -> None:
    if fh is not None:
        fh.write(data + b"\n")


@click.command("verify")
@click.argument("answers", type=click.Path(allow_dash=True, dir_okay=False))
@click.option(
    "--packs",
    "packs_path",
    required=True,
    type=click.Path(allow_dash=True, dir_okay=False),
    help="Pack v1 JSONL the answers were written from (`ctxbudget pack -o`).",
)
@click.option("-o", "--output", default="-", show_default=True, help="Verdict v1 JSONL.")
@click.option(
    "--batches",
    "batches_path",
    type=click.Path(dir_okay=False),
    help="The CandidateBatches: with labels, the four-way diagnosis of expected evidence.",
)
@click.option(
    "--trace",
    "trace_path",
    type=click.Path(dir_okay=False),
    help="TraceEvent JSONL (`ctxbudget pack --trace`): why each dropped passage was dropped "
    "(and the labels, without --batches).",
)
@click.option("--dead-letter", "dead_path", help="DeadLetter v1 JSONL for answers not checked.")
def verify_cmd(
    answers: str,
    packs_path: str,
    output: str,
    batches_path: str | None,
    trace_path: str | None,
    dead_path: str | None,
) -> None:
    """Check ANSWERS (Answer v1 JSONL) against their packs: one Verdict v1 line per answer.

    Every cited id must be an evidence id of the pack (else fabricated_id); every number,
    date, unit, percentage and capitalised name of a claim must be in the text it cites
    (else unsupported_value, naming what is missing); a claim with such values and no
    citation is uncited. An answer that is not valid, or whose request and lane have no
    pack, goes to the dead letters. Exit status 0 when every answer was checked, 1 when one
    or more went to the dead letters, 2 for a usage error. A summary goes to stderr.
    """
    packs = _packs(packs_path)
    traces = _traces(trace_path)
    batches = _batches(batches_path)
    verifier = AnswerVerifier()
    verdicts: list[Verdict] = []
    dead = 0
    lines = list(_records(answers, "answers"))
    with ExitStack() as stack:
        out = stack.enter_context(open_out(output, what="verdicts"))
        dl = stack.enter_context(open_out(dead_path, what="dead letters"))
        for where, raw in lines:
            try:
                answer = decode(raw, Answer)
                key: Key = (answer.request_id, answer.lane)
                pack = packs.get(key)
                if pack is None:
                    raise InputError(f"no pack for request {key[0]!r} in lane {key[1]}")
                verdict = verifier.run(answer, pack, facts=_facts(key, batches, traces))
            except InputError as e:
                dead += 1
                click.echo(f"{where}: dead letter: {e}", err=True)
                path, line = where.rsplit(":", 1)
                _write(dl, encode(dead_letter(raw, e, stage=STAGE, source=path, line=int(line))))
                continue
            verdicts.append(verdict)
            _write(out, encode(verdict))
    click.echo(render_summary(summarise(verdicts)), err=True)
    summary = f"verify: {len(lines)} answers, {len(verdicts)} verdicts, {dead} dead letters"
    click.echo(summary, err=True)
    if dead:
        sys.exit(1)
