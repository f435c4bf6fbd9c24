"""The safety gate on a labelled prompt-injection corpus: attacks caught, benign withheld, cost.

    python -m bench.injection [--corpus tests/data/injection_corpus.jsonl] [--split dev|heldout|all]
                              [--gate-file path/to/safety] [--show-misses] [--repeats 5]

The corpus is JSONL, one passage per line: ``{"id", "label": "attack"|"benign", "style",
"title"?, "text", "group"?, "split": "dev"|"heldout"}``. A passage is withheld when
:func:`ctxbudget.safety.scan_candidate` returns any finding (the router quarantines it). Passages
that share a ``group`` are the halves of one split attack and count once: caught when any half
is caught. ``--gate-file`` loads ``scan_candidate`` from another copy of the gate, a package
folder (``git worktree add /tmp/old HEAD~1`` then ``--gate-file /tmp/old/ctxbudget/safety``) or
a single module (versions before the package) for a before/after.

Timing is the wall clock of the gate alone over every passage of the selection, best of
``--repeats`` runs, in microseconds per passage; it is a rough figure on a shared machine.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ctxbudget.safety import scan_candidate

if TYPE_CHECKING:
    from bench.injection_data import Unit

DEFAULT_CORPUS = (
    Path(__file__).resolve().parent.parent / "tests" / "data" / "injection_corpus.jsonl"
)

Gate = Callable[[str | None, str], Sequence[str]]


@dataclass(frozen=True, slots=True)
class Passage:
    id: str
    label: str
    style: str
    title: str | None
    text: str
    group: str | None
    split: str


def load_corpus(path: Path = DEFAULT_CORPUS, split: str = "all") -> list[Passage]:
    """The passages of ``path`` in ``split`` (``dev``, ``heldout`` or ``all``)."""
    out = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            row = json.loads(line)
            passage = Passage(
                id=row["id"],
                label=row["label"],
                style=row["style"],
                title=row.get("title"),
                text=row["text"],
                group=row.get("group"),
                split=row.get("split", "dev"),
            )
            if split in ("all", passage.split):
                out.append(passage)
    return out


@dataclass(slots=True)
class StyleCount:
    total: int = 0
    hit: int = 0  # attacks caught, or benign passages withheld
    misses: list[str] = field(default_factory=list)  # attacks let through / benign withheld


@dataclass(slots=True)
class Report:
    attacks: dict[str, StyleCount]
    benign: dict[str, StyleCount]
    findings: dict[str, tuple[str, ...]]

    @staticmethod
    def _sum(counts: Iterable[StyleCount]) -> tuple[int, int]:
        hit = total = 0
        for c in counts:
            hit += c.hit
            total += c.total
        return hit, total

    @property
    def attacks_caught(self) -> tuple[int, int]:
        return self._sum(self.attacks.values())

    @property
    def benign_withheld(self) -> tuple[int, int]:
        return self._sum(self.benign.values())


def evaluate(passages: Sequence[Passage], gate: Gate = scan_candidate) -> Report:
    """Run ``gate`` on every passage; split-attack groups count once (caught if any half is)."""
    findings = {p.id: tuple(gate(p.title, p.text)) for p in passages}
    attacks: dict[str, StyleCount] = defaultdict(StyleCount)
    benign: dict[str, StyleCount] = defaultdict(StyleCount)
    groups: dict[str, list[Passage]] = defaultdict(list)
    for p in passages:
        if p.label == "attack" and p.group is not None:
            groups[p.group].append(p)
            continue
        counts = attacks if p.label == "attack" else benign
        c = counts[p.style]
        c.total += 1
        flagged = bool(findings[p.id])
        c.hit += flagged
        if flagged != (p.label == "attack"):
            c.misses.append(p.id)
    for members in groups.values():
        c = attacks[members[0].style]
        c.total += 1
        if any(findings[m.id] for m in members):
            c.hit += 1
        else:
            c.misses.append("+".join(m.id for m in members))
    return Report(dict(attacks), dict(benign), findings)


def time_gate(
    passages: Sequence[Passage | tuple[str | None, str]], gate: Gate, repeats: int
) -> float:
    """Best-of-``repeats`` microseconds per passage for ``gate`` over ``passages``."""
    pairs = [(p.title, p.text) if isinstance(p, Passage) else p for p in passages]
    if not pairs:
        return 0.0
    best = float("inf")
    for _ in range(max(1, repeats)):
        start = time.perf_counter()
        for title, text in pairs:
            gate(title, text)
        best = min(best, time.perf_counter() - start)
    return best / len(pairs) * 1e6


def load_gate(path: Path | None) -> Gate:
    if path is None:
        return scan_candidate
    if path.is_dir():  # a copy of the package (its modules import each other relatively)
        spec = importlib.util.spec_from_file_location(
            "_bench_gate", path / "__init__.py", submodule_search_locations=[str(path)]
        )
    else:  # a single-module version of the gate
        spec = importlib.util.spec_from_file_location("_bench_gate", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # the package's relative imports find it here
    spec.loader.exec_module(module)
    gate: Gate = module.scan_candidate
    return gate


def _pct(hit: int, total: int) -> str:
    return f"{hit:>3}/{total:<3} {100.0 * hit / total:5.1f}%" if total else "  -/-          "


def format_report(report: Report, *, show_misses: bool = False) -> str:
    lines = [f"{'attack style':<20} {'caught':>15}"]
    for style in sorted(report.attacks):
        c = report.attacks[style]
        lines.append(f"{style:<20} {_pct(c.hit, c.total)}")
        if show_misses and c.misses:
            lines.append(f"{'':<20}   missed: {', '.join(c.misses)}")
    lines.append(f"{'ALL ATTACKS':<20} {_pct(*report.attacks_caught)}")
    lines.append("")
    lines.append(f"{'benign style':<20} {'withheld':>15}")
    for style in sorted(report.benign):
        c = report.benign[style]
        lines.append(f"{style:<20} {_pct(c.hit, c.total)}")
        if show_misses and c.misses:
            detail = ", ".join(f"{m} {list(report.findings[m])}" for m in c.misses)
            lines.append(f"{'':<20}   withheld: {detail}")
    lines.append(f"{'ALL BENIGN':<20} {_pct(*report.benign_withheld)}")
    return "\n".join(lines)


def use_model(path: Path | None) -> None:
    """Make the gate read the sentence model at ``path`` (e.g. one fitted on the training part
    only, for the held-out estimate) instead of the shipped one."""
    if path is None:
        return
    from ctxbudget.safety import gate
    from ctxbudget.safety.model import LinearModel

    model = LinearModel.from_json(path.read_text(encoding="utf-8"))
    gate.shipped_model = lambda: model  # type: ignore[assignment]


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (nearest rank) of ``values``."""
    ordered = sorted(values)
    if not ordered:
        return 0.0
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))]


