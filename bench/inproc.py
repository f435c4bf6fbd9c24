"""In-process benchmark: each stage, the four fused, the floor and the naive assembler.

For every batch of the traffic, in one pass and in this order:

* **fused** — what a fused worker does with one record, without Kafka: decode (pydantic,
  strict) → route → consolidate → select → compress → encode the Pack → build and encode the
  four TraceEvents. Each part is timed on its own; ``fused`` is their sum.
* **floor** — the unavoidable work (the target's definition): ``orjson.loads`` of the raw
  batch plus one exact, uncached count of the final rendered evidence block.
* **split hops** — what the four-worker topology adds in-process: each stage's output is
  encoded (the compact form of ``codec.encode_compact``, as the workers write it) and
  decoded again by the next worker (RoutedBatch, ConsolidatedBatch, PackedBatch).
* **naive** — ``ctxbudget.testing.naive.naive_assemble`` (decode + tokenize every candidate + fill).

Each pass starts cold: a new pipeline (empty token-count, shingle and sentence caches) and a
fresh naive counter, so no pass profits from the one before. Inside a pass the caches
work as they do in production (a chunk that recurs in a later request is a cache hit).
Figures are per batch; the reported value of each row is the median over the passes, and the
ratio to the floor is taken pass by pass (both measured on the same batches, interleaved).
"""

from __future__ import annotations

import resource
import statistics
import time
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import orjson

from bench.common import Summary, Traffic, table
from ctxbudget.codec import decode, decode_batch, encode, encode_compact
from ctxbudget.pipeline import Pipeline
from ctxbudget.policy import PolicyStore, default_policies_dir
from ctxbudget.schemas import ConsolidatedBatch, PackedBatch, RoutedBatch
from ctxbudget.tokens import TokenizerRegistry

FUSED_PARTS = ("decode", "route", "consolidate", "select", "compress", "encode", "traces")
HOP_PARTS = ("hop_routed", "hop_consolidated", "hop_packed")


def native_path() -> str:
    """The path this process packs on (``python`` for a ctxbudget without the switch)."""
    try:
        from ctxbudget.native import native_path as path
    except ImportError:  # a release before the compiled path: measured as it was
        return "python"
    return path()


def clear_memos() -> None:
    """Forget what earlier passes memoised at module level, so each pass starts cold (older
    versions kept shingle sets in ``ctxbudget.text``; now every memo belongs to a pipeline,
    and each pass builds a fresh one)."""
    from ctxbudget import text

    clear = getattr(text, "clear_memos", None)  # present in older versions only
    if clear is not None:
        clear()


def fresh_pipeline(store: PolicyStore, policy: str) -> Pipeline:
    return Pipeline.from_store(store, policy, tokenizers=TokenizerRegistry())


#: The clocks a pass may time with: the thread's CPU time (what a batch costs, whatever else
#: the machine runs) or the wall clock (what a caller waits, preemption included).
CLOCKS = {"cpu": time.thread_time, "wall": time.perf_counter}


