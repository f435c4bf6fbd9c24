"""`ctxbudget init`: the example files written into a folder, never over the user's own."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from ctxbudget.cli import main
from ctxbudget.policy import PolicyStore
from tests.paths import REPO


def test_init_writes_the_examples_and_a_policies_copy(tmp_path: Path) -> None:
    """The folder gets batches.jsonl, use_from_python.py and a loadable policies/ copy."""
    target = tmp_path / "new"
    result = CliRunner().invoke(main, ["init", str(target)])
    assert result.exit_code == 0, result.output
    assert (target / "batches.jsonl").read_bytes() == (REPO / "examples/batches.jsonl").read_bytes()
    assert (target / "use_from_python.py").read_text() == (
        REPO / "examples/use_from_python.py"
    ).read_text()
    assert (
        PolicyStore.load(target / "policies").names() == PolicyStore.load(REPO / "policies").names()
    )
    assert "ctxbudget pack batches.jsonl" in result.output


def test_init_refuses_to_overwrite_unless_forced(tmp_path: Path) -> None:
    """A file already there is a usage error naming it; --force writes over it."""
    (tmp_path / "batches.jsonl").write_text("mine\n")
    refused = CliRunner().invoke(main, ["init", str(tmp_path)])
    assert refused.exit_code == 2 and "batches.jsonl" in refused.output
    assert (tmp_path / "batches.jsonl").read_text() == "mine\n"
    assert not (tmp_path / "use_from_python.py").exists()
    forced = CliRunner().invoke(main, ["init", str(tmp_path), "--force"])
    assert forced.exit_code == 0, forced.output
    assert (tmp_path / "batches.jsonl").read_text() != "mine\n"