def gate_costs(pairs: Sequence[tuple[str | None, str]], gate: Gate) -> list[float]:
    """Microseconds of CPU time the gate takes on each passage (one run each, after warming
    up): CPU time rather than the wall clock, which on a shared machine mostly measures the
    scheduler."""
    for title, text in pairs[:50]:
        gate(title, text)
    out = []
    for title, text in pairs:
        start = time.thread_time_ns()
        gate(title, text)
        out.append((time.thread_time_ns() - start) / 1e3)
    return out


def _bipia_contexts(
    units: Sequence[Unit], flagged: dict[int, bool], part: str
) -> dict[tuple[str, str], list[int]]:
    """BIPIA units of ``part`` per context kind (email, table, code) and label: [hit, total].
    An attacked unit's id names its context (``text-3-table-middle``), a clean one starts
    with it (``table-12``)."""
    out: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for u in units:
        if u.corpus != "bipia" or u.part != part:
            continue
        bits = u.id.split("-")
        context = bits[2] if u.label == "attack" else bits[0]
        c = out[(context, u.label)]
        c[0] += flagged[id(u)]
        c[1] += 1
    return out


def dev_report(gate: Gate, *, show_misses: bool = False) -> str:
    """The gate on every development corpus (:mod:`bench.injection_data`), per corpus, part
    and style, then the false withholds on retrieval traffic and the gate's cost."""
    from bench.injection_data import all_units, data_dir, dbpedia_units

    units = all_units()
    flagged = {id(u): bool(gate(u.title, u.text)) for u in units}
    table: dict[tuple[str, str, str, str], StyleCount] = defaultdict(StyleCount)
    for u in units:
        c = table[(u.part, u.corpus, u.label, u.style)]
        c.total += 1
        c.hit += flagged[id(u)]
        if flagged[id(u)] != (u.label == "attack"):
            c.misses.append(u.id)
    lines = []
    for part in ("train", "heldout"):
        lines.append(f"== {part} part")
        lines.append(f"{'corpus':<10} {'kind':<7} {'style':<32} {'caught/withheld':>16}")
        totals: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
        for (p, corpus, label, style), c in sorted(table.items()):
            if p != part:
                continue
            kind = "attack" if label == "attack" else "benign"
            lines.append(f"{corpus:<10} {kind:<7} {style[:32]:<32} {_pct(c.hit, c.total)}")
            if show_misses and c.misses:
                lines.append(f"{'':<51} {' '.join(c.misses[:12])}")
            t = totals[(corpus, kind)]
            t[0] += c.hit
            t[1] += c.total
        for (corpus, kind), (hit, total) in sorted(totals.items()):
            lines.append(f"{'ALL':<10} {kind:<7} {corpus:<32} {_pct(hit, total)}")
        for (context, kind), (hit, total) in sorted(_bipia_contexts(units, flagged, part).items()):
            lines.append(f"{'BIPIA':<10} {kind:<7} {'in ' + context:<32} {_pct(hit, total)}")
        lines.append("")
    for corpus in ("msmarco", "hotpotqa"):
        wrong = [u.id for u in units if u.corpus == corpus and flagged[id(u)]]
        total = sum(1 for u in units if u.corpus == corpus)
        lines.append(f"false withholds on {corpus}: {len(wrong)}/{total} {' '.join(wrong[:10])}")
    unseen = list(dbpedia_units()) if (data_dir() / "dbpedia_entity_beir_subset").is_dir() else []
    if unseen:
        wrong = [u.id for u in unseen if gate(u.title, u.text)]
        lines.append(
            f"false withholds on dbpedia (never fitted): {len(wrong)}/{len(unseen)} "
            f"{' '.join(wrong[:10])}"
        )
    traffic = [(u.title, u.text) for u in units if u.corpus in ("msmarco", "hotpotqa")]
    costs = gate_costs(traffic, gate)
    every = gate_costs([(u.title, u.text) for u in units], gate)
    lines.append(
        f"gate cost, MS MARCO + HotpotQA ({len(costs)} passages): "
        f"p50 {percentile(costs, 50):.1f} us, p99 {percentile(costs, 99):.1f} us; "
        f"every development unit ({len(every)}): "
        f"p50 {percentile(every, 50):.1f} us, p99 {percentile(every, 99):.1f} us"
    )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.injection", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    ap.add_argument("--split", choices=("dev", "heldout", "all"), default="all")
    ap.add_argument(
        "--gate-file",
        type=Path,
        default=None,
        help="load scan_candidate from this package folder or module file",
    )
    ap.add_argument("--show-misses", action="store_true", help="list the ids the gate got wrong")
    ap.add_argument("--repeats", type=int, default=5, help="timing runs (best is reported)")
    ap.add_argument(
        "--dev", action="store_true", help="also report every development corpus (../shared/data)"
    )
    ap.add_argument(
        "--model", type=Path, default=None, help="sentence model file to use (default: shipped)"
    )
    args = ap.parse_args(argv)

    use_model(args.model)
    gate = load_gate(args.gate_file)
    passages = load_corpus(args.corpus, args.split)
    report = evaluate(passages, gate)
    print(f"corpus {args.corpus} split={args.split}: {len(passages)} passages")
    print(format_report(report, show_misses=args.show_misses))
    benign = [p for p in passages if p.label == "benign"]
    print()
    print(
        f"gate cost: {time_gate(passages, gate, args.repeats):.1f} us/passage (all), "
        f"{time_gate(benign, gate, args.repeats):.1f} us/passage (benign)"
    )
    if args.dev:
        print()
        print(dev_report(gate, show_misses=args.show_misses))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
