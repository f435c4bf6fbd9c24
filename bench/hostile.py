"""Hostile batches, and what they cost a worker: ``python -m bench hostile``.

Each case runs in a child process of its own (so its peak resident memory is its own) and
reports wall time, the peak RSS and the RSS at the end, and what came out:

- ``identical-3000`` / ``identical-4000``: that many identical passages (0.23 / 0.31 MB),
  through the four stages in process (``Pipeline.run`` on the model: the input limits,
  which would refuse the batch at the door, are not in the way);
- ``near-identical-2000``: 2,000 passages that differ in one word each, in process;
- ``tiny-30000``: a valid 2.2 MB batch of 30,000 tiny candidates, through the route and the
  fused record paths (``ctxbudget.kafka.handlers``): the bytes they would produce, per topic;
- ``candidates-100k``: 100,000 candidates in about 8 MB, through the fused record path;
- ``tokenizer-400``: 400 batches naming a tokenizer that is not available, fused record path:
  RSS after a warm-up batch and at the end;
- ``memo-240``: 240 batches each holding a distinct 1 MB passage, fused record path;
- ``*-unlimited``: the same with the input limit in the way raised (max_candidates,
  max_text_bytes), to show what the next defence does (the output limit of the routed
  topic; the memos bounded in bytes).

The generators are shared with ``bench soak --no-broker --hostile``, which mixes them into
ordinary traffic. Figures are single runs on a shared machine.
"""

from __future__ import annotations

import json
import os
import random
import resource
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import orjson

from bench.common import REPO, table
from ctxbudget.kafka.processes import rss_mb

QUERY = "How long do Acme gateway API keys stay valid before they must be rotated?"
#: 84 characters: 3,000 copies with their ids and scores make a 0.51 MB batch
PASSAGE = "API keys for the Acme gateway expire after 90 days; rotate them before they expire."


def batch(rid: str, candidates: list[dict[str, Any]], *, tokenizer: str = "cl100k_base") -> bytes:
    """A CandidateBatch v1 line around ``candidates``."""
    return orjson.dumps(
        {
            "schema": "ctx.candidate_batch.v1",
            "request_id": rid,
            "tenant_id": "acme",
            "principal": {"tenant_id": "acme", "access_labels": ["public"]},
            "query": {"text": QUERY},
            "model": {"name": "m", "input_limit": 8192, "tokenizer": tokenizer},
            "answer_contract": {"kind": "short_fact"},
            "candidates": candidates,
        }
    )


def cand(i: int, text: str, **extra: Any) -> dict[str, Any]:
    return {"chunk_id": f"c{i}", "doc_id": f"d{i}", "source_id": f"s{i % 7}", "text": text, **extra}


def _words(rng: random.Random, n: int) -> str:
    return " ".join(f"w{rng.getrandbits(40):x}" for _ in range(n))


def identical(n: int, rid: str = "identical") -> bytes:
    return batch(rid, [cand(i, PASSAGE, retrieval_score=1.0) for i in range(n)])


def near_identical(n: int, rid: str = "near-identical") -> bytes:
    base = (PASSAGE + " ") * 4
    return batch(rid, [cand(i, f"{base}variant{i}", retrieval_score=1.0) for i in range(n)])


def tiny(n: int, rid: str = "tiny") -> bytes:
    return batch(
        rid,
        [{"chunk_id": f"c{i}", "doc_id": "d", "source_id": "s", "text": f"t{i}"} for i in range(n)],
    )


