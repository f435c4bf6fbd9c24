"""`ctxbudget verify` and `ctxbudget schema answer|verdict`: files in, one verdict per answer,
the diagnosis from labelled batches, dead letters for answers that cannot be checked."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
from click.testing import CliRunner

from ctxbudget.cli import main
from tests.paths import REPO

EXAMPLES = REPO / "examples" / "batches.jsonl"
GOLDEN = REPO / "tests" / "golden" / "examples.packs.jsonl"


def _first_pack() -> dict[str, object]:
    return dict(json.loads(GOLDEN.read_text().splitlines()[0]))


def test_schema_prints_the_answer_and_verdict_models() -> None:
    """Both wire models have a JSON Schema carrying their ``schema`` name."""
    for name, wire in (("answer", "ctx.answer.v1"), ("verdict", "ctx.verdict.v1")):
        res = CliRunner().invoke(main, ["schema", name])
        assert res.exit_code == 0, res.output
        assert wire in res.output


def test_verify_writes_one_verdict_per_answer_and_dead_letters_the_rest(tmp_path: Path) -> None:
    """A valid answer gets a verdict (with the diagnosis when --batches label it); an answer
    without a pack and a line that is not JSON go to the dead letters; exit status 1."""
    pack = _first_pack()
    eid = pack["evidence"][0]["evidence_id"]  # type: ignore[index]
    answers = tmp_path / "answers.jsonl"
    answers.write_bytes(
        b"\n".join(
            [
                orjson.dumps(
                    {
                        "schema": "ctx.answer.v1",
                        "request_id": pack["request_id"],
                        "text": f"Keys expire after 90 days [{eid}]. They last 60 days [{eid}].",
                    }
                ),
                orjson.dumps({"schema": "ctx.answer.v1", "request_id": "nope", "text": "x"}),
                b"not json",
            ]
        )
    )
    out, dead = tmp_path / "verdicts.jsonl", tmp_path / "dead.jsonl"
    res = CliRunner().invoke(
        main,
        [
            "verify",
            str(answers),
            "--packs",
            str(GOLDEN),
            "--batches",
            str(EXAMPLES),
            "-o",
            str(out),
            "--dead-letter",
            str(dead),
        ],
    )
    assert res.exit_code == 1, res.output
    verdicts = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(verdicts) == 1
    assert [c["status"] for c in verdicts[0]["claims"]] == ["supported", "unsupported_value"]
    assert verdicts[0]["claims"][1]["missing"] == ["60 days"]
    letters = [json.loads(line) for line in dead.read_text().splitlines()]
    assert [d["line"] for d in letters] == [2, 3]
    assert "no pack for request 'nope'" in letters[0]["error"]
    assert all(d["stage"] == "verify" for d in letters)
    assert "verify: 3 answers, 1 verdicts, 2 dead letters" in res.output


def test_verify_twice_writes_the_same_bytes(tmp_path: Path) -> None:
    """Deterministic output: two runs over the same files are byte-identical."""
    pack = _first_pack()
    eid = pack["evidence"][0]["evidence_id"]  # type: ignore[index]
    answers = tmp_path / "answers.jsonl"
    line = {
        "schema": "ctx.answer.v1",
        "request_id": pack["request_id"],
        "claims": [{"text": "Keys expire after 90 days.", "evidence_ids": [eid]}],
    }
    answers.write_bytes(orjson.dumps(line) + b"\n")
    outs = []
    for n in range(2):
        out = tmp_path / f"v{n}.jsonl"
        res = CliRunner().invoke(
            main, ["verify", str(answers), "--packs", str(GOLDEN), "-o", str(out)]
        )
        assert res.exit_code == 0, res.output
        outs.append(out.read_bytes())
    assert outs[0] == outs[1] and outs[0]
