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
from typing import Any

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
            async for event in stream.events():
                await self._process(handler, source, event)

        agent.__name__ = f"stage_{stage}"
        self.app.agent(topic, name=f"ctxbudget.{stage}", concurrency=self.settings.concurrency)(
            agent
        )

    async def _process(self, handler: Handler, source: str, event: faust.EventT[bytes]) -> None:
        msg = event.message
        loop = asyncio.get_running_loop()
        outputs = await loop.run_in_executor(
            self.executor, lambda: handler.handle(msg.value, source=source, offset=msg.offset)
        )
        pending = [await self._topic(o.topic).send(key=o.key, value=o.value) for o in outputs]
        for fut in pending:  # wait for the broker's acks before the input may be committed
            await fut
        self.metrics.inc("records")

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
            bootstrap=self.settings.bootstrap(), topic=self.settings.topics.control,
            holder=self.holder, on_apply=self._control_applied,
        )
        self.follower.start()
        if self.follower.wait_caught_up(timeout_s):
            state = self.holder.get()
            log.info("control state in force", version=state.version, baseline=state.baseline,
                     candidate=state.candidate, percent=state.percent, shadow=state.shadow,
                     killed=state.killed)
            return
        self.holder.force(baseline_only(self.file_state))
        self.metrics.inc("control_unavailable")
        log.error("CONTROL TOPIC UNREADABLE AT START: packing with the baseline policy only "
                  f"({self.file_state.baseline}); will apply the control state once readable",
                  topic=self.settings.topics.control)

    def _control_applied(self, state: ControlState, lag_ms: float) -> None:
        self.metrics.inc("control_applied")
        event = ControlApplied(worker=self.worker_id, version=state.version, lag_ms=lag_ms,
                               killed=state.killed)
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
        try:
            worker.execute_from_commandline()
        finally:
            if self.follower is not None:
                self.follower.stop()
            if self._producer is not None:
                self._producer.close(timeout=5)
            self.executor.shutdown(wait=True)
            shutil.rmtree(self._datadir, ignore_errors=True)