def huge_passage(seed: int, size: int = 1 << 20, rid: str | None = None) -> bytes:
    """One distinct passage of about ``size`` bytes beside three ordinary ones."""
    rng = random.Random(seed)
    big = _words(rng, size // 12)
    cands = [cand(0, big, retrieval_score=2.0)]
    cands += [cand(i, f"{PASSAGE} {_words(rng, 20)}", retrieval_score=1.0) for i in (1, 2, 3)]
    return batch(rid or f"huge-{seed}", cands)


def bad_tokenizer(seed: int, *, name: str = "o200k_base", rid: str | None = None) -> bytes:
    """About 300 KB of passages and a tokenizer this machine does not hold."""
    rng = random.Random(seed)
    cands = [cand(i, _words(rng, 250), retrieval_score=1.0) for i in range(100)]
    return batch(rid or f"tok-{seed}", cands, tokenizer=name)


def oversize(seed: int, size: int = 9 << 20, rid: str | None = None) -> bytes:
    rng = random.Random(seed)
    cands = [cand(i, _words(rng, 5000)) for i in range(size // 60_000 + 1)]
    return batch(rid or f"oversize-{seed}", cands)


def many_candidates(n: int = 100_000, rid: str = "many") -> bytes:
    return batch(
        rid,
        [
            {"chunk_id": f"c{i}", "doc_id": "d", "source_id": "s", "text": f"x{i:011d}"}
            for i in range(n)
        ],
    )


# ---------------------------------------------------------------- the cases, one child each


def _rss_mb() -> float:
    return rss_mb(os.getpid())


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _handler(stage: str, **limits: int) -> Any:
    """A handler built as a worker builds it: the input limits (the defaults, or raised by
    ``limits``) and the output limits of the shipped topic specs."""
    from ctxbudget.kafka.handlers import (
        Context,
        Metrics,
        Pipelines,
        build_handler,
        static_assignment,
    )
    from ctxbudget.kafka.limits import load_specs, topic_limits
    from ctxbudget.kafka.settings import TopicNames, WorkerSettings
    from ctxbudget.limit_settings import LimitSettings
    from ctxbudget.limits import InputLimits

    held = InputLimits(**limits)
    ctx = Context(
        pipelines=Pipelines(REPO / "policies", max_pair_checks=held.max_pair_checks),
        topics=TopicNames(),
        metrics=Metrics(),
        assign=static_assignment("default@1"),
        limits=held,
        topic_limits=topic_limits(WorkerSettings(), LimitSettings(), load_specs(WorkerSettings())),
    )
    return build_handler(stage, ctx)


def _outputs(outs: list[Any]) -> dict[str, Any]:
    sizes: Counter[str] = Counter()
    for o in outs:
        sizes[o.topic] += len(o.value)
    errors = [orjson.loads(o.value)["error"][:160] for o in outs if "deadletter" in o.topic]
    return {"bytes_by_topic": dict(sizes), "dead_letter_errors": errors}


def _in_process(raw: bytes) -> dict[str, Any]:
    from ctxbudget.pipeline import Pipeline
    from ctxbudget.policy import PolicyStore
    from ctxbudget.schemas import CandidateBatch

    pipe = Pipeline.from_store(PolicyStore.load(REPO / "policies"), "default@1")
    model = CandidateBatch.model_validate_json(raw)
    t0 = time.perf_counter()
    try:
        pack = pipe.run(model).pack
        outcome = f"pack: {len(pack.evidence)} evidence item(s), dropped {dict(pack.dropped)}"
    except Exception as e:  # the report says what stopped it
        outcome = f"{type(e).__name__}: {str(e)[:160]}"
    return {"seconds": time.perf_counter() - t0, "outcome": outcome, "input_mb": len(raw) / 1e6}


def _record_path(stage: str, raw: bytes, **limits: int) -> dict[str, Any]:
    handler = _handler(stage, **limits)
    t0 = time.perf_counter()
    outs = handler.handle(raw, source="hostile")
    return {"seconds": time.perf_counter() - t0, "input_mb": len(raw) / 1e6, **_outputs(outs)}


def _repeated(make: Callable[[int], bytes], n: int, **limits: int) -> dict[str, Any]:
    handler = _handler("fused", **limits)
    warm = (REPO / "examples" / "batches.jsonl").read_bytes().splitlines()[0]
    handler.handle(warm)
    start = _rss_mb()
    t0 = time.perf_counter()
    topics: Counter[str] = Counter()
    for i in range(n):
        for o in handler.handle(make(i), source="hostile", offset=i):
            topics[o.topic] += 1
    return {
        "seconds": time.perf_counter() - t0,
        "rss_start_mb": round(start, 1),
        "records": n,
        "outputs_by_topic": dict(topics),
    }


CASES: dict[str, Callable[[], dict[str, Any]]] = {
    "identical-3000": lambda: _in_process(identical(3000)),
    "identical-4000": lambda: _in_process(identical(4000)),
    "near-identical-2000": lambda: _in_process(near_identical(2000)),
    "tiny-30000-route": lambda: _record_path("route", tiny(30_000)),
    "tiny-30000-fused": lambda: _record_path("fused", tiny(30_000)),
    "candidates-100k": lambda: _record_path("fused", many_candidates()),
    "oversize-9MB": lambda: _record_path("fused", oversize(1)),
    "tokenizer-400": lambda: _repeated(lambda i: bad_tokenizer(i), 400),
    "memo-240": lambda: _repeated(lambda i: huge_passage(i), 240),
    # the same with the input limits raised out of the way: what the later defences do
    "tiny-30000-route-unlimited": lambda: _record_path(
        "route", tiny(30_000), max_candidates=1_000_000
    ),
    "memo-240-unlimited": lambda: _repeated(lambda i: huge_passage(i), 240, max_text_bytes=1 << 21),
}


def child(name: str) -> int:
    base = _rss_mb()
    result = CASES[name]()
    result.update(
        case=name,
        rss_base_mb=round(base, 1),
        peak_rss_mb=round(_peak_mb(), 1),
        rss_end_mb=round(_rss_mb(), 1),
        seconds=round(result["seconds"], 2),
    )
    print(json.dumps(result), flush=True)
    return 0


def run(args: Any) -> dict[str, Any]:
    names = [n for n in str(args.cases).split(",") if n] or list(CASES)
    results = []
    for name in names:
        out = subprocess.run(
            [sys.executable, "-m", "bench.hostile", name],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=args.timeout,
            check=False,
        )
        if out.returncode != 0:
            results.append({"case": name, "failed": out.returncode, "stderr": out.stderr[-2000:]})
        else:
            results.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(json.dumps(results[-1]), flush=True)
    return {"cases": results}


def render(report: dict[str, Any]) -> str:
    rows = []
    for r in report["cases"]:
        if "failed" in r:
            rows.append([r["case"], "-", "-", "-", f"exit {r['failed']}"])
            continue
        what = r.get("outcome") or ", ".join(
            f"{k} {v / 1e6:.2f} MB" for k, v in r.get("bytes_by_topic", {}).items()
        )
        if r.get("outputs_by_topic"):
            what = f"RSS {r['rss_start_mb']} -> {r['rss_end_mb']} MB; " + str(r["outputs_by_topic"])
        rows.append(
            [
                r["case"],
                f"{r['seconds']:.2f}",
                f"{r['peak_rss_mb']:.0f}",
                f"{r['rss_end_mb']:.0f}",
                what,
            ]
        )
    return table(["case", "seconds", "peak RSS MB", "end RSS MB", "outcome"], rows)


if __name__ == "__main__":
    sys.exit(child(sys.argv[1]))
