"""Normalisation: the form of a passage the gate's rules match against (HTML references and
tag characters decoded, NFKC, format characters removed, look-alike letters mapped to ASCII in
mixed-script words, spaced-out letters joined, lower-cased)."""

from __future__ import annotations

import html
import re
import unicodedata

#: The only non-ASCII characters ``re.IGNORECASE`` matches to an ASCII letter (a property test
#: checks this table). Normalisation folds all four: NFKC the long s and the Kelvin sign,
#: ``_REPLACE`` the dotted and dotless i.
_FOLD = (("\u0130", "i"), ("\u0131", "i"), ("\u017f", "s"), ("\u212a", "k"))

# ---------------------------------------------------------------------------------------------
# Normalisation
# ---------------------------------------------------------------------------------------------

_LATIN_LOOKALIKES = {
    # Cyrillic
    "а": "a", "в": "b", "е": "e", "ё": "e", "к": "k", "м": "m", "н": "h", "о": "o", "р": "p",
    "с": "c", "т": "t", "у": "y", "х": "x", "і": "i", "ї": "i", "ј": "j", "ѕ": "s", "һ": "h",
    "ԁ": "d", "ԛ": "q", "ԝ": "w", "ӏ": "l", "ɡ": "g",
    "А": "A", "В": "B", "Е": "E", "К": "K", "М": "M", "Н": "H", "О": "O", "Р": "P", "С": "C",
    "Т": "T", "Х": "X", "У": "Y", "І": "I", "Ј": "J", "Ѕ": "S", "Һ": "H", "Ԁ": "D",
    # Greek
    "α": "a", "ε": "e", "ι": "i", "κ": "k", "ν": "v", "ο": "o", "ρ": "p", "τ": "t", "υ": "u",
    "χ": "x", "η": "n", "γ": "y", "ω": "w",
    "Α": "A", "Β": "B", "Ε": "E", "Ζ": "Z", "Η": "H", "Ι": "I", "Κ": "K", "Μ": "M", "Ν": "N",
    "Ο": "O", "Ρ": "P", "Τ": "T", "Υ": "Y", "Χ": "X",
    # Armenian
    "օ": "o", "ս": "u", "հ": "h", "ո": "n",
}  # fmt: skip
_LOOKALIKE_TABLE = str.maketrans(_LATIN_LOOKALIKES)
_LOOKALIKES = "".join(_LATIN_LOOKALIKES)
# Where a Latin letter touches a look-alike one: the seam inside a mixed-script word.
_MIXED_SEAM = re.compile(f"[a-zA-Z][{_LOOKALIKES}]|[{_LOOKALIKES}][a-zA-Z]")
_LOOKALIKE_SCRIPTS = re.compile("[\u0261\u0370-\u058f]")  # Greek, Cyrillic, Armenian: a quick test

# Format characters (category Cf), variation selectors and C0/C1 controls are removed; line and
# paragraph separators become newlines; look-alike angle brackets and slashes become ASCII.
_STRIP = (
    "\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
    "\u2060-\u206f\ufe00-\ufe0f\ufeff\ufff9-\ufffb\x00-\x08\x0e-\x1f\x7f-\x84\x86-\x9f"
    "\U000e0000-\U000e0fff"
)
_REPLACE = {
    "\u2028": "\n", "\u2029": "\n", "\x85": "\n", "\x0b": "\n", "\x0c": "\n", "\r": "\n",
    "\u2039": "<", "\u203a": ">", "\u2329": "<", "\u232a": ">", "\u3008": "<",
    "\u3009": ">", "\u27e8": "<", "\u27e9": ">", "\u02c2": "<", "\u02c3": ">",
    "\u1438": "<", "\u1433": ">", "\u276e": "<", "\u276f": ">", "\u2215": "/",
    "\u2044": "/", "\u29f8": "/", "\u0130": "i", "\u0131": "i",
}  # fmt: skip
_STRIP_RX = re.compile("[" + _STRIP + "]")


def _ascii_class(c: int) -> int:
    """NUL for the ASCII controls that ``_STRIP`` removes or ``_REPLACE`` rewrites (all but tab
    and newline), "a" for a letter, space for a space, "." for anything else."""
    if c == 127 or (c < 32 and c not in (9, 10)):
        return 0
    if chr(c).isalpha():
        return ord("a")
    return c if c == 32 else ord(".")


