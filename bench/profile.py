"""A cProfile of the fused hot path (decode → four stages → encode Pack and traces).

One cold pass over the traffic under the profiler; prints the functions with the most time
of their own and the most cumulative time, and writes the raw profile with ``--out`` (open it
with ``python -m pstats`` or snakeviz). The profiler slows pure-Python code more than C code,
so read it for where the time goes, and ``bench inproc`` for how much there is.
"""

from __future__ import annotations

import cProfile
import io
import pstats
from typing import Any

from bench.common import default_traffic
from bench.inproc import clear_memos, fresh_pipeline, measure_pass
from ctxbudget.codec import decode_batch, encode
from ctxbudget.policy import PolicyStore, default_policies_dir
from ctxbudget.trace import compress_trace, consolidate_trace, route_trace, select_trace


def _fused(lines: tuple[bytes, ...], store: PolicyStore, policy: str) -> None:
    pipe = fresh_pipeline(store, policy)
    for raw in lines:
        batch = decode_batch(raw)
        routed = pipe.router.run(batch)
        cb = pipe.consolidator.run(routed)
        packed = pipe.selector.run(cb)
        finished = pipe.compressor.run(packed)
        encode(finished.pack)
        for trace in (
            route_trace(routed),
            consolidate_trace(cb),
            select_trace(packed),
            compress_trace(finished, packed),
        ):
            encode(trace)


def run(args: Any) -> dict[str, Any]:
    store = PolicyStore.load(default_policies_dir())
    traffic = default_traffic(args, msmarco=False)[0]
    measure_pass(traffic.lines[:10], store, args.policy, naive=False)  # warm up
    clear_memos()
    prof = cProfile.Profile()
    prof.enable()
    _fused(traffic.lines, store, args.policy)
    prof.disable()
    if args.out:
        prof.dump_stats(args.out)
    report: dict[str, Any] = {"traffic": traffic.name, "batches": len(traffic.lines)}
    stats = pstats.Stats(prof)
    total = stats.total_tt  # type: ignore[attr-defined]
    for key in ("tottime", "cumulative"):
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats(key).print_stats(args.top)
        text = buf.getvalue()
        print(f"profile of {traffic.name}, sorted by {key} (total {total:.2f} s):")
        print(text[text.find("   ncalls") :].rstrip(), end="\n\n")
    rows = []
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    for (path, line, func), (_cc, ncalls, tt, ct, _callers) in raw.items():
        rows.append(
            {
                "function": f"{path}:{line}({func})",
                "ncalls": ncalls,
                "tottime_s": round(tt, 4),
                "cumtime_s": round(ct, 4),
                "tottime_share": round(tt / total, 4) if total else 0.0,
            }
        )
    rows.sort(key=lambda r: -r["tottime_s"])
    report["total_s"] = round(total, 3)
    report["top_tottime"] = rows[: args.top]
    return report
