"""``python -m bench.guarantees fuzz|poison|kill``."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

import bench.guarantees as package
from bench.common import environment, write_json
from bench.guarantees.fuzz import render_fuzz, run_fuzz
from bench.guarantees.kill import render_kill, run_kill
from bench.guarantees.poison import render_poison, run_poison


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench.guarantees", description=(package.__doc__ or "").split("\n")[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("fuzz", help="tenant and access-label fuzzing, in process")
    p.add_argument("--n", type=int, default=2000, help="synthetic batches")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--policies", default="default@1,lean@1")
    p.add_argument("--no-msmarco", action="store_true")
    p.add_argument("--no-control", action="store_true", help="skip the authorization-off run")
    p.add_argument("--json-out")
    p = sub.add_parser("poison", help="a mixed hostile file through `ctxbudget pack`")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--good", type=int, default=200, help="good batches per round")
    p.add_argument("--rounds", type=int, default=3, help="the whole mix this many times")
    p.add_argument("--work-budget-s", type=float, default=2.0)
    p.add_argument("--policy", default="default@1")
    p.add_argument("--skip", default="", help="kinds to leave out, comma-separated")
    p.add_argument("--no-timing", action="store_true", help="skip timing each line alone")
    p.add_argument("--json-out")
    p = sub.add_parser("kill", help="SIGKILL stage workers on the embedded broker")
    p.add_argument("--batches", type=int, default=2000)
    p.add_argument("--kills", type=int, default=5)
    p.add_argument("--rate", type=float, default=40.0, help="records produced per second")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--poison", action="store_true", help="put the poison lines on the topic too")
    p.add_argument("--skip", default="", help="poison kinds to leave out, comma-separated")
    p.add_argument("--restart-delay-s", type=float, default=1.0)
    p.add_argument("--drain-timeout-s", type=float, default=300.0)
    p.add_argument(
        "--kafka", type=int, choices=(0, 1, 3), default=0, help="nodes of a real Kafka cluster"
    )
    p.add_argument("--replicas", type=int, default=1, help="worker processes per stage")
    p.add_argument("--broker-kills", type=int, default=0, help="SIGKILL partition leaders")
    p.add_argument("--rolling", action="store_true", help="then restart each node in turn")
    p.add_argument("--broker-restart-delay-s", type=float, default=5.0)
    p.add_argument("--json-out")
    return parser


def _skip(value: str) -> list[str]:
    return [x for x in value.split(",") if x]


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    report: dict[str, Any]
    if args.command == "fuzz":
        policies = [x for x in args.policies.split(",") if x]
        report = run_fuzz(
            args.n, args.seed, policies, msmarco=not args.no_msmarco, control=not args.no_control
        )
        print(render_fuzz(report))
        guarded = [r for r in report["runs"] if r["mode"] == "guarded" and r["source"] == "all"]
        control = [r for r in report["runs"] if r["mode"] == "control" and r["source"] == "all"]
        failed = any(
            r["packs_leaking"]
            or r["over_budget"]
            or r["token_mismatch"]
            or r["errors"]
            or r["decided_by_forbidden"]
            for r in guarded
        ) or any(r["packs_leaking"] == 0 for r in control)
    elif args.command == "poison":
        report = run_poison(
            args.seed,
            good=args.good,
            rounds=args.rounds,
            work_budget_s=args.work_budget_s,
            policy=args.policy,
            skip=_skip(args.skip),
            timing=not args.no_timing,
        )
        print(render_poison(report))
        failed = bool(report["problems"] or report["over_work_budget"])
    else:
        report = run_kill(
            batches=args.batches,
            kills=args.kills,
            rate=args.rate,
            seed=args.seed,
            poison=args.poison,
            restart_delay_s=args.restart_delay_s,
            drain_timeout_s=args.drain_timeout_s,
            skip=_skip(args.skip),
            kafka_nodes=args.kafka,
            replicas=args.replicas,
            broker_kills=args.broker_kills,
            rolling=args.rolling,
            broker_restart_delay_s=args.broker_restart_delay_s,
        )
        print(render_kill(report))
        failed = bool(
            report["broker_chaos_errors"]
            or report["lost"]
            or report["duplicates_differing"]
            or report["workers_dead_at_end"]
            or report.get("poison", {}).get("problems")
        )
    report["environment"] = environment()
    write_json(args.json_out, report)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
