"""A reader's view of a rendered block: every envelope tag in it, raw or look-alike.

Independent of the renderer's own test: each character is folded as a reader would see it
(compatibility form, marks and invisible characters dropped, case folded, look-alike
brackets, slashes and letters mapped to ASCII), then tags are searched for. Character
references stay as they are: ``&#65308;`` is not a bracket.
"""

from __future__ import annotations

import re
import unicodedata

from ctxbudget.escaping import CLOSE_LOOKALIKES, OPEN_LOOKALIKES, SLASH_LOOKALIKES

_LETTERS = {
    "\u0435": "e",
    "\u0454": "e",
    "\u03b5": "e",
    "\u03f5": "e",
    "\u1d07": "e",
    "\u212e": "e",
    "\u04bd": "e",
    "\u025b": "e",
    "\uab32": "e",
    "\u0475": "v",
    "\u03bd": "v",
    "\u1d20": "v",
    "\u2228": "v",
    "\u22c1": "v",
}


def _fold(char: str) -> str:
    if char in OPEN_LOOKALIKES:
        return "<"
    if char in CLOSE_LOOKALIKES:
        return ">"
    if char in SLASH_LOOKALIKES:
        return "/"
    if unicodedata.category(char) in ("Cf", "Mn", "Me"):
        return ""
    base = "".join(c for c in unicodedata.normalize("NFKD", char) if not unicodedata.combining(c))
    return "".join(_LETTERS.get(c, c) for c in base.casefold())


_TAG = re.compile(r"<\s{0,3}/?\s{0,3}ev(?:idence(?:_?set)?)?(?![a-z_])")


def envelope_tags(block: str) -> int:
    """How many envelope tags (``<ev``, ``</ev``, ``<evidence_set``, ... in any look-alike
    form) a reader finds in ``block``."""
    folded = "".join(_fold(c) for c in block)
    return len(_TAG.findall(folded))


def own_tags(items: int) -> int:
    """The tags a block of ``items`` items has of its own: the set's two and two per item."""
    return 0 if items == 0 else 2 + 2 * items
