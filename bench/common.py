"""What every benchmark shares: traffic, statistics, the table printer and the JSON report.

Traffic is a list of raw CandidateBatch v1 lines (bytes), as a worker would read them off the
candidates topic. The generated traffic is :func:`ctxbudget.testing.traffic.synthetic` (the
evaluation
traffic's shape: copies, stale versions, overlaps, injected and foreign passages) and, when the
data folder holds it, the MS MARCO traffic; ``--file F`` replays a file instead. Candidates
are stripped of ``tokens`` by default: the target is traffic whose candidates come
without token counts (the packer never trusts them anyway).
"""

from __future__ import annotations

import json
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

REPO = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------- traffic


@dataclass(frozen=True)
class Traffic:
    """Raw batches and where they came from."""

    name: str
    lines: tuple[bytes, ...]

    @property
    def candidates_per_batch(self) -> float:
        if not self.lines:
            return 0.0
        return statistics.fmean(len(orjson.loads(x)["candidates"]) for x in self.lines)

    @property
    def bytes_per_batch(self) -> float:
        return statistics.fmean(len(x) for x in self.lines) if self.lines else 0.0


def strip_tokens(raw: bytes) -> bytes:
    """The batch with every candidate's ``tokens`` unset (``null``)."""
    data = orjson.loads(raw)
    for c in data.get("candidates", ()):
        c["tokens"] = None
    return orjson.dumps(data)


def read_file(path: Path, *, keep_tokens: bool = True, limit: int | None = None) -> Traffic:
    lines = [x for x in path.read_bytes().splitlines() if x.strip()][:limit]
    if not keep_tokens:
        lines = [strip_tokens(x) for x in lines]
    return Traffic(path.name, tuple(lines))


def synthetic_traffic(
    n: int, *, seed: int = 1, candidates: int = 22, keep_tokens: bool = False
) -> Traffic:
    from ctxbudget.testing.traffic import synthetic

    batches = synthetic(n, seed=seed, candidates=candidates)
    lines = [_dump(g.batch) for g in batches]
    if not keep_tokens:
        lines = [strip_tokens(x) for x in lines]
    return Traffic(f"synthetic(n={n}, seed={seed}, candidates={candidates})", tuple(lines))


def msmarco_traffic(
    *,
    seed: int = 1,
    variants: int = 5,
    candidates: tuple[int, int] | None = None,
    keep_tokens: bool = False,
) -> Traffic | None:
    """MS MARCO traffic, or None when the data folder does not hold the subset."""
    from ctxbudget.testing.traffic import TrafficError, from_msmarco

    kwargs: dict[str, Any] = {"seed": seed, "variants_per_query": variants}
    if candidates is not None:
        kwargs["candidates_per_query"] = candidates
    try:
        batches = from_msmarco(None, **kwargs)
    except (TrafficError, FileNotFoundError, OSError):
        return None
    lines = [_dump(g.batch) for g in batches]
    if not keep_tokens:
        lines = [strip_tokens(x) for x in lines]
    shown = f", candidates={candidates[0]}-{candidates[1]}" if candidates else ""
    return Traffic(f"msmarco(variants={variants}, seed={seed}{shown})", tuple(lines))


def _dump(model: Any) -> bytes:
    from ctxbudget.codec import encode

    return encode(model)


def default_traffic(args: Any, *, msmarco: bool = True) -> list[Traffic]:
    """``--file`` when given, else synthetic traffic and (when present) MS MARCO traffic."""
    if getattr(args, "file", None):
        return [read_file(Path(args.file), keep_tokens=args.keep_tokens, limit=args.limit)]
    out = [synthetic_traffic(args.n, seed=args.seed, keep_tokens=args.keep_tokens)]
    if msmarco and not getattr(args, "no_msmarco", False):
        ms = msmarco_traffic(seed=args.seed, keep_tokens=args.keep_tokens)
        if ms is not None:
            out.append(ms)
        else:
            print("note: MS MARCO data not found; synthetic traffic only", file=sys.stderr)
    return out


# ---------------------------------------------------------------- statistics


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in 0..100); 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, math.ceil(q / 100 * len(ordered)) - 1))
    return ordered[k]


@dataclass(frozen=True)
class Summary:
    """Per-batch latencies (ms) of one pass, summarised."""

    n: int
    total_s: float
    mean_ms: float
    p50_ms: float
    p99_ms: float

    @property
    def per_s(self) -> float:
        return self.n / self.total_s if self.total_s > 0 else 0.0

    @classmethod
    def of(cls, latencies_ms: Sequence[float]) -> Summary:
        total = sum(latencies_ms) / 1000
        return cls(
            n=len(latencies_ms),
            total_s=total,
            mean_ms=statistics.fmean(latencies_ms) if latencies_ms else 0.0,
            p50_ms=percentile(latencies_ms, 50),
            p99_ms=percentile(latencies_ms, 99),
        )

    def as_dict(self) -> dict[str, float]:
        return {
            "n": self.n,
            "batches_per_s": round(self.per_s, 1),
            "mean_ms": round(self.mean_ms, 4),
            "p50_ms": round(self.p50_ms, 4),
            "p99_ms": round(self.p99_ms, 4),
        }


def median_summary(passes: Sequence[Summary]) -> Summary:
    """The pass with the median mean (so p50/p99 come from one real pass, not a blend)."""
    ordered = sorted(passes, key=lambda s: s.mean_ms)
    return ordered[(len(ordered) - 1) // 2]


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = fn()
    return out, (time.perf_counter() - t0) * 1000


# ---------------------------------------------------------------- output


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A plain fixed-width table (numbers right-aligned)."""
    cells = [[_cell(v) for v in r] for r in rows]
    widths = [len(h) for h in headers]
    for r in cells:
        widths = [max(w, len(c)) for w, c in zip(widths, r, strict=True)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    for r in cells:
        lines.append(
            "  ".join(
                c.rjust(w) if _numeric(c) else c.ljust(w) for c, w in zip(r, widths, strict=True)
            )
        )
    return "\n".join(lines)


def _cell(v: Any) -> str:
    if isinstance(v, float):
        if v == 0:
            return "0"
        if abs(v) >= 100:
            return f"{v:.0f}"
        if abs(v) >= 10:
            return f"{v:.1f}"
        return f"{v:.3f}" if abs(v) < 1 else f"{v:.2f}"
    return str(v)


def _numeric(c: str) -> bool:
    try:
        float(c.rstrip("x%"))
    except ValueError:
        return False
    return True


def environment() -> dict[str, Any]:
    """Where the figures were measured (they mean little without it)."""
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "loadavg_at_start": [round(x, 2) for x in load],
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def write_json(path: str | None, report: dict[str, Any]) -> None:
    if not path:
        return
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(report, indent=2, sort_keys=False) + "\n")
    print(f"wrote {path}", file=sys.stderr)
