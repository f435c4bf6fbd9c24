"""`ctxbudget produce`: put CandidateBatch lines on the candidates topic, validated first.

Each line is decoded as strictly as a worker decodes it; a line that would not pack (not JSON,
fails validation, over the message size) is refused: reported with its line number (and
written to ``--dead-letter`` as a DeadLetter v1 record) and never sent. A valid line is sent
as it is, keyed by its request id, so a request's stages stay on one partition.
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any

import click

from ctxbudget.cli.common import (
    Pacer,
    UsageFailure,
    iter_lines,
    one_line,
    open_in,
    open_out,
    topic_specs,
    worker_settings,
)
from ctxbudget.codec import dead_letter, decode_batch, encode

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


def _connect(settings: WorkerSettings, brokers: str, topic: str, timeout_s: float) -> TopicWriter:
    """A writer, once the broker answers and the topic exists (usage errors otherwise)."""
    from ctxbudget.kafka import io

    try:
        return io.writer_for(
            settings,
            brokers=brokers,
            topic=topic,
            timeout_s=timeout_s,
            client_id="ctxbudget-produce",
            acks="all",
            linger_ms=5,
            max_request_size=settings.max_message_bytes + 65536,
        )
    except (io.BrokerUnreachableError, io.TopicNotFoundError) as e:
        raise UsageFailure(str(e)) from e


def _validate(raw: bytes, max_bytes: int) -> str:
    """The line's request id, if a worker would accept the line; raises otherwise."""
    if len(raw) > max_bytes:
        raise ValueError(
            f"line is {len(raw)} bytes, over the {max_bytes}-byte message limit "
            "(CTXBUDGET_MAX_MESSAGE_BYTES)"
        )
    return decode_batch(raw).request_id


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


def _destination(settings: WorkerSettings, topic: str | None) -> str:
    """--topic, else the candidates topic; a live pack topic is a usage error (exit 2)."""
    from ctxbudget.kafka import LaneError, check_destination

    try:
        return check_destination(
            topic or settings.topics.candidates,
            settings.topics,
            topic_specs(),
            writer="produce",
            role="candidates",
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
    brokers = brokers or settings.brokers
    topic = _destination(settings, topic)
    src = open_in(batches, what="BATCHES")
    tally = _Tally()
    started = time.monotonic()
    try:
        with open_out(dead_path, what="--dead-letter file") as dl:
            writer = None if dry_run else _connect(settings, brokers, topic, timeout)
            try:
                _produce_lines(src, batches, writer, topic, settings, rate, dl, tally)
            finally:
                if writer is not None:
                    _finish(writer, timeout, tally)
            if dl is not None:
                for line_no, raw, error in sorted(tally.failed, key=lambda f: f[0]):
                    letter = dead_letter(raw, error, stage="produce", source=batches, line=line_no)
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
    _report(tally, topic, brokers, dry_run, verbose, time.monotonic() - started)
    if tally.refused or tally.failed:
        sys.exit(EXIT_REFUSED)


def _produce_lines(
    src: IO[bytes],
    source: str,
    writer: TopicWriter | None,
    topic: str,
    settings: WorkerSettings,
    rate: float | None,
    dl: IO[bytes] | None,
    tally: _Tally,
) -> None:
    pacer = Pacer(rate)
    for line_no, raw in iter_lines(src):
        tally.lines += 1
        try:
            rid = _validate(raw, settings.max_message_bytes)
        except Exception as e:  # whatever is wrong with a line, it is that line's refusal
            tally.refused += 1
            _refuse(line_no, raw, e, source, dl)
            continue
        if writer is None:  # --dry-run
            continue
        if rate:
            pacer.wait()
        _send(writer, topic, line_no, rid, raw, tally)


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
    tally: _Tally, topic: str, brokers: str, dry_run: bool, verbose: bool, took: float
) -> None:
    if verbose:
        for line_no, rid, partition, offset in sorted(tally.acked):
            click.echo(f"line {line_no}: {rid} -> {topic}[{partition}]@{offset}", err=True)
    for line_no, _, error in sorted(tally.failed, key=lambda f: f[0]):
        click.echo(f"line {line_no}: not sent: {one_line(error)}", err=True)
    if dry_run:
        click.echo(
            f"produce: {tally.lines} lines, {tally.lines - tally.refused} valid, "
            f"{tally.refused} refused (dry run: nothing sent)",
            err=True,
        )
        return
    acked = len(tally.acked)
    partitions = len({p for _, _, p, _ in tally.acked})
    click.echo(
        f"produce: {tally.lines} lines, {acked} sent to {topic} at {brokers} "
        f"(key: request_id, {partitions} partition(s), {tally.bytes_acked / 1024:.1f} KiB, "
        f"{took:.1f} s), {tally.refused} refused, {len(tally.failed)} not acknowledged",
        err=True,
    )
