"""How the cost grows with the number of candidates per batch and with their length.

Two curves, each point a set of batches measured like ``bench inproc`` (cold passes, per
batch, median over passes):

* **candidates**: 10, 30, 100, 300 per batch. MS MARCO traffic (real passages, BM25-ranked,
  with the evaluation's copies, stale versions and overlaps mixed in) asks the generator for
  exactly N candidates; the synthetic traffic does the same with its generated passages,
  which are built from a small set of sentence templates (so at 300 candidates many passages
  really are near-copies of each other: the hard case for consolidation).
* **length**: the MS MARCO batches of about 20 candidates with every candidate text scaled by
  0.5, 1, 2 or 4. A longer text appends variants of itself whose words carry a suffix
  ("gateway" → "gatewayb"), so copies stay copies, every added word is new to the shingle
  sets and the tokenizer, and the sentence structure is kept; 0.5 keeps the first half (cut
  at a word). Spans are scaled alike, so overlapping chunks still overlap.

The figure to read is µs per candidate (or per KB): flat means linear. Each stage is shown,
so a quadratic step (consolidation's pairing, selection's novelty) would stand out.
"""

from __future__ import annotations

import re
import statistics
from typing import Any

import orjson

from bench.common import Traffic, msmarco_traffic, synthetic_traffic, table
from bench.inproc import FUSED_PARTS, measure_pass
from ctxbudget.policy import PolicyStore, default_policies_dir

_WORDISH = re.compile(r"[A-Za-z]+")


def scale_text(text: str, factor: float, *, salt: int = 0) -> str:
    """``text`` made ``factor`` times as long (see the module docstring)."""
    if factor <= 0:
        raise ValueError(f"factor must be > 0, got {factor}")
    if factor < 1:
        cut = max(1, int(len(text) * factor))
        while cut < len(text) and not text[cut].isspace():
            cut += 1
        return text[:cut]
    whole = int(factor)
    parts = [text]
    for k in range(1, whole):
        suffix = "bcdefghijk"[(k - 1 + salt) % 10]
        parts.append(_WORDISH.sub(lambda m, s=suffix: m.group(0) + s, text))  # type: ignore[misc]
    frac = factor - whole
    if frac > 0:
        parts.append(scale_text(parts[-1], frac))
    return "\n".join(parts)


def scale_batch(raw: bytes, factor: float) -> bytes:
    data = orjson.loads(raw)
    for c in data["candidates"]:
        old = len(c["text"])
        c["text"] = scale_text(c["text"], factor)
        span = c.get("span")
        if span is not None and span["end"] - span["start"] == old:
            start = int(span["start"] * factor)
            c["span"] = {"start": start, "end": start + len(c["text"])}
        c["tokens"] = None
    return orjson.dumps(data)


def _measure(traffic: Traffic, store: PolicyStore, policy: str, repeats: int) -> dict[str, float]:
    measure_pass(traffic.lines[:5], store, policy, naive=False)
    passes = [measure_pass(traffic.lines, store, policy, naive=False) for _ in range(repeats)]
    out = {
        name: statistics.median(statistics.fmean(p[name]) for p in passes)
        for name in ("fused", *FUSED_PARTS, "floor")
    }
    out["p99"] = statistics.median(
        sorted(p["fused"])[max(0, int(len(p["fused"]) * 0.99) - 1)] for p in passes
    )
    return out


def _point(label: str, traffic: Traffic, figures: dict[str, float]) -> dict[str, Any]:
    cands = traffic.candidates_per_batch
    kb = traffic.bytes_per_batch / 1024
    return {
        "point": label,
        "traffic": traffic.name,
        "batches": len(traffic.lines),
        "candidates_per_batch": round(cands, 1),
        "kb_per_batch": round(kb, 1),
        "fused_ms": round(figures["fused"], 3),
        "fused_p99_ms": round(figures["p99"], 3),
        "us_per_candidate": round(figures["fused"] * 1000 / cands, 1) if cands else None,
        "us_per_kb": round(figures["fused"] * 1000 / kb, 1) if kb else None,
        "floor_ms": round(figures["floor"], 3),
        "x_floor": round(figures["fused"] / figures["floor"], 2) if figures["floor"] else None,
        **{f"{k}_ms": round(figures[k], 3) for k in FUSED_PARTS},
    }


def run(args: Any) -> dict[str, Any]:
    store = PolicyStore.load(default_policies_dir())
    sizes = [int(x) for x in args.sizes.split(",") if x]
    lengths = [float(x) for x in args.lengths.split(",") if x]
    n = args.batches
    curves: dict[str, list[dict[str, Any]]] = {}
    sources = ("msmarco", "synthetic") if args.source == "both" else (args.source,)
    for source in sources:
        points = []
        for size in sizes:
            if source == "msmarco":
                found = msmarco_traffic(seed=args.seed, variants=1, candidates=(size, size))
                if found is None:
                    print("note: MS MARCO data not found; skipping its curve")
                    break
                traffic = Traffic(found.name, found.lines[:n])
            else:
                traffic = synthetic_traffic(n, seed=args.seed, candidates=size)
            figures = _measure(traffic, store, args.policy, args.repeats)
            points.append(_point(f"{size} candidates", traffic, figures))
            print(f"  {source} {size:>4} candidates: {figures['fused']:.2f} ms", flush=True)
        if points:
            curves[f"candidates/{source}"] = points
    base = msmarco_traffic(seed=args.seed, variants=1, candidates=(20, 20))
    if base is None:
        base = synthetic_traffic(n, seed=args.seed, candidates=20)
    points = []
    for factor in lengths:
        lines = tuple(scale_batch(x, factor) for x in base.lines[:n])
        traffic = Traffic(f"{base.name} x{factor:g} length", lines)
        figures = _measure(traffic, store, args.policy, args.repeats)
        points.append(_point(f"length x{factor:g}", traffic, figures))
        print(f"  length x{factor:g}: {figures['fused']:.2f} ms", flush=True)
    curves["length"] = points
    for name, pts in curves.items():
        print(f"\nscaling: {name}")
        print(render(pts))
    return {"curves": curves, "repeats": args.repeats, "policy": args.policy}


def render(points: list[dict[str, Any]]) -> str:
    return table(
        [
            "point",
            "cands",
            "KB",
            "fused ms",
            "p99 ms",
            "us/cand",
            "us/KB",
            "route",
            "consol.",
            "select",
            "compress",
            "floor ms",
            "x floor",
        ],
        [
            [
                p["point"],
                p["candidates_per_batch"],
                p["kb_per_batch"],
                p["fused_ms"],
                p["fused_p99_ms"],
                p["us_per_candidate"],
                p["us_per_kb"],
                p["route_ms"],
                p["consolidate_ms"],
                p["select_ms"],
                p["compress_ms"],
                p["floor_ms"],
                f"{p['x_floor']:.2f}x",
            ]
            for p in points
        ],
    )
