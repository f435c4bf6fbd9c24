"""The faust-streaming application: one agent per stage, each only moving bytes.

Delivery is at-least-once: an agent produces the stage's output and its trace, waits until
the broker has acknowledged both, and only then lets faust acknowledge the input record,
whose offset is committed afterwards (every ``commit_interval_s``). A record redelivered
after a crash produces the same bytes again (the stages are deterministic and keyed by
request_id), so consumers can drop duplicates by (request_id, stage, lane).

The CPU work of a stage runs in a small thread pool so the event loop keeps heartbeating
and fetching; the loop's lag is measured every half second and reported in the metrics.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any, NoReturn

import faust
import orjson
import structlog

from ctxbudget.codec import encode
from ctxbudget.errors import ConfigError
from ctxbudget.kafka import clients, scratch
from ctxbudget.kafka.control_follower import (
    ControlFollower,
    ControlHolder,
    RefusalLog,
    baseline_only,
    refusal_counter,
    starting_state,
    trusted_keys,
)
from ctxbudget.kafka.delivery import deliver, deliver_alone, handle_safely
from ctxbudget.kafka.handlers import (
    STAGES,
    Context,
    Handler,
    Metrics,
    Output,
    Pipelines,
    build_handler,
    input_topic,
    rollout_assignment,
)
from ctxbudget.kafka.lanes import check_roles, written_roles
from ctxbudget.kafka.limits import (
    PRODUCER_HEADROOM,
    TopicsMissingError,
    check_topics,
    load_specs,
    topic_limits,
)
from ctxbudget.kafka.logs import bind_request
from ctxbudget.kafka.logs import configure as configure_logs
from ctxbudget.kafka.observability import LANES, Observability, PackFacts
from ctxbudget.kafka.probe import BrokerProbe, ask_brokers
from ctxbudget.kafka.settings import WorkerSettings
from ctxbudget.kafka.transport import FetchWaitApp
from ctxbudget.limit_settings import LimitSettings
from ctxbudget.rollout import ControlApplied, ControlRefused, ControlState
from ctxbudget.signing import Verdict

#: Stages whose lanes depend on the control state.
CONTROLLED = ("route", "fused", "shadow")
#: Exit status of a worker that does not start because a topic it uses is missing (EX_CONFIG).
EXIT_TOPICS_MISSING = 78
#: The topics (roles of TopicNames) each stage writes records to, besides audit and dead letters.
#: What the worker says, at start and in readiness, when it trusts no control key.
NO_TRUSTED_KEY = (
    "no trusted control key (CTXBUDGET_CONTROL_TRUSTED_KEYS unset): the control topic is "
    "ignored, the baseline of rollout.yaml packs every request"
)


class WorkerObservability(Observability):
    """The worker's metrics and health; readiness also tells how the control state is held."""

    control_note = ""

    def ready(self) -> tuple[bool, str]:
        """Readiness and why, with the control note when there is one."""
        ok, why = super().ready()
        return ok, f"{why}; {self.control_note}" if self.control_note else why


def initial_state(settings: WorkerSettings, policies: Path) -> ControlState:
    """policies/rollout.yaml (its baseline replaced by CTXBUDGET_POLICY when that is set)."""
    return starting_state(settings, policies)


log = structlog.get_logger("ctxbudget.worker")

#: Most records one agent handles in one unit of work (see ``WorkerApp._consume``).
MAX_BATCH = 32


def _handle_all(handler: Handler, source: str, events: Sequence[Any]) -> list[list[Output]]:
    """Handle a batch of records in the CPU thread (handlers never raise for bad input)."""
    out = []
    for e in events:
        key = e.message.key
        with bind_request(key.decode("utf-8", "replace") if key else None):
            out.append(
                handle_safely(handler, e.message.value, source=source, offset=e.message.offset)
            )
    return out


def _exit_without_ack(error: BaseException, pending: int, datadir: str) -> NoReturn:
    """The broker cannot take outputs: stop at once, before any offset of them is committed
    (the inputs are redelivered after the restart, or to the worker taking them over)."""
    log.critical(
        "outputs not acknowledged by the broker; exiting without acking the inputs",
        error=repr(error),
        inputs=pending,
    )
    shutil.rmtree(datadir, ignore_errors=True)
    os._exit(70)


def _field(value: bytes, name: str) -> str | None:
    try:
        found = orjson.loads(value).get(name)
    except (orjson.JSONDecodeError, AttributeError):
        return None
    return found if isinstance(found, str) else None


