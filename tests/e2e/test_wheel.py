"""The built wheel works from site-packages, in an empty directory, with no checkout around.

Builds the wheel (hatchling, no build isolation, nothing downloaded), installs it with
``--no-deps`` into a fresh virtual environment whose only other packages are this test
environment's (a ``.pth`` line; the project's own editable install is not visible there),
then runs ``ctxbudget policies`` and ``ctxbudget pack`` from an empty temporary directory:
the policies and topic specs must come from the package data.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import time
import zipfile
from pathlib import Path

import pytest

from ctxbudget.codec import decode_batch, encode
from ctxbudget.pipeline import Pipeline
from ctxbudget.policy import PolicyStore
from tests.paths import REPO

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

EXAMPLES = REPO / "examples" / "batches.jsonl"


def _run(cmd: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=180, check=False
    )
    assert proc.returncode == 0, f"{cmd}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    return proc


def _clean_env() -> dict[str, str]:
    drop = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PIP_REQUIRE_VIRTUALENV")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    return {k: v for k, v in env.items() if not k.startswith("CTXBUDGET_")}


def _build_wheel(dist: Path, env: dict[str, str]) -> Path:
    pytest.importorskip("hatchling", reason="the build backend (dev extra) is not installed")
    _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "--no-index", "-q", "-w", str(dist), str(REPO)],
        cwd=dist, env=env,
    )  # fmt: skip
    [wheel] = dist.glob("ctxbudget-*.whl")
    return wheel


def _venv_with_wheel(root: Path, wheel: Path, env: dict[str, str]) -> Path:
    """A venv holding the wheel; its dependencies come from this test environment."""
    venv = root / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=root, env=env)
    python = venv / "bin" / "python"
    purelib = _run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        cwd=root,
        env=env,
    ).stdout.strip()
    deps = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    # plain path lines: this environment's packages, but not its .pth files (the editable
    # install of the checkout stays invisible)
    (Path(purelib) / "_ctxbudget_test_deps.pth").write_text("\n".join(sorted(deps)) + "\n")
    _run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
         "--no-index", "-q", str(wheel)],
        cwd=root, env=env,
    )  # fmt: skip
    return venv


def test_the_wheel_works_from_site_packages_in_an_empty_directory(tmp_path: Path) -> None:
    """Installed alone, the wheel finds its data, packs as the checkout does, runs init's files."""
    started = time.monotonic()
    env = _clean_env()
    dist = tmp_path / "dist"
    dist.mkdir()
    wheel = _build_wheel(dist, env)
    names = set(zipfile.ZipFile(wheel).namelist())
    for data in (
        "ctxbudget/_data/policies/packing/default@1.yaml",
        "ctxbudget/_data/policies/packing/lean@1.yaml",
        "ctxbudget/_data/policies/routing.yaml",
        "ctxbudget/_data/policies/rollout.yaml",
        "ctxbudget/_data/topics/ctx.candidates.v1.yaml",
        "ctxbudget/_data/examples/batches.jsonl",
        "ctxbudget/_data/examples/use_from_python.py",
        "ctxbudget/integrations/langchain.py",
        "ctxbudget/integrations/llama_index.py",
        "ctxbudget/integrations/haystack.py",
        "ctxbudget/py.typed",
        "ctxbudget/kafka/clients.py",
        "ctxbudget/kafka/app.py",
        "ctxbudget/kafka/processes.py",
        "ctxbudget/testing/naive.py",
        "ctxbudget/_data/ops/kafka/pom.xml",
    ):
        assert data in names, f"{data} is not in the wheel"
    tops = {n.split("/")[0] for n in names if "/" in n and ".dist-info/" not in n}
    assert tops == {"ctxbudget"}, f"the wheel installs more than ctxbudget at top level: {tops}"

    venv = _venv_with_wheel(tmp_path, wheel, env)
    empty = tmp_path / "empty"
    empty.mkdir()
    bindir = venv / "bin"
    env["PATH"] = f"{bindir}{os.pathsep}{env.get('PATH', '')}"

    probe = (
        "import ctxbudget, ctxbudget.kafka.topics as t\n"
        "import ctxbudget.testing.naive, ctxbudget.testing.traffic  # no bench/ beside it\n"
        "from ctxbudget.policy import default_policies_dir\n"
        "print(ctxbudget.__file__, default_policies_dir(), len(t.load_topic_specs()))"
    )
    where = _run([str(bindir / "python"), "-c", probe], cwd=empty, env=env).stdout.split()
    assert where[0].startswith(str(venv)), where
    assert where[1] == str(Path(where[0]).parent / "_data" / "policies")
    shipped = len(list((REPO / "topics").glob("*.yaml")))
    assert where[2] == str(shipped)

    policies = _run([str(bindir / "ctxbudget"), "policies"], cwd=empty, env=env).stdout
    assert "default@1" in policies and "lean@1" in policies

    pack = _run(
        [str(bindir / "ctxbudget"), "pack", str(EXAMPLES), "-o", "packs.jsonl", "--no-progress"],
        cwd=empty,
        env=env,
    )
    assert "7 batches, 7 packs, 0 dead letters" in pack.stderr
    assert sorted(p.name for p in empty.iterdir()) == ["packs.jsonl"]
    pipeline = Pipeline.from_store(PolicyStore.load(REPO / "policies"), "default@1")
    expected = [
        encode(pipeline.run(decode_batch(line)).pack)
        for line in EXAMPLES.read_bytes().splitlines()
        if line.strip()
    ]
    assert (empty / "packs.jsonl").read_bytes().splitlines() == expected

    # The README's first commands from an empty folder: `ctxbudget init`, then the example
    # files it wrote, packed and run as they are.
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    _run([str(bindir / "ctxbudget"), "init"], cwd=fresh, env=env)
    assert sorted(p.name for p in fresh.iterdir()) == [
        "batches.jsonl", "policies", "use_from_python.py",
    ]  # fmt: skip
    assert (fresh / "batches.jsonl").read_bytes() == EXAMPLES.read_bytes()
    _run(
        [str(bindir / "ctxbudget"), "pack", "batches.jsonl", "-o", "packs.jsonl", "--no-progress"],
        cwd=fresh,
        env=env,
    )
    assert (fresh / "packs.jsonl").read_bytes().splitlines() == expected
    printed = _run([str(bindir / "python"), "use_from_python.py"], cwd=fresh, env=env).stdout
    assert printed.startswith("<evidence_set") and "API keys expire after 90 days." in printed
    took = time.monotonic() - started
    print(f"wheel: built, installed and run in {took:.1f} s")
    assert took < 90