# ASCII text by character class, for the checks on ASCII text in one pass: ``b"\0"`` in it
# when normalisation has controls to remove, ``b" a a a "`` when ``_SPACED_HINT_ASCII`` matches.
_ASCII_CLASSES = bytes(_ascii_class(c) for c in range(128)) + bytes(128)
_REPLACE_RX = re.compile("[" + "".join(_REPLACE) + "]")
_TAG_CHARS = re.compile("[\U000e0020-\U000e007e]")
# "i g n o r e": five or more single letters spaced out are joined back into a word.
_SPACED_LETTERS = re.compile(r"\b(?:[^\W\d_] ){4,}[^\W\d_]\b")
# "t e l l   t h e   u s e r ' s": three or more spaced-out words (two letters or more, an
# apostrophe counting as a letter) with two or three spaces between words; joined into words
# with one space between them.
# A run starts only where no spaced letter comes before it, and its letters are taken
# possessively, so a search reads each run once (linear time).
_SPACED_WORDS = re.compile(
    r"(?<![^\W\d_'] )\b[^\W\d_](?: (?:[^\W\d_]|'))++"
    r"(?: {2,3}(?:[^\W\d_]|')(?: (?:[^\W\d_]|'))++){2,}"
)
_WORD_GAP = re.compile(" {2,3}")
_SPACED_HINT = re.compile(r" [^\W\d_] [^\W\d_] [^\W\d_] ")  # inside any such run: a cheap test
_SPACED_HINT_ASCII = re.compile(r" [a-zA-Z] [a-zA-Z] [a-zA-Z] ")
_ENTITY = re.compile(r"&(?:#\d{1,7}|#x[0-9a-fA-F]{1,6}|[a-zA-Z]{2,8});")


def _fix_char(m: re.Match[str]) -> str:
    return _REPLACE.get(m.group(0), "")


def _unmix(t: str) -> tuple[str, int]:
    """Map look-alike letters to Latin inside words that mix them with Latin letters; the
    number of such words of four letters or more. Each seam expands to its word (bounded)."""
    pieces: list[str] = []
    last = 0
    count = 0
    for m in _MIXED_SEAM.finditer(t):
        if m.start() < last:
            continue
        a, b = m.start(), m.end()
        while a > last and m.start() - a < 64 and t[a - 1].isalpha():
            a -= 1
        while b < len(t) and b - m.end() < 64 and t[b].isalpha():
            b += 1
        fixed = t[a:b].translate(_LOOKALIKE_TABLE)
        count += len(fixed) >= 4 and fixed.isascii()
        pieces += (t[last:a], fixed)
        last = b
    pieces.append(t[last:])
    return "".join(pieces), count


def prepare(raw: str) -> tuple[str, str, int]:
    """The normalised text with its case kept (for base64 and URLs), the same lower-cased (what
    the rules match), and the number of words that mixed Latin with look-alike letters."""
    t = raw
    if "&" in t and _ENTITY.search(t):
        t = html.unescape(t)
    if t.isascii():
        return _prepare_ascii(t)
    mixed = 0
    if _TAG_CHARS.search(t):
        t = _TAG_CHARS.sub(lambda m: chr(ord(m.group(0)) - 0xE0000), t)
    t = _STRIP_RX.sub("", unicodedata.normalize("NFKC", t))
    if _REPLACE_RX.search(t):
        t = _REPLACE_RX.sub(_fix_char, t)
    if _LOOKALIKE_SCRIPTS.search(t) and _MIXED_SEAM.search(t):
        t, mixed = _unmix(t)
    hint = _SPACED_HINT_ASCII if t.isascii() else _SPACED_HINT
    if hint.search(t) and (_SPACED_LETTERS.search(t) or _SPACED_WORDS.search(t)):
        t = _join_spaced_letters(t)
    return t, t.lower(), mixed


def _prepare_ascii(t: str) -> tuple[str, str, int]:
    """:func:`prepare` for ASCII text (no look-alike letters), its tests on one translation."""
    classes = t.encode("ascii").translate(_ASCII_CLASSES)
    if b"\0" in classes:
        t = _STRIP_RX.sub("", t)
        if _REPLACE_RX.search(t):
            t = _REPLACE_RX.sub(_fix_char, t)
        classes = t.encode("ascii").translate(_ASCII_CLASSES)
    if b" a a a " in classes and (_SPACED_LETTERS.search(t) or _SPACED_WORDS.search(t)):
        t = _join_spaced_letters(t)
    return t, t.lower(), 0


def _join_spaced_letters(t: str) -> str:
    """Spaced-out words joined (one space left between them), then runs of spaced-out letters."""
    if _SPACED_WORDS.search(t):
        t = _SPACED_WORDS.sub(
            lambda m: " ".join(w.replace(" ", "") for w in _WORD_GAP.split(m.group(0))), t
        )
    return _SPACED_LETTERS.sub(lambda m: m.group(0).replace(" ", ""), t)


def normalize(text: str) -> str:
    """The form the gate matches against: HTML references and tag characters decoded, NFKC,
    format characters removed, look-alike brackets and (in mixed-script words) letters mapped
    to ASCII, lower-cased. ``normalize("＜/ｅｖｉｄｅｎｃｅ＞") == "</evidence>"``."""
    return prepare(text)[1]
