"""Whole-process benchmark: ``ctxbudget pack`` against the naive assembler and the floor.

Each contender is a fresh Python process reading the same JSONL file, run in alternating
order (round k runs them in the order of round k-1 turned around, so drift on a shared
machine falls on every contender alike):

* **ctxbudget** — ``ctxbudget pack FILE -o - --trace -``: strict decode, the four stages,
  the Pack and four TraceEvents per line; once on the compiled path and once with
  ``CTXBUDGET_NATIVE=0`` (the pure-Python path);
* **naive** — strict decode, ``ctxbudget.testing.naive.naive_assemble`` (an exact count of
  candidates in score order until the budget is full), ``orjson.dumps`` of what it admitted;
* **floor** — ``orjson.loads`` of each line plus one exact, uncached count of the rendered
  block ctxbudget made of it (packed once before the timed rounds; the blocks are read as
  one JSON string per line).

CPU is the child's user + system time (``wait4``), memory its peak resident set. Each
process also pays for starting Python, importing and loading its tokenizer and policies; a
run over the first line alone measures that (``startup``), and the per-batch figures are
(whole run - that run) / (lines - 1). The ratio to the floor is taken
round by round, then the median.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from bench.common import table

CONTENDERS = ("ctxbudget", "ctxbudget-python", "naive", "floor")


def _command(name: str, batches: Path, packs: Path) -> tuple[list[str], dict[str, str]]:
    env = dict(os.environ)
    env["CTXBUDGET_NATIVE"] = "0" if name == "ctxbudget-python" else "1"
    if name.startswith("ctxbudget"):
        args = ["-m", "ctxbudget", "pack", str(batches), "-o", "-", "--trace", "-"]
        return [sys.executable, *args, "--no-progress"], env
    return [sys.executable, "-m", "bench.process", f"--role={name}", str(batches), str(packs)], env


def _timed(argv: list[str], env: dict[str, str]) -> dict[str, float]:
    """Run to the end; wall seconds, CPU seconds and peak RSS (MiB) of the child."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    err = proc.stderr.read() if proc.stderr else b""
    if proc.stderr:
        proc.stderr.close()
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):
        raise RuntimeError(f"{argv[2:5]} exited {code}: {err.decode()[-2000:]}")
    return {
        "wall_s": wall,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "rss_mib": usage.ru_maxrss / 1024,
    }


def _make_packs(batches: Path, rendered: Path) -> None:
    """Pack once; keep each pack's rendered block (a JSON string per line) for the floor."""
    packs = rendered.with_suffix(".packs")
    argv, env = _command("ctxbudget", batches, packs)
    argv[argv.index("-o") + 1] = str(packs)
    subprocess.run(argv, env=env, check=False, capture_output=True, timeout=3600)
    with packs.open("rb") as f:
        rendered.write_bytes(b"".join(orjson.dumps(orjson.loads(p)["rendered"]) + b"\n" for p in f))


def run(args: Any) -> dict[str, Any]:
    lines = b"".join(Path(f).read_bytes() for f in args.file)
    n = lines.count(b"\n")
    if n < 2:
        raise SystemExit("bench process needs two lines or more")
    with tempfile.TemporaryDirectory(prefix="ctxbudget-process-") as tmp:
        batches, first, packs = Path(tmp, "in.jsonl"), Path(tmp, "first.jsonl"), Path(tmp, "p")
        batches.write_bytes(lines)
        first.write_bytes(lines[: lines.index(b"\n") + 1])
        _make_packs(batches, packs)
        order = list(CONTENDERS)
        full: dict[str, list[dict[str, float]]] = {c: [] for c in CONTENDERS}
        start: dict[str, list[dict[str, float]]] = {c: [] for c in CONTENDERS}
        for _ in range(args.rounds):
            for name in order:
                start[name].append(_timed(*_command(name, first, packs)))
                full[name].append(_timed(*_command(name, batches, packs)))
            order.reverse()
    return _report(args, n, full, start)


