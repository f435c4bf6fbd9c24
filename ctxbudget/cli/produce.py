"""`ctxbudget produce` and `ctxbudget label`: put validated lines on a topic.

``produce`` sends CandidateBatch lines to the candidates topic; ``label`` sends Label v1 lines
(or the labels of labelled CandidateBatch lines, converted) to the labels topic.

Each line is decoded as strictly as a worker decodes it; a line that would not pack (not JSON,
fails validation, over the message size) is refused: reported with its line number (and
written to ``--dead-letter`` as a DeadLetter v1 record) and never sent. A valid line is sent
as it is, keyed by its request id, so a request's stages stay on one partition.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any

import click
import orjson

from ctxbudget.cli.common import (
    Pacer,
    UsageFailure,
    env_input_limits,
    iter_lines,
    one_line,
    open_in,
    open_out,
    topic_specs,
    worker_settings,
)
from ctxbudget.codec import dead_letter, decode_batch, encode
from ctxbudget.labels import LABEL_SOURCES, Label, LabelSource, label_of_batch
from ctxbudget.limits import InputLimits, check_message_size

if TYPE_CHECKING:
    from ctxbudget.kafka import WorkerSettings
    from ctxbudget.kafka.io import TopicWriter

#: Exit statuses of ``ctxbudget produce`` (as ``ctxbudget pack``'s).
EXIT_SENT, EXIT_REFUSED, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3


class InternalFailure(click.ClickException):
    """A failure outside the lines (a bug, the input stream breaking): exit status 3."""

    exit_code = EXIT_INTERNAL


@dataclass
class _Tally:
    """Counts, and what the producer's thread reported (acknowledged or failed sends)."""

    lines: int = 0
    refused: int = 0
    bytes_acked: int = 0
    #: line number -> raw bytes, for sends not answered yet
    pending: dict[int, bytes] = field(default_factory=dict)
    #: (line, request id, partition, offset) of every acknowledged record
    acked: list[tuple[int, str, int, int]] = field(default_factory=list)
    #: (line, raw, error) of every record sent but not acknowledged
    failed: list[tuple[int, bytes, BaseException]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def settle(self, line_no: int, error: BaseException | None, where: Any = None) -> None:
        """Record the broker's answer for one line (called by the producer's thread)."""
        with self.lock:
            raw = self.pending.pop(line_no, b"")
            if error is None:
                self.acked.append((line_no, where[0], where[1], where[2]))
                self.bytes_acked += len(raw)
            else:
                self.failed.append((line_no, raw, error))


def _connect(
    settings: WorkerSettings, brokers: str, topic: str, timeout_s: float, limits: InputLimits
) -> TopicWriter:
    """A writer, once the broker answers and the topic exists (usage errors otherwise)."""
    from ctxbudget.kafka import io
    from ctxbudget.kafka.limits import PRODUCER_HEADROOM

    try:
        return io.writer_for(
            settings,
            brokers=brokers,
            topic=topic,
            timeout_s=timeout_s,
            client_id="ctxbudget-produce",
            acks="all",
            linger_ms=5,
            max_request_size=limits.max_message_bytes + PRODUCER_HEADROOM,
        )
    except (io.BrokerUnreachableError, io.TopicNotFoundError) as e:
        raise UsageFailure(str(e)) from e


#: Checks one line against the input limits and returns its key and the bytes to send;
#: raises when it must be refused.
Validator = Callable[[bytes, InputLimits], tuple[str, bytes]]


def _validate(raw: bytes, limits: InputLimits) -> tuple[str, bytes]:
    """The line's request id and the line itself, if a worker would accept it; raises otherwise."""
    return decode_batch(raw, limits=limits).request_id, raw


def _label_validator(source: LabelSource) -> Validator:
    """Label v1 lines pass as they are; a labelled CandidateBatch line becomes its Label."""

    def validate(raw: bytes, limits: InputLimits) -> tuple[str, bytes]:
        check_message_size(len(raw), limits)
        doc = orjson.loads(raw)
        if isinstance(doc, dict) and doc.get("schema") == "ctx.label.v1":
            label = Label.model_validate_json(raw)
            return label.request_id, raw
        made = label_of_batch(decode_batch(raw, limits=limits), source)
        if made is None:
            raise ValueError("the batch carries no labels (labels.relevant_chunk_ids)")
        return made.request_id, encode(made)

    return validate


def _refuse(
    line_no: int, raw: bytes, error: BaseException, source: str, dl: IO[bytes] | None
) -> None:
    click.echo(f"line {line_no}: {one_line(error)}", err=True)
    if dl is not None:
        letter = dead_letter(raw, error, stage="produce", source=source, line=line_no)
        dl.write(encode(letter) + b"\n")


def _send(
    writer: TopicWriter, topic: str, line_no: int, rid: str, raw: bytes, tally: _Tally
) -> None:
    """Send one record; its outcome is recorded when the broker answers."""
    with tally.lock:
        tally.pending[line_no] = raw

    def done(error: BaseException | None, partition: int | None, offset: int | None) -> None:
        tally.settle(line_no, error, None if error is not None else (rid, partition, offset))

    try:
        writer.send(topic, key=rid.encode(), value=raw, on_done=done)
    except Exception as e:  # refused by the client itself (size, metadata timeout)
        tally.settle(line_no, e)


def _destination(
    settings: WorkerSettings,
    topic: str | None,
    *,
    writer: str = "produce",
    role: str = "candidates",
) -> str:
    """--topic, else the topic of ``role``; a live pack topic is a usage error (exit 2)."""
    from ctxbudget.kafka import LaneError, check_destination

    try:
        return check_destination(
            topic or getattr(settings.topics, role),
            settings.topics,
            topic_specs(),
            writer=writer,
            role=role,
        ).strip()
    except LaneError as e:
        raise UsageFailure(str(e)) from e


@click.command("produce")
@click.argument("batches", type=click.Path(allow_dash=True, dir_okay=False))
@click.option(
    "--brokers",
    envvar="CTXBUDGET_BROKERS",
    help="Bootstrap servers (default: $CTXBUDGET_BROKERS, else 127.0.0.1:9092).",
)
@click.option(
    "--topic",
    help="Topic to write (default: the candidates topic, $CTXBUDGET_TOPICS__CANDIDATES).",
)
@click.option(
    "--rate",
    type=click.FloatRange(min=0, min_open=True),
    help="At most this many batches per second (default: as fast as the broker takes them).",
)
@click.option(
    "--dead-letter",
    "dead_path",
    help="Write refused lines here as DeadLetter v1 records (with their line numbers).",
)
@click.option("--dry-run", is_flag=True, help="Validate only: connect to nothing, send nothing.")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=15.0,
    show_default=True,
    help="Seconds to wait for the broker: to answer at start, to acknowledge at the end.",
)
@click.option("-v", "--verbose", is_flag=True, help="List every record sent: line, key, place.")
def produce_cmd(
    batches: str,
    brokers: str | None,
    topic: str | None,
    rate: float | None,
    dead_path: str | None,
    dry_run: bool,
    timeout: float,
    verbose: bool,
) -> None:
    """Send the CandidateBatch v1 lines of BATCHES ('-' for stdin) to the candidates topic.

    Every line is validated first, as strictly as a worker reads it; a line that fails is
    reported with its line number (and written to --dead-letter) and not sent. The others
    are sent unchanged, keyed by their request id, and acknowledged by every in-sync
    replica. Security (SASL, TLS) comes from the CTXBUDGET_* settings, as for the workers.

    \b
    Exit status:
      0  every line was sent and acknowledged
      1  one or more lines were refused (invalid) or not acknowledged; the others were sent
      2  usage error: a bad option, BATCHES cannot be read, the broker cannot be reached,
         the topic does not exist, the --dead-letter file cannot be written
      3  internal failure outside any one line
    """
    settings = worker_settings()
    _run(
        settings,
        batches,
        brokers or settings.brokers,
        _destination(settings, topic),
        rate,
        dead_path,
        dry_run,
        timeout,
        verbose,
        _validate,
        name="produce",
        what="BATCHES",
    )