def _pack_facts(value: bytes) -> PackFacts | None:
    try:
        pack = orjson.loads(value)
        return PackFacts(
            lane=str(pack["lane"]),
            evidence_tokens=int(pack["evidence_tokens"]),
            evidence_budget=int(pack["budget"]["evidence_budget"]),
            dropped={str(k): int(v) for k, v in pack.get("dropped", {}).items()},
            withheld=len(pack.get("withheld", ())),
        )
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return None


def _credentials(settings: WorkerSettings) -> Any:
    """faust's broker credentials, from the one client-config factory (ctxbudget.kafka.clients)."""
    return clients.faust_credentials(settings)


def name_of(stages: Sequence[str]) -> str:
    """The worker's name in its group id and scratch folder: its stages, or "all"."""
    return "-".join(stages) if len(stages) < 4 else "all"


class WorkerApp:
    """A faust App running the given stages ("all" = the four stages, one agent each)."""

    def __init__(
        self, settings: WorkerSettings, stages: Sequence[str], *, pipelines: Pipelines | None = None
    ) -> None:
        unknown = [s for s in stages if s not in STAGES]
        if unknown or not stages:
            raise ValueError(f"unknown stages {unknown}; expected some of {', '.join(STAGES)}")
        self.settings = settings
        self.stages = list(stages)
        self.metrics = Metrics()
        self.obs = WorkerObservability(worker="+".join(self.stages))
        self.refused = refusal_counter(self.obs.registry)
        self.probe: BrokerProbe | None = None
        self._skipped_seen = 0
        self.limits = LimitSettings()
        self.topic_specs = load_specs(settings)
        self.topic_limits = topic_limits(settings, self.limits, self.topic_specs)
        check_roles(
            settings.topics,
            self.written_roles(),
            self.topic_specs,
            writer=f"worker {name_of(stages)}",
        )
        self.keys = trusted_keys(settings)
        self.pipelines = pipelines or Pipelines(
            settings.policies, max_pair_checks=self.limits.max_pair_checks
        )
        self.file_state = initial_state(settings, self.pipelines.store.root)
        self.holder = ControlHolder(
            self.file_state
            if self.keys is not None
            else baseline_only(self.file_state, "no trusted control key: baseline only")
        )
        self.follower: ControlFollower | None = None
        self.ctx = Context(
            pipelines=self.pipelines,
            topics=settings.topics,
            metrics=self.metrics,
            assign=rollout_assignment(self.holder.get, "live"),
            limits=self.limits.input_limits(),
            write_intermediate=settings.write_intermediate,
            compact_intermediate=settings.compact_intermediate,
            topic_limits=self.topic_limits,
        )
        self.executor = ThreadPoolExecutor(
            max_workers=settings.cpu_threads, thread_name_prefix="ctxbudget-cpu"
        )
        self.max_lag_ms = 0.0
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}:{'+'.join(self.stages)}"
        self._producer: Any = None
        name = name_of(self.stages)
        folder, abandoned = scratch.make(name)  # and remove those of killed workers
        self._datadir = str(folder)
        if abandoned:
            log.info("removed scratch folders of stopped workers", folders=len(abandoned))
        # every consumer faust creates waits at most fetch_max_wait_ms for a fetch
        self.app = FetchWaitApp(
            f"{settings.group_prefix}-{name}",
            fetch_max_wait_ms=settings.fetch_max_wait_ms,
            broker=[f"kafka://{b}" for b in settings.bootstrap()],
            broker_credentials=_credentials(settings),
            value_serializer="raw",
            key_serializer="raw",
            broker_session_timeout=settings.session_timeout_s,
            broker_heartbeat_interval=settings.heartbeat_interval_s,
            broker_rebalance_timeout=settings.rebalance_timeout_s,
            broker_commit_interval=settings.commit_interval_s,
            consumer_auto_offset_reset="earliest",
            producer_acks=-1,
            producer_max_request_size=self.limits.max_message_bytes + PRODUCER_HEADROOM,
            # A fetch takes the largest request the producers may send.
            consumer_max_fetch_size=self.limits.max_message_bytes + PRODUCER_HEADROOM,
            topic_disable_leader=True,
            topic_allow_declare=False,
            web_enabled=False,
            processing_guarantee="at_least_once",
            # No tables: state lives in memory, and each process gets its own scratch folder
            # (two workers in one folder would otherwise share faust's data directory).
            store="memory://",
            datadir=self._datadir,
            broker_request_timeout=max(30.0, settings.session_timeout_s * 2),
        )
        self._out_topics: dict[str, faust.TopicT] = {}
        for stage in self.stages:
            self._add_agent(stage)
        self.app.timer(0.5)(self._measure_lag)
        self.app.timer(10.0)(self._log_metrics)
        self.app.timer(5.0)(self._observe_consumer)
        self.obs.expect(
            self.stages,
            outputs={stage: self._outputs(stage) for stage in self.stages},
            lanes=LANES if set(self.stages) & {"compress", "fused", "shadow"} else (),
            skip_label="+".join(self.stages),
        )

    def _topic(self, name: str) -> faust.TopicT:
        if name not in self._out_topics:
            self._out_topics[name] = self.app.topic(
                name, value_serializer="raw", key_serializer="raw"
            )
        return self._out_topics[name]

    def _add_agent(self, stage: str) -> None:
        ctx = self.ctx
        if stage == "shadow":
            ctx = replace(ctx, assign=rollout_assignment(self.holder.get, "shadow"))
        source = input_topic(stage, self.settings.topics)
        ctx = replace(ctx, limits=self.limits.input_limits(cap=self.topic_limits.get(source)))
        handler = build_handler(stage, ctx)
        topic = self._topic(source)
        for name in (
            self.settings.topics.routed,
            self.settings.topics.consolidated,
            self.settings.topics.packed,
            self.settings.topics.packs,
            self.settings.topics.shadow,
            self.settings.topics.audit,
            self.settings.topics.deadletter,
        ):
            self._topic(name)

        async def agent(stream: faust.StreamT[bytes]) -> None:
            await self._consume(handler, source, stream)

        agent.__name__ = f"stage_{stage}"
        self.app.agent(topic, name=f"ctxbudget.{stage}", concurrency=self.settings.concurrency)(
            agent
        )

    # -- the record-processing loop
    #
    # The agent's stream never acks by itself (``noack``): this loop acks an input only after
    # the broker has acknowledged every record made from it, so an offset is committed only
    # for inputs whose outputs are safe. A reader queues the events as they come (the queue
    # is bounded, so a slow stage holds back fetching); a processor takes whatever is queued,
    # up to MAX_BATCH: one executor call handles them all, their outputs are produced
    # together, the acks are awaited together, then the inputs are acked in arrival order.
    # Under load a batch grows and the per-record costs (thread hand-off, ack round trip)
    # are shared; at low rates a batch is one record and nothing waits for company.
    # Every output was checked against its topic's limit first. An output the broker still
    # refuses for what it is (too large, corrupt) makes its input go alone, then as a dead
    # letter, else skipped (ctxbudget.kafka.delivery): one record never stops a partition. Any other
    # failure (the broker unreachable, timing out, refusing access) ends the process without
    # acking: the inputs are redelivered to whoever takes the partitions over.

    async def _consume(self, handler: Handler, source: str, stream: Any) -> None:
        plain = stream.noack()
        queue: asyncio.Queue[Any] = asyncio.Queue(maxsize=2 * MAX_BATCH)
        processor = asyncio.ensure_future(self._process(handler, source, plain, queue))
        try:
            async for event in plain.events():
                await queue.put(event)
        finally:
            processor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await processor

    async def _process(self, handler: Handler, source: str, stream: Any, queue: Any) -> None:
        loop = asyncio.get_running_loop()
        while True:
            events = [await queue.get()]
            while len(events) < MAX_BATCH and not queue.empty():
                events.append(queue.get_nowait())
            started = time.perf_counter()
            try:
                results = await loop.run_in_executor(
                    self.executor, _handle_all, handler, source, events
                )
                handled = time.perf_counter() - started
                producer = self.app.producer
                refused = await deliver(producer, results)  # every output is on the broker
                for i, first in sorted(refused.items()):
                    message = events[i].message
                    await deliver_alone(
                        producer,
                        handler,
                        raw=message.value,
                        source=source,
                        offset=message.offset,
                        outputs=results[i],
                        first=first,
                    )
            except asyncio.CancelledError:
                raise
            except Exception as e:  # the broker cannot take outputs: do not ack the inputs
                _exit_without_ack(e, len(events), self._datadir)
            for event in events:
                await stream.ack(event)
            self.metrics.inc("records", len(events))
            # off the event loop: reading the packs' figures is CPU work
            self.executor.submit(self._observe, handler.stage, handled / len(events), results)

    def _observe(self, stage: str, seconds: float, results: Sequence[Sequence[Output]]) -> None:
        """Metrics of the records just handled (reads only the small Pack and dead-letter
        fields it needs; never evidence text)."""
        t = self.settings.topics
        for outputs in results:
            dead: list[str] = []
            packs: list[PackFacts] = []
            for out in outputs:
                if out.topic == t.deadletter:
                    dead.append(_field(out.value, "error_type") or "unknown")
                elif out.topic in (t.packs, t.shadow):
                    facts = _pack_facts(out.value)
                    if facts is not None:
                        packs.append(facts)
            self.obs.observe(
                stage, seconds, [o.topic for o in outputs], dead_letter_types=dead, packs=packs
            )

    async def _observe_consumer(self) -> None:
        """Consumer lag per assigned partition, readiness, the control state, and the records
        skipped since the last look (counted by the handlers and the delivery path)."""
        self.obs.tick()
        skipped = self.metrics.snapshot().get("skipped", 0)
        if skipped > self._skipped_seen:
            self.obs.skip("+".join(self.stages), skipped - self._skipped_seen)
            self._skipped_seen = skipped
        app = self.app
        # A rebalance has completed (generation ids start at 0 on some brokers: not a signal).
        joined = getattr(app, "rebalancing_count", 0) > 0 and not app.rebalancing
        self.obs.joined(joined)
        state = self.holder.get()
        self.obs.set_control(
            percent=state.percent, killed=state.killed, shadow=state.shadow, version=state.version
        )
        if not self.obs.broker_answering():
            self.obs.forget_lag()  # the last figures are stale, not "caught up"
            return
        try:
            consumer = app.consumer
            for tp in sorted(consumer.assignment()):
                end = consumer.highwater(tp)
                position = await consumer.position(tp)
                if end is not None and position is not None:
                    self.obs.set_lag(tp.topic, tp.partition, end - position)
        except Exception as e:  # lag is best effort; a rebalance may be under way
            log.debug("consumer lag not measured", error=str(e))

    async def _measure_lag(self) -> None:
        self.obs.tick()
        t0 = time.perf_counter()
        await asyncio.sleep(0.05)
        lag = (time.perf_counter() - t0 - 0.05) * 1000
        self.max_lag_ms = max(self.max_lag_ms, lag)
        if lag > 100:
            self.metrics.inc("loop_lag_over_100ms")

    async def _log_metrics(self) -> None:
        log.info(
            "metrics",
            stages=self.stages,
            max_loop_lag_ms=round(self.max_lag_ms, 1),
            **self.metrics.snapshot(),
        )

    def written_roles(self) -> list[str]:
        """The roles (fields of TopicNames) of the topics this worker writes records to."""
        return written_roles(self.stages, write_intermediate=self.settings.write_intermediate)

    def _outputs(self, stage: str) -> list[str]:
        """The topics ``stage`` writes records on: its outputs, the audit and dead letters."""
        t = self.settings.topics
        made = {
            "route": [t.routed],
            "consolidate": [t.consolidated],
            "select": [t.packed],
            "compress": [t.packs, t.shadow],
            "fused": [t.packs, t.shadow],
            "shadow": [t.shadow],
        }[stage]
        if stage == "fused" and self.settings.write_intermediate:
            made += [t.routed, t.consolidated, t.packed]
        return [*made, t.audit, t.deadletter]

    def used_topics(self) -> list[str]:
        """Every topic this worker reads or writes records on (the control topic aside)."""
        t = self.settings.topics
        names = [t.audit, t.deadletter]
        for stage in self.stages:
            names += [input_topic(stage, t), *self._outputs(stage)]
        return list(dict.fromkeys(names))

    def check_topics(self) -> None:
        """Refuse to start while a topic this worker reads or writes records on is missing
        (the broker would create it with its own defaults on first use); log how the others
        differ from their specs. The control topic is not checked: without it a worker packs
        with the baseline policy (``start_control``)."""
        if not self.settings.check_topics:
            return
        for warning in check_topics(self.settings, self.topic_specs, self.used_topics()):
            log.warning("topic differs from its spec: " + warning)

    def start_control(self, timeout_s: float = 10.0) -> None:
        """Read the control topic to its end before packing; fall back to the baseline only."""
        if not any(s in CONTROLLED for s in self.stages):
            self.obs.control_read()
            return
        if self.keys is None:
            self.obs.control_note = NO_TRUSTED_KEY
            self.obs.control_read()
            log.warning(NO_TRUSTED_KEY, baseline=self.file_state.baseline)
            return
        self.follower = ControlFollower(
            bootstrap=self.settings.bootstrap(),
            settings=self.settings,
            topic=self.settings.topics.control,
            holder=self.holder,
            keys=self.keys,
            known_policy=self._known_policy,
            on_apply=self._control_applied,
            refusals=RefusalLog(counter=self.refused, report=self._control_refused),
        )
        self.follower.start()
        if self.follower.wait_caught_up(timeout_s):
            self.obs.control_read()
            state = self.holder.get()
            log.info(
                "control state in force",
                trusted_keys=self.keys.ids(),
                key_id=state.key_id,
                version=state.version,
                baseline=state.baseline,
                candidate=state.candidate,
                percent=state.percent,
                shadow=state.shadow,
                killed=state.killed,
            )
            return
        self.holder.force(baseline_only(self.file_state))
        self.metrics.inc("control_unavailable")
        log.error(
            "CONTROL TOPIC UNREADABLE AT START: packing with the baseline policy only "
            f"({self.file_state.baseline}); will apply the control state once readable",
            topic=self.settings.topics.control,
        )

    def _known_policy(self, ref: str) -> bool:
        """Whether this worker has the policy ``ref`` (a control state naming another is
        refused: its requests would all be dead letters)."""
        try:
            self.pipelines.store.get(ref)
        except ConfigError:
            return False
        return True

    def _control_applied(self, before: ControlState, state: ControlState, lag_ms: float) -> None:
        self.metrics.inc("control_applied")
        self.obs.control_read()
        event = ControlApplied(
            worker=self.worker_id,
            version=state.version,
            lag_ms=lag_ms,
            killed=state.killed,
            key_id=state.key_id,
            before=before,
            after=state,
        )
        self._audit(event)

    def _control_refused(self, verdict: Verdict, where: str, size: int) -> None:
        held = self.holder.get()
        event = ControlRefused(
            worker=self.worker_id,
            reason=verdict.reason or "malformed",
            detail=verdict.detail[:500],
            key_id=verdict.key_id,
            version=verdict.version,
            size=size,
            where=where,
            held_version=held.version,
            held_key_id=held.key_id,
        )
        # not awaited: a flood of forged records must not hold back the next valid one
        self._audit(event, wait=False)

    def _audit(self, event: ControlApplied | ControlRefused, *, wait: bool = True) -> None:
        """Write a control audit record (best effort: the decision is made either way)."""
        try:
            producer = self._control_producer()
            producer.send(self.settings.topics.audit, key=b"control", value=encode(event))
            if wait:
                producer.flush(timeout=5)
        except Exception as e:
            log.warning("control audit not written", error=str(e))

    def _control_producer(self) -> Any:
        if self._producer is None:
            self._producer = clients.producer(
                self.settings, client_id="ctxbudget-control", acks="all"
            )
        return self._producer

    def _abandon(self) -> None:
        """Undo what construction and a start that failed made (nothing was consumed)."""
        self.obs.close()
        self.executor.shutdown(wait=False)
        shutil.rmtree(self._datadir, ignore_errors=True)

    def run(self) -> None:
        """Run until SIGTERM/SIGINT: faust then stops the agents, commits and leaves the group.

        Before anything starts, the metrics port is bound and a broker must answer: a taken
        port is a :class:`~ctxbudget.kafka.observability.MetricsPortInUseError`, an unreachable
        broker a :class:`~ctxbudget.kafka.probe.BrokerNotAnsweringError` (the command prints either
        in one line)."""
        configure_logs(
            level=self.settings.log_level,
            fmt=None if self.settings.log_format == "auto" else self.settings.log_format,
            evidence=self.settings.log_evidence,
        )
        try:
            port = self.obs.serve(self.settings.metrics_port) if self.settings.metrics_port else 0
            ask_brokers(self.settings)
        except BaseException:
            self._abandon()
            raise
        self.obs.broker_answered()
        log.info("worker starting", stages=self.stages, settings=self.settings.describe())
        if port:
            log.info("metrics and health served", port=port, paths="/metrics /healthz /readyz")
        try:
            self.check_topics()
        except TopicsMissingError as e:
            log.critical("WORKER NOT STARTED: " + str(e))
            self._abandon()
            raise SystemExit(EXIT_TOPICS_MISSING) from e
        self.probe = BrokerProbe.of(self.settings, self.obs)
        self.probe.start()
        self.start_control()
        worker = faust.Worker(
            self.app, loglevel=self.settings.log_level.lower(), quiet=True, override_logging=False
        )
        # faust's terminal spinner writes cursor escape codes even when the output is a log
        # file or a pipe (hide on first use, show at exit); a service has no use for it.
        worker.spinner = None
        try:
            worker.execute_from_commandline()
        finally:
            log.info(
                "final metrics",
                stages=self.stages,
                max_loop_lag_ms=round(self.max_lag_ms, 1),
                **self.metrics.snapshot(),
            )
            self.obs.close()
            if self.probe is not None:
                self.probe.stop()
            if self.follower is not None:
                self.follower.stop()
            if self._producer is not None:
                self._producer.close(timeout=5)
            self.executor.shutdown(wait=True)
            shutil.rmtree(self._datadir, ignore_errors=True)
