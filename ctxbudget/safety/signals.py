"""Signals beside the rules: invisible characters in the raw text, text hidden by HTML or
markdown, URLs that would carry data away, and payloads encoded as base64, hex, rot13 or
reversed text (decoded, bounded, and scanned again)."""

from __future__ import annotations

import base64
import binascii
import codecs
import re
import unicodedata
import urllib.parse
from collections.abc import Iterable

from .rules import RULE_WORDS
from .types import FindingSink, PassageText

# --- Raw-text checks ------------------------------------------------------------------------------
# Bidirectional overrides (Trojan-source reordering) and zero-width characters inside a word.
_BIDI_OVERRIDE = re.compile("[\u202d\u202e]")
_ZW_IN_WORD = re.compile("[A-Za-z][\u200b-\u200d\u2060-\u2064\ufeff\u180e]{1,8}[A-Za-z]")
_FLAG_EMOJI = re.compile("\U0001f3f4[\U000e0061-\U000e007a]{2,7}\U000e007f")
_ANY_TAG_CHAR = re.compile("[\U000e0000-\U000e007f]")
RAW_ANY = re.compile("[\u202d\u202e\u200b-\u200d\u2060-\u2064\ufeff\u180e\U000e0000-\U000e007f]")

# --- Hidden HTML / markdown -----------------------------------------------------------------------
_OPEN_TAG = re.compile(r"<[a-z][a-z0-9]{0,10}\b[^<>]{0,400}>")
_HIDDEN_STYLE = re.compile(
    r"display[ \t]{0,3}:[ \t]{0,3}none|visibility[ \t]{0,3}:[ \t]{0,3}hidden|"
    r"font-size[ \t]{0,3}:[ \t]{0,3}0(?![.\d])|opacity[ \t]{0,3}:[ \t]{0,3}0(?![.\d])|"
    r"\bhidden\b|aria-hidden|color[ \t]{0,3}:[ \t]{0,3}(?:#fff\b|#ffffff|white|transparent)|"
    r"(?:height|width)[ \t]{0,3}:[ \t]{0,3}0(?:px)?\b|(?:left|top)[ \t]{0,3}:[ \t]{0,3}-\d{3,}"
)
_ATTR_TEXT = re.compile(r"\b(?:alt|title|aria-label)[ \t]{0,3}=[ \t]{0,3}\"([^\"]{0,500})\"")
_MD_TITLE = re.compile(r"\]\([^\s()\[\]]{1,500}[ \t]{1,3}\"([^\"\n]{1,300})\"\)")
_MD_COMMENT = re.compile(r"\[(?://|comment|_)\]:[ \t]{0,3}(?:#|<>)[ \t]{0,3}\(([^)\n]{0,500})\)")
_MAX_SEGMENTS = 200
MAX_HIDDEN_CHARS = 8000

# --- URLs -----------------------------------------------------------------------------------------
_MD_URL = re.compile(r"!?\[[^\]\n]{0,200}\]\([ \t]{0,3}([^\s()\[\]]{1,500})")
_BARE_URL = re.compile(r"(?:[hH][tT][tT][pP][sS]?:)?//[^\s<>\"'()\[\]{}|\\^`]{1,500}")
_SECRETISH = re.compile(
    r"\b(?:conversation|chat|history|messages?|prompt|system_prompt|secrets?|password|passwd|pwd|"
    r"token|api_?key|apikey|session_?token|user_?name|username|email|question|answer|data|"
    r"payload|context|summary|cookies?|credentials|ssn|card)\b"
)
_PLACEHOLDER_START = ("{", "<", "[", "$", "%")
# Conversation or secret data named near a URL left open for appending.
_SECRETISH_NEAR = re.compile(
    r"(?i)\b(?:conversation|chat|history|messages?|passwords?|api key|secrets?|credentials|"
    r"email address|personal data|system prompt|tokens?|session|summar\w{1,5})\b"
)
_MAX_URLS = 500

