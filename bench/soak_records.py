"""Memory soak of a worker's record path, without the broker: ``bench soak --no-broker``.

Why it exists: the embedded broker keeps every record in memory and has no retention (its
memory engine implements neither retention nor DeleteRecords), so an hour at 100 batches/s
through it needs more memory than a development machine has, and the broker slows as it
fills. This soak runs, for as long as asked, exactly what a fused worker runs per record
(``ctxbudget.kafka.handlers.FusedHandler.handle``: decode, the four stages, encode the pack and the
four TraceEvents, dead letters for bad records), built the way ``WorkerApp`` builds it, in a
child process of its own, at a fixed rate on an open-loop schedule. The child reads its
traffic from a file line by line (cycling, each cycle with fresh request ids), so the traffic
does not sit in its memory, and reports its own resident memory (VmRSS) and CPU time every
``--sample-s`` seconds. What it leaves out is the Kafka client (its buffers are bounded by
configuration) and faust's own bookkeeping: ``bench soak`` with the broker covers those for
as long as the broker holds.

The parent generates the traffic file (synthetic, ``--n`` distinct batches; more batches =
more distinct texts for the caches to meet), starts the child, relays its per-minute lines
and writes the same report shape as ``bench soak``.

``--hostile N`` makes every N-th record a hostile one, made fresh by the child (so no cache
ever meets it twice), in turn: a 60 KB passage of distinct words (within the limits: it
fills the shingle and sentence memos), 1,500 identical passages, a tokenizer that is not
available (the name varies), a 9 MB message, 5,000 candidates, 600 near-identical passages
(over the consolidation work budget) and metadata nested 40 deep (see
:mod:`bench.hostile`). The handler is built as ``WorkerApp`` builds it, with the input
limits and the shipped topics' output limits.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from bench.common import default_traffic, percentile, table
from bench.soak import rss_verdict
from ctxbudget.kafka.processes import cpu_seconds, rss_mb


def _lines(path: Path) -> Any:
    """The file's lines forever, with request ids made unique per cycle."""
    cycle = 0
    while True:
        with path.open("rb") as f:
            for line in f:
                if not line.strip():
                    continue
                if cycle == 0:
                    yield line
                else:
                    data = orjson.loads(line)
                    data["request_id"] = f"{data['request_id']}~{cycle}"
                    yield orjson.dumps(data)
        cycle += 1


def _handler(policy: str) -> Any:
    """The fused handler as ``WorkerApp`` builds it: input limits, the topics' limits."""
    from ctxbudget.kafka.handlers import (
        Context,
        Metrics,
        Pipelines,
        build_handler,
        static_assignment,
    )
    from ctxbudget.kafka.limits import load_specs, topic_limits
    from ctxbudget.kafka.settings import WorkerSettings
    from ctxbudget.limit_settings import LimitSettings

    settings, limits = WorkerSettings(), LimitSettings()
    tops = topic_limits(settings, limits, load_specs(settings))
    held = limits.input_limits(cap=tops.get(settings.topics.candidates))
    ctx = Context(
        pipelines=Pipelines(None, max_pair_checks=held.max_pair_checks),
        topics=settings.topics,
        metrics=Metrics(),
        assign=static_assignment(policy),
        limits=held,
        topic_limits=tops,
    )
    return build_handler("fused", ctx)


def _hostile_lines(path: Path, every: int) -> Any:
    """The file's lines, every ``every``-th replaced by a fresh hostile batch."""
    from bench import hostile

    oversize = b'{"request_id":"oversize","junk":"' + b"x" * (9 << 20) + b'"}'
    deep: Any = "leaf"
    for _ in range(40):
        deep = {"k": deep}
    kinds = [
        lambda i: hostile.huge_passage(i, size=60_000, rid=f"hostile-long-{i}"),
        lambda i: hostile.identical(1500, rid=f"hostile-identical-{i}"),
        lambda i: hostile.bad_tokenizer(
            i, name=("o200k_base", f"nope-{i}")[i % 2], rid=f"hostile-tok-{i}"
        ),
        lambda i: oversize,
        lambda i: hostile.tiny(5000, rid=f"hostile-many-{i}"),
        lambda i: hostile.near_identical(600, rid=f"hostile-near-{i}"),
        lambda i: hostile.batch(
            f"hostile-deep-{i}", [{**hostile.cand(0, hostile.PASSAGE), "metadata": deep}]
        ),
    ]
    plain = _lines(path)
    i = 0
    while True:
        i += 1
        yield kinds[(i // every) % len(kinds)](i) if i % every == 0 else next(plain)


def child(
    path: Path, rate: float, minutes: float, sample_s: float, policy: str, hostile_every: int = 0
) -> int:
    """Run the fused record path at ``rate`` for ``minutes``; one JSON line per sample."""
    handler = _handler(policy)
    ctx = handler.ctx
    total = int(rate * minutes * 60)
    pid = os.getpid()
    source = _hostile_lines(path, hostile_every) if hostile_every else _lines(path)
    clock = time.monotonic
    start = clock()
    next_sample = start + sample_s
    window: list[float] = []
    late: list[float] = []
    out_bytes = 0
    cpu0 = cpu_seconds(pid)
    last_cpu, last_t = cpu0, start
    for i in range(total):
        due = start + i / rate
        now = clock()
        if now < due:
            time.sleep(due - now)
        else:
            late.append((now - due) * 1000)
        t0 = clock()
        outputs = handler.handle(next(source), source="soak", offset=i)
        window.append((clock() - t0) * 1000)
        out_bytes += sum(len(o.value) for o in outputs)
        now = clock()
        if now >= next_sample or i == total - 1:
            cpu = cpu_seconds(pid)
            sample = {
                "t_s": round(now - start, 1),
                "records": i + 1,
                "worker_rss_mb": round(rss_mb(pid), 1),
                "worker_cpu_pct": round((cpu - last_cpu) / (now - last_t) * 100, 1),
                "handle_p50_ms": round(percentile(window, 50), 2),
                "handle_p99_ms": round(percentile(window, 99), 2),
                "behind_schedule_ms_max": round(max(late), 1) if late else 0.0,
                "dead_letters": ctx.metrics.counts.get("dead_letters", 0),
                "limits": {
                    k.removeprefix("limit."): v
                    for k, v in ctx.metrics.snapshot().items()
                    if k.startswith("limit.")
                },
                "output_mb": round(out_bytes / 1e6, 1),
            }
            print(json.dumps(sample), flush=True)
            window, late = [], []
            last_cpu, last_t = cpu, now
            next_sample += sample_s
    return 0


def run(args: Any) -> dict[str, Any]:
    traffic = default_traffic(args, msmarco=False)[0]
    samples: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="ctxbudget-soak-") as tmp:
        path = Path(tmp) / "traffic.jsonl"
        path.write_bytes(b"\n".join(traffic.lines) + b"\n")
        n_lines = len(traffic.lines)
        del traffic
        cmd = [
            sys.executable,
            "-m",
            "bench.soak_records",
            str(path),
            str(args.rate),
            str(args.minutes),
            str(args.sample_s),
            args.policy,
            str(getattr(args, "hostile", 0) or 0),
        ]
        hostile = getattr(args, "hostile", 0) or 0
        print(
            f"soak (no broker): the fused record path at {args.rate:g} batches/s for "
            f"{args.minutes:g} min, {n_lines} distinct batches cycled"
            + (f", every {hostile}th record hostile" if hostile else ""),
            flush=True,
        )
        per_minute = max(1, int(60 / args.sample_s))
        with subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True) as proc:
            assert proc.stdout is not None
            for line in proc.stdout:
                samples.append(json.loads(line))
                if len(samples) % per_minute == 0:
                    print(f"  {line.strip()}", flush=True)
            rc = proc.wait()
        if rc != 0:
            raise SystemExit(f"the soak's child process failed with exit code {rc}")
    return summarise(samples, args, n_lines)


