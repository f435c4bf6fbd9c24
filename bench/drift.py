"""The coverage monitor on drifting labelled traffic: ``python -m bench drift``.

Labelled traffic is WikiQA (train and dev splits, read from ../shared/data; never the test
split), converted by :mod:`bench.wikiqa`; only questions with at least one relevant sentence
are kept, as a label stream carries relevant passages. The train questions are split in two by
a seeded hash: one half calibrates the filter, the other half and dev are the
stream. Three scenarios, each at ``--alpha``:

* ``exchangeable``: the stream shuffled again and again up to ``--null-requests`` labelled
  requests; any alarm is a false alarm (reported per 10,000 requests) and coverage should stay
  near 1 - alpha.
* ``rescaled``: ``--before`` requests as they are, then ``--after`` requests whose scores
  (``--scorer``, rerank by default) are rescaled as a new retriever would give them
  (``x -> 0.5 x - 0.4``).
* ``rescaled-mild``: the same with a milder change (``x -> 0.8 x``).
* ``dataset-switch``: ``--before`` WikiQA requests, then ``--after`` MS MARCO TREC-DL19
  requests (:func:`ctxbudget.testing.traffic.from_msmarco`: other passages, another score scale);
  the new
  traffic's own calibration is made on other MS MARCO variants. ``--no-dataset-switch`` skips it.

For each shift it prints coverage after the change for the static calibration, for the
monitor's recalibration (``--adaptive``), and for a calibration made on the new traffic itself
(the other half of the questions, rescaled: what a user would calibrate by hand, the reference
for context size), the detection delay in labelled requests, and the share of candidates kept.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.wikiqa import convert_split, default_data_dir
from ctxbudget.conformal import CalibrationFile, batches_sha256, calibrate, scorer_from_name
from ctxbudget.conformal.monitor import CoverageMonitor, MonitorConfig, MonitorReport
from ctxbudget.schemas import CandidateBatch


def _half(request_id: str, seed: int) -> int:
    return hashlib.sha256(f"{seed}:{request_id}".encode()).digest()[0] & 1


def load_traffic(data_dir: Path | None = None) -> tuple[list[CandidateBatch], list[CandidateBatch]]:
    """WikiQA train and dev batches with at least one relevant candidate."""
    root = data_dir or default_data_dir()
    out = []
    for split in ("train", "dev"):
        batches = [b for b, _ in convert_split(root, split)]
        out.append([b for b in batches if b.labels is not None and b.labels.relevant_chunk_ids])
    return out[0], out[1]


def rescale(batch: CandidateBatch, scale: float, shift: float, field: str) -> CandidateBatch:
    """A copy of the batch whose ``field`` scores are ``scale * x + shift`` (input untouched)."""
    candidates = tuple(
        c.model_copy(update={field: scale * getattr(c, field) + shift})
        if getattr(c, field) is not None
        else c
        for c in batch.candidates
    )
    return batch.model_copy(update={"candidates": candidates})


def _calibrate(
    batches: Sequence[CandidateBatch], alpha: float, name: str, scorer: str
) -> CalibrationFile:
    return calibrate(
        batches,
        alphas=(alpha,),
        scorer=scorer_from_name(scorer),
        data_hash=batches_sha256(batches),
        created="2026-01-01",
        name=name,
        baselines=False,
    )


def _run(
    cal: CalibrationFile, stream: Sequence[CandidateBatch], config: MonitorConfig
) -> tuple[MonitorReport, list[tuple[int, int, int, int]]]:
    """The report and, per request, (relevant, kept relevant, candidates, kept candidates)."""
    monitor = CoverageMonitor(cal, config)
    rows = []
    for b in stream:
        o = monitor.observe(b)
        assert o is not None
        rows.append((o.n_relevant, o.n_kept, o.n_candidates, o.n_candidates_kept))
    return monitor.report(), rows


def _segment(rows: Sequence[tuple[int, int, int, int]], start: int, end: int) -> dict[str, Any]:
    part = rows[start:end]
    rel = sum(r[0] for r in part)
    cands = sum(r[2] for r in part)
    return {
        "coverage": round(sum(r[1] for r in part) / rel, 4) if rel else None,
        "kept_fraction": round(sum(r[3] for r in part) / cands, 4) if cands else None,
    }


@dataclass(frozen=True, slots=True)
class Shift:
    name: str
    scale: float
    shift: float


SHIFTS = (Shift("rescaled", 0.5, -0.4), Shift("rescaled-mild", 0.8, 0.0))


def _labelled_msmarco(seed: int, n: int) -> list[CandidateBatch]:
    """MS MARCO TREC-DL19 batches (:func:`ctxbudget.testing.traffic.from_msmarco`) with relevant
    passages: ``n`` of them, as many variants of the 43 judged queries as that takes."""
    from ctxbudget.testing.traffic import from_msmarco

    variants = max(1, -(-n // 43))
    batches = [g.batch for g in from_msmarco(None, seed=seed, variants_per_query=variants)]
    labelled = [b for b in batches if b.labels is not None and b.labels.relevant_chunk_ids]
    random.Random(seed).shuffle(labelled)
    return labelled[:n]


def _scenarios(
    args: argparse.Namespace,
    calib: Sequence[CandidateBatch],
    pool: Sequence[CandidateBatch],
    field: str,
) -> list[tuple[str, list[CandidateBatch], list[CandidateBatch], CalibrationFile]]:
    """(name, before, after, the calibration a user would make on the new traffic)."""
    order = list(pool)
    random.Random(args.seed + 1).shuffle(order)
    before = order[: args.before]
    after_src = [b for b in order[args.before :]] + order[: args.before]
    out = []
    for sh in SHIFTS:
        after = [rescale(b, sh.scale, sh.shift, field) for b in after_src[: args.after]]
        # the user's own calibration on the new traffic: the calibration half, rescaled
        oracle_cal = _calibrate(
            [rescale(b, sh.scale, sh.shift, field) for b in calib],
            args.alpha,
            "oracle",
            args.scorer,
        )
        out.append((sh.name, before, after, oracle_cal))
    if args.dataset_switch:
        # another corpus, another retriever's score scale: MS MARCO passages after WikiQA
        # sentences; the new calibration is made on other MS MARCO variants
        after = _labelled_msmarco(args.seed, args.after)
        oracle_cal = _calibrate(
            _labelled_msmarco(args.seed + 1000, len(calib)), args.alpha, "oracle", args.scorer
        )
        out.append(("dataset-switch", before, after, oracle_cal))
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    train, dev = load_traffic(args.data_dir)
    calib = [b for b in train if _half(b.request_id, args.seed) == 0]
    pool = [b for b in train if _half(b.request_id, args.seed) == 1] + dev
    field = f"{args.scorer}_score"
    cal = _calibrate(calib, args.alpha, "wikiqa-train-half", args.scorer)
    base = MonitorConfig(alpha=args.alpha, window=args.window)
    out: dict[str, Any] = {
        "alpha": args.alpha,
        "scorer": args.scorer,
        "calibration_queries": len(calib),
        "stream_pool": len(pool),
    }

    # exchangeable: reshuffles of the pool, false alarms counted
    rng = random.Random(args.seed)
    stream: list[CandidateBatch] = []
    while len(stream) < args.null_requests:
        order = list(pool)
        rng.shuffle(order)
        stream.extend(order)
    stream = stream[: args.null_requests]
    rep, rows = _run(cal, stream, base)
    out["exchangeable"] = {
        "requests": len(stream),
        "false_alarms": len(rep.alarms),
        "false_alarms_per_10k": round(len(rep.alarms) * 10_000 / len(stream), 3),
        **_segment(rows, 0, len(rows)),
    }

    for name, before, after, oracle_cal in _scenarios(args, calib, pool, field):
        stream = before + after
        change = len(before)
        static_rep, static_rows = _run(cal, stream, base)
        adapt_cfg = MonitorConfig(
            alpha=args.alpha,
            window=args.window,
            adaptive=True,
            recalibration_size=args.recalibration_size,
        )
        adapt_rep, adapt_rows = _run(cal, stream, adapt_cfg)
        aci_cfg = MonitorConfig(alpha=args.alpha, window=args.window, aci_gamma=args.aci_gamma)
        aci_rep, aci_rows = _run(cal, stream, aci_cfg)
        _, oracle_rows = _run(oracle_cal, stream, base)
        tail = len(stream) - len(after) // 3
        alarm = next((a for a in static_rep.alarms if a >= change), None)
        early = [a for a in static_rep.alarms if a < change]
        out[name] = {
            "change_at": change,
            "requests": len(stream),
            "alarm_at": alarm,
            "alarms_before_change": len(early),
            "detection_delay": None if alarm is None else alarm - change + 1,
            "recalibrated_at": list(adapt_rep.recalibrations),
            "before": _segment(static_rows, 0, change),
            "static_after": _segment(static_rows, change, len(stream)),
            "adaptive_after": _segment(adapt_rows, change, len(stream)),
            "static_last_third": _segment(static_rows, tail, len(stream)),
            "adaptive_last_third": _segment(adapt_rows, tail, len(stream)),
            "aci_after": _segment(aci_rows, change, len(stream)),
            "aci_last_third": _segment(aci_rows, tail, len(stream)),
            "new_calibration_last_third": _segment(oracle_rows, tail, len(stream)),
            "coverage_by_window_static": [w.coverage for w in static_rep.coverage_by_window],
            "coverage_by_window_adaptive": [w.coverage for w in adapt_rep.coverage_by_window],
            "coverage_by_window_aci": [w.coverage for w in aci_rep.coverage_by_window],
        }
    return out


def render(res: dict[str, Any]) -> str:
    a = res["alpha"]
    ex = res["exchangeable"]
    lines = [
        f"drift bench: WikiQA, {res['scorer']} scorer, alpha {a} (target coverage {1 - a:.2f}); "
        f"calibration {res['calibration_queries']} questions, stream pool {res['stream_pool']}",
        f"exchangeable: {ex['requests']} labelled requests, coverage {ex['coverage']}, "
        f"false alarms {ex['false_alarms']} ({ex['false_alarms_per_10k']} per 10k)",
    ]
    for name in [s.name for s in SHIFTS] + ["dataset-switch"]:
        if name not in res:
            continue
        r = res[name]
        lines.append(
            f"{name}: change at request {r['change_at']}, alarm at {r['alarm_at']} "
            f"(delay {r['detection_delay']} labelled requests, {r['alarms_before_change']} "
            f"alarms before the change), recalibrated at {r['recalibrated_at']}"
        )
        lines.append("  segment                    coverage  kept_fraction")
        for label, key in (
            ("before the change", "before"),
            ("static, after", "static_after"),
            ("adaptive, after", "adaptive_after"),
            ("static, last third", "static_last_third"),
            ("adaptive, last third", "adaptive_last_third"),
            ("aci, after", "aci_after"),
            ("aci, last third", "aci_last_third"),
            ("new calibration, last third", "new_calibration_last_third"),
        ):
            seg = r[key]
            lines.append(f"  {label:<27}{seg['coverage']!s:>8}  {seg['kept_fraction']!s:>13}")
        lines.append(
            "  windows static:   "
            + " ".join("-" if c is None else f"{c:.2f}" for c in r["coverage_by_window_static"])
        )
        lines.append(
            "  windows adaptive: "
            + " ".join("-" if c is None else f"{c:.2f}" for c in r["coverage_by_window_adaptive"])
        )
        lines.append(
            "  windows aci:      "
            + " ".join("-" if c is None else f"{c:.2f}" for c in r["coverage_by_window_aci"])
        )
    return "\n".join(lines)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--alpha", type=float, default=0.1)
    p.add_argument("--scorer", choices=("rerank", "retrieval"), default="rerank")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--window", type=int, default=50)
    p.add_argument("--null-requests", type=int, default=10_000)
    p.add_argument("--before", type=int, default=300)
    p.add_argument("--after", type=int, default=500)
    p.add_argument("--recalibration-size", type=int, default=500)
    p.add_argument("--aci-gamma", type=float, default=0.005)
    p.add_argument("--data-dir", type=Path, default=None)
    p.add_argument(
        "--dataset-switch",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also switch from WikiQA to MS MARCO TREC-DL19 mid-stream",
    )
    p.add_argument("--json-out")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench drift", description=__doc__.split("\n")[0]
    )
    add_arguments(parser)
    args = parser.parse_args(argv)
    res = run(args)
    print(render(res))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(res, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
