"""What the generator knows and the packer must not (:class:`BatchTruth`), and the writer
and reader of a batches file and its truth file."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ctxbudget.schemas import CandidateBatch


@dataclass(frozen=True, slots=True)
class BatchTruth:
    """What the generator knows about a batch and the packer must not: kinds and families."""

    request_id: str
    kinds: Mapping[str, str]
    families: Mapping[str, str] = field(default_factory=dict)
    #: Chunk id -> the supporting sentences it holds (stripped); HotpotQA traffic only.
    support: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: The question type ("bridge" or "comparison" for HotpotQA); ``None`` when unknown.
    qtype: str | None = None

    def kind_of(self, chunk_id: str) -> str | None:
        """The kind of a chunk id of this batch (``None`` if the id is not in the batch)."""
        return self.kinds.get(chunk_id)

    def family_of(self, chunk_id: str) -> str:
        """The family root: the original's chunk id for a copy, the id itself otherwise."""
        return self.families.get(chunk_id, chunk_id)

    def is_injected(self, chunk_id: str) -> bool:
        return self.kinds.get(chunk_id) == "injected"

    def to_json(self) -> str:
        data: dict[str, object] = {
            "schema": "bench.batch_truth.v1",
            "request_id": self.request_id,
            "kinds": dict(sorted(self.kinds.items())),
            "families": dict(sorted(self.families.items())),
        }
        if self.support:  # optional fields only when set: older truth lines stay unchanged
            data["support"] = {k: list(v) for k, v in sorted(self.support.items())}
        if self.qtype is not None:
            data["qtype"] = self.qtype
        return json.dumps(data, ensure_ascii=False)

    @classmethod
    def from_json(cls, line: str) -> BatchTruth:
        data = json.loads(line)
        qtype = data.get("qtype")
        return cls(
            request_id=str(data["request_id"]),
            kinds={str(k): str(v) for k, v in data["kinds"].items()},
            families={str(k): str(v) for k, v in data.get("families", {}).items()},
            support={str(k): tuple(str(s) for s in v) for k, v in data.get("support", {}).items()},
            qtype=None if qtype is None else str(qtype),
        )


@dataclass(frozen=True, slots=True)
class GeneratedBatch:
    """One generated batch and its truth record."""

    batch: CandidateBatch
    truth: BatchTruth

    def to_json(self) -> str:
        return self.batch.model_dump_json(by_alias=True)


def truth_path_for(batches_path: Path) -> Path:
    """Where the truth file of a batches file lives by default: ``X.jsonl`` -> ``X.truth.jsonl``."""
    if batches_path.suffix == ".jsonl":
        return batches_path.with_name(batches_path.stem + ".truth.jsonl")
    return batches_path.with_name(batches_path.name + ".truth.jsonl")


def write_traffic(
    generated: Iterable[GeneratedBatch], out: Path, truth_out: Path | None = None
) -> tuple[int, Path]:
    """Write the batches to ``out`` and the truth to ``truth_out``; returns (count, truth path)."""
    truth_path = truth_out if truth_out is not None else truth_path_for(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    truth_path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with out.open("w", encoding="utf-8") as fb, truth_path.open("w", encoding="utf-8") as ft:
        for item in generated:
            fb.write(item.to_json() + "\n")
            ft.write(item.truth.to_json() + "\n")
            n += 1
    return n, truth_path


def read_truth(path: Path) -> dict[str, BatchTruth]:
    """Truth records by request id."""
    out: dict[str, BatchTruth] = {}
    with path.open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                truth = BatchTruth.from_json(line)
                out[truth.request_id] = truth
    return out
