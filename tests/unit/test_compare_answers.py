"""`ctxbudget compare` judged on answers: with verdicts of both lanes it reports unsupported
claims, citation precision and expected evidence cited, live against shadow."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from ctxbudget.cli import main
from ctxbudget.codec import encode
from ctxbudget.compare import compare, render
from ctxbudget.pipeline import Pipeline
from ctxbudget.schemas import Labels, Pack
from ctxbudget.testing import batch, candidate
from ctxbudget.verification import Answer, AnswerVerifier, Verdict

TEXT = "API keys for the Acme gateway expire after 90 days and can be rotated."


def _lanes(pipeline: Pipeline) -> tuple[list[Pack], list[Verdict]]:
    b = batch([candidate("keys", TEXT, 9.0)], query="when do keys expire?", request_id="c-1")
    b = b.model_copy(update={"labels": Labels(relevant_chunk_ids=("keys",))})
    live = pipeline.run(b).pack
    shadow = pipeline.run(b, lane="shadow").pack
    eid = live.evidence[0].evidence_id
    good = f"Keys expire after 90 days [{eid}]."
    bad = f"Keys expire after 60 days [{eid}]. Acme says so."
    verifier = AnswerVerifier()
    verdicts = [
        verifier.run(Answer(request_id="c-1", text=good), live),
        verifier.run(Answer(request_id="c-1", lane="shadow", text=bad), shadow),
    ]
    return [live, shadow], verdicts


def test_answers_of_both_lanes_are_compared(pipeline: Pipeline) -> None:
    """Shadow's answer has two unsupported claims and no supporting citation; live's none."""
    (live, shadow), verdicts = _lanes(pipeline)
    c = compare([live], [shadow], labels={"c-1": ("keys",)}, verdicts=verdicts)
    a = c.answers
    assert a is not None and a.pairs == 1
    assert (a.live_unsupported, a.shadow_unsupported) == (0, 2)
    assert (a.live_citation_precision, a.shadow_citation_precision) == (1.0, 0.0)
    assert (a.live_expected_cited, a.shadow_expected_cited) == (1.0, 1.0)
    assert "unsupported claims 0 -> 2" in render(c)


def test_without_verdicts_of_both_lanes_there_is_no_answer_comparison(pipeline: Pipeline) -> None:
    """Verdicts of one lane only: the comparison of packs stands alone."""
    (live, shadow), verdicts = _lanes(pipeline)
    assert compare([live], [shadow], verdicts=verdicts[:1]).answers is None


def test_the_compare_command_reads_verdict_files(pipeline: Pipeline, tmp_path: Path) -> None:
    """--verdicts adds the answers line to the table."""
    (live, shadow), verdicts = _lanes(pipeline)
    files: dict[str, str] = {}
    records: dict[str, list[Pack] | list[Verdict]] = {
        "live": [live],
        "shadow": [shadow],
        "verdicts": verdicts,
    }
    for name, rs in records.items():
        path = tmp_path / f"{name}.jsonl"
        path.write_bytes(b"".join(encode(r) + b"\n" for r in rs))
        files[name] = str(path)
    res = CliRunner().invoke(
        main,
        [
            "compare",
            "--live",
            files["live"],
            "--shadow",
            files["shadow"],
            "--verdicts",
            files["verdicts"],
        ],
    )
    assert res.exit_code == 0, res.output
    assert (
        "expected evidence cited" in res.output
        and "citation precision 100.0% -> 0.0%" in res.output
    )
