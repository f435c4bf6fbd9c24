"""The Python API: ctxbudget.Packer, its lenient inputs, its errors, and byte-identity with
`ctxbudget pack`."""

from __future__ import annotations

import copy
import re
import runpy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import ctxbudget
from ctxbudget import ArgumentError, CtxBudgetError, InputError, Packer
from ctxbudget.cli import main
from ctxbudget.codec import decode_batch, encode
from ctxbudget.schemas import Candidate, CandidateBatch, Pack
from tests.paths import REPO

EXAMPLES = REPO / "examples" / "batches.jsonl"
GOLDEN = REPO / "tests" / "golden" / "examples.packs.jsonl"


@pytest.fixture(scope="module")
def packer() -> Packer:
    """One Packer with the shipped default policy for the module."""
    return Packer()


def _readme_block(heading: str) -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match is not None, f"no python block under {heading!r}"
    return match.group(1)


def test_readme_use_from_python_runs_and_is_the_shipped_example(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README's Python block is the shipped example file, at most 5 lines of code, and it
    prints a rendered evidence block."""
    block = _readme_block("Use from Python")
    shipped = (REPO / "examples" / "use_from_python.py").read_text(encoding="utf-8")
    assert block == shipped
    code = [line for line in block.splitlines() if line.strip() and not line.startswith("#")]
    assert len(code) <= 5
    monkeypatch.chdir(tmp_path)
    runpy.run_path(str(REPO / "examples" / "use_from_python.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert out.startswith("<evidence_set") and "API keys expire after 90 days." in out


def test_the_package_exports_the_api_the_models_and_the_errors() -> None:
    """Packer, the wire models and CtxBudgetError are importable from ctxbudget itself."""
    assert ctxbudget.Packer is Packer
    assert ctxbudget.Pack is Pack and ctxbudget.CandidateBatch is CandidateBatch
    assert issubclass(ArgumentError, InputError) and issubclass(InputError, CtxBudgetError)
    assert set(ctxbudget.__all__) <= set(dir(ctxbudget))
    with pytest.raises(AttributeError):
        _ = ctxbudget.NoSuchName  # type: ignore[attr-defined]


def test_importing_ctxbudget_loads_neither_pydantic_nor_the_pipeline() -> None:
    """``import ctxbudget`` stays cheap: the API and the models load on first use."""
    probe = "import sys, ctxbudget; print(sorted(m for m in ('pydantic', 'ctxbudget.api', " \
        "'ctxbudget.pipeline', 'typing') if m in sys.modules))"  # fmt: skip
    out = subprocess.run(
        [sys.executable, "-S", "-c", probe], capture_output=True, text=True, check=True,
        cwd=REPO,
    ).stdout  # fmt: skip
    assert out.strip() == "[]"


def test_bare_strings_and_mappings_get_defaults(packer: Packer) -> None:
    """A bare string is a candidate c<n> of its own document and source; a mapping's friendly
    keys set the wire fields; the default principal is tenant 'default' with no labels."""
    batch = packer.batch(
        "q?",
        ["one", {"id": 7, "text": "two", "score": 2, "source": "wiki", "title": "T"}],
        input_limit=1000,
    )
    a, b = batch.candidates
    assert (a.chunk_id, a.doc_id, a.source_id, a.retrieval_score) == ("c1", "c1", "c1", None)
    assert (b.chunk_id, b.doc_id, b.source_id, b.retrieval_score, b.title) == (
        "7", "7", "wiki", 2.0, "T",
    )  # fmt: skip
    assert batch.tenant_id == "default" == batch.principal.tenant_id
    assert batch.principal.access_labels == ()
    assert batch.answer_contract.kind == "short_fact" and batch.model.tokenizer == "cl100k_base"


def test_the_default_principal_sees_unlabelled_candidates_only(packer: Packer) -> None:
    """Single-tenant defaults fail closed: a candidate with an access label or another
    tenant is dropped as unauthorized unless the principal is given that label."""
    cands = [
        {"id": "open", "text": "Paris is the capital of France."},
        {"id": "secret", "text": "Paris hosts the office.", "access_label": "internal"},
    ]
    pack = packer.pack("What is the capital of France?", cands, input_limit=2000)
    assert pack.dropped == {"unauthorized": 1}
    granted = packer.pack(
        "What is the capital of France?",
        cands,
        input_limit=2000,
        principal={"tenant_id": "default", "access_labels": ["internal"]},
    )
    assert "unauthorized" not in granted.dropped


def test_the_same_request_gets_the_same_id_and_bytes(packer: Packer) -> None:
    """The default request id is a digest of the request: equal requests, equal packs;
    another query, another id."""
    cands = ["Hamlet was written by Shakespeare.", "Macbeth is a play."]
    one = packer.pack("Who wrote Hamlet?", cands, input_limit=1000)
    two = packer.pack("Who wrote Hamlet?", list(cands), input_limit=1000)
    other = packer.pack("Who wrote Macbeth?", cands, input_limit=1000)
    assert encode(one) == encode(two)
    assert one.request_id.startswith("py-") and one.request_id != other.request_id


def test_inputs_are_not_mutated(packer: Packer) -> None:
    """The caller's mappings come back as they went in."""
    cands: list[Any] = [{"id": "a", "text": "Alpha.", "score": 1, "metadata": {"k": [1]}}]
    before = copy.deepcopy(cands)
    packer.pack("alpha?", cands, input_limit=500, answer={"kind": "short_fact"})
    assert cands == before


@pytest.mark.parametrize(
    ("candidates", "kwargs", "field", "shown"),
    [
        ([{"text": "x", "score": "high"}], {}, "candidates[0].score", "'high'"),
        (["ok", {"txt": "x"}], {}, "candidates[1].txt", "unknown key"),
        ([{"text": "x", "authority": 1.5}], {}, "candidates[0].authority", "1.5"),
        ([{"text": "x", "id": "a", "chunk_id": "b"}], {}, "candidates[0].chunk_id", "'b'"),
        ([{"text": "x", "title": 3}], {}, "candidates[0].title", "3"),
        ([{"id": "a"}], {}, "candidates[0].text", "missing"),
        ([{"id": "", "text": "x"}], {}, "candidates[0].id", "''"),
        ([{"text": "x", "metadata": {"o": object()}}], {}, "candidates[0].metadata", "JSON"),
        ([{"text": "x", "span": (3, 1)}], {}, "candidates[0].span", "before start 3"),
        ([3.5], {}, "candidates[0]", "3.5"),
        ([], {"input_limit": 0}, "input_limit", "0"),
        ([], {"answer": {"kind": "x", "reserve_tokens": -1}}, "answer.reserve_tokens", "-1"),
        ([], {"principal": {"access_labels": ["a"]}}, "principal.tenant_id", "required"),
        ([], {"conversation": [("user",)]}, "conversation[0]", "('user',)"),
    ],
)
def test_errors_name_the_field_and_the_value(
    packer: Packer, candidates: list[Any], kwargs: dict[str, Any], field: str, shown: str
) -> None:
    """Every refusal is an ArgumentError whose field and message name what was wrong."""
    args: dict[str, Any] = {"input_limit": 1000, **kwargs}
    with pytest.raises(ArgumentError) as info:
        packer.pack("q?", candidates, **args)
    assert info.value.field == field
    assert str(info.value).startswith(field) and shown in str(info.value)


def test_the_wire_models_stay_strict() -> None:
    """The leniency is the API's: the wire Candidate still refuses a string score."""
    with pytest.raises(ValueError):
        Candidate.model_validate(
            {"chunk_id": "a", "doc_id": "a", "source_id": "a", "text": "x",
             "retrieval_score": "1"}
        )  # fmt: skip


def test_pack_batch_matches_the_golden_packs_for_model_mapping_and_text(packer: Packer) -> None:
    """pack_batch gives the golden `ctxbudget pack` bytes for a model, its JSON mapping and
    its JSON text."""
    import orjson

    lines = [line for line in EXAMPLES.read_bytes().splitlines() if line.strip()]
    golden = [line for line in GOLDEN.read_bytes().splitlines() if line.strip()]
    for raw, expected in zip(lines, golden, strict=True):
        assert encode(packer.pack_batch(decode_batch(raw))) == expected
        assert encode(packer.pack_batch(orjson.loads(raw))) == expected
        assert encode(packer.pack_batch(raw.decode())) == expected


def test_pack_is_byte_identical_to_ctxbudget_pack(packer: Packer, tmp_path: Path) -> None:
    """The batch the API builds, packed by `ctxbudget pack`, gives the API's Pack bytes."""
    kwargs: dict[str, Any] = {
        "input_limit": 700,
        "instructions": "Answer from the evidence only.",
        "conversation": [("user", "hi"), {"role": "assistant", "text": "hello"}],
        "answer": {"kind": "short_fact", "reserve_tokens": 120},
    }
    cands = [
        "The Eiffel Tower is in Paris. It was finished in 1889.",
        {"id": "t2", "text": "The tower is 330 metres tall.", "score": 3.5, "title": "Height"},
        {"id": "t3", "text": "The Eiffel Tower is in Paris. It was finished in 1889!", "score": 1},
    ]
    query = "When was the Eiffel Tower finished?"
    batch = packer.batch(query, cands, **kwargs)
    (tmp_path / "in.jsonl").write_bytes(encode(batch) + b"\n")
    result = CliRunner().invoke(
        main, ["pack", str(tmp_path / "in.jsonl"), "-o", str(tmp_path / "out.jsonl"),
               "--policies", str(REPO / "policies"), "--no-progress"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert (tmp_path / "out.jsonl").read_bytes() == encode(
        packer.pack(query, cands, **kwargs)
    ) + b"\n"


def test_an_unknown_policy_is_a_config_error() -> None:
    """Packer names the unknown policy and the known ones."""
    with pytest.raises(ctxbudget.ConfigError, match="unknown policy 'nope@1'"):
        Packer("nope@1")
