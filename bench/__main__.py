"""``python -m bench`` (``./dev bench``): the performance benchmarks, one command each.

    python -m bench inproc   [--file F] [--n 1000] [--repeats 5] [--json-out F]
    python -m bench process  --file F [--file G] [--rounds 5] [--json-out F]
    python -m bench scaling  [--sizes 10,30,100,300] [--lengths 0.5,1,2,4] [--json-out F]
    python -m bench profile  [--file F] [--top 25] [--out hot.prof]
    python -m bench kafka    [--topology split,fused] [--rate 100] [--duration 30] [--json-out F]
    python -m bench soak     [--minutes 10] [--rate 100] [--topology fused] [--json-out F]
    python -m bench soak --no-broker [--minutes 60] [--n 5000]   (the record path alone)
    python -m bench soak --no-broker --hostile 4 [--rate 20]      (... with hostile batches)
    python -m bench quality  [--policy default@1] [--compare lean@1] [--sets a,b]
                             [--half a|b] [--json-out F]
    python -m bench hostile  [--cases identical-3000,tokenizer-400] [--json-out F]
    python -m bench drift    [--alpha 0.1] [--null-requests 10000] [--json-out F]
    python -m bench verify   [--sets dev,heldout] [--per-pack 5] [--repeats 3] [--json-out F]
    python -m bench peers    [--frameworks langchain,llama-index,haystack] [--repeats 3]
    python -m bench all      [--json-out DIR]   (inproc, scaling, profile, kafka; soak is separate)

The tools with a command line of their own are reached here too (``python -m bench TOOL
...`` runs ``python -m bench.TOOL ...``): ``injection``, ``train-gate``, ``datamark``,
``guarantees``, ``hotpot``, ``musique``, ``wikiqa``, ``shadow``, ``traffic``.

Every command prints a table and, with ``--json-out``, writes the figures as JSON. Timing
is wall clock on a shared machine: repeat runs and read the medians. Tests never time.
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ctxbudget.blas import limit_blas_threads

limit_blas_threads()  # as the packing processes run: before numpy loads

from bench.common import default_traffic, environment, write_json  # noqa: E402


def _traffic_args(p: argparse.ArgumentParser, *, n: int = 1000) -> None:
    p.add_argument("--file", type=Path, help="replay this CandidateBatch v1 JSONL instead")
    p.add_argument("--limit", type=int, default=None, help="use the first N lines of --file")
    p.add_argument("--n", type=int, default=n, help="synthetic batches to generate")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--no-msmarco", action="store_true", help="synthetic traffic only")
    p.add_argument(
        "--keep-tokens",
        action="store_true",
        help="keep candidates' token counts (default: strip them, as retrievers send them)",
    )
    p.add_argument("--policy", default="default@1")


def _parser() -> argparse.ArgumentParser:
    tools = "\n".join(f"  {name:<12} {what}" for name, (_, what) in TOOLS.items())
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description=__doc__.split("\n")[0],
        epilog=f"tools with their own options (python -m bench TOOL --help):\n{tools}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("inproc", help="stages, fused, floor and naive, in process")
    _traffic_args(p)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--no-naive", action="store_true")
    p.add_argument(
        "--clock", choices=("cpu", "wall"), default="cpu", help="thread CPU time or wall time"
    )
    p.add_argument("--json-out")

    p = sub.add_parser("process", help="whole processes: ctxbudget pack, naive, floor")
    p.add_argument("--file", type=Path, action="append", required=True, help="JSONL (repeatable)")
    p.add_argument("--rounds", type=int, default=5, help="alternating rounds")
    p.add_argument("--json-out")

    p = sub.add_parser("scaling", help="cost against candidates per batch and their length")
    p.add_argument("--sizes", default="10,30,100,300")
    p.add_argument("--lengths", default="0.5,1,2,4")
    p.add_argument("--batches", type=int, default=40, help="batches per point")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--source", choices=("msmarco", "synthetic", "both"), default="both")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--policy", default="default@1")
    p.add_argument("--json-out")

    p = sub.add_parser("profile", help="cProfile of the fused hot path")
    _traffic_args(p, n=500)
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--out", help="also write the raw profile (pstats) here")
    p.add_argument("--json-out")

    for name, helptext in (
        ("kafka", "through the embedded broker: split and fused topologies"),
        ("soak", "a worker's resident memory over a long run at a fixed rate"),
    ):
        p = sub.add_parser(name, help=helptext)
        _traffic_args(p, n=2000)
        p.add_argument("--topology", default="split,fused" if name == "kafka" else "fused")
        p.add_argument("--rate", type=float, default=100.0, help="batches/s of the latency run")
        p.add_argument("--json-out")
        p.add_argument(
            "--cpu-threads", type=int, default=None, help="CTXBUDGET_CPU_THREADS of the workers"
        )
        p.add_argument(
            "--fetch-wait-ms",
            type=int,
            default=None,
            help="CTXBUDGET_FETCH_MAX_WAIT_MS of the workers (default: the worker's own)",
        )
        if name == "kafka":
            p.add_argument("--duration", type=float, default=30.0, help="seconds per rate run")
            p.add_argument(
                "--rates",
                default="",
                help="extra offered rates to try, e.g. 200,300,400 (sustained = kept up)",
            )
            p.add_argument(
                "--burst",
                type=int,
                default=6000,
                help="batches produced at once to measure the throughput ceiling (0: skip)",
            )
            p.add_argument(
                "--processes",
                default="1,4",
                help="split topology: 1 = four agents in one process, 4 = one per stage",
            )
        else:
            p.add_argument("--minutes", type=float, default=10.0)
            p.add_argument("--sample-s", type=float, default=5.0)
            p.add_argument(
                "--no-broker",
                action="store_true",
                help="the fused record path alone, in a child process, for as long as asked "
                "(the embedded broker cannot hold an hour: no retention)",
            )
            p.add_argument(
                "--hostile",
                type=int,
                default=0,
                metavar="N",
                help="with --no-broker: every N-th record a fresh hostile batch (huge and "
                "identical passages, unavailable tokenizers, oversize, too many candidates, "
                "near-identical passages, deep nesting)",
            )

    p = sub.add_parser("quality", help="packing quality beside the naive assembler, per class")
    p.add_argument("--policy", default="default@1")
    p.add_argument("--compare", action="append", default=[], help="another policy to run too")
    p.add_argument("--sets", default="", help="comma-separated traffic sets (default: all)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument(
        "--half", choices=("a", "b"), default=None, help="one half of the questions only"
    )
    p.add_argument("--json-out")

    p = sub.add_parser("hostile", help="what hostile batches cost: time and peak RSS per case")
    p.add_argument("--cases", default="", help="comma-separated case names (default: all)")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per case")
    p.add_argument("--json-out")

    p = sub.add_parser("drift", help="the coverage monitor on labelled traffic that drifts")
    from bench import drift

    drift.add_arguments(p)
    p = sub.add_parser("verify", help="the answer verifier on labelled answers from real packs")
    p.add_argument("--policy", default="default@1")
    p.add_argument("--sets", default="", help="dev, heldout or both (default: both)")
    p.add_argument("--per-pack", type=int, default=5, help="answers written per pack")
    p.add_argument("--repeats", type=int, default=3, help="timed passes (the best is shown)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--examples", action="store_true", help="print a few misses")
    p.add_argument("--json-out")

    p = sub.add_parser(
        "peers", help="LangChain, LlamaIndex, Haystack context assembly beside the components"
    )
    p.add_argument("--frameworks", default="langchain,llama-index,haystack")
    p.add_argument("--budget", choices=("moderate", "tight"), default="moderate")
    p.add_argument("--awkward", action="store_true", help="mix in the awkward cases")
    p.add_argument("--repeats", type=int, default=1, help="timing runs (best kept)")
    p.add_argument("--limit", type=int, default=None, help="the first N questions only")
    p.add_argument("--data-dir", type=Path, default=None)
    p.add_argument("--policy", default="default@1")
    p.add_argument("--json-out")

    p = sub.add_parser("all", help="inproc, scaling, profile and kafka with their defaults")
    p.add_argument("--json-out", help="a folder: one JSON file per benchmark")
    p.add_argument("--quick", action="store_true", help="smaller runs (a smoke test)")
    return parser


#: Tools with a command line of their own, reached through this one entry point too:
#: ``python -m bench injection --dev`` is ``python -m bench.injection --dev``.
TOOLS: dict[str, tuple[str, str]] = {
    "injection": ("bench.injection", "the safety gate on labelled injection corpora"),
    "train-gate": ("bench.train_gate", "train the gate's sentence model (the shipped file)"),
    "datamark": ("bench.datamark", "what datamarking costs in tokens and in what fits"),
    "guarantees": ("bench.guarantees.__main__", "fuzz, poison and kill: the guarantees"),
    "hotpot": ("bench.hotpot", "convert HotpotQA to labelled CandidateBatch traffic"),
    "musique": ("bench.musique", "convert MuSiQue to labelled CandidateBatch traffic"),
    "wikiqa": ("bench.wikiqa", "convert WikiQA to labelled CandidateBatch traffic"),
    "shadow": ("bench.shadow", "live latency with the shadow worker off and on"),
    "traffic": ("ctxbudget.testing.traffic.cli", "generate synthetic or MS MARCO traffic"),
}


def main(argv: Sequence[str] | None = None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    if given and given[0] in TOOLS:
        tool: Any = importlib.import_module(TOOLS[given[0]][0])
        return int(tool.main(given[1:]) or 0)
    args = _parser().parse_args(given)
    # SIGTERM unwinds like Ctrl-C, so brokers and workers are stopped by their finally blocks
    signal.signal(signal.SIGTERM, _interrupt)
    if args.command == "all":
        return _all(args)
    return _run(args.command, args)


def _inproc(args: Any, report: dict[str, Any]) -> None:
    from bench import inproc

    runs = []
    for traffic in default_traffic(args):
        result = inproc.run(
            traffic,
            repeats=args.repeats,
            policy=args.policy,
            naive=not args.no_naive,
            clock_name=getattr(args, "clock", "cpu"),
        )
        print(inproc.render(result), end="\n\n", flush=True)
        runs.append(result)
    report["runs"] = runs


def _quality(args: Any, report: dict[str, Any]) -> None:
    from bench import quality_suite

    sets = [s for s in args.sets.split(",") if s]
    report["policies"] = {}
    built: dict[str, Any] = {}
    for ref in (args.policy, *args.compare):
        results = quality_suite.run(
            ref,
            seed=args.seed,
            sets=sets or None,
            half=args.half,
            built=built,
            progress=lambda m: print(m, file=sys.stderr, flush=True),
        )
        print(quality_suite.format_results(ref, results), end="\n\n", flush=True)
        report["policies"][ref] = [asdict(r) for r in results]


def _drift(args: Any, report: dict[str, Any]) -> None:
    from bench import drift

    report.update(drift.run(args))
    print(drift.render(report))


def _peers(args: Any, report: dict[str, Any]) -> None:
    from bench import peers

    results = peers.run(
        data_dir=args.data_dir,
        budget=args.budget,
        awkward=args.awkward,
        repeats=args.repeats,
        frameworks=[f for f in args.frameworks.split(",") if f],
        policy=args.policy,
        limit=args.limit,
        progress=lambda m: print(m, file=sys.stderr, flush=True),
    )
    print(peers.render(results))
    report["results"] = peers.as_json(results)


def _hostile(args: Any, report: dict[str, Any]) -> None:
    from bench import hostile

    report.update(hostile.run(args))
    print(hostile.render(report))


def _soak(args: Any, report: dict[str, Any]) -> None:
    if args.no_broker:
        from bench import soak_records

        result = soak_records.run(args)
        print(soak_records.render(result))
        report.update(result)
    else:
        from bench import soak

        report.update(soak.run(args))


def _module_run(name: str) -> Callable[[Any, dict[str, Any]], None]:
    """A command whose module's ``run(args)`` returns the figures (it prints its own table)."""

    def run(args: Any, report: dict[str, Any]) -> None:
        module = importlib.import_module(f"bench.{name}")
        report.update(module.run(args))

    return run