@click.command("label")
@click.argument("labels", type=click.Path(allow_dash=True, dir_okay=False))
@click.option(
    "--source",
    type=click.Choice(LABEL_SOURCES),
    default="analyst",
    show_default=True,
    help="Who labelled: given to labelled batches (Label v1 lines keep their own).",
)
@click.option(
    "--brokers",
    envvar="CTXBUDGET_BROKERS",
    help="Bootstrap servers (default: $CTXBUDGET_BROKERS, else 127.0.0.1:9092).",
)
@click.option("--topic", help="Topic to write (default: $CTXBUDGET_TOPICS__LABELS).")
@click.option(
    "--dead-letter", "dead_path", help="Write refused lines here as DeadLetter v1 records."
)
@click.option("--dry-run", is_flag=True, help="Validate only: connect to nothing, send nothing.")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=15.0,
    show_default=True,
    help="Seconds to wait for the broker: to answer at start, to acknowledge at the end.",
)
@click.option("-v", "--verbose", is_flag=True, help="List every record sent: line, key, place.")
def label_cmd(
    labels: str,
    source: LabelSource,
    brokers: str | None,
    topic: str | None,
    dead_path: str | None,
    dry_run: bool,
    timeout: float,
    verbose: bool,
) -> None:
    """Send the labels of LABELS ('-' for stdin) to the labels topic, for the coverage monitor.

    Each line is a Label v1 record, or a labelled CandidateBatch v1 whose
    labels.relevant_chunk_ids are sent as a Label with --source. Lines are keyed by request id;
    a line that is neither is refused with its line number. Exit statuses as `produce`.
    """
    settings = worker_settings()
    _run(
        settings,
        labels,
        brokers or settings.brokers,
        _destination(settings, topic, writer="label", role="labels"),
        None,
        dead_path,
        dry_run,
        timeout,
        verbose,
        _label_validator(source),
        name="label",
        what="LABELS",
    )