# --- Encoded payloads -----------------------------------------------------------------------------
_B64_RUN = re.compile(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{24,}={0,2}")
_HEX_RUN = re.compile(r"(?<![0-9a-fA-F])(?:[0-9a-fA-F]{2}){12,}")
_ROT13_HINT = re.compile(r"\brot[ -]?13\b|\bcaesar\b|\bdecod(?:e|ing)\b|\bdecipher\b")
_REVERSE_HINT = re.compile(r"\b(?:backwards|reversed|in reverse|reverse (?:order|the text))\b")
_HEX_HINT = re.compile(r"\bhex(?:adecimal)?\b")
# A word every match of the three hints above holds (as a word of ``_word_list``).
_ROT13_WORDS = frozenset(("rot", "caesar", "decode", "decoding", "decipher"))
_REVERSE_WORDS = frozenset(("backwards", "reversed", "reverse"))
_HEX_WORDS = frozenset(("hex", "hexadecimal"))
HINT_WORDS = _ROT13_WORDS | _REVERSE_WORDS | _HEX_WORDS
_MAX_RUNS = 256  # runs are disjoint: decoding them all is linear in the text
# Cheap pre-check for a base64 run: alphabet bytes -> "a", others -> " ", look for 24 "a"s.
_B64_CHARS = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/_-"
_B64_ALPHABET_TO_A = bytes(97 if c in _B64_CHARS else 32 for c in range(256))
_B64_RUN_OF_24 = b"a" * 24
_MAX_DECODE_CHARS = 8192  # per run
# Base32 (RFC 4648 alphabet, upper case) and bare hex runs, tried among the base64-alphabet runs.
_B32_RUN = re.compile(r"[A-Z2-7]{24,}={0,6}")
_BARE_HEX_RUN = re.compile(r"(?:[0-9a-fA-F]{2}){24,}")
# Percent-encoding: four escapes in a row.
_PERCENT_RUN = re.compile(r"(?:%[0-9a-fA-F]{2}){4}")
# Leetspeak: digits or symbols standing for letters inside words ("1gn0r3 4ll pr3v10u5"),
# counted in one translation (letters to "a", those digits and symbols to "1").
_LEET_CLASSES = bytes(
    97 if chr(c).isalpha() and c < 128 else (49 if chr(c) in "013457@$" else 32) for c in range(256)
)
_LEET_TABLE = str.maketrans("013457@$", "oieasta" + "s")
#: Letter-digit seams ("a1" or "1a") from which a text reads as leetspeak.
_MIN_LEET_SEAMS = 6
# Combining marks left after NFKC (strike-through, overlines, "zalgo" stacks).
_COMBINING = re.compile(
    "[\u0300-\u036f\u0483-\u0489\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]"
)
_MAX_DECODED_TOTAL = 32768  # base64 or hex text re-scanned, in all
# Words cut into pieces by hyphens or line breaks ("in-struc-tions", "Ign\nore"): runs of
# letters joined by single hyphens, or a line broken inside a word (a lower-case letter on
# both sides of the break).
_HYPHENATED = re.compile(r"[a-z]{1,12}(?:-[a-z]{1,12}){1,6}")
_BROKEN_LINE = re.compile(r"[a-z]{1,12}\n[a-z]{1,12}")
#: Rejoined pieces that make cue words, from which a text reads as words cut on purpose (a
#: real compound, "e-mail" or "re-read", makes one at most).
_MIN_REJOINED = 2
_MAX_PIECES = 400


def first_matches(it: Iterable[re.Match[str]], n: int) -> list[re.Match[str]]:
    """The first ``n`` matches of ``it`` (all of them when fewer), without reading further."""
    out = []
    for m in it:
        out.append(m)
        if len(out) >= n:
            break
    return out


def hidden_segments(t: str) -> list[str]:
    """Text the reader of a rendered page does not see: comments, invisible elements, alt
    texts, link titles, markdown comments (bounded in count and size)."""
    out: list[str] = []
    pos = 0
    while len(out) < _MAX_SEGMENTS:
        start = t.find("<!--", pos)
        if start < 0:
            break
        end = t.find("-->", start + 4)
        end = len(t) if end < 0 else end
        out.append(t[start + 4 : min(end, start + 4 + 2000)])
        pos = end + 3
    if "<" in t:
        for m in first_matches(_OPEN_TAG.finditer(t), 10 * _MAX_SEGMENTS):
            if len(out) >= _MAX_SEGMENTS:
                break
            if _HIDDEN_STYLE.search(m.group(0)):
                out.append(t[m.end() : m.end() + 1000].split("</", 1)[0])
    for rx, needle in ((_ATTR_TEXT, "="), (_MD_TITLE, "]("), (_MD_COMMENT, "]:")):
        if needle in t:
            out.extend(m.group(1) for m in first_matches(rx.finditer(t), _MAX_SEGMENTS))
    return out


def url_signal(cased: str) -> tuple[float, str]:
    """2.0 for a markdown link/image whose query carries a placeholder (``{x}``, ``<X>``,
    ``$X``, ``[x]``, or an identifier naming conversation/secret data such as ``CHAT_HISTORY``),
    1.5 for such a bare URL or one left open right before a placeholder, 1.0 for a URL left
    open at the end for data to be appended; else 0. Reads the case-kept text."""
    if "//" not in cased or "=" not in cased:
        return 0.0, ""
    best = (0.0, "")
    urls = [
        (m.group(1), True, "", m.start(), m.end())
        for m in first_matches(_MD_URL.finditer(cased), _MAX_URLS)
    ]
    urls += [
        (m.group(0), False, cased[m.end() : m.end() + 1], m.start(), m.end())
        for m in first_matches(_BARE_URL.finditer(cased), _MAX_URLS)
    ]
    for url, in_md, after, start, end in urls:
        if "?" not in url:
            continue
        params = url.split("?", 1)[1].split("#", 1)[0].split("&")
        for i, param in enumerate(params):
            _key, eq, value = param.partition("=")
            if not eq:
                continue
            if _placeholder_value(value):
                best = max(best, (2.0 if in_md else 1.5, "url_placeholder"))
            elif not value and i == len(params) - 1:
                if after and after in "[{<$":
                    weight = 1.5
                elif _SECRETISH_NEAR.search(cased, max(0, start - 120), end + 120):
                    weight = 1.0
                else:
                    weight = 0.5
                best = max(best, (weight, "url_open_ended"))
    return best


def _placeholder_value(value: str) -> bool:
    if value.startswith(_PLACEHOLDER_START):
        return True
    ident = value.strip("%")
    if not ident or not _SECRETISH.search(ident.lower().replace("_", " ")):
        return False
    # CHAT_HISTORY, DATA, user_email: a name standing for data, not a literal value.
    return (ident.isupper() and len(ident) >= 3) or "_" in ident


def decoded_payloads(x: PassageText) -> list[str]:
    """Plain texts hidden as base64, as hex (with a "hex" hint), as rot13 (with a "rot13" or
    "decode" hint) or reversed (with a "backwards"/"reversed" hint). The decoded base64 (and hex)
    runs are joined into one text, bounded in size. Worked out once per text (kept on ``x``)."""
    if x.decoded is None:
        x.decoded = _decode_all(x)
    return x.decoded


def encoded_prose(x: PassageText) -> list[str]:
    """The texts of :func:`decoded_payloads` that only one reading gives, base64, base32 or
    hex runs decoded, when they read as prose (words of letters, spaces between them): text
    someone hid by encoding it. rot13, reversed text and leetspeak are left out, since any
    text "decodes" under them."""
    decoded_payloads(x)
    return [d for d in x.exact or () if _reads_as_prose(d)]


#: A decoded text reads as prose with at least this many words of two letters or more, and
#: letters and spaces making up this share of it.
_PROSE_WORDS = 6
_PROSE_SHARE = 0.8


def _reads_as_prose(text: str) -> bool:
    words = [w for w in text.split() if len(w) >= 2 and w.isalpha()]
    if len(words) < _PROSE_WORDS:
        return False
    plain = sum(1 for c in text if c.isalpha() or c == " ")
    return plain >= _PROSE_SHARE * len(text)


def _decode_all(x: PassageText) -> list[str]:
    out: list[str] = []
    exact: list[str] = []
    x.exact = exact
    cased, t = x.cased, x.t
    if len(t) >= 24 and _B64_RUN_OF_24 in x.t_bytes.translate(_B64_ALPHABET_TO_A):
        runs = [
            m.group(0)[:_MAX_DECODE_CHARS]
            for m in first_matches(_B64_RUN.finditer(cased), _MAX_RUNS)
        ]
        out.append(_join_decoded(_run_text(run) for run in runs))
        exact.append(out[-1])
    out += _plain_disguises(x)
    words = x.words
    if not out and HINT_WORDS.isdisjoint(words):
        return out
    if not _ROT13_WORDS.isdisjoint(words) and _ROT13_HINT.search(t):
        out.append(codecs.encode(cased, "rot13"))
    if not _REVERSE_WORDS.isdisjoint(words) and _REVERSE_HINT.search(t):
        out.append(cased[::-1])
    if not _HEX_WORDS.isdisjoint(words) and _HEX_HINT.search(t):
        out.append(
            _join_decoded(
                _printable(bytes.fromhex(m.group(0)[:_MAX_DECODE_CHARS]))
                for m in first_matches(_HEX_RUN.finditer(cased), _MAX_RUNS)
            )
        )
        exact.append(out[-1])
    return [d for d in out if d]


def _run_text(run: str) -> str | None:
    """A base64-alphabet run read as base64, else as base32, else as bare hex."""
    text = _b64_text(run)
    if text is None and _B32_RUN.fullmatch(run):
        text = _b32_text(run)
    if text is None and _BARE_HEX_RUN.fullmatch(run):
        text = _printable(bytes.fromhex(run))
    return text


def _b32_text(run: str) -> str | None:
    body = run.rstrip("=")
    try:
        raw = base64.b32decode(body + "=" * (-len(body) % 8))
    except (binascii.Error, ValueError):
        return None
    return _printable(raw)


def _plain_disguises(x: PassageText) -> list[str]:
    """The text with percent-escapes decoded, with leetspeak read as letters (six letter-digit
    seams or more), with leftover combining marks removed, and with words cut by hyphens or
    line breaks joined again (when two or more of them make words the rules look for); each
    only when it applies."""
    out: list[str] = []
    cased, t = x.cased, x.t
    if "-" in t or "\n" in t:
        rejoined = _rejoin_split_words(t)
        if rejoined is not None:
            out.append(rejoined)
    if "%" in cased and _PERCENT_RUN.search(cased):
        out.append(urllib.parse.unquote(cased[: 4 * _MAX_DECODE_CHARS]))
    classes = x.t_bytes.translate(_LEET_CLASSES)
    if classes.count(b"a1") + classes.count(b"1a") >= _MIN_LEET_SEAMS:
        out.append(t.translate(_LEET_TABLE))
    if not x.ascii and _COMBINING.search(cased):
        out.append(_COMBINING.sub("", unicodedata.normalize("NFKD", cased)))
    return out


def _rejoin_split_words(t: str) -> str | None:
    """``t`` with its hyphenated and line-broken words joined, when at least
    :data:`_MIN_REJOINED` of the joins make a word of five letters or more that a rule looks
    for (:data:`~.rules.RULE_WORDS`) out of pieces that are not all such words (at most
    :data:`_MAX_PIECES` seams looked at); else None. Only the seams are visited (found by
    ``str.find``), each cut word read from the start of its first piece."""
    made = 0
    for rx, sep in ((_HYPHENATED, "-"), (_BROKEN_LINE, "\n")):
        pos = t.find(sep, 1)
        seams = 0
        while pos > 0 and seams < _MAX_PIECES:
            seams += 1
            if not ("a" <= t[pos - 1] <= "z" and "a" <= t[pos + 1 : pos + 2] <= "z"):
                pos = t.find(sep, pos + 1)
                continue
            begin = pos - 1
            while begin > 0 and pos - begin < 12 and "a" <= t[begin - 1] <= "z":
                begin -= 1
            m = rx.match(t, begin)
            if m is None:
                pos = t.find(sep, pos + 1)
                continue
            pieces = m.group(0).split(sep)
            word = "".join(pieces)
            if len(word) >= 5 and word in RULE_WORDS and not RULE_WORDS.issuperset(pieces):
                made += 1
                if made >= _MIN_REJOINED:
                    return _BROKEN_LINE.sub(
                        lambda b: b.group(0).replace("\n", ""),
                        _HYPHENATED.sub(lambda h: h.group(0).replace("-", ""), t),
                    )
            pos = t.find(sep, m.end())
    return None


def _join_decoded(texts: Iterable[str | None]) -> str:
    out: list[str] = []
    size = 0
    for text in texts:
        if text and size < _MAX_DECODED_TOTAL:
            out.append(text)
            size += len(text)
    return "\n".join(out)[:_MAX_DECODED_TOTAL]


def _b64_text(run: str) -> str | None:
    body = run.rstrip("=")
    urlsafe = "-" in body or "_" in body
    if urlsafe and ("+" in body or "/" in body):
        return None
    padded = body + "=" * (-len(body) % 4)
    try:
        if urlsafe:
            raw = base64.urlsafe_b64decode(padded)
        else:
            raw = base64.b64decode(padded, validate=True)
    except (binascii.Error, ValueError):
        return None
    return _printable(raw)


def _printable(raw: bytes) -> str | None:
    if len(raw) < 12:
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    ok = sum(1 for c in text if c.isprintable() or c in "\n\r\t")
    if ok < 0.95 * len(text) or not any(c in text for c in ' {"'):
        return None
    return text


def raw_checks(raw: str, v: FindingSink) -> None:
    """Invisible characters that reorder text, split words, or smuggle ASCII as tag chars."""
    if raw.isascii() or not RAW_ANY.search(raw):
        return
    if _BIDI_OVERRIDE.search(raw):
        v.add("hidden_characters", 4.0, "bidi_override")
    if _ZW_IN_WORD.search(raw):
        v.add("hidden_characters", 4.0, "zero_width_in_word")
    if _ANY_TAG_CHAR.search(raw) and _ANY_TAG_CHAR.search(_FLAG_EMOJI.sub("", raw)):
        v.add("hidden_characters", 4.0, "tag_characters")
