"""`ctxbudget replay` and `ctxbudget compare`: logged traffic through a candidate policy."""

from __future__ import annotations

import sys
import time
from collections.abc import Generator, Iterator
from datetime import datetime
from typing import IO, TYPE_CHECKING

import click
import orjson

from ctxbudget.cli.common import (
    Pacer,
    UsageFailure,
    iter_lines,
    load_store,
    open_in,
    open_out,
    topic_specs,
    worker_settings,
)
from ctxbudget.codec import decode, decode_batch
from ctxbudget.compare import compare, render
from ctxbudget.errors import ConfigError, CtxBudgetError, InputError
from ctxbudget.pipeline import Pipeline
from ctxbudget.schemas import CandidateBatch, Pack, ReplayInfo, TraceEvent
from ctxbudget.verification.models import Verdict

if TYPE_CHECKING:
    from ctxbudget.kafka import WorkerSettings
    from ctxbudget.kafka.io import TopicRecord, TopicWriter
    from ctxbudget.kafka.replay import ReplayTopics

Record = tuple[str, bytes, float | None]  # (where, raw bytes, timestamp in seconds or None)


def _parse_time(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return datetime.fromisoformat(value).timestamp()
    except ValueError as e:
        raise click.BadParameter(f"not an ISO date-time: {value!r}") from e


def _from_file(path: str, what: str = "TRAFFIC") -> Iterator[Record]:
    src = open_in(path, what=what)  # opened now: a missing file is a usage error at once
    return _lines_of(src, path)


def _lines_of(src: IO[bytes], path: str) -> Iterator[Record]:
    try:
        for n, raw in iter_lines(src):
            yield f"{path}:{n}", raw, None
    finally:
        if src is not sys.stdin.buffer:
            src.close()


def _from_topic(
    brokers: str,
    topic: str,
    *,
    from_offset: int | None,
    to_offset: int | None,
    since: float | None,
    until: float | None,
    idle_ms: int = 1000,
    settings: WorkerSettings,
) -> Iterator[Record]:
    """Read a topic from the start (or an offset) until it goes quiet, filtering by time.

    The consumer is made at once (an unreachable broker fails here, not mid-iteration).
    """
    from ctxbudget.kafka import io

    try:
        with io.reaching(brokers):
            consumer = io.client(
                "consumer",
                settings,
                brokers=brokers,
                client_id="ctxbudget-consumer",
                group_id=None,
                enable_auto_commit=False,
            )
    except io.BrokerUnreachableError as e:
        raise UsageFailure(str(e)) from e
    records = io.read_topic(
        consumer,
        topic,
        from_offset=from_offset,
        to_offset=to_offset,
        since=since,
        until=until,
        idle_ms=idle_ms,
    )
    return _replayable(records)


def _replayable(records: Generator[TopicRecord, None, None]) -> Iterator[Record]:
    from ctxbudget.kafka.io import TopicNotFoundError

    try:
        for r in records:
            ts = r.timestamp / 1000 if r.timestamp is not None else None
            yield r.where, r.value or b"", ts
    except TopicNotFoundError as e:
        raise click.ClickException(str(e)) from e
    finally:
        records.close()  # and the consumer, when the reading stops early


@click.command("replay")
@click.argument("traffic", required=False, type=click.Path(allow_dash=True))
@click.option("--from-topic", help="Read CandidateBatches from this topic instead of a file.")
@click.option("--from-offset", type=int, help="First offset (every partition).")
@click.option("--to-offset", type=int, help="Last offset, inclusive (every partition).")
@click.option("--since", help="Only records at or after this ISO time (topic source).")
@click.option("--until", help="Only records at or before this ISO time (topic source).")
@click.option("--rate", type=float, help="At most this many batches per second.")
@click.option("--speed", type=float, help="Replay at X times the recorded pace (topic source).")
@click.option("--policy", "policy_ref", required=True, help="Policy NAME@VERSION to pack with.")
@click.option("--run-id", required=True, help="Marks every replayed request and pack.")
@click.option("--brokers", envvar="CTXBUDGET_BROKERS", help="Write packs to the shadow topic.")
@click.option(
    "--shadow-topic",
    help="Shadow topic to write the packs to (default: $CTXBUDGET_TOPICS__SHADOW, "
    "ctx.shadow.v1); a live pack topic is refused.",
)
@click.option("--out", "out_path", help="Write the packs to this file instead (or as well).")
@click.option("--trace", "trace_path", help="Write the traces to this file.")
@click.option("--policies", "policies_opt", help="Policies folder (default: ./policies).")
@click.option("--progress/--no-progress", default=None)
def replay_cmd(
    traffic: str | None,
    from_topic: str | None,
    from_offset: int | None,
    to_offset: int | None,
    since: str | None,
    until: str | None,
    rate: float | None,
    speed: float | None,
    policy_ref: str,
    run_id: str,
    brokers: str | None,
    shadow_topic: str | None,
    out_path: str | None,
    trace_path: str | None,
    policies_opt: str | None,
    progress: bool | None,
) -> None:
    """Re-pack logged CandidateBatches with a policy, in the shadow lane only.

    Replayed requests carry replay.run_id; their packs go to the shadow topic (and the
    traces to the audit topic) or to --out, never to the live pack topic, whatever topic
    the traffic is read from.
    """
    if (traffic is None) == (from_topic is None):
        raise click.UsageError("give either a TRAFFIC file or --from-topic")
    if from_topic and not brokers:
        raise click.UsageError("--from-topic needs --brokers (or $CTXBUDGET_BROKERS)")
    if not brokers and not out_path:
        raise click.UsageError("nowhere to write: give --brokers and/or --out")
    settings = worker_settings()
    topics = _destinations(settings, shadow_topic)
    store = load_store(policies_opt)
    try:
        pipeline = Pipeline.from_store(store, policy_ref)
    except CtxBudgetError as e:
        raise click.ClickException(str(e)) from e
    records = (
        _from_file(traffic)
        if traffic is not None
        else _from_topic(
            brokers or "",
            from_topic or "",
            from_offset=from_offset,
            to_offset=to_offset,
            since=_parse_time(since),
            until=_parse_time(until),
            settings=settings,
        )
    )
    sink = _Sink(brokers, out_path, trace_path, settings=settings, topics=topics)
    pacer = Pacer(rate, speed)
    show = sys.stderr.isatty() if progress is None else progress
    bar = None
    if show:
        from tqdm import tqdm

        bar = tqdm(unit="batch", file=sys.stderr, dynamic_ncols=True, desc=f"replay {run_id}")
    n = bad = 0
    started = time.monotonic()
    marker = ReplayInfo(run_id=run_id)
    try:
        for where, raw, ts in records:
            pacer.wait(ts)
            n += 1
            try:
                batch = decode_batch(raw).model_copy(update={"replay": marker})
                result = pipeline.run(
                    batch, lane="shadow", cohort="replay", clock=time.perf_counter
                )
            except InputError as e:
                bad += 1
                click.echo(f"{where}: {e}", err=True)
            else:
                sink.write(result.pack, result.traces)
            if bar is not None:
                bar.update(1)
    finally:
        sink.close()
        if bar is not None:
            bar.close()
    took = time.monotonic() - started
    click.echo(
        f"replay {run_id}: {n} batches, {n - bad} shadow packs, {bad} rejected, "
        f"{n / took if took else 0:.0f} batches/s",
        err=True,
    )
    if bad:
        sys.exit(1)


def _destinations(settings: WorkerSettings, shadow_topic: str | None) -> ReplayTopics:
    """Where replay writes; a destination that is a live topic is a usage error (exit 2),
    whether it comes from --shadow-topic, the environment or the .env file."""
    from ctxbudget.kafka.replay import replay_topics

    try:
        return replay_topics(settings.topics, topic_specs(), shadow=shadow_topic)
    except ConfigError as e:
        raise UsageFailure(str(e)) from e


class _Sink:
    """Packs to the shadow topic and/or a file; never the live pack topic."""

    def __init__(
        self,
        brokers: str | None,
        out_path: str | None,
        trace_path: str | None,
        *,
        settings: WorkerSettings,
        topics: ReplayTopics,
    ) -> None:
        from ctxbudget.kafka import io

        self.topics = topics
        self._files = [
            open_out(out_path, what="--out file"),
            open_out(trace_path, what="--trace file"),
        ]
        self.out: IO[bytes] | None = self._files[0].__enter__()
        self.trace: IO[bytes] | None = self._files[1].__enter__()
        self.writer: TopicWriter | None = None
        if brokers:
            try:
                with io.reaching(brokers):
                    producer = io.client(
                        "producer",
                        settings,
                        brokers=brokers,
                        client_id="ctxbudget-producer",
                        acks="all",
                        linger_ms=5,
                    )
                self.writer = io.TopicWriter(producer)
            except io.BrokerUnreachableError as e:
                self._close_files()
                raise UsageFailure(str(e)) from e
            except BaseException:
                self._close_files()
                raise

    def write(self, pack: Pack, traces: tuple[TraceEvent, ...]) -> None:
        from ctxbudget.kafka.replay import replay_records

        first, *rest = replay_records(pack, traces, self.topics)
        if self.writer is not None:
            for r in (first, *rest):
                self.writer.send(r.topic, key=r.key, value=r.value)
        if self.out is not None:
            self.out.write(first.value + b"\n")
        if self.trace is not None:
            self.trace.write(b"".join(r.value + b"\n" for r in rest))

    def close(self) -> None:
        if self.writer is not None:
            self.writer.flush()
            self.writer.close()
        self._close_files()

    def _close_files(self) -> None:
        for f in self._files:
            f.__exit__(None, None, None)


def _read_packs(path: str, run_id: str | None, what: str) -> list[Pack]:
    out = []
    for where, raw, _ in _from_file(path, what):
        try:
            pack = decode(raw, Pack)
        except InputError as e:
            raise click.ClickException(f"{where}: {e}") from e
        if run_id is None or (pack.replay is not None and pack.replay.run_id == run_id):
            out.append(pack)
    return out


def _read_models(path: str, model: type[Verdict], what: str) -> list[Verdict]:
    """Every line of a JSONL file as ``model``; a bad line is an error naming it."""
    out = []
    for where, raw, _ in _from_file(path, what):
        try:
            out.append(decode(raw, model))
        except InputError as e:
            raise click.ClickException(f"{where}: {e}") from e
    return out


def _topic_packs(
    brokers: str,
    topic: str,
    run_id: str | None,
    *,
    since: float | None = None,
    until: float | None = None,
    settings: WorkerSettings,
) -> list[Pack]:
    out = []
    for where, raw, _ in _from_topic(
        brokers,
        topic,
        from_offset=None,
        to_offset=None,
        since=since,
        until=until,
        settings=settings,
    ):
        try:
            pack = decode(raw, Pack)
        except InputError as e:
            click.echo(f"{where}: skipped: {e}", err=True)
            continue
        if run_id is None or (pack.replay is not None and pack.replay.run_id == run_id):
            out.append(pack)
    return out


@click.command("compare")
@click.option("--live", "live_path", help="Live packs (JSONL); default: the live pack topic.")
@click.option("--shadow", "shadow_path", help="Shadow packs (JSONL); default: the shadow topic.")
@click.option("--run-id", help="Only shadow packs of this replay run.")
@click.option("--brokers", envvar="CTXBUDGET_BROKERS")
@click.option(
    "--batches",
    "batches_path",
    help="The CandidateBatches: labels for needed evidence, and the noise floor.",
)
@click.option(
    "--live-policy",
    default="default@1",
    show_default=True,
    help="Policy the noise floor packs the batches with (twice).",
)
@click.option("--policies", "policies_opt")
@click.option("--since", help="Topic packs written at or after this ISO time.")
@click.option("--until", help="Topic packs written at or before this ISO time.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option(
    "--verdicts",
    "verdict_paths",
    multiple=True,
    type=click.Path(dir_okay=False),
    help="Verdict JSONL (`ctxbudget verify -o`) of either lane; repeatable. With verdicts of "
    "both lanes the answers are compared too.",
)
def compare_cmd(
    live_path: str | None,
    shadow_path: str | None,
    run_id: str | None,
    brokers: str | None,
    batches_path: str | None,
    live_policy: str,
    policies_opt: str | None,
    since: str | None,
    until: str | None,
    as_json: bool,
    verdict_paths: tuple[str, ...] = (),
) -> None:
    """Compare live and shadow packs of the same requests (tokens, overlap, order, drops),
    and their answers when --verdicts give both lanes' (unsupported claims, citation
    precision, expected evidence cited)."""
    settings = worker_settings()
    topics = settings.topics
    if (live_path is None or shadow_path is None) and not brokers:
        raise click.UsageError("give --live and --shadow files, or --brokers to read the topics")
    live = (
        _read_packs(live_path, None, "--live file")
        if live_path
        else _topic_packs(
            brokers or "",
            topics.packs,
            None,
            since=_parse_time(since),
            until=_parse_time(until),
            settings=settings,
        )
    )
    shadow = (
        _read_packs(shadow_path, run_id, "--shadow file")
        if shadow_path
        else _topic_packs(
            brokers or "",
            topics.shadow,
            run_id,
            since=_parse_time(since),
            until=_parse_time(until),
            settings=settings,
        )
    )
    labels: dict[str, tuple[str, ...]] = {}
    noise = None
    if batches_path:
        batches: list[CandidateBatch] = []
        for where, raw, _ in _from_file(batches_path, "--batches file"):
            try:
                batches.append(decode_batch(raw))
            except InputError as e:
                raise click.ClickException(f"{where}: {e}") from e
        labels = {b.request_id: b.labels.relevant_chunk_ids for b in batches if b.labels}
        wanted = {p.request_id for p in shadow}
        store = load_store(policies_opt)
        first = Pipeline.from_store(store, live_policy)
        second = Pipeline.from_store(store, live_policy)
        noise = [(first.run(b).pack, second.run(b).pack) for b in batches if b.request_id in wanted]
    verdicts = [v for path in verdict_paths for v in _read_models(path, Verdict, "--verdicts file")]
    result = compare(live, shadow, labels=labels, noise=noise, verdicts=verdicts)
    if as_json:
        click.echo(orjson.dumps(result.model_dump(mode="json"), option=orjson.OPT_INDENT_2))
    else:
        click.echo(render(result))