#: Each command's runner: it prints its table and adds its figures to the report.
COMMANDS: dict[str, Callable[[Any, dict[str, Any]], None]] = {
    "inproc": _inproc,
    "quality": _quality,
    "drift": _drift,
    "peers": _peers,
    "hostile": _hostile,
    "soak": _soak,
    **{name: _module_run(name) for name in ("verify", "scaling", "profile", "kafka", "process")},
}


def _run(command: str, args: Any) -> int:
    report: dict[str, Any] = {"benchmark": command, "environment": environment()}
    COMMANDS[command](args, report)
    write_json(args.json_out, report)
    return 0


def _all(args: Any) -> int:
    out = Path(args.json_out) if args.json_out else None
    quick = ["--n", "200", "--repeats", "2"] if args.quick else []
    plans: list[tuple[str, list[str]]] = [
        ("inproc", quick),
        ("scaling", ["--batches", "10", "--repeats", "1"] if args.quick else []),
        ("profile", ["--n", "200"] if args.quick else []),
        ("kafka", ["--duration", "10", "--burst", "1000"] if args.quick else []),
    ]
    for name, extra in plans:
        argv = [name, *extra]
        if out is not None:
            argv += ["--json-out", str(out / f"{name}.json")]
        print(f"== {name} ==", flush=True)
        rc = main(argv)
        if rc:
            return rc
    return 0


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())
