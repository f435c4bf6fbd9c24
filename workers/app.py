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
import ssl
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any, NoReturn

import faust
import structlog

from ctxbudget.codec import encode
from ctxbudget.rollout import ControlApplied, ControlState, load_rollout
from workers.control import ControlFollower, ControlHolder, baseline_only
from workers.handlers import (
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
from workers.settings import WorkerSettings

#: Stages whose lanes depend on the control state.
CONTROLLED = ("route", "fused", "shadow")


def limit_fetch_wait(ms: int) -> None:
    """Cap the consumer's fetch wait (faust hard-codes 1500 ms for aiokafka).

    A broker may hold a fetch until the wait runs out even when records arrive (the embedded
    broker does: a record then waits up to the full wait before a worker sees it), so the
    wait bounds the added latency of every hop. Applied once per process, to every consumer
    faust creates.
    """
    import aiokafka

    cls: Any = aiokafka.AIOKafkaConsumer
    original = getattr(cls, "_ctxbudget_init", None) or cls.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        kwargs["fetch_max_wait_ms"] = ms
        original(self, *args, **kwargs)

    cls._ctxbudget_init = original
    cls.__init__ = init


def initial_state(settings: WorkerSettings, policies: Path) -> ControlState:
    """policies/rollout.yaml when present, else the baseline from CTXBUDGET_POLICY."""
    path = policies / "rollout.yaml"
    return load_rollout(path) if path.exists() else ControlState(baseline=settings.policy)


log = structlog.get_logger("ctxbudget.worker")

#: Most records one agent handles in one unit of work (see ``WorkerApp._consume``).
MAX_BATCH = 32


def _handle_all(handler: Handler, source: str, events: Sequence[Any]) -> list[list[Output]]:
    """Handle a batch of records in the CPU thread (handlers never raise for bad input)."""
    return [handler.handle(e.message.value, source=source, offset=e.message.offset) for e in events]


def _exit_without_ack(error: BaseException, pending: int) -> NoReturn:
    """Outputs were not acknowledged: stop at once, before any offset of them is committed."""
    log.critical(
        "outputs not acknowledged by the broker; exiting without acking the inputs",
        error=repr(error),
        inputs=pending,
    )
    os._exit(70)


def _credentials(settings: WorkerSettings) -> Any:
    proto = settings.security_protocol
    if proto == "PLAINTEXT":
        return None
    context = None
    if proto in ("SSL", "SASL_SSL"):
        context = ssl.create_default_context(
            cafile=str(settings.ssl_cafile) if settings.ssl_cafile else None
        )
        if settings.ssl_certfile:
            context.load_cert_chain(
                str(settings.ssl_certfile),
                str(settings.ssl_keyfile) if settings.ssl_keyfile else None,
            )
    if proto == "SSL":
        return faust.SSLCredentials(context)
    password = settings.sasl_password.get_secret_value() if settings.sasl_password else ""
    return faust.SASLCredentials(
        username=settings.sasl_username or "",
        password=password,
        mechanism=settings.sasl_mechanism,
        ssl_context=context,
    )


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
        self.pipelines = pipelines or Pipelines(settings.policies)
        self.file_state = initial_state(settings, self.pipelines.store.root)
        self.holder = ControlHolder(self.file_state)
        self.follower: ControlFollower | None = None
        self.ctx = Context(
            pipelines=self.pipelines,
            topics=settings.topics,
            metrics=self.metrics,
            assign=rollout_assignment(self.holder.get, "live"),
            max_bytes=settings.max_message_bytes,
            write_intermediate=settings.write_intermediate,
            compact_intermediate=settings.compact_intermediate,
        )
        self.executor = ThreadPoolExecutor(
            max_workers=settings.cpu_threads, thread_name_prefix="ctxbudget-cpu"
        )
        self.max_lag_ms = 0.0
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}:{'+'.join(self.stages)}"
        self._producer: Any = None
        name = "-".join(self.stages) if len(self.stages) < 4 else "all"
        self._datadir = tempfile.mkdtemp(prefix=f"ctxbudget-{name}-")
        limit_fetch_wait(settings.fetch_max_wait_ms)
        self.app = faust.App(
            f"{settings.group_prefix}-{name}",
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
            producer_max_request_size=settings.max_message_bytes + 65536,
            consumer_max_fetch_size=settings.max_message_bytes + 65536,
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
        handler = build_handler(stage, ctx)
        source = input_topic(stage, self.settings.topics)
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
    # An output the broker refuses (after the producer's own retries) ends the process
    # without acking: the inputs are redelivered to whoever takes the partitions over.

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
            try:
                results = await loop.run_in_executor(
                    self.executor, _handle_all, handler, source, events
                )
                producer = self.app.producer
                acks = [
                    await producer.send(o.topic, o.key, o.value, None, None, None)
                    for outputs in results
                    for o in outputs
                ]
                await asyncio.gather(*acks)  # every output is on the broker
            except asyncio.CancelledError:
                raise
            except Exception as e:  # whatever it was, the inputs must not be acked
                _exit_without_ack(e, len(events))
            for event in events:
                await stream.ack(event)
            self.metrics.inc("records", len(events))

    async def _measure_lag(self) -> None:
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

    def start_control(self, timeout_s: float = 10.0) -> None:
        """Read the control topic to its end before packing; fall back to the baseline only."""
        if not any(s in CONTROLLED for s in self.stages):
            return
        self.follower = ControlFollower(
            bootstrap=self.settings.bootstrap(),
            topic=self.settings.topics.control,
            holder=self.holder,
            on_apply=self._control_applied,
        )
        self.follower.start()
        if self.follower.wait_caught_up(timeout_s):
            state = self.holder.get()
            log.info(
                "control state in force",
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

    def _control_applied(self, state: ControlState, lag_ms: float) -> None:
        self.metrics.inc("control_applied")
        event = ControlApplied(
            worker=self.worker_id, version=state.version, lag_ms=lag_ms, killed=state.killed
        )
        try:
            producer = self._control_producer()
            producer.send(self.settings.topics.audit, key=b"control", value=encode(event))
            producer.flush(timeout=5)
        except Exception as e:  # the audit record is best effort; the state is applied
            log.warning("control audit not written", error=str(e))

    def _control_producer(self) -> Any:
        if self._producer is None:
            from kafka import KafkaProducer

            self._producer = KafkaProducer(bootstrap_servers=self.settings.bootstrap(), acks="all")
        return self._producer

    def run(self) -> None:
        """Run until SIGTERM/SIGINT: faust then stops the agents, commits and leaves the group."""
        log.info("worker starting", stages=self.stages, settings=self.settings.describe())
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
            if self.follower is not None:
                self.follower.stop()
            if self._producer is not None:
                self._producer.close(timeout=5)
            self.executor.shutdown(wait=True)
            shutil.rmtree(self._datadir, ignore_errors=True)
