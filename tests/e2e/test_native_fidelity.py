"""Packs and traces are the same bytes on the compiled path and on the pure-Python one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tests.paths import REPO, data_dir

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

#: (name, generator module, its arguments): the benchmark traffic, written to a temp folder.
_GENERATED = [
    ("synthetic", "ctxbudget.testing.traffic", ["synthetic", "--n", "120"]),
    ("msmarco", "ctxbudget.testing.traffic", ["msmarco"]),
    ("hotpot-moderate-awkward", "bench.hotpot", ["--budget", "moderate", "--awkward"]),
    ("hotpot-tight", "bench.hotpot", ["--budget", "tight"]),
    ("musique-moderate", "bench.musique", ["--budget", "moderate"]),
    ("musique-tight-awkward", "bench.musique", ["--budget", "tight", "--awkward"]),
]
_NEEDS_DATA = {name for name, _, _ in _GENERATED} - {"synthetic"}


def _env(native: str) -> dict[str, str]:
    env = dict(os.environ)
    env["CTXBUDGET_NATIVE"] = native
    env.setdefault("CTXBUDGET_DATA_DIR", str(data_dir()))
    return env


def _run(args: list[str], native: str = "1") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        cwd=REPO,
        env=_env(native),
        timeout=600,
        check=False,
    )


def _pack_both_ways(batches: Path, out: Path) -> None:
    """Pack ``batches`` on each path; assert the packs are the same bytes and the traces the
    same but for their measured latency."""
    results = {}
    for native in ("0", "1"):
        packs, traces = out / f"packs.{native}.jsonl", out / f"traces.{native}.jsonl"
        done = _run(
            ["-m", "ctxbudget", "pack", str(batches), "-o", str(packs), "--trace", str(traces)],
            native,
        )
        assert done.returncode in (0, 1), done.stderr.decode()
        results[native] = (packs.read_bytes(), traces.read_bytes())
    assert results["0"][0] == results["1"][0]
    assert results["0"][0].count(b"\n") > 0
    assert _without_latency(results["0"][1]) == _without_latency(results["1"][1])


def _without_latency(lines: bytes) -> list[dict[str, object]]:
    out = []
    for line in lines.splitlines():
        event = orjson.loads(line)
        event.pop("latency_ms", None)  # wall time: the one field that is not a result
        out.append(event)
    return out


def test_the_compiled_path_is_built_and_loaded() -> None:
    """The environment the tests run in has the extension built (./dev builds it)."""
    done = _run(["-c", "from ctxbudget.native import native_path; print(native_path())"])
    assert done.stdout.decode().strip() == "native", done.stderr.decode()
    forced = _run(["-c", "from ctxbudget.native import native_path; print(native_path())"], "0")
    assert forced.stdout.decode().strip() == "python"


def test_example_traffic_packs_the_same_on_both_paths(tmp_path: Path) -> None:
    """The example file (the golden packs' input) gives the same bytes either way."""
    _pack_both_ways(REPO / "examples" / "batches.jsonl", tmp_path)


@pytest.mark.parametrize(("name", "module", "args"), _GENERATED, ids=[g[0] for g in _GENERATED])
def test_bench_traffic_packs_the_same_on_both_paths(
    tmp_path: Path, name: str, module: str, args: list[str]
) -> None:
    """Each development traffic set gives the same packs and traces on both paths."""
    if name in _NEEDS_DATA and not data_dir().is_dir():
        pytest.skip(f"the shared data is not at {data_dir()}")
    batches = tmp_path / f"{name}.jsonl"
    made = _run(["-m", module, *args, "--out", str(batches)])
    assert made.returncode == 0, made.stderr.decode()
    _pack_both_ways(batches, tmp_path)
