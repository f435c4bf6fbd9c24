"""Reading JSON-lines input (ctxbudget.jsonl): blank lines skipped, line numbers kept for the
dead letters that name them."""

from __future__ import annotations

import io
from pathlib import Path

from ctxbudget.jsonl import count_lines, iter_lines, read_lines


def test_blank_lines_are_skipped_but_keep_their_line_numbers() -> None:
    """A record is named by its line in the file, so blank lines still count toward the number,
    and line endings (LF or CRLF) are stripped."""
    fh = io.BytesIO(b'{"a": 1}\r\n\n   \n{"b": 2}\n')
    assert list(iter_lines(fh)) == [(1, b'{"a": 1}'), (4, b'{"b": 2}')]


def test_a_file_is_read_and_counted_alike(tmp_path: Path) -> None:
    """The progress total is the number of records read; stdin ('-') has none to give."""
    path = tmp_path / "in.jsonl"
    path.write_bytes(b'{"a": 1}\n\n{"b": 2}\n{"c": 3}')
    assert [n for n, _ in read_lines(str(path))] == [1, 3, 4]
    assert count_lines(str(path)) == 3
    assert count_lines("-") is None
