"""Reading JSON-lines files (or stdin) line by line, shared by the commands and the sink."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator


def iter_lines(fh: Iterable[bytes]) -> Iterator[tuple[int, bytes]]:
    """(line number, raw bytes) of each non-blank line of an open binary file."""
    for n, line in enumerate(fh, start=1):
        line = line.rstrip(b"\r\n")
        if line.strip():
            yield n, line


def read_lines(path: str) -> Iterator[tuple[int, bytes]]:
    """(line number, raw bytes) of each non-blank line; '-' reads stdin."""
    fh = sys.stdin.buffer if path == "-" else open(path, "rb")  # noqa: SIM115
    try:
        yield from iter_lines(fh)
    finally:
        if fh is not sys.stdin.buffer:
            fh.close()


def count_lines(path: str) -> int | None:
    """The number of non-blank lines of the file (a progress total); None for stdin ('-'),
    which cannot be read twice."""
    if path == "-":
        return None
    with open(path, "rb") as fh:
        return sum(1 for line in fh if line.strip())
