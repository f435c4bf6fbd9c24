"""Every verdict of the injection gate on every development unit, one JSON line each, for a
comparison of the compiled path with the pure-Python one.

    python -m bench.gate_fidelity -o /tmp/native.jsonl
    CTXBUDGET_NATIVE=0 python -m bench.gate_fidelity -o /tmp/python.jsonl
    cmp /tmp/native.jsonl /tmp/python.jsonl

Per unit (:func:`bench.injection_data.all_units`, title and text as the router reads them):
``scan_candidate``'s findings, ``explain()``'s scores, rules, frame penalty and documentation
flag, the sentence model's logit and weak probability of the normalised text (floats as their
``repr``, so equal lines mean bit-identical numbers); then ``scan_batch`` over the units in
reading order, in batches of :data:`BATCH` with the corpus as the document key (every
neighbouring pair of one corpus is read joined). The summary line on stderr names the path.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

from ctxbudget.native import native_path
from ctxbudget.safety import explain, normalize, passage_text, scan_batch, scan_candidate
from ctxbudget.safety.model import shipped_model

#: Units per ``scan_batch`` call.
BATCH = 16


def verdict_lines() -> Iterator[str]:
    """The JSON lines :func:`main` writes."""
    from bench.injection_data import all_units

    model = shipped_model()
    units = all_units()
    for u in units:
        text = passage_text(u.title, u.text)
        v = explain(text)
        t = normalize(text)
        row = {
            "id": u.id,
            "corpus": u.corpus,
            "findings": scan_candidate(u.title, u.text),
            "scores": {k: repr(s) for k, s in v.scores.items()},
            "rules": v.rules,
            "frame_penalty": repr(v.frame_penalty),
            "documentation": v.documentation,
            "total": repr(v.total),
            "logit": repr(model.logit(t)),
            "weak_probability": repr(model.weak_probability(t)),
        }
        yield json.dumps(row, ensure_ascii=False, sort_keys=True)
    for start in range(0, len(units), BATCH):
        batch = units[start : start + BATCH]
        joined = scan_batch([(u.corpus, passage_text(u.title, u.text)) for u in batch])
        yield json.dumps({"batch": start, "findings": joined})


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.gate_fidelity", description=__doc__.split("\n")[0]
    )
    ap.add_argument("-o", "--out", type=Path, required=True, help="JSON lines to write")
    args = ap.parse_args(argv)
    units = batches = 0
    with args.out.open("w", encoding="utf-8") as f:
        for line in verdict_lines():
            units += '"batch"' not in line[:10]
            batches += '"batch"' in line[:10]
            f.write(line + "\n")
    print(f"{native_path()} path: {units} units, {batches} batches -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
