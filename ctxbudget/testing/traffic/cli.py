"""The command line: ``python -m ctxbudget.testing.traffic SOURCE --out FILE`` (SOURCE:
``msmarco``, ``dbpedia`` or ``synthetic``)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from ctxbudget.testing.traffic.base import REPO_ROOT, TrafficError
from ctxbudget.testing.traffic.dataset_free import synthetic
from ctxbudget.testing.traffic.msmarco import from_dbpedia, from_msmarco
from ctxbudget.testing.traffic.truth import truth_path_for, write_traffic


def _inside_repo(path: Path) -> bool:
    resolved = path.resolve()
    return resolved == REPO_ROOT or REPO_ROOT in resolved.parents


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m ctxbudget.testing.traffic",
        description="Generate CandidateBatch v1 JSONL traffic.",
    )
    sub = parser.add_subparsers(dest="source", required=True)
    ms = sub.add_parser("msmarco", help="traffic from the MS MARCO TREC-DL19 subset")
    ms.add_argument("--out", type=Path, required=True, help="output JSONL (outside the repo)")
    ms.add_argument("--truth-out", type=Path, default=None, help="default: OUT.truth.jsonl")
    ms.add_argument("--seed", type=int, default=1)
    ms.add_argument("--data-dir", type=Path, default=None, help="default: $CTXBUDGET_DATA_DIR")
    ms.add_argument("--variants", type=int, default=1, help="batches per judged query")
    db = sub.add_parser("dbpedia", help="entity-search traffic from the DBPedia-Entity subset")
    db.add_argument("--out", type=Path, required=True, help="output JSONL (outside the repo)")
    db.add_argument("--truth-out", type=Path, default=None, help="default: OUT.truth.jsonl")
    db.add_argument("--seed", type=int, default=1)
    db.add_argument("--data-dir", type=Path, default=None, help="default: $CTXBUDGET_DATA_DIR")
    sy = sub.add_parser("synthetic", help="dataset-free generated traffic")
    sy.add_argument("--out", type=Path, required=True)
    sy.add_argument("--truth-out", type=Path, default=None, help="default: OUT.truth.jsonl")
    sy.add_argument("--seed", type=int, default=1)
    sy.add_argument("--n", type=int, default=1000, help="number of batches")
    sy.add_argument("--candidates", type=int, default=22)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.source in ("msmarco", "dbpedia"):
            for path in (args.out, args.truth_out or truth_path_for(args.out)):
                if _inside_repo(path):
                    raise TrafficError(
                        f"refusing to write dataset-derived traffic inside the repository "
                        f"({path}); choose a path outside {REPO_ROOT}, e.g. /tmp"
                    )
        if args.source == "msmarco":
            generated = from_msmarco(
                args.data_dir, seed=args.seed, variants_per_query=args.variants
            )
        elif args.source == "dbpedia":
            generated = from_dbpedia(args.data_dir, seed=args.seed)
        else:
            generated = synthetic(args.n, seed=args.seed, candidates=args.candidates)
    except (TrafficError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    n, truth = write_traffic(generated, args.out, args.truth_out)
    print(f"wrote {n} batches to {args.out} and their truth to {truth}", file=sys.stderr)
    return 0
