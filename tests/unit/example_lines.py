"""The example batches as raw lines, and hand edits of them for tests of hostile input."""

from __future__ import annotations

from tests.paths import REPO

EXAMPLES = (REPO / "examples" / "batches.jsonl").read_bytes().splitlines()
GOOD = EXAMPLES[0]
BIG = str(2**70).encode()


def edited(old: bytes, new: bytes, line: bytes = GOOD) -> bytes:
    """The good line with one literal edit (the JSON is written by hand, big ints stay ints)."""
    assert old in line, old
    return line.replace(old, new)