def measure_pass(
    lines: Sequence[bytes],
    store: PolicyStore,
    policy: str,
    *,
    naive: bool = True,
    clock_name: str = "cpu",
) -> dict[str, list[float]]:
    """One cold pass over ``lines``: per-batch milliseconds of every part."""
    from ctxbudget.testing.naive import TiktokenCounter as NaiveCounter
    from ctxbudget.testing.naive import naive_assemble

    clear_memos()
    pipe = fresh_pipeline(store, policy)
    naive_counter = NaiveCounter() if naive else None
    out: dict[str, list[float]] = defaultdict(list)
    clock = CLOCKS[clock_name]
    encoding: Any = None
    for raw in lines:
        t0 = clock()
        batch = decode_batch(raw)
        t1 = clock()
        result = pipe.run(batch, clock=clock)  # the one orchestration, as workers run it
        t2 = clock()
        encode(result.pack)
        t3 = clock()
        for trace in result.traces:
            encode(trace)
        t4 = clock()
        out["decode"].append((t1 - t0) * 1000)
        for name, ms in zip(FUSED_PARTS[1:5], result.stage_ms, strict=True):
            out[name].append(ms)
        out["encode"].append((t3 - t2) * 1000)
        # building the traces happens inside run(), after the last stage
        out["traces"].append((t2 - t1) * 1000 - sum(result.stage_ms) + (t4 - t3) * 1000)
        out["fused"].append((t4 - t0) * 1000)

        # the floor: decode the bytes, count the final block once, exactly, uncached
        if encoding is None:
            encoding = _raw_encoding(pipe, batch.model.tokenizer)
        f0 = clock()
        orjson.loads(raw)
        f1 = clock()
        encoding.encode_ordinary(result.pack.rendered)
        f2 = clock()
        out["floor_decode"].append((f1 - f0) * 1000)
        out["floor_count"].append((f2 - f1) * 1000)
        out["floor"].append((f2 - f0) * 1000)

        # what the split topology adds: the next worker decodes what this one encoded
        for name, model, cls in (
            ("hop_routed", result.routed, RoutedBatch),
            ("hop_consolidated", result.consolidated, ConsolidatedBatch),
            ("hop_packed", result.packed, PackedBatch),
        ):
            h0 = clock()
            decode(encode_compact(model), cls)  # the form the workers put on the topics
            out[name].append((clock() - h0) * 1000)

        if naive_counter is not None:
            n0 = clock()
            naive_assemble(decode_batch(raw), naive_counter)
            out["naive"].append((clock() - n0) * 1000)
    return dict(out)


def _raw_encoding(pipe: Pipeline, tokenizer: str) -> Any:
    counter = pipe.compressor.tokenizers.get(tokenizer)
    return counter._encoding  # type: ignore[attr-defined]  # the uncached tiktoken encoding


