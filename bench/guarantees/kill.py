"""``kill``: stage workers (and Kafka nodes) killed under load (see :mod:`bench.guarantees`)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import orjson

from bench.common import REPO, table
from bench.guarantees.poison import (
    KIND_HEADERS,
    KindTally,
    PoisonLine,
    kind_cells,
    poison_lines,
    unexpected_errors,
    verify_outcomes,
)
from ctxbudget.codec import encode
from ctxbudget.kafka.processes import (
    PackCollector,
    ctxbudget_command,
    rss_mb,
    spawn,
    stop_all,
    trouble_in_logs,
)
from ctxbudget.pipeline import Pipeline
from ctxbudget.policy import PolicyStore
from ctxbudget.schemas import Pack

POLICIES = REPO / "policies"
STAGES = ("route", "consolidate", "select", "compress")


@dataclass
class _Stage:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path
    started: int = 1
    rss_mb: list[float] = field(default_factory=list)


class _Topology:
    """Stage worker processes (``replicas`` per stage) on a fresh embedded broker, or on a
    real Kafka cluster (``kafka_nodes``), with the shipped topics."""

    def __init__(
        self,
        logdir: Path,
        env_extra: dict[str, str],
        *,
        kafka_nodes: int = 0,
        replicas: int = 1,
        cluster: Any = None,
    ) -> None:
        from ctxbudget.kafka.broker import EmbeddedBroker
        from ctxbudget.kafka.topic_admin import apply_topics
        from ctxbudget.kafka.topics import load_topic_specs

        self.logdir = logdir
        self.cluster: Any = None
        self.client_settings: Any = None
        group_prefix = f"guarantees-{uuid.uuid4().hex[:8]}"
        specs = load_topic_specs(REPO / "topics")
        self.stage_env: dict[str, dict[str, str]] = {stage: {} for stage in STAGES}
        self.own_cluster = cluster is None
        if cluster is not None or kafka_nodes:
            self.cluster = self._start_cluster(kafka_nodes, specs, group_prefix, cluster)
            self.bootstrap = self.cluster.bootstrap
        else:
            self.broker = EmbeddedBroker().start()
            self.bootstrap = self.broker.bootstrap
            apply_topics(self.bootstrap, specs)
        self.env = dict(
            os.environ,
            CTXBUDGET_BROKERS=self.bootstrap,
            CTXBUDGET_POLICIES=str(POLICIES),
            CTXBUDGET_GROUP_PREFIX=group_prefix,
            CTXBUDGET_LOG_LEVEL="WARNING",
            **env_extra,
        )
        self.slots = [
            stage if replicas == 1 else f"{stage}-{i}"
            for stage in STAGES
            for i in range(1, replicas + 1)
        ]
        self.stages: dict[str, _Stage] = {}
        self.lock = threading.Lock()
        self.exits: list[tuple[str, int | None]] = []

    def _start_cluster(
        self, nodes: int, specs: Sequence[Any], group_prefix: str, given: Any
    ) -> Any:
        """The cluster (``given``, or a new one of ``nodes``), topics and ACLs applied."""
        from ctxbudget.kafka.acls import acl_plan, apply_acls, principals
        from ctxbudget.kafka.kafka_cluster import KafkaCluster
        from ctxbudget.kafka.topic_admin import apply_topics

        names = principals()
        cluster = given or KafkaCluster(nodes=nodes, users=list(names.values())).start()
        nodes = cluster.nodes
        try:
            self.client_settings = cluster.settings()
            apply_topics(
                cluster.bootstrap, specs, replication_factor=nodes, settings=self.client_settings
            )
            plan = acl_plan(cluster.settings(group_prefix=group_prefix))
            admin = cluster.admin()
            try:
                apply_acls(admin, plan)
            finally:
                admin.close()
            cluster.wait_in_sync([spec.name for spec in specs])
        except BaseException:
            if given is None:
                cluster.stop()
            raise
        self.stage_env = {stage: cluster.env(names[stage]) for stage in STAGES}
        return cluster

    def spawn(self, slot: str) -> _Stage:
        stage = slot.split("-")[0]
        n = self.stages[slot].started + 1 if slot in self.stages else 1
        log = self.logdir / f"{slot}-{n}.log"
        env = {**self.env, **self.stage_env[stage]}
        proc = spawn([*ctxbudget_command(), "worker", stage], env, log, cwd=REPO)
        s = _Stage(slot, proc, log, started=n)
        with self.lock:
            self.stages[slot] = s
        return s

    def start_all(self) -> None:
        for slot in self.slots:
            self.spawn(slot)

    def kill(self, stage: str) -> None:
        with self.lock:
            s = self.stages[stage]
        s.proc.send_signal(signal.SIGKILL)
        s.proc.wait(30)

    def dead_workers(self) -> list[str]:
        with self.lock:
            return [
                f"{s.name} (exit {s.proc.returncode})"
                for s in self.stages.values()
                if s.proc.poll() is not None
            ]

    def sample_rss(self) -> None:
        with self.lock:
            for s in self.stages.values():
                s.rss_mb.append(round(rss_mb(s.proc.pid), 1))

    def stop(self) -> dict[str, int | None]:
        with self.lock:
            stages = list(self.stages.values())
        codes: dict[str, int | None] = dict(
            zip([s.name for s in stages], stop_all([s.proc for s in stages]), strict=True)
        )
        if self.cluster is not None:
            if self.own_cluster:
                self.cluster.stop()
        else:
            self.broker.stop()
        return codes

    def log_findings(self) -> dict[str, list[str]]:
        """Lines of the worker logs that tell of trouble (tracebacks, critical, exits)."""
        return trouble_in_logs(self.logdir)


@dataclass(frozen=True, slots=True)
class _Record:
    key: str
    value: bytes | None
    poison: PoisonLine | None = None
    #: The record's key on the wire when it is not ``key`` (None: a record without a key).
    wire_key: bytes | Literal["same"] | None = "same"

    def kafka_key(self) -> bytes | None:
        return self.key.encode() if self.wire_key == "same" else self.wire_key


def topic_only_lines(seed: int) -> list[tuple[_Record, PoisonLine]]:
    """Records a file cannot hold: a null value (a tombstone), and good batches without a
    key or with a key that is not UTF-8 (their packs are keyed by the request id)."""
    from ctxbudget.testing.traffic import synthetic

    out: list[tuple[_Record, PoisonLine]] = []
    tomb = PoisonLine("tombstone", b"", "dead", None)
    out.append((_Record("poison-tombstone", None, tomb), tomb))
    for kind, key in (("good_null_key", None), ("good_binary_key", b"\xff\xfe\x00key")):
        g = synthetic(1, seed=seed + len(out) + 4242)[0]
        rid = f"topic-{kind}"
        raw = encode(g.batch).replace(orjson.dumps(g.batch.request_id), orjson.dumps(rid), 1)
        line = PoisonLine(kind, raw, "pack", rid)
        out.append((_Record(rid, raw, line, wire_key=key), line))
    return out


def _traffic(batches: int, seed: int) -> tuple[list[_Record], dict[str, bytes]]:
    """The good records and the in-process pack of each (what the workers must produce)."""
    from ctxbudget.testing.traffic import synthetic

    pipe = Pipeline.from_store(PolicyStore.load(POLICIES), "default@1")
    records, expected = [], {}
    for g in synthetic(batches, seed=seed):
        raw = encode(g.batch)
        records.append(_Record(g.batch.request_id, raw))
        expected[g.batch.request_id] = encode(pipe.run(g.batch).pack)
    return records, expected


def _warm_up(
    topo: _Topology, collector: PackCollector, timeout_s: float, resend_every_s: float = 30.0
) -> float:
    """Six requests through the whole topology before the measured run. Each send is
    retried and acknowledged (a leader that refuses the first connection loses no warm-up
    record), and the requests still without a pack are sent again every ``resend_every_s``
    (warm-up packs are never counted, so a copy costs nothing)."""
    from ctxbudget.kafka import io
    from ctxbudget.testing.traffic import synthetic

    t0 = time.monotonic()
    producer = io.client(
        "producer",
        topo.client_settings,
        brokers=topo.bootstrap,
        client_id="ctxbudget-bench",
        acks="all",
        retries=2**31 - 1,
        retry_backoff_ms=200,
        request_timeout_ms=15000,
    )
    records: dict[str, bytes] = {}
    for i, g in enumerate(synthetic(6, seed=987654)):
        rid = f"warmup-{i}"
        raw = encode(g.batch).replace(orjson.dumps(g.batch.request_id), orjson.dumps(rid), 1)
        records[rid] = raw

    def send(keys: Sequence[str]) -> None:
        futures = [
            producer.send("ctx.candidates.v1", key=k.encode(), value=records[k]) for k in keys
        ]
        producer.flush()
        for f in futures:
            f.get(timeout=60)

    try:
        send(sorted(records))
        resent_at = time.monotonic()
        while collector.have(set(records)) < len(records):
            missing = sorted(k for k in records if collector.have({k}) == 0)
            if time.monotonic() - t0 > timeout_s:
                raise RuntimeError(
                    f"workers not ready after {timeout_s:.0f} s: no pack for {missing}, "
                    f"{len(collector.dead)} dead letters; {topo.log_findings()}"
                )
            if topo.dead_workers():
                raise RuntimeError(f"a worker exited during warm-up: {topo.dead_workers()}")
            if time.monotonic() - resent_at > resend_every_s:
                send(missing)
                resent_at = time.monotonic()
            time.sleep(0.1)
    finally:
        producer.close()
    return time.monotonic() - t0


class _Chaos:
    """SIGKILLs stage workers on schedule and restarts them; run from the main thread only
    (a worker's parent-death signal is tied to the thread that started it). A worker that
    exits on its own is recorded and restarted too, as a supervisor would."""

    def __init__(
        self,
        topo: _Topology,
        kill_times: Sequence[float],
        rng: random.Random,
        restart_delay_s: float,
        t0: float,
    ) -> None:
        self.topo, self.rng, self.delay, self.t0 = topo, rng, restart_delay_s, t0
        self.kills = list(kill_times)
        self.restarts: list[tuple[float, str, dict[str, Any]]] = []
        self.events: list[dict[str, Any]] = []
        self.unexpected: list[dict[str, Any]] = []
        self.given_up: set[str] = set()
        self.max_restarts = 5

    def _down(self) -> set[str]:
        return {stage for _, stage, _ in self.restarts}

    def tick(self) -> None:
        now = time.monotonic() - self.t0
        while self.kills and self.kills[0] <= now:
            self.kills.pop(0)
            up = [s for s in self.topo.slots if s not in self._down()]
            if not up:
                continue
            stage = self.rng.choice(up)
            self.topo.kill(stage)
            event = {"stage": stage, "killed_at_s": round(now, 2), "restarted_at_s": None}
            self.events.append(event)
            self.restarts.append((now + self.delay, stage, event))
        for item in list(self.restarts):
            at, stage, event = item
            if at <= now:
                self.topo.spawn(stage)
                event["restarted_at_s"] = round(time.monotonic() - self.t0, 2)
                self.restarts.remove(item)
        down = self._down()
        with self.topo.lock:
            exited = [s for s in self.topo.stages.values() if s.proc.poll() is not None]
        for s in exited:
            if s.name in down or s.name in self.given_up:
                continue
            tail = s.log.read_text(errors="replace")[-1500:]
            self.unexpected.append(
                {
                    "stage": s.name,
                    "exit": s.proc.returncode,
                    "at_s": round(now, 2),
                    "log_tail": tail,
                }
            )
            if sum(1 for u in self.unexpected if u["stage"] == s.name) > self.max_restarts:
                self.given_up.add(s.name)  # a crash loop: left down, and the report says so
            else:
                self.topo.spawn(s.name)

    @property
    def idle(self) -> bool:
        return not self.kills and not self.restarts


class _BrokerChaos(threading.Thread):
    """SIGKILLs the leader of the candidates and packs partitions, then rolls every node.

    Runs its schedule in a thread of its own, so the producer and the worker chaos of the
    main thread never wait on a broker restart (the cluster starts the JVMs from its own
    long-lived thread, so they outlive this one).
    """

    def __init__(
        self,
        cluster: Any,
        *,
        kill_times: Sequence[float],
        rolling_at: float | None,
        restart_delay_s: float,
        t0: float,
        topics: Sequence[str],
    ) -> None:
        super().__init__(daemon=True, name="guarantees-broker-chaos")
        self.cluster, self.t0, self.delay, self.topics = cluster, t0, restart_delay_s, topics
        self.plan: list[tuple[float, str]] = [
            (at, ("ctx.candidates.v1", "ctx.packs.v1")[i % 2]) for i, at in enumerate(kill_times)
        ]
        if rolling_at is not None:
            self.plan.append((rolling_at, "rolling"))
        self.events: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self.done = threading.Event()
        self.finished = threading.Event()

    def _now(self) -> float:
        return round(time.monotonic() - self.t0, 1)

    def _kill_leader(self, topic: str) -> None:
        node = self.cluster.leader(topic, 0)
        event: dict[str, Any] = {"action": f"kill -9 leader of {topic}[0]", "node": node}
        event["at_s"] = self._now()
        self.cluster.kill(node)
        time.sleep(self.delay)
        self.cluster.start_node(node)
        event["restarted_at_s"] = self._now()
        self.cluster.wait_in_sync(self.topics, timeout_s=300)
        event["in_sync_at_s"] = self._now()
        self.events.append(event)

    def _rolling(self) -> None:
        for node in (1, 2, 3):
            event: dict[str, Any] = {"action": "rolling restart", "node": node}
            event["at_s"] = self._now()
            event["sigterm_exit"] = self.cluster.stop_node(node)
            self.cluster.start_node(node)
            event["restarted_at_s"] = self._now()
            self.cluster.wait_in_sync(self.topics, timeout_s=300)
            event["in_sync_at_s"] = self._now()
            self.events.append(event)

    def run(self) -> None:
        try:
            for at, action in sorted(self.plan):
                while time.monotonic() - self.t0 < at:
                    time.sleep(0.1)
                if action == "rolling":
                    self._rolling()
                else:
                    self._kill_leader(action)
        except Exception as e:  # reported: the run's figures say what happened
            self.errors.append(f"{type(e).__name__}: {e}")
        finally:
            self.done.set()
        self.finished.wait()

    def finish(self) -> None:
        self.finished.set()
        self.join(5)


def _poison_outcomes(
    lines: Sequence[PoisonLine],
    keys: Sequence[str],
    packs: dict[str, list[bytes]],
    dead: Sequence[dict[str, Any]],
    *,
    allow_duplicates: bool,
) -> tuple[dict[str, KindTally], list[str], int]:
    """Each poison line's packs (by key) and dead letters (by the original's sha256 for the
    first stage, else by request id)."""
    by_sha = {x.sha256: n for n, x in enumerate(lines, start=1)}
    by_rid = {x.request_id: n for n, x in enumerate(lines, start=1) if x.request_id}
    dead_by_line: dict[int, list[dict[str, Any]]] = {}
    for d in dead:
        n = by_sha.get(str(d.get("original_sha256")))
        if n is None and d.get("request_id") is not None:
            n = by_rid.get(str(d["request_id"]))
        if n is not None:
            dead_by_line.setdefault(n, []).append(d)
    packs_by_line: dict[int, list[Pack]] = {}
    for n, key in enumerate(keys, start=1):
        for value in packs.get(key, []):
            packs_by_line.setdefault(n, []).append(Pack.model_validate_json(value))
    kinds, problems = verify_outcomes(
        lines, packs_by_line, dead_by_line, allow_duplicates=allow_duplicates
    )
    exactly_one = sum(
        1
        for n in range(1, len(lines) + 1)
        if len(packs_by_line.get(n, [])) + len(dead_by_line.get(n, [])) == 1
    )
    return kinds, problems, exactly_one


def _produce_all(
    producer: Any,
    records: Sequence[_Record],
    rate: float,
    chaos: _Chaos,
    topo: _Topology,
    t0: float,
) -> tuple[dict[str, float], int, float]:
    """Send ``records`` at ``rate``, ticking the chaos; send again, as a retriever would,
    every record the broker did not acknowledge. Returns when each was first sent, how many
    were sent again, and when the next memory sample is due."""
    sent_at: dict[str, float] = {}
    pending: list[tuple[_Record, Any]] = []
    next_rss = t0
    for i, rec in enumerate(records):
        due = t0 + i / rate
        while (now := time.monotonic()) < due:
            chaos.tick()
            time.sleep(min(0.01, max(0.0, due - now)))
        future = producer.send("ctx.candidates.v1", key=rec.kafka_key(), value=rec.value)
        pending.append((rec, future))
        sent_at.setdefault(rec.key, time.monotonic())
        if now >= next_rss:
            topo.sample_rss()
            next_rss = now + 5.0
    resent = 0
    while pending:
        producer.flush()
        retry = [rec for rec, fut in pending if fut.failed()]
        pending = []
        for rec in retry:
            resent += 1
            future = producer.send("ctx.candidates.v1", key=rec.kafka_key(), value=rec.value)
            pending.append((rec, future))
        chaos.tick()
    return sent_at, resent, next_rss


def run_kill(
    *,
    batches: int,
    kills: int,
    rate: float,
    seed: int,
    poison: bool,
    restart_delay_s: float = 1.0,
    drain_timeout_s: float = 300.0,
    skip: Sequence[str] = (),
    env_extra: dict[str, str] | None = None,
    kafka_nodes: int = 0,
    replicas: int = 1,
    broker_kills: int = 0,
    rolling: bool = False,
    broker_restart_delay_s: float = 5.0,
    cluster: Any = None,
) -> dict[str, Any]:
    """``cluster``: a running :class:`~ctxbudget.kafka.kafka_cluster.KafkaCluster` to use (and leave
    running) instead of a new broker; its shipped topics must not hold records yet."""
    from ctxbudget.kafka import io

    kafka_nodes = cluster.nodes if cluster is not None else kafka_nodes
    if (broker_kills or rolling) and kafka_nodes != 3:
        raise ValueError("broker kills and the rolling restart need a 3-node cluster (--kafka 3)")
    rng = random.Random(f"guarantees-kill|{seed}")
    records, expected = _traffic(batches, seed)
    poison_lines_: list[PoisonLine] = []
    poison_keys: list[str] = []
    if poison:
        extra = [
            (_Record(x.request_id or f"poison-line-{n}", x.raw, x), x)
            for n, x in enumerate(poison_lines(seed, good=0), start=1)
        ] + topic_only_lines(seed)
        extra = [(r, x) for r, x in extra if x.kind not in skip]
        poison_lines_ = [x for _, x in extra]
        poison_keys = [r.key for r, _ in extra]
        step = max(1, len(records) // (len(extra) + 1))
        for n, (rec, _) in enumerate(extra, start=1):
            records.insert(min(len(records), n * step + n - 1), rec)
    produce_s = len(records) / rate
    kill_times = sorted(rng.uniform(0.1 * produce_s, 0.9 * produce_s) for _ in range(kills))
    report: dict[str, Any] = {
        "command": "kill",
        "batches": batches,
        "poison_lines": len(poison_lines_),
        "kills": kills,
        "rate": rate,
        "seed": seed,
        "restart_delay_s": restart_delay_s,
        "broker": f"Apache Kafka, {kafka_nodes} node(s)" if kafka_nodes else "embedded",
        "workers_per_stage": replicas,
    }
    broker_times = sorted(
        rng.uniform(0.15 * produce_s, 0.45 * produce_s) for _ in range(broker_kills)
    )
    rolling_at = 0.5 * produce_s if rolling else None
    with tempfile.TemporaryDirectory(prefix="guarantees-kill-") as tmp:
        topo = _Topology(
            Path(tmp), env_extra or {}, kafka_nodes=kafka_nodes, replicas=replicas, cluster=cluster
        )
        collector: PackCollector | None = None
        brokers: _BrokerChaos | None = None
        try:
            topo.start_all()
            collector = PackCollector(
                topo.bootstrap, "ctx.packs.v1", "ctx.deadletter.v1", topo.client_settings
            )
            collector.start()
            report["warmup_s"] = round(_warm_up(topo, collector, 180.0), 1)
            producer = io.client(
                "producer",
                topo.client_settings,
                brokers=topo.bootstrap,
                client_id="ctxbudget-bench",
                acks="all",
                linger_ms=5,
                retries=2**31 - 1,
                retry_backoff_ms=200,
                request_timeout_ms=15000,
                max_request_size=32 * 1024 * 1024,
            )
            t0 = time.monotonic()
            chaos = _Chaos(topo, kill_times, rng, restart_delay_s, t0)
            if broker_times or rolling_at is not None:
                brokers = _BrokerChaos(
                    topo.cluster,
                    kill_times=broker_times,
                    rolling_at=rolling_at,
                    restart_delay_s=broker_restart_delay_s,
                    t0=t0,
                    topics=("ctx.candidates.v1", "ctx.packs.v1"),
                )
                brokers.start()
            sent_at, resent, next_rss = _produce_all(producer, records, rate, chaos, topo, t0)
            producer.close()
            produced_at = time.monotonic()
            want = {r.key for r in records if r.poison is None}
            deadline = time.monotonic() + drain_timeout_s
            while time.monotonic() < deadline and (
                collector.have(want) < len(want)
                or not chaos.idle
                or (brokers is not None and not brokers.done.is_set())
            ):
                chaos.tick()
                if time.monotonic() >= next_rss:
                    topo.sample_rss()
                    next_rss = time.monotonic() + 5.0
                time.sleep(0.1)
            done_at = time.monotonic()
            settle = time.monotonic() + 3.0  # late duplicates and dead letters
            while time.monotonic() < settle:
                chaos.tick()
                time.sleep(0.1)
            topo.sample_rss()
            events, unexpected = chaos.events, chaos.unexpected
            alive_problems = topo.dead_workers()
            collector.stop()
            packs, first_at, dead = collector.packs, collector.first_at, collector.dead
        finally:
            if collector is not None and collector.is_alive():
                collector.stop()
            exit_codes = topo.stop()
            if brokers is not None:
                brokers.finish()
        findings = topo.log_findings()
        rss = {s.name: s.rss_mb for s in topo.stages.values()}
        restarts = {s.name: s.started - 1 for s in topo.stages.values()}
    lost = sorted(want - set(packs))
    dup = {k: len(v) - 1 for k, v in packs.items() if k in want and len(v) > 1}
    differing = sorted(k for k, v in packs.items() if k in want and len(set(v)) > 1)
    not_inproc = sorted(k for k in want if k in packs and packs[k][0] != expected.get(k))
    latency = sorted(first_at[k] - sent_at[k] for k in want if k in first_at)
    good_dead = [d for d in dead if d.get("request_id") in want]
    last_restart = max((e["restarted_at_s"] or 0.0 for e in events), default=0.0)
    for e in events:
        # requests sent in the 2 s after the kill: when the last of their packs came
        hit = [k for k in want if 0.0 <= sent_at[k] - t0 - e["killed_at_s"] <= 2.0]
        done = [first_at[k] for k in hit if k in first_at]
        e["requests_hit"] = len(hit)
        e["their_packs_done_after_s"] = (
            round(max(done) - t0 - e["killed_at_s"], 1) if done and len(done) == len(hit) else None
        )
    report.update(
        {
            "kill_events": events,
            "produce_s": round(produced_at - t0, 1),
            "packs_for_all_s": round(done_at - t0, 1),
            "drain_after_last_send_s": round(done_at - produced_at, 1),
            "recovery_after_kill_s": [e["their_packs_done_after_s"] for e in events],
            "drain_after_last_restart_s": (
                round(done_at - t0 - last_restart, 1) if events else None
            ),
            "requests": len(want),
            "with_pack": len(want) - len(lost),
            "lost": len(lost),
            "lost_examples": lost[:5],
            "duplicate_requests": len(dup),
            "duplicate_packs": sum(dup.values()),
            "duplicates_differing": len(differing),
            "first_pack_not_in_process_pack": len(not_inproc),
            "good_dead_letters": len(good_dead),
            "latency_s": {
                "p50": round(latency[len(latency) // 2], 3) if latency else None,
                "p99": round(latency[int(len(latency) * 0.99)], 3) if latency else None,
                "max": round(latency[-1], 3) if latency else None,
            },
            "workers_dead_at_end": alive_problems,
            "unexpected_worker_exits": unexpected,
            "worker_exit_codes_on_sigterm": exit_codes,
            "restarts": restarts,
            "worker_rss_mb": {
                k: {
                    "first": v[0] if v else None,
                    "last": v[-1] if v else None,
                    "max": max(v) if v else None,
                }
                for k, v in rss.items()
            },
            "log_findings": findings,
            "producer_resent": resent,
            "broker_events": brokers.events if brokers is not None else [],
            "broker_chaos_errors": brokers.errors if brokers is not None else [],
            "dead_letters_total": len(dead),
            "unexpected_errors": unexpected_errors(dead),
        }
    )
    if poison:
        kinds, problems, exactly_one = _poison_outcomes(
            poison_lines_, poison_keys, packs, dead, allow_duplicates=kills > 0
        )
        report["poison"] = {
            "exactly_one": exactly_one,
            "kinds": {k: v.as_dict() for k, v in sorted(kinds.items())},
            "problems": problems,
        }
    return report


def render_kill(report: dict[str, Any]) -> str:
    lat = report["latency_s"]
    rows = [
        ["broker / workers per stage", f"{report['broker']} / {report['workers_per_stage']}"],
        ["requests produced (good)", report["requests"]],
        ["poison lines produced", report["poison_lines"]],
        ["rate /s", report["rate"]],
        [
            "SIGKILLs (stage @ s)",
            ", ".join(f"{e['stage']}@{e['killed_at_s']}" for e in report["kill_events"]) or "-",
        ],
        [
            "broker events (node @ s)",
            ", ".join(f"{e['action']} n{e['node']}@{e['at_s']}" for e in report["broker_events"])
            or "-",
        ],
        ["records the producer sent again", report["producer_resent"]],
        ["requests with >= 1 pack", report["with_pack"]],
        ["lost", report["lost"]],
        [
            "requests with duplicates / extra packs",
            f"{report['duplicate_requests']} / {report['duplicate_packs']}",
        ],
        ["duplicates not byte-identical", report["duplicates_differing"]],
        ["first pack != in-process pack", report["first_pack_not_in_process_pack"]],
        ["dead letters of good requests", report["good_dead_letters"]],
        ["dead letters from unexpected errors", len(report["unexpected_errors"])],
        ["produce s / all packs at s", f"{report['produce_s']} / {report['packs_for_all_s']}"],
        ["drain after last send s", report["drain_after_last_send_s"]],
        [
            "per kill: packs of the next 2 s of requests done after s",
            " / ".join(str(x) for x in report["recovery_after_kill_s"]) or "-",
        ],
        ["latency p50 / p99 / max s", f"{lat['p50']} / {lat['p99']} / {lat['max']}"],
        ["workers dead at end", ", ".join(report["workers_dead_at_end"]) or "none"],
        [
            "workers that exited on their own (restarted)",
            ", ".join(
                f"{u['stage']} exit {u['exit']} @{u['at_s']}"
                for u in report["unexpected_worker_exits"]
            )
            or "none",
        ],
        [
            "exit codes on SIGTERM",
            ", ".join(f"{k} {v}" for k, v in report["worker_exit_codes_on_sigterm"].items()),
        ],
        [
            "worker RSS MB first -> last (max)",
            ", ".join(
                f"{k} {v['first']}->{v['last']} ({v['max']})"
                for k, v in report["worker_rss_mb"].items()
            ),
        ],
    ]
    if "poison" in report:
        p = report["poison"]
        rows.append(
            [
                "poison lines: exactly one pack or dead letter",
                f"{p['exactly_one']} of {report['poison_lines']}",
            ]
        )
        rows.append(["poison problems", len(p["problems"])])
    parts = [table(["figure", "value"], rows)]
    if "poison" in report:
        prow = [
            [*kind_cells(kind, k), ", ".join(k["errors"])[:80]]
            for kind, k in report["poison"]["kinds"].items()
        ]
        parts.append(table([*KIND_HEADERS, "errors"], prow))
        if report["poison"]["problems"]:
            parts.append("problems:\n  " + "\n  ".join(report["poison"]["problems"][:40]))
    if report["unexpected_errors"]:
        parts.append("unexpected errors:\n  " + "\n  ".join(report["unexpected_errors"][:10]))
    if report["log_findings"]:
        parts.append(
            "worker logs:\n"
            + "\n".join(
                f"  {name}: {lines[0]}" + (f" (+{len(lines) - 1})" if len(lines) > 1 else "")
                for name, lines in report["log_findings"].items()
            )
        )
    return "\n\n".join(parts)