def summarise(samples: list[dict[str, Any]], args: Any, n_lines: int) -> dict[str, Any]:
    minutes: dict[int, list[dict[str, Any]]] = {}
    for s in samples:
        minutes.setdefault(int((s["t_s"] - 1e-9) // 60), []).append(s)
    per_minute = [
        {
            "minute": m,
            "records": v[-1]["records"],
            "rss_mb": v[-1]["worker_rss_mb"],
            "cpu_pct": round(sum(x["worker_cpu_pct"] for x in v) / len(v), 1),
            "handle_p50_ms": round(percentile([x["handle_p50_ms"] for x in v], 50), 2),
            "handle_p99_ms_max": max(x["handle_p99_ms"] for x in v),
            "behind_schedule_ms_max": max(x["behind_schedule_ms_max"] for x in v),
        }
        for m, v in sorted(minutes.items())
    ]
    return {
        "mode": "record path, no broker",
        "topology": "fused (record path)",
        "rate": args.rate,
        "minutes": args.minutes,
        "distinct_batches": n_lines,
        "records": samples[-1]["records"] if samples else 0,
        "dead_letters": samples[-1]["dead_letters"] if samples else 0,
        "hostile_every": getattr(args, "hostile", 0) or 0,
        "limits": samples[-1].get("limits", {}) if samples else {},
        "memory": {"worker_rss_mb": rss_verdict(samples, "worker_rss_mb")},
        "per_minute": per_minute,
        "samples": samples,
    }


def render(report: dict[str, Any]) -> str:
    m = report["memory"]["worker_rss_mb"]
    rows = [
        [
            str(r["minute"]),
            str(r["records"]),
            f"{r['rss_mb']:.1f}",
            f"{r['cpu_pct']:.0f}",
            f"{r['handle_p50_ms']:.2f}",
            f"{r['handle_p99_ms_max']:.2f}",
            f"{r['behind_schedule_ms_max']:.0f}",
        ]
        for r in report["per_minute"]
    ]
    head = (
        f"soak (record path, no broker): {report['rate']:g} batches/s for "
        f"{report['minutes']:g} min, {report['records']} records, "
        f"{report['dead_letters']} dead letters"
    )
    if report.get("hostile_every"):
        head += f"; every {report['hostile_every']}th record hostile, limits met: " + ", ".join(
            f"{k} {v}" for k, v in sorted(report.get("limits", {}).items())
        )
    verdict = (
        f"RSS after the first minute {m['first_after_1min_mb']:.1f} MB, at the end "
        f"{m['last_mb']:.1f} MB ({m['change_pct']:+.1f}%), peak {m['peak_mb']:.1f} MB: "
        + ("flat within 10%" if m["flat_within_10pct"] else "NOT flat within 10%")
    )
    if m.get("at_10min_mb") is not None:
        verdict += (
            f"; from minute 10 ({m['at_10min_mb']:.1f} MB) to the end "
            f"{m['change_after_10min_pct']:+.1f}%"
        )
    cols = ["minute", "records", "RSS MB", "CPU %", "p50 ms", "p99 ms (max)", "late ms (max)"]
    return "\n".join([head, table(cols, rows), verdict])


if __name__ == "__main__":
    path_arg, rate_arg, minutes_arg, sample_arg, policy_arg = sys.argv[1:6]
    every = int(sys.argv[6]) if len(sys.argv) > 6 else 0
    sys.exit(
        child(
            Path(path_arg),
            float(rate_arg),
            float(minutes_arg),
            float(sample_arg),
            policy_arg,
            every,
        )
    )