def run(
    traffic: Traffic,
    *,
    repeats: int = 5,
    policy: str = "default@1",
    warmup: int = 20,
    naive: bool = True,
    clock_name: str = "cpu",
) -> dict[str, Any]:
    store = PolicyStore.load(default_policies_dir())
    measure_pass(traffic.lines[:warmup], store, policy, naive=naive)  # load, compile, JIT caches
    passes = [
        measure_pass(traffic.lines, store, policy, naive=naive, clock_name=clock_name)
        for _ in range(repeats)
    ]
    rows = _rows(passes)
    ratios = [statistics.fmean(p["fused"]) / statistics.fmean(p["floor"]) for p in passes]
    to_naive = [
        statistics.fmean(p["fused"]) / statistics.fmean(p["naive"]) for p in passes if "naive" in p
    ]
    pack_only = [
        statistics.fmean([f - t for f, t in zip(p["fused"], p["traces"], strict=True)])
        / statistics.fmean(p["floor"])
        for p in passes
    ]
    return {
        "traffic": {
            "name": traffic.name,
            "batches": len(traffic.lines),
            "candidates_per_batch": round(traffic.candidates_per_batch, 1),
            "bytes_per_batch": round(traffic.bytes_per_batch),
        },
        "repeats": repeats,
        "policy": policy,
        "clock": clock_name,
        "path": native_path(),
        "rows": rows,
        "ratio_fused_to_floor": round(statistics.median(ratios), 2),
        "ratio_fused_to_floor_passes": [round(r, 2) for r in ratios],
        "ratio_without_traces_to_floor": round(statistics.median(pack_only), 2),
        "ratio_fused_to_naive": round(statistics.median(to_naive), 2) if to_naive else None,
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


_LABELS = {
    "decode": "  decode (pydantic, strict)",
    "route": "  route",
    "consolidate": "  consolidate",
    "select": "  select",
    "compress": "  compress (render + exact count)",
    "encode": "  encode Pack",
    "traces": "  4 TraceEvents (build + encode)",
    "fused": "fused: all four stages, one hop",
    "floor_decode": "  orjson.loads",
    "floor_count": "  one exact count of the pack",
    "floor": "floor: decode + one exact count",
    "hop_routed": "  RoutedBatch encode + decode",
    "hop_consolidated": "  ConsolidatedBatch encode + decode",
    "hop_packed": "  PackedBatch encode + decode",
    "split": "split: fused + the three hops",
    "naive": "naive assembler (ctxbudget/testing/naive.py)",
    "contract": "contract: strict decode + one count + Pack + traces",
}
_ORDER = (
    "fused",
    *FUSED_PARTS,
    "floor",
    "floor_decode",
    "floor_count",
    "contract",
    "split",
    *HOP_PARTS,
    "naive",
)


def _rows(passes: Sequence[dict[str, list[float]]]) -> list[dict[str, Any]]:
    for p in passes:
        p["split"] = [f + sum(p[h][i] for h in HOP_PARTS) for i, f in enumerate(p["fused"])]
        # What a worker must do with no packing work at all: validate the input strictly
        # (bad input must become a clear dead letter), count the pack once, encode the Pack
        # and the four TraceEvents the wire contract asks for.
        p["contract"] = [
            d + c + e + t
            for d, c, e, t in zip(
                p["decode"], p["floor_count"], p["encode"], p["traces"], strict=True
            )
        ]
    rows = []
    for name in _ORDER:
        if name not in passes[0]:
            continue
        summaries = [Summary.of(p[name]) for p in passes]
        mean = statistics.median(s.mean_ms for s in summaries)
        rows.append(
            {
                "part": name,
                "label": _LABELS[name].strip(),
                "mean_ms": round(mean, 4),
                "p50_ms": round(statistics.median(s.p50_ms for s in summaries), 4),
                "p99_ms": round(statistics.median(s.p99_ms for s in summaries), 4),
                "batches_per_s": round(1000 / mean, 1) if mean > 0 else None,
            }
        )
    floor = next(r["mean_ms"] for r in rows if r["part"] == "floor")
    for r in rows:
        r["x_floor"] = round(r["mean_ms"] / floor, 2) if floor else None
    return rows


def _x(report: dict[str, Any], part: str) -> str:
    row = next((r for r in report["rows"] if r["part"] == part), None)
    return f"{row['x_floor']:.2f}x" if row and row["x_floor"] is not None else "n/a"


def render(report: dict[str, Any]) -> str:
    t = report["traffic"]
    head = (
        f"in-process, {t['name']}: {t['batches']} batches, "
        f"{t['candidates_per_batch']} candidates and {t['bytes_per_batch']} bytes per batch; "
        f"median of {report['repeats']} cold passes; {report['clock']} clock, "
        f"{report['path']} path; peak RSS {report['peak_rss_mib']} MiB"
    )
    body = table(
        ["", "mean ms", "p50 ms", "p99 ms", "batches/s", "x floor"],
        [
            [
                _LABELS[r["part"]],
                r["mean_ms"],
                r["p50_ms"],
                r["p99_ms"],
                r["batches_per_s"] or 0.0,
                f"{r['x_floor']:.2f}x",
            ]
            for r in report["rows"]
        ],
    )
    tail = (
        f"fused / floor = {report['ratio_fused_to_floor']:.2f}x (passes: "
        f"{', '.join(f'{x:.2f}' for x in report['ratio_fused_to_floor_passes'])}); "
        f"without the traces {report['ratio_without_traces_to_floor']:.2f}x; target <= 3x; "
        + (
            f"fused / naive = {report['ratio_fused_to_naive']:.2f}x (target <= 1x); "
            if report["ratio_fused_to_naive"] is not None
            else ""
        )
        + f"the contract alone (no packing work) {_x(report, 'contract')}"
    )
    return f"{head}\n{body}\n{tail}"
