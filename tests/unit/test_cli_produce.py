"""`ctxbudget produce --dry-run` holds each line to the input limits a worker holds it to
(``CTXBUDGET_MAX_*``, one InputLimits), and refuses a line over one naming the limit."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from ctxbudget.cli import main
from tests.paths import REPO

pytest.importorskip("kafka")

EXAMPLES = REPO / "examples" / "batches.jsonl"


def _dry_run(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, str]]:
    """The dead letters of a dry run of ``path``, by line."""
    monkeypatch.chdir(tmp_path)
    dead = tmp_path / "dead.jsonl"
    result = CliRunner().invoke(
        main, ["produce", str(path), "--dry-run", "--dead-letter", str(dead)]
    )
    assert result.exit_code in (0, 1), result.output
    return [orjson.loads(line) for line in dead.read_bytes().splitlines()]


def test_a_line_over_the_configured_candidate_limit_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With CTXBUDGET_MAX_CANDIDATES below a batch's count the line is refused, as a worker
    would refuse it; with the defaults every example line passes."""
    assert _dry_run(EXAMPLES, tmp_path, monkeypatch) == []
    most = max(len(orjson.loads(line)["candidates"]) for line in EXAMPLES.read_bytes().splitlines())
    monkeypatch.setenv("CTXBUDGET_MAX_CANDIDATES", str(most - 1))
    dead = _dry_run(EXAMPLES, tmp_path, monkeypatch)
    assert dead and all("max_candidates" in d["error"] for d in dead)


def test_a_line_over_the_message_cap_is_refused_once_naming_the_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CTXBUDGET_MAX_MESSAGE_BYTES below a line's size refuses that line, and only that line."""
    lines = EXAMPLES.read_bytes().splitlines()
    sizes = sorted(len(line) for line in lines)
    monkeypatch.setenv("CTXBUDGET_MAX_MESSAGE_BYTES", str(sizes[-1] - 1))
    dead = _dry_run(EXAMPLES, tmp_path, monkeypatch)
    assert len(dead) == sizes.count(sizes[-1])
    assert "max_message_bytes" in dead[0]["error"]
