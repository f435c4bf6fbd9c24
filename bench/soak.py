"""Memory soak: a worker's resident memory over a long run at a fixed rate.

The same cluster as ``bench kafka`` (fresh embedded broker, topics, worker processes), then
the load generator sends ``--rate`` batches/s for ``--minutes``. Every ``--sample-s`` seconds
the resident memory (VmRSS) of each worker process is read from ``/proc``, with the packs
received so far. The verdict compares the last sample with the first one taken after the
first minute (caches and memos fill during the first minutes by design: the token-count cache
holds up to 65,536 counts, the shingle memo 2,048 sets): *flat* means within 10%. The peak is
the largest sample. Latency is summarised per minute (p50/p99), so a slow drift shows too.

The embedded broker keeps every record in memory (no retention on its memory engine), so its
own memory grows with the run; it is reported, not judged.
"""

from __future__ import annotations

import tempfile
import threading
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.common import default_traffic, percentile, table
from bench.kafka import cluster, produce, traffic_file_for, warm_up
from ctxbudget.kafka.processes import cpu_seconds, rss_mb


def run(args: Any) -> dict[str, Any]:
    traffic = default_traffic(args, msmarco=False)[0]
    topology = str(args.topology).split(",")[0]
    processes = 4 if topology == "split4" else 1
    topo = "split" if topology.startswith("split") else "fused"
    count = int(args.rate * args.minutes * 60)
    samples: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="ctxbudget-soak-") as tmp:
        workdir = Path(tmp)
        traffic_file = traffic_file_for(traffic, workdir)
        with cluster(topo, processes, args.cpu_threads, workdir, args.fetch_wait_ms) as c:
            warm = warm_up(c, traffic_file, workdir)
            assert c.collector is not None and c.broker is not None
            prefix = f"soak-{uuid.uuid4().hex[:6]}"
            result: dict[str, Any] = {}

            def load() -> None:
                result.update(produce(c, traffic_file, prefix, count, args.rate, workdir))

            loader = threading.Thread(target=load, daemon=True)
            t0 = time.monotonic()
            loader.start()
            pids = c.pids()
            print(
                f"soak: {c.name}, {args.rate:g} batches/s for {args.minutes:g} min "
                f"({count} batches); workers ready after {warm:.1f} s",
                flush=True,
            )
            watched = {k: p for k, p in pids.items() if k.startswith("worker") or k == "broker"}
            last_cpu = {k: cpu_seconds(p) for k, p in watched.items()}
            last_t = time.monotonic()
            while loader.is_alive() or c.collector.count(prefix) < count:
                c.check_alive()
                now = time.monotonic()
                elapsed = now - t0
                cpu = {k: cpu_seconds(p) for k, p in watched.items()}
                sample = {
                    "t_s": round(elapsed, 1),
                    "packs": c.collector.count(prefix),
                    **{f"{k}_rss_mb": round(rss_mb(p), 1) for k, p in watched.items()},
                    **{
                        f"{k}_cpu_pct": round((cpu[k] - last_cpu[k]) / (now - last_t) * 100, 1)
                        for k in watched
                    },
                }
                last_cpu, last_t = cpu, now
                samples.append(sample)
                if len(samples) % max(1, int(60 / args.sample_s)) == 0:
                    print(f"  {sample}", flush=True)
                if not loader.is_alive() and elapsed > args.minutes * 60 + 120:
                    break
                time.sleep(args.sample_s)
            loader.join()
            received = c.collector.times(prefix)
    sent = result.get("sent", [])
    report = _summarise(samples, sent, received, prefix, args)
    report.update({"topology": c.name, "rate": args.rate, "minutes": args.minutes})
    print(render(report))
    return report


