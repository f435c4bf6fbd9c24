"""The command line imports a command's module when the command is used, and offers them all."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import click

from ctxbudget.cli import _BLOCKS, main
from tests.paths import REPO


def test_the_table_names_each_command_as_its_module_does() -> None:
    """Every command name of the lazy table is the name of the command object it stands for."""
    for _, modules in _BLOCKS:
        for module, attrs, names in modules:
            mod = importlib.import_module(f"ctxbudget.cli.{module}")
            found = tuple(getattr(mod, attr).name for attr in attrs)
            assert found == names, module


def test_every_command_is_listed_and_found() -> None:
    """Listing the commands (as --help does) offers each one, and each one resolves."""
    ctx = click.Context(main)
    listed = main.list_commands(ctx)
    expected = sorted(name for _, modules in _BLOCKS for _, _, names in modules for name in names)
    assert listed == expected
    for name in listed:
        command = main.get_command(ctx, name)
        assert command is not None and command.name == name
    assert main.get_command(ctx, "no-such-command") is None


def test_packing_from_the_command_line_imports_no_other_command() -> None:
    """`ctxbudget pack` loads neither the Kafka side, nor the analytics store, nor DuckDB."""
    code = (
        "import sys, click\n"
        "from ctxbudget.cli import main\n"
        "assert main.get_command(click.Context(main), 'pack') is not None\n"
        "heavy = ('ctxbudget.kafka', 'ctxbudget.analytics', 'duckdb', 'ctxbudget.cli.replay')\n"
        "print(sorted(m for m in sys.modules if m.startswith(heavy)))\n"
    )
    assert _printed_by(code) == "[]"


def test_packing_a_file_never_loads_the_kafka_edge_or_a_kafka_client(tmp_path: Path) -> None:
    """`ctxbudget pack` is offline: packing a whole file builds no Kafka settings and imports
    neither ctxbudget.kafka nor faust, aiokafka, kafka-python or mode."""
    packs = tmp_path / "packs.jsonl"
    code = (
        "import sys\n"
        "from ctxbudget.cli import main\n"
        "try:\n"
        f"    main(['pack', 'examples/batches.jsonl', '-o', {str(packs)!r}],\n"
        "         standalone_mode=False)\n"
        "except SystemExit as e:\n"
        "    assert not e.code, e.code\n"
        "clients = {'faust', 'aiokafka', 'kafka', 'mode'}\n"
        "print(sorted(m for m in sys.modules\n"
        "             if m.split('.')[0] in clients or m.partition('.')[2].startswith('kafka')\n"
        "             and m.startswith('ctxbudget.')))\n"
    )
    assert _printed_by(code) == "[]"
    lines = (REPO / "examples" / "batches.jsonl").read_text().splitlines()
    assert len(packs.read_text().splitlines()) == len([line for line in lines if line.strip()])


def _printed_by(code: str) -> str:
    """What ``code``, run by this interpreter in the repository, prints (it must succeed)."""
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()
