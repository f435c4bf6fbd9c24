"""The README's own commands, run as a user would run them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from ctxbudget.codec import encode
from ctxbudget.schemas import Pack
from tests.paths import REPO

pytestmark = pytest.mark.e2e


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["CTXBUDGET_VENV"] = sys.prefix  # reuse the environment running the tests
    return env


def _ctxbudget(
    *args: str, stdin: bytes | None = None, cwd: Path = REPO
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "ctxbudget", *args],
        input=stdin,
        capture_output=True,
        cwd=cwd,
        env=_env(),
        timeout=300,
        check=False,
    )


@pytest.mark.broker
def test_the_quick_start_main_job_runs_on_the_embedded_broker() -> None:
    """`./dev demo`: broker, topics, workers, traffic; every pack identical to the CLI's."""
    _mark_installed()
    proc = subprocess.run(
        ["./dev", "demo", "--repeat", "5"],
        cwd=REPO,
        env=_env(),
        capture_output=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    out = proc.stdout.decode()
    assert "35 batches produced, 35 packs received, 1 dead letter(s)" in out
    assert "35/35 packs byte-identical" in out


def _mark_installed() -> None:
    if not (Path(sys.prefix) / ".installed").exists():
        (Path(sys.prefix) / ".installed").touch()


def test_dev_pack_packs_the_example_file() -> None:
    """`./dev pack` writes the golden packs to out/packs.jsonl, no dead letter, and the summary."""
    _mark_installed()
    proc = subprocess.run(
        ["./dev", "pack"], cwd=REPO, env=_env(), capture_output=True, timeout=600, check=False
    )
    assert proc.returncode == 0, proc.stderr.decode()
    assert b"pack: 7 batches, 7 packs, 0 dead letters" in proc.stderr
    packs = (REPO / "out" / "packs.jsonl").read_bytes().splitlines()
    assert len(packs) == 7
    for line in packs:
        Pack.model_validate_json(line)
    golden = REPO / "tests" / "golden" / "examples.packs.jsonl"
    assert (REPO / "out" / "packs.jsonl").read_bytes() == golden.read_bytes()
    assert (REPO / "out" / "dead-letters.jsonl").read_bytes() == b""


def test_pack_reads_stdin_and_writes_stdout() -> None:
    """'-' works both ways, so ctxbudget composes in a shell pipeline."""
    raw = (REPO / "examples" / "batches.jsonl").read_bytes()
    proc = _ctxbudget("pack", "-", "-o", "-", stdin=raw)
    assert proc.returncode == 0, proc.stderr.decode()
    assert len(proc.stdout.splitlines()) == 7


def test_bad_lines_go_to_the_dead_letters_and_the_run_goes_on(tmp_path: Path) -> None:
    """Malformed JSON, a schema violation and an unknown tokenizer: three dead letters, exit 1."""
    good = (REPO / "examples" / "batches.jsonl").read_bytes().splitlines()[0]
    data = orjson.loads(good)
    data["model"]["tokenizer"] = "no_such_tokenizer"
    lines = [
        good,
        b"{not json",
        b'{"schema": "ctx.candidate_batch.v1", "request_id": 5}',
        orjson.dumps(data),
        good,
    ]
    src = tmp_path / "in.jsonl"
    src.write_bytes(b"\n".join(lines) + b"\n")
    out, dead = tmp_path / "packs.jsonl", tmp_path / "dead.jsonl"
    proc = _ctxbudget("pack", str(src), "-o", str(out), "--dead-letter", str(dead))
    assert proc.returncode == 1
    assert len(out.read_bytes().splitlines()) == 2
    letters = [orjson.loads(x) for x in dead.read_bytes().splitlines()]
    assert [d["line"] for d in letters] == [2, 3, 4]
    assert "no_such_tokenizer" in letters[2]["error"]
    assert letters[1]["raw"] == lines[2].decode()
    assert b"pack: 5 batches, 2 packs, 3 dead letters" in proc.stderr


def test_schema_prints_json_schema() -> None:
    """`ctxbudget schema pack` is a JSON Schema naming the contract fields."""
    proc = _ctxbudget("schema", "pack")
    assert proc.returncode == 0
    schema = orjson.loads(proc.stdout)
    assert {"evidence_tokens", "rendered", "budget", "schema"} <= set(schema["properties"])


def test_golden_packs_of_the_example_file(tmp_path: Path) -> None:
    """The example file packs to exactly the reviewed golden output."""
    out = tmp_path / "packs.jsonl"
    proc = _ctxbudget("pack", "examples/batches.jsonl", "-o", str(out))
    assert proc.returncode == 0, proc.stderr.decode()
    golden = REPO / "tests" / "golden" / "examples.packs.jsonl"
    if os.environ.get("CTXBUDGET_UPDATE_GOLDEN"):
        golden.write_bytes(out.read_bytes())
    assert out.read_bytes() == golden.read_bytes()


def test_packs_in_process_equal_packs_from_the_cli(tmp_path: Path) -> None:
    """The in-process pipeline and the command line give the same bytes."""
    from ctxbudget.codec import decode_batch
    from ctxbudget.pipeline import Pipeline
    from ctxbudget.policy import PolicyStore

    pipe = Pipeline.from_store(PolicyStore.load(REPO / "policies"), "default@1")
    lines = (REPO / "examples" / "batches.jsonl").read_bytes().splitlines()
    expected = b"".join(encode(pipe.run(decode_batch(x)).pack) + b"\n" for x in lines)
    golden = (REPO / "tests" / "golden" / "examples.packs.jsonl").read_bytes()
    assert expected == golden
