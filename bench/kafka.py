"""End-to-end benchmark through the embedded broker: the split and the fused topologies.

For each topology a fresh embedded broker is started (memory storage, so runs do not see each
other's records), the topics of ``topics/`` are created, and the workers are started as
``python -m ctxbudget worker ...`` processes exactly as in production:

* ``split/1``: the four stage agents in one process (``worker all``);
* ``split/4``: one process per stage (``worker route``, ``consolidate``, ``select``,
  ``compress``), so the stages can use both cores;
* ``fused``: one process, one agent running all four stages (``worker fused``).

The load generator runs in its own process (:mod:`bench.loadgen`); it records when it hands
each batch to its producer. This process consumes the packs topic and records when each pack
arrives; latency is the difference (``time.monotonic`` is system-wide). Runs, per topology:

1. latency: ``--rate`` batches/s (100 by default) for ``--duration`` seconds;
2. ``--rates``: further offered rates; a rate is *sustained* when every pack arrives, the
   pack rate keeps up with the offered rate and the p99 latency stays under one second;
3. burst: ``--burst`` batches produced as fast as possible; the throughput ceiling is the rate
   at which their packs arrive (from the first pack to the last).

Each run gets a fresh broker and fresh workers, warmed up with a few batches until their packs
come back (the groups have joined): the embedded broker's memory engine keeps every record
and gets slower per record as it fills (measured: its CPU per batch doubled over 24,000
batches of the split topology), so runs must not inherit each other's data.

CPU seconds of the workers, the broker, the load generator and this process are read from
``/proc`` for every run, and the resident memory of each worker.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common import REPO, Traffic, default_traffic, percentile, table
from ctxbudget.kafka.broker import _die_with_parent
from ctxbudget.kafka.processes import PackCollector, cpu_seconds, rss_mb, spawn, stop_all

PACKS = "ctx.packs.v1"
DEADLETTER = "ctx.deadletter.v1"
STAGES = ("route", "consolidate", "select", "compress")


# ---------------------------------------------------------------- a cluster per topology


@dataclass
class Cluster:
    topology: str
    processes: int
    cpu_threads: int | None
    fetch_wait_ms: int | None = None
    broker: Any = None
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)
    collector: PackCollector | None = None

    @property
    def name(self) -> str:
        return "fused" if self.topology == "fused" else f"split/{self.processes}"

    def worker_commands(self) -> list[list[str]]:
        base = [sys.executable, "-m", "ctxbudget", "worker"]
        if self.topology == "fused":
            return [[*base, "fused"]]
        if self.processes == 1:
            return [[*base, "all"]]
        return [[*base, stage] for stage in STAGES]

    def start(self, logdir: Path) -> None:
        from ctxbudget.kafka.broker import EmbeddedBroker
        from ctxbudget.kafka.topic_admin import apply_topics
        from ctxbudget.kafka.topics import load_topic_specs

        self.broker = EmbeddedBroker().start()
        apply_topics(self.broker.bootstrap, load_topic_specs(REPO / "topics"))
        env = dict(
            os.environ,
            CTXBUDGET_BROKERS=self.broker.bootstrap,
            CTXBUDGET_POLICIES=str(REPO / "policies"),
            CTXBUDGET_GROUP_PREFIX=f"bench-{uuid.uuid4().hex[:8]}",
            CTXBUDGET_LOG_LEVEL="WARNING",
        )
        if self.cpu_threads:
            env["CTXBUDGET_CPU_THREADS"] = str(self.cpu_threads)
        if self.fetch_wait_ms:
            env["CTXBUDGET_FETCH_MAX_WAIT_MS"] = str(self.fetch_wait_ms)
        for i, cmd in enumerate(self.worker_commands()):
            log = logdir / f"{self.name.replace('/', '-')}-worker{i}.log"
            self.logs.append(log)
            self.workers.append(spawn(cmd, env, log, cwd=REPO))
        self.collector = PackCollector(
            self.broker.bootstrap, PACKS, DEADLETTER, keep_values=False, fetch_wait_ms=20
        )
        self.collector.start()

    def stop(self) -> None:
        stop_all(self.workers, timeout_s=20)
        if self.collector is not None:
            self.collector.stop()
        if self.broker is not None:
            self.broker.stop()

    def pids(self) -> dict[str, int]:
        out = {f"worker{i}": w.pid for i, w in enumerate(self.workers)}
        if self.broker is not None and self.broker.pid:
            out["broker"] = self.broker.pid
        out["bench"] = os.getpid()
        return out

    def check_alive(self) -> None:
        for w, log in zip(self.workers, self.logs, strict=True):
            if w.poll() is not None:
                tail = log.read_text(errors="replace")[-3000:]
                raise RuntimeError(f"worker {w.args} exited with {w.returncode}:\n{tail}")


@contextlib.contextmanager
def cluster(
    topology: str,
    processes: int,
    cpu_threads: int | None,
    logdir: Path,
    fetch_wait_ms: int | None = None,
) -> Iterator[Cluster]:
    c = Cluster(topology, processes, cpu_threads, fetch_wait_ms)
    try:
        c.start(logdir)
        yield c
    finally:
        c.stop()


# ---------------------------------------------------------------- one load run


def produce(
    c: Cluster, traffic_file: Path, prefix: str, count: int, rate: float, workdir: Path
) -> dict[str, Any]:
    """Run the load generator process to completion; returns its report."""
    assert c.broker is not None
    out = workdir / f"{prefix}.sent.json"
    cmd = [
        sys.executable,
        "-m",
        "bench.loadgen",
        "--bootstrap",
        c.broker.bootstrap,
        "--file",
        str(traffic_file),
        "--prefix",
        prefix,
        "--count",
        str(count),
        "--rate",
        str(rate),
        "--out",
        str(out),
    ]
    proc = subprocess.Popen(cmd, cwd=REPO, preexec_fn=_die_with_parent)
    cpu_before = 0.0
    while proc.poll() is None:
        cpu_before = max(cpu_before, cpu_seconds(proc.pid))
        time.sleep(0.2)
    if proc.returncode:
        raise RuntimeError(f"load generator failed with {proc.returncode}")
    report: dict[str, Any] = json.loads(out.read_text())
    report["cpu_s"] = cpu_before
    return report


def load_run(
    c: Cluster,
    traffic_file: Path,
    *,
    label: str,
    count: int,
    rate: float,
    workdir: Path,
    timeout_s: float = 120.0,
) -> dict[str, Any]:
    assert c.collector is not None
    prefix = f"{label}-{uuid.uuid4().hex[:6]}"
    pids = c.pids()
    cpu0 = {k: cpu_seconds(p) for k, p in pids.items()}
    t0 = time.monotonic()
    sent = produce(c, traffic_file, prefix, count, rate, workdir)
    deadline = time.monotonic() + timeout_s
    while c.collector.count(prefix) < count and time.monotonic() < deadline:
        c.check_alive()
        time.sleep(0.05)
    elapsed = time.monotonic() - t0
    cpu = {k: round(cpu_seconds(p) - cpu0[k], 2) for k, p in pids.items()}
    cpu["loadgen"] = round(sent["cpu_s"], 2)
    got = c.collector.times(prefix)
    sent_at = sent["sent"]
    lat = []
    windows: dict[int, list[float]] = {}
    last_recv = 0.0
    first_recv = float("inf")
    for i, t_sent in enumerate(sent_at):
        t_recv = got.get(f"{prefix}-{i:07d}")
        if t_recv is not None:
            lat.append((t_recv - t_sent) * 1000)
            windows.setdefault(int((t_sent - sent["start"]) // 5), []).append(lat[-1])
            last_recv = max(last_recv, t_recv)
            first_recv = min(first_recv, t_recv)
    n = len(lat)
    span = (last_recv - sent["start"]) if n else 0.0
    drain = (n - 1) / (last_recv - first_recv) if n > 1 and last_recv > first_recv else 0.0
    rss = {k: round(rss_mb(p), 1) for k, p in pids.items() if k.startswith("worker")}
    worker_cpu = sum(v for k, v in cpu.items() if k.startswith("worker"))
    return {
        "label": label,
        "topology": c.name,
        "offered_rate": rate,
        "produced": count,
        "produce_rate": round(sent["achieved_rate"], 1),
        "late_sends": sent["late_sends"],
        "packs": n,
        "missing": count - n,
        "pack_rate": round(n / span, 1) if span > 0 else 0.0,
        "drain_rate": round(drain, 1),
        "p50_ms": round(percentile(lat, 50), 1),
        "p90_ms": round(percentile(lat, 90), 1),
        "p99_ms": round(percentile(lat, 99), 1),
        "max_ms": round(max(lat), 1) if lat else 0.0,
        "mean_ms": round(statistics.fmean(lat), 1) if lat else 0.0,
        "elapsed_s": round(elapsed, 1),
        "cpu_s": cpu,
        "worker_cpu_ms_per_batch": round(worker_cpu * 1000 / n, 2) if n else None,
        "worker_rss_mb": rss,
        "dead_letters_total": c.collector.dead_letters,
        # p99 of each 5-second window of send times: shows whether a tail is one stall or many
        "p99_ms_by_5s": [round(percentile(windows[w], 99), 1) for w in sorted(windows)],
    }


def warm_up(c: Cluster, traffic_file: Path, workdir: Path, timeout_s: float = 90.0) -> float:
    """Send a few batches until their packs come back; the seconds it took."""
    t0 = time.monotonic()
    result = load_run(
        c, traffic_file, label="warmup", count=20, rate=0, workdir=workdir, timeout_s=timeout_s
    )
    if result["missing"]:
        raise RuntimeError(
            f"{c.name}: {result['missing']} of 20 warm-up packs missing after {timeout_s:.0f} s"
        )
    return time.monotonic() - t0


# ---------------------------------------------------------------- the benchmark


def _sustained(r: dict[str, Any]) -> bool:
    return r["missing"] == 0 and r["pack_rate"] >= 0.95 * r["offered_rate"] and r["p99_ms"] < 1000


def run_topology(
    topology: str,
    processes: int,
    traffic_file: Path,
    args: Any,
    workdir: Path,
) -> dict[str, Any]:
    """Every run on a fresh broker: the embedded broker keeps all records in memory and its
    cost per record grows with what it holds, so runs must not inherit each other's data."""
    rates = [float(x) for x in str(args.rates).split(",") if x]
    plan: list[tuple[str, int, float]] = [
        (f"rate{r:g}", max(1, int(r * args.duration)), r) for r in [args.rate, *rates]
    ]
    if args.burst:
        plan.append(("burst", args.burst, 0.0))
    runs = []
    warmups = []
    name = "fused" if topology == "fused" else f"split/{processes}"
    for label, count, rate in plan:
        with cluster(topology, processes, args.cpu_threads, workdir, args.fetch_wait_ms) as c:
            warmups.append(warm_up(c, traffic_file, workdir))
            r = load_run(
                c,
                traffic_file,
                label=label,
                count=count,
                rate=rate,
                workdir=workdir,
                timeout_s=max(120.0, args.duration * 4, count / 20),
            )
        r["warmup_s"] = round(warmups[-1], 1)
        if label == "burst":
            r["sustained"] = None
            print(
                f"  {name}: burst of {count}: drained at {r['drain_rate']}/s "
                f"(p99 {r['p99_ms']} ms while queued), missing {r['missing']}",
                flush=True,
            )
        else:
            r["sustained"] = _sustained(r)
            print(
                f"  {name}: offered {rate:g}/s -> packs {r['pack_rate']}/s, "
                f"p50 {r['p50_ms']} ms, p99 {r['p99_ms']} ms, missing {r['missing']}",
                flush=True,
            )
        runs.append(r)
    return {"topology": name, "warmup_s": [round(w, 1) for w in warmups], "runs": runs}


