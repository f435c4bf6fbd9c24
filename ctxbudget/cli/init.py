"""`ctxbudget init`: write the README's example files into a folder, to start from."""

from __future__ import annotations

import shutil
from pathlib import Path

import click

from ctxbudget.cli.common import UsageFailure
from ctxbudget.resources import shipped

#: What init writes: (name in the folder, shipped folder, path inside it).
EXAMPLE_FILES: tuple[tuple[str, str, str], ...] = (
    ("batches.jsonl", "examples", "batches.jsonl"),
    ("use_from_python.py", "examples", "use_from_python.py"),
)


@click.command("init")
@click.argument("folder", type=click.Path(file_okay=False, path_type=Path), default=".")
@click.option("--force", is_flag=True, help="Overwrite files that are already there.")
def init_cmd(folder: Path, force: bool) -> None:
    """Write the example files into FOLDER (default: the current directory).

    batches.jsonl (example CandidateBatch v1 lines for `ctxbudget pack batches.jsonl`),
    use_from_python.py (the README's Python example) and policies/ (a copy of the shipped
    policies, to edit; `ctxbudget pack` run in FOLDER then uses it). A file already there is
    left alone (exit status 2 naming it) unless --force.
    """
    targets = [(folder / name, shipped(src) / path) for name, src, path in EXAMPLE_FILES]
    policies = folder / "policies"
    existing = [t for t, _ in targets if t.exists()] + ([policies] if policies.exists() else [])
    if existing and not force:
        names = ", ".join(str(p) for p in existing)
        raise UsageFailure(f"already there: {names} (use --force to overwrite)")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for target, source in targets:
            shutil.copyfile(source, target)
        shutil.copytree(shipped("policies"), policies, dirs_exist_ok=True)
    except OSError as e:
        raise UsageFailure(f"cannot write into {folder}: {e.strerror or e}") from e
    for target, _ in targets:
        click.echo(f"wrote {target}")
    click.echo(f"wrote {policies}/")
    click.echo(f"next: cd {folder} && ctxbudget pack batches.jsonl -o packs.jsonl")
