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
from ctxbudget.jsonl import count_lines, iter_lines, read_lines
from ctxbudget.policy import PolicyStore, default_policies_dir

__all__ = [
    "UsageFailure",
    "count_lines",
    "iter_lines",
    "load_store",
    "open_in",
    "open_out",
    "policies_dir",
    "read_lines",
]


class UsageFailure(click.ClickException):
    """A usage error told in one line ("Error: ..."), exit status 2 like click's own."""

    exit_code = 2


def _os_reason(e: OSError) -> str:
    return e.strerror or str(e)


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


def load_store(option: str | None, *, usage: bool = False) -> PolicyStore:
    """The policies; a folder that cannot be loaded is an error (a usage error if ``usage``)."""
    try:
        return PolicyStore.load(policies_dir(option))
    except ConfigError as e:
        raise (UsageFailure if usage else click.ClickException)(str(e)) from e


def open_in(path: str, *, what: str = "input") -> IO[bytes]:
    """A binary input, stdin for '-'; one that cannot be opened is a :class:`UsageFailure`."""
    if path == "-":
        return sys.stdin.buffer
    try:
        return open(path, "rb")
    except OSError as e:
        raise UsageFailure(f"cannot read {what} {path!r}: {_os_reason(e)}") from e


@contextmanager
def open_out(path: str | None, *, what: str = "output") -> Iterator[IO[bytes] | None]:
    """A binary output: None when not asked for, stdout for '-', else the file.

    A file that cannot be created is a :class:`UsageFailure` (exit status 2)."""
    if path is None:
        yield None
    elif path == "-":
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
    else:
        try:
            fh = open(path, "wb")  # noqa: SIM115
        except OSError as e:
            raise UsageFailure(f"cannot write {what} {path!r}: {_os_reason(e)}") from e
        with fh:
            yield fh