def _report(
    args: Any,
    n: int,
    full: dict[str, list[dict[str, float]]],
    start: dict[str, list[dict[str, float]]],
) -> dict[str, Any]:
    rows: dict[str, dict[str, float]] = {}
    per_round: dict[str, list[float]] = {}
    for name in CONTENDERS:
        cpu = [
            (f["cpu_s"] - s["cpu_s"]) / (n - 1) * n
            for f, s in zip(full[name], start[name], strict=True)
        ]
        per_round[name] = cpu
        med = statistics.median
        rows[name] = {
            "wall_s": round(med(f["wall_s"] for f in full[name]), 3),
            "cpu_s": round(med(f["cpu_s"] for f in full[name]), 3),
            "startup_cpu_s": round(med(s["cpu_s"] for s in start[name]), 3),
            "cpu_ms_per_batch": round(1000 * med(cpu) / n, 4),
            "packs_per_cpu_s": round(n / med(cpu), 1) if med(cpu) > 0 else 0.0,
            "packs_per_s_wall": round(n / med(f["wall_s"] for f in full[name]), 1),
            "peak_rss_mib": round(med(f["rss_mib"] for f in full[name]), 1),
        }
    ratios = {
        f"{name}_to_{base}": round(
            statistics.median(
                a / b for a, b in zip(per_round[name], per_round[base], strict=True) if b > 0
            ),
            2,
        )
        for name in ("ctxbudget", "ctxbudget-python")
        for base in ("floor", "naive")
    }
    ratios["python_to_native"] = round(
        statistics.median(
            a / b
            for a, b in zip(per_round["ctxbudget-python"], per_round["ctxbudget"], strict=True)
        ),
        2,
    )
    report = {
        "files": [str(f) for f in args.file],
        "batches": n,
        "rounds": args.rounds,
        "rows": rows,
        "ratios": ratios,
    }
    print(render(report))
    return report


def render(report: dict[str, Any]) -> str:
    head = (
        f"whole process, {report['batches']} batches ({', '.join(report['files'])}); "
        f"median of {report['rounds']} alternating rounds; "
        "per batch = (run - one-line run) / (n - 1)"
    )
    body = table(
        [
            "",
            "wall s",
            "CPU s",
            "one-line run CPU s",
            "CPU ms/batch",
            "packs/CPU-s",
            "packs/s wall",
            "peak RSS MiB",
        ],
        [
            [
                name,
                r["wall_s"],
                r["cpu_s"],
                r["startup_cpu_s"],
                r["cpu_ms_per_batch"],
                r["packs_per_cpu_s"],
                r["packs_per_s_wall"],
                r["peak_rss_mib"],
            ]
            for name, r in report["rows"].items()
        ],
    )
    rt = report["ratios"]
    tail = (
        f"CPU per batch: ctxbudget / floor = {rt['ctxbudget_to_floor']:.2f}x (target <= 3x), "
        f"ctxbudget / naive = {rt['ctxbudget_to_naive']:.2f}x (target <= 1x); "
        f"pure-Python path / floor = {rt['ctxbudget-python_to_floor']:.2f}x, "
        f"/ naive = {rt['ctxbudget-python_to_naive']:.2f}x; "
        f"pure-Python / compiled = {rt['python_to_native']:.2f}x"
    )
    return f"{head}\n{body}\n{tail}"


# --- the roles the timed child processes play ----------------------------------------------


def _naive_role(batches: Path) -> None:
    from ctxbudget.codec import decode_batch
    from ctxbudget.testing.naive import TiktokenCounter, naive_assemble

    counter = TiktokenCounter()
    out = sys.stdout.buffer
    with batches.open("rb") as f:
        for line in f:
            result = naive_assemble(decode_batch(line), counter)
            out.write(orjson.dumps(result.admitted_chunk_ids) + b"\n")


def _floor_role(batches: Path, packs: Path) -> None:
    from ctxbudget.tokens import TokenizerRegistry

    encoding: Any = None
    with batches.open("rb") as f, packs.open("rb") as p:
        for line, pack_line in zip(f, p, strict=False):
            orjson.loads(line)
            block = orjson.loads(pack_line)  # a JSON string: next to nothing
            if encoding is None:
                counter = TokenizerRegistry().get("cl100k_base")
                encoding = counter._encoding  # type: ignore[attr-defined]  # uncached tiktoken
            encoding.encode_ordinary(block)


def main(argv: Sequence[str]) -> int:
    role, *paths = argv
    if role == "--role=naive":
        _naive_role(Path(paths[0]))
    elif role == "--role=floor":
        _floor_role(Path(paths[0]), Path(paths[1]))
    else:
        raise SystemExit(f"unknown role {role}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
