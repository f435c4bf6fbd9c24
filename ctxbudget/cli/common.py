"""Helpers shared by the commands: policy location, line reading, output files."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import click

from ctxbudget.errors import ConfigError
from ctxbudget.jsonl import count_lines, read_lines
from ctxbudget.policy import PolicyStore, default_policies_dir

__all__ = ["count_lines", "load_store", "open_out", "policies_dir", "read_lines"]


def policies_dir(option: str | None) -> Path:
    """--policies, else $CTXBUDGET_POLICIES, else ./policies, else the shipped folder."""
    if option:
        return Path(option)
    env = os.environ.get("CTXBUDGET_POLICIES")
    if env:
        return Path(env)
    local = Path("policies")
    if (local / "packing").is_dir():
        return local
    return default_policies_dir()


def load_store(option: str | None) -> PolicyStore:
    try:
        return PolicyStore.load(policies_dir(option))
    except ConfigError as e:
        raise click.ClickException(str(e)) from e


@contextmanager
def open_out(path: str | None) -> Iterator[IO[bytes] | None]:
    """A binary output: None when not asked for, stdout for '-', else the file."""
    if path is None:
        yield None
    elif path == "-":
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
    else:
        with open(path, "wb") as fh:
            yield fh