def _summarise(
    samples: list[dict[str, Any]],
    sent: list[float],
    received: dict[str, float],
    prefix: str,
    args: Any,
) -> dict[str, Any]:
    workers = sorted(k for k in samples[0] if k.endswith("_rss_mb")) if samples else []
    verdicts = {w: rss_verdict(samples, w) for w in workers}
    per_minute: dict[int, list[float]] = {}
    start = sent[0] if sent else 0.0
    for i, t_sent in enumerate(sent):
        t_recv = received.get(f"{prefix}-{i:07d}")
        if t_recv is not None:
            per_minute.setdefault(int((t_sent - start) // 60), []).append((t_recv - t_sent) * 1000)
    minutes = [
        {
            "minute": m,
            "packs": len(v),
            "p50_ms": round(percentile(v, 50), 1),
            "p99_ms": round(percentile(v, 99), 1),
        }
        for m, v in sorted(per_minute.items())
    ]
    cpu_per_minute: dict[int, dict[str, list[float]]] = {}
    for smp in samples:
        bucket = cpu_per_minute.setdefault(int(smp["t_s"] // 60), {})
        for k, v in smp.items():
            if k.endswith("_cpu_pct"):
                bucket.setdefault(k.removesuffix("_cpu_pct"), []).append(v)
    for m in minutes:
        for k, v in cpu_per_minute.get(m["minute"], {}).items():
            m[f"{k}_cpu_pct"] = round(sum(v) / len(v), 1)
    return {
        "samples": samples,
        "memory": verdicts,
        "latency_per_minute": minutes,
        "missing": len(sent) - sum(m["packs"] for m in minutes),
        "sample_s": args.sample_s,
    }


def rss_verdict(samples: Sequence[dict[str, Any]], key: str) -> dict[str, Any]:
    """Whether the RSS samples under ``key`` stay within 10% from the first minute on.

    Bounded caches fill at the pace of the traffic's variety (the token counts hold 65,536
    entries), so the change from minute 10 on says whether memory still moves once they are
    full. A sample of 0 is a process not yet (or no longer) there.
    """
    series = [s[key] for s in samples if s[key] > 0]
    if not series:
        return {"flat_within_10pct": False}
    settled = [s[key] for s in samples if s["t_s"] >= 60 and s[key] > 0] or series
    late = [s[key] for s in samples if s["t_s"] >= 600 and s[key] > 0]
    first, last = settled[0], settled[-1]
    return {
        "first_after_1min_mb": first,
        "last_mb": last,
        "peak_mb": max(series),
        "min_mb": min(series),
        "change_pct": round((last - first) / first * 100, 1),
        "flat_within_10pct": abs(last - first) / first <= 0.10,
        "at_10min_mb": late[0] if late else None,
        "change_after_10min_pct": round((last - late[0]) / late[0] * 100, 1) if late else None,
    }


def render(report: dict[str, Any]) -> str:
    broker = report["memory"].get("broker_rss_mb")
    grew = f"; the broker's RSS grew to {broker['peak_mb']:.0f} MB" if broker else ""
    head = (
        f"soak: {report['topology']} at {report['rate']:g} batches/s for "
        f"{report['minutes']:g} min; {report['missing']} packs missing{grew}"
    )
    rss = table(
        ["process", "RSS after 1 min", "RSS at end", "change", "peak", "flat (<=10%)"],
        [
            [
                w,
                v["first_after_1min_mb"],
                v["last_mb"],
                f"{v['change_pct']}%",
                v["peak_mb"],
                "yes" if v["flat_within_10pct"] else "no",
            ]
            for w, v in report["memory"].items()
            if not w.startswith("broker")
        ],
    )
    minutes = report["latency_per_minute"]
    cpus = sorted({k for m in minutes for k in m if k.endswith("_cpu_pct")})
    lat = table(
        ["minute", "packs", "p50 ms", "p99 ms", *[k.replace("_cpu_pct", " CPU %") for k in cpus]],
        [
            [m["minute"], m["packs"], m["p50_ms"], m["p99_ms"], *[m.get(k, 0.0) for k in cpus]]
            for m in minutes
        ],
    )
    return f"{head}\n{rss}\n{lat}"