def _plan(args: Any) -> list[tuple[str, int]]:
    plan = []
    procs = [int(x) for x in str(args.processes).split(",") if x]
    for topo in str(args.topology).split(","):
        if topo == "split":
            plan.extend(("split", p) for p in procs)
        elif topo == "fused":
            plan.append(("fused", 1))
        elif topo:
            raise SystemExit(f"unknown topology {topo!r}; expected split and/or fused")
    return plan


def traffic_file_for(traffic: Traffic, workdir: Path) -> Path:
    path = workdir / "traffic.jsonl"
    path.write_bytes(b"\n".join(traffic.lines) + b"\n")
    return path


def run(args: Any) -> dict[str, Any]:
    traffic = default_traffic(args, msmarco=False)[0]
    with tempfile.TemporaryDirectory(prefix="ctxbudget-bench-") as tmp:
        workdir = Path(tmp)
        traffic_file = traffic_file_for(traffic, workdir)
        print(
            f"kafka: {traffic.name}, {len(traffic.lines)} batches cycled, "
            f"{traffic.candidates_per_batch:.1f} candidates per batch",
            flush=True,
        )
        results = [run_topology(t, p, traffic_file, args, workdir) for t, p in _plan(args)]
    print()
    print(render(results))
    return {
        "traffic": {"name": traffic.name, "batches": len(traffic.lines)},
        "fetch_wait_ms": args.fetch_wait_ms,
        "cpu_threads": args.cpu_threads,
        "duration_s": args.duration,
        "topologies": results,
    }


def render(results: Sequence[dict[str, Any]]) -> str:
    rows = []
    for res in results:
        for r in res["runs"]:
            broker = r["cpu_s"].get("broker", 0.0)
            rows.append(
                [
                    res["topology"],
                    "burst" if r["label"] == "burst" else f"{r['offered_rate']:g}/s",
                    r["produced"],
                    r["pack_rate"] if r["label"] != "burst" else r["drain_rate"],
                    r["p50_ms"],
                    r["p99_ms"],
                    r["max_ms"],
                    r["missing"],
                    r["worker_cpu_ms_per_batch"] or 0.0,
                    broker,
                    max(r["worker_rss_mb"].values() or [0.0]),
                    "-" if r["sustained"] is None else ("yes" if r["sustained"] else "no"),
                ]
            )
    return table(
        [
            "topology",
            "offered",
            "batches",
            "packs/s",
            "p50 ms",
            "p99 ms",
            "max ms",
            "missing",
            "worker CPU ms/batch",
            "broker CPU s",
            "worker RSS MB",
            "sustained",
        ],
        rows,
    )