def _run(
    settings: WorkerSettings,
    path: str,
    brokers: str,
    topic: str,
    rate: float | None,
    dead_path: str | None,
    dry_run: bool,
    timeout: float,
    verbose: bool,
    validate: Validator,
    *,
    name: str,
    what: str,
) -> None:
    batches = path
    limits = env_input_limits()
    src = open_in(batches, what=what)
    tally = _Tally()
    started = time.monotonic()
    try:
        with open_out(dead_path, what="--dead-letter file") as dl:
            writer = None if dry_run else _connect(settings, brokers, topic, timeout, limits)
            try:
                _produce_lines(src, batches, writer, topic, limits, rate, dl, tally, validate)
            finally:
                if writer is not None:
                    _finish(writer, timeout, tally)
            if dl is not None:
                for line_no, raw, error in sorted(tally.failed, key=lambda f: f[0]):
                    letter = dead_letter(raw, error, stage=name, source=batches, line=line_no)
                    dl.write(encode(letter) + b"\n")
    except click.ClickException:
        raise
    except Exception as e:
        raise InternalFailure(
            f"internal failure after {tally.lines} lines ({len(tally.acked)} sent): {one_line(e)}"
        ) from e
    finally:
        if src is not sys.stdin.buffer:
            src.close()
    _report(tally, topic, brokers, dry_run, verbose, time.monotonic() - started, name)
    if tally.refused or tally.failed:
        sys.exit(EXIT_REFUSED)


def _produce_lines(
    src: IO[bytes],
    source: str,
    writer: TopicWriter | None,
    topic: str,
    limits: InputLimits,
    rate: float | None,
    dl: IO[bytes] | None,
    tally: _Tally,
    validate: Validator,
) -> None:
    pacer = Pacer(rate)
    for line_no, raw in iter_lines(src):
        tally.lines += 1
        try:
            rid, value = validate(raw, limits)
        except Exception as e:  # whatever is wrong with a line, it is that line's refusal
            tally.refused += 1
            _refuse(line_no, raw, e, source, dl)
            continue
        if writer is None:  # --dry-run
            continue
        if rate:
            pacer.wait()
        _send(writer, topic, line_no, rid, value, tally)


def _finish(writer: TopicWriter, timeout_s: float, tally: _Tally) -> None:
    """Wait for the acknowledgements; a send still unanswered then counts as failed."""
    try:
        writer.flush(timeout_s)
    finally:
        writer.close(timeout_s=5)
    with tally.lock:
        late = sorted(tally.pending)
    for line_no in late:
        tally.settle(line_no, TimeoutError(f"not acknowledged within {timeout_s:g} s"))


def _report(
    tally: _Tally, topic: str, brokers: str, dry_run: bool, verbose: bool, took: float, name: str
) -> None:
    if verbose:
        for line_no, rid, partition, offset in sorted(tally.acked):
            click.echo(f"line {line_no}: {rid} -> {topic}[{partition}]@{offset}", err=True)
    for line_no, _, error in sorted(tally.failed, key=lambda f: f[0]):
        click.echo(f"line {line_no}: not sent: {one_line(error)}", err=True)
    if dry_run:
        click.echo(
            f"{name}: {tally.lines} lines, {tally.lines - tally.refused} valid, "
            f"{tally.refused} refused (dry run: nothing sent)",
            err=True,
        )
        return
    acked = len(tally.acked)
    partitions = len({p for _, _, p, _ in tally.acked})
    click.echo(
        f"{name}: {tally.lines} lines, {acked} sent to {topic} at {brokers} "
        f"(key: request_id, {partitions} partition(s), {tally.bytes_acked / 1024:.1f} KiB, "
        f"{took:.1f} s), {tally.refused} refused, {len(tally.failed)} not acknowledged",
        err=True,
    )
