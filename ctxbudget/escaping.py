"""How evidence is written inside the envelope: escaping, look-alike tags and datamarking.

Text escapes ``&``, ``<`` and ``>``; an attribute value also escapes double quotes and every
character that breaks a line or is invisible (controls, format characters, the line and
paragraph separators). A value that holds a look-alike of an envelope tag (``＜/ev＞``,
``‹evidence_set›``, a bracket from another script before letters that read as ``ev``) has its
look-alike brackets written as character references too, so no text can open or close an
envelope tag in any form a reader would take for one. :func:`unescape` undoes all of it.

Datamarking (:func:`datamark`) writes a marker character in place of every space of the
escaped text and before every other whitespace character, so every word of evidence carries
the mark of data ("spotlighting"); :func:`unmark` removes it exactly.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from functools import lru_cache

from ctxbudget.tokens import estimate_tokens

_NAMED = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}
_TEXT_ESCAPES = {k: _NAMED[k] for k in "&<>"}

#: Brackets that read as ``<``: NFKC's fullwidth and small forms, and the angle brackets and
#: quotation marks of other blocks that Unicode lists as confusable with it.
OPEN_LOOKALIKES = (
    "\uff1c\ufe64\u2039\u2329\u3008\u27e8\u02c2\u1438\u276e\u276c\u2770\u29fc\u300a\u27ea"
    "\u00ab\u227a\u22d6\u16b2\U0001d236\u226e"
)
#: Their closing counterparts, read as ``>``.
CLOSE_LOOKALIKES = (
    "\uff1e\ufe65\u203a\u232a\u3009\u27e9\u02c3\u1433\u276f\u276d\u2771\u29fd\u300b\u27eb"
    "\u00bb\u227b\u22d7\U00016f3f\U0001d237\u226f"
)
#: Characters that read as a slash (between a look-alike bracket and a tag name).
SLASH_LOOKALIKES = "/\uff0f\u2215\u2044\u29f8\u2571\u27cb"
#: Look-alike letters of the envelope's tag names that no normal form folds to ASCII.
_LETTER_LOOKALIKES = str.maketrans(
    {
        "\u0435": "e", "\u0454": "e", "\u03b5": "e", "\u03f5": "e", "\u1d07": "e",
        "\u212e": "e", "\u04bd": "e", "\u025b": "e", "\uab32": "e",
        "\u0475": "v", "\u03bd": "v", "\u1d20": "v", "\u2228": "v", "\u22c1": "v",
    }
)  # fmt: skip
#: Spaces a reader still sees between a look-alike bracket and a tag name.
_TAG_MAX_SPACES = 6
#: Bounds on the look for tags, past which a text is taken to hold one (its brackets are then
#: escaped, which is lossless): look-alike opening brackets examined, and invisible characters
#: skipped after one. They keep the check within a few thousand steps on any input.
_MAX_OPENERS = 64
_MAX_SKIPPED = 32
#: The envelope's tag names, and the older ``evidence`` (a name read as one of these is a tag).
_TAG_NAMES = frozenset(("ev", "evidence", "evidence_set", "evidenceset"))
_LONGEST_NAME = max(len(n) for n in _TAG_NAMES)

_OPEN_RX = re.compile("[" + re.escape(OPEN_LOOKALIKES) + "]")
#: ASCII characters an attribute value escapes: the named four, tab, line breaks, controls.
_ASCII_ATTR_RX = re.compile('[&<>"\x00-\x1f\x7f]')
#: Unicode categories an attribute value escapes: controls, format characters, separators
#: of lines and paragraphs (with the controls: LF, CR, VT, FF, NEL, FS, GS, RS).
ATTR_CATEGORIES = frozenset(("Cc", "Cf", "Zl", "Zp"))
#: The format characters beyond the Basic Multilingual Plane (Unicode 15): a test checks that
#: these and the plane's own, found at first use, are every character of those categories.
_ASTRAL_FORMAT = (
    (0x110BD, 0x110BD), (0x110CD, 0x110CD), (0x13430, 0x1343F), (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A), (0xE0001, 0xE0001), (0xE0020, 0xE007F),
)  # fmt: skip
_REFERENCE_RX = re.compile(r"&(?:amp|lt|gt|quot|#[0-9]{1,7});")


def _reference(char: str) -> str:
    return _NAMED.get(char) or f"&#{ord(char)};"


def _reference_of(m: re.Match[str]) -> str:
    return _reference(m.group(0))


@lru_cache(maxsize=1)
def _attr_table() -> dict[int, str]:
    """The ``str.translate`` table of an attribute's escapes (made at first use: scanning the
    plane takes tens of milliseconds)."""
    chars = [chr(c) for c in range(0x10000) if unicodedata.category(chr(c)) in ATTR_CATEGORIES]
    chars += [chr(c) for lo, hi in _ASTRAL_FORMAT for c in range(lo, hi + 1)]
    return {ord(c): _reference(c) for c in [*_NAMED, *chars]}


#: The look-alike brackets' references, a ``str.translate`` table.
_BRACKET_TABLE = {ord(c): _reference(c) for c in OPEN_LOOKALIKES + CLOSE_LOOKALIKES}


@lru_cache(maxsize=4096)
def _fold(char: str) -> str:
    """What ``char`` reads as in a tag name: its compatibility decomposition without marks,
    case-folded, look-alike letters mapped to ASCII; empty for an invisible character
    (format character, combining mark), a space for whitespace. A control character stays
    itself: it ends a name."""
    if char.isspace():
        return " "
    if unicodedata.category(char) in ("Cf", "Mn", "Me"):
        return ""
    base = unicodedata.normalize("NFKD", char)
    kept = "".join(c for c in base if not unicodedata.combining(c))
    return kept.casefold().translate(_LETTER_LOOKALIKES)


def _opens_tag(text: str, at: int) -> bool:
    """Whether the look-alike bracket at ``at`` starts what reads as an envelope tag: an
    optional slash, then a name that reads as one of :data:`_TAG_NAMES` (letters and
    underscores, ended by anything else); invisible characters are skipped, and up to
    :data:`_TAG_MAX_SPACES` spaces before the name. More than :data:`_MAX_SKIPPED` invisible
    characters or slashes count as a tag (a reader sees none of them), so a scan takes a few
    dozen steps at most."""
    name = ""
    spaces = skipped = 0
    j = at + 1
    while j < len(text) and len(name) <= _LONGEST_NAME:
        char = text[j]
        j += 1
        if not name and char in SLASH_LOOKALIKES:
            skipped += 1
            if skipped > _MAX_SKIPPED:
                return True
            continue
        folded = _fold(char)
        if folded == " " and not name:
            spaces += 1
            if spaces > _TAG_MAX_SPACES:
                return False
            continue
        if not folded:
            skipped += 1
            if skipped > _MAX_SKIPPED:
                return True
            continue
        if not all(c == "_" or (c.isascii() and c.isalpha()) for c in folded):
            break
        name += folded
    return name in _TAG_NAMES


def has_lookalike_tag(text: str) -> bool:
    """Whether ``text`` holds a look-alike bracket that starts an envelope tag name (or more
    than :data:`_MAX_OPENERS` look-alike brackets, taken to)."""
    if text.isascii() or _OPEN_RX.search(text) is None:
        return False
    for n, m in enumerate(_OPEN_RX.finditer(text)):
        if n >= _MAX_OPENERS or _opens_tag(text, m.start()):
            return True
    return False


def _neutralise(text: str) -> str:
    """``text`` with its look-alike brackets as references when one starts a look-alike tag."""
    if not has_lookalike_tag(text):
        return text
    return text.translate(_BRACKET_TABLE)


def escape_text(text: str) -> str:
    """``text`` with ``&``, ``<`` and ``>`` escaped, for the content of an envelope (and the
    look-alike brackets when it holds a look-alike tag); other text comes back as it is."""
    # One str.replace per character present, "&" first so no escape is escaped again: the
    # same result as one substitution pass, and text without markup is returned as it is.
    for char, escaped in _TEXT_ESCAPES.items():
        if char in text:
            text = text.replace(char, escaped)
    return text if text.isascii() else _neutralise(text)


def escape_attr(value: str) -> str:
    """``value`` escaped for a double-quoted attribute: ``&``, ``<``, ``>``, double quotes,
    and every control, format, line-separator and paragraph-separator character (tabs and
    all line breaks among them), as character references; look-alike brackets too when the
    value holds a look-alike tag."""
    if value.isascii():
        return _ASCII_ATTR_RX.sub(_reference_of, value) if _ASCII_ATTR_RX.search(value) else value
    return _neutralise(value.translate(_attr_table()))


def unescape(text: str) -> str:
    """Undo :func:`escape_text` or :func:`escape_attr` exactly: the four named references and
    decimal character references are decoded (escaped text has every ``&`` of its own
    escaped, so each reference in it is one that escaping wrote); anything else is left."""
    if "&" not in text:
        return text
    return _REFERENCE_RX.sub(_decoded, text)


_UNNAMED = {v: k for k, v in _NAMED.items()}


def _decoded(m: re.Match[str]) -> str:
    ref = m.group(0)
    named = _UNNAMED.get(ref)
    if named is not None:
        return named
    code = int(ref[2:-1])
    return chr(code) if code < 0x110000 else ref


# ------------------------------------------------------------------------- datamarking

#: The marker of the spotlighting paper (U+02C6, modifier letter circumflex): two cl100k tokens
#: that never merge with the letters around them.
DEFAULT_DATAMARK = "\u02c6"
#: Characters a marker may not be: they are markup, references or words.
_MARKER_FORBIDDEN = set("&<>\"'#;=/") | set(OPEN_LOOKALIKES) | set(CLOSE_LOOKALIKES)
_OTHER_SPACE_RX = re.compile(r"[^\S ]")


def marker_problem(marker: str) -> str | None:
    """Why ``marker`` cannot mark evidence words, or None: it must be one visible character,
    neither a letter (modifier letters aside), digit, space, markup nor a look-alike bracket."""
    if len(marker) != 1:
        return f"must be one character, got {len(marker)}"
    category = unicodedata.category(marker)
    # Modifier letters (Lm, such as U+02C6) are marks, not words: they are allowed.
    if category[0] in "NZ" or category in ("Lu", "Ll", "Lt", "Lo") or marker == "_":
        return "must not be a letter, digit, underscore or space"
    if marker in _MARKER_FORBIDDEN or category[0] in "CM":
        return "must not be markup, a look-alike bracket, a mark or an invisible character"
    return None


#: Tokens a marker is taken to cost in an estimate, per space or line break it marks: U+02C6
#: measures 2.1 per word on cl100k_base, one-token markers such as U+00A4 about 1.2, so the
#: estimate errs high, as estimates here do (the exact count settles it).
DATAMARK_TOKENS_ESTIMATE = 2


def datamark_estimate(text: str) -> int:
    """The tokens datamarking is estimated to add to ``text`` (:data:`DATAMARK_TOKENS_ESTIMATE`
    per space and line break)."""
    return DATAMARK_TOKENS_ESTIMATE * (text.count(" ") + text.count("\n"))


def text_estimator(marker: str | None) -> Callable[[str], int]:
    """The token estimate of evidence text as the envelope writes it: :func:`estimate_tokens`,
    plus :func:`datamark_estimate` when it is datamarked with ``marker``."""
    if marker is None:
        return estimate_tokens

    def marked(text: str) -> int:
        return estimate_tokens(text) + datamark_estimate(text)

    return marked


def datamark(escaped: str, marker: str) -> str:
    """Escaped text with ``marker`` in place of each space and before each other whitespace
    character; the marker's own occurrences are written as a reference first."""
    if marker in escaped:
        escaped = escaped.replace(marker, f"&#{ord(marker)};")
    marked = escaped.replace(" ", marker)
    if _OTHER_SPACE_RX.search(marked) is None:
        return marked
    return _OTHER_SPACE_RX.sub(lambda m: marker + m.group(0), marked)


@lru_cache(maxsize=64)
def _unmark_rx(marker: str) -> re.Pattern[str]:
    return re.compile(re.escape(marker) + r"([^\S ])?")


def unmark(marked: str, marker: str) -> str:
    """Undo :func:`datamark` exactly (the result is still escaped)."""
    if marker not in marked:
        return marked
    return _unmark_rx(marker).sub(lambda m: m.group(1) or " ", marked)
