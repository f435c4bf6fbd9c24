"""The checkable values of a claim (numbers, dates, quantities, percentages, names) and the
index of a passage they are looked up in, both normalised the same way.

A claim's value is kept with its surface form (what ``missing`` shows) and the keys that
would support it; a passage's index holds every key its text supports, generously (a full
date also supports its month, its year and its day of the year; ``three`` supports 3), so a
value written differently from the passage still matches:

* numbers: thousands separators dropped, trailing decimal zeros dropped, scale words applied
  (``12,000`` = ``12000``, ``3.5 million`` = ``3500000``), ordinals and decades read as
  their number (``19th`` = 19, ``1990s`` = 1990);
* percentages: ``12%``, ``12 percent`` and ``12 per cent`` are one value;
* quantities: a number and the unit word after it (``90 days``, ``90-day``, ``$3.5``,
  ``5 km``), the unit singular and lower case; in a passage the unit may come up to three
  words after the number (``90 calendar days``);
* dates: ``2024-03-01``, ``1 March 2024``, ``March 1, 2024`` and ``1st of March, 2024`` are
  one date; ``March 2024`` a month; ``March 1`` a day of the year;
* names: capitalised words (the first word of a sentence or clause, after ``;``, ``:`` or
  ``…``, only when it is not a common word),
  compared without case, accents or a possessive ``'s``, each word on its own, against
  every word of the passage.

Everything here is a pure function of its text.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

__all__ = ["PassageIndex", "Value", "claim_values", "index_passage", "normalise_word"]

_MONTHS = {
    "january": 1, "february": 2, "march": 3, "april": 4, "may": 5, "june": 6, "july": 7,
    "august": 8, "september": 9, "october": 10, "november": 11, "december": 12,
    "jan": 1, "feb": 2, "mar": 3, "apr": 4, "jun": 6, "jul": 7, "aug": 8, "sep": 9,
    "sept": 9, "oct": 10, "nov": 11, "dec": 12,
}  # fmt: skip
_MONTH_NAMES = tuple(
    sorted((m for m in _MONTHS), key=lambda m: (-len(m), m))
)  # longest first, so "march" wins over "mar"
_MONTH_BY_NUMBER = dict(enumerate(list(_MONTHS)[:12], start=1))

_SCALES = {
    "thousand": Decimal(1000),
    "million": Decimal(10) ** 6,
    "billion": Decimal(10) ** 9,
    "trillion": Decimal(10) ** 12,
}
_CURRENCY_SIGNS = {"$": "usd", "€": "eur", "£": "gbp", "¥": "jpy"}
_UNITS = {
    **{w: "day" for w in ("day", "days")},
    **{w: "week" for w in ("week", "weeks")},
    **{w: "month" for w in ("month", "months")},
    **{w: "year" for w in ("year", "years", "yr", "yrs")},
    **{w: "hour" for w in ("hour", "hours", "hr", "hrs", "h")},
    **{w: "minute" for w in ("minute", "minutes", "min", "mins")},
    **{w: "second" for w in ("second", "seconds", "sec", "secs", "s")},
    **{w: "ms" for w in ("ms", "millisecond", "milliseconds")},
    **{w: "km" for w in ("km", "kilometre", "kilometres", "kilometer", "kilometers")},
    **{w: "m" for w in ("m", "metre", "metres", "meter", "meters")},
    **{w: "cm" for w in ("cm", "centimetre", "centimetres", "centimeter", "centimeters")},
    **{w: "mm" for w in ("mm", "millimetre", "millimetres", "millimeter", "millimeters")},
    **{w: "mile" for w in ("mile", "miles", "mi")},
    **{w: "ft" for w in ("ft", "foot", "feet")},
    **{w: "inch" for w in ("inch", "inches")},
    **{w: "kg" for w in ("kg", "kilogram", "kilograms", "kilo", "kilos")},
    **{w: "g" for w in ("g", "gram", "grams")},
    **{w: "lb" for w in ("lb", "lbs", "pound", "pounds")},
    **{w: "ton" for w in ("ton", "tons", "tonne", "tonnes")},
    **{w: "acre" for w in ("acre", "acres")},
    **{w: "hectare" for w in ("hectare", "hectares", "ha")},
    **{w: "mph" for w in ("mph",)},
    **{w: "kb" for w in ("kb", "kib", "kilobyte", "kilobytes")},
    **{w: "mb" for w in ("mb", "mib", "megabyte", "megabytes")},
    **{w: "gb" for w in ("gb", "gib", "gigabyte", "gigabytes")},
    **{w: "tb" for w in ("tb", "tib", "terabyte", "terabytes")},
    **{w: "usd" for w in ("dollar", "dollars", "usd")},
    **{w: "eur" for w in ("euro", "euros", "eur")},
    **{w: "gbp" for w in ("gbp", "sterling")},
    **{w: "people" for w in ("people", "persons", "inhabitants", "residents")},
}
#: Units too short or too common to be read as a unit a few words after a number.
_NEAR_ONLY = frozenset({"h", "s", "m", "g", "mi", "ha", "min", "sec"})
_UNIT_WINDOW = 3
_NUMBER_WORDS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13,
    "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18,
    "nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60,
    "seventy": 70, "eighty": 80, "ninety": 90, "hundred": 100, "dozen": 12,
    "first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6,
    "seventh": 7, "eighth": 8, "ninth": 9, "tenth": 10, "twice": 2, "once": 1,
}  # fmt: skip

#: Words that start sentences without naming anything: never read as names when first.
_COMMON_WORDS = """
    a an the this that these those it its it's he she they them their his her hers we our
    you your i my me mine us there here then than so such some any all both each every either
    neither no not none nor and or but if as at by for from in into of off on onto out over per
    to up upon with within without about above across after against along among around
    before behind below beneath beside besides between beyond during except inside like near
    since through throughout till toward towards under until unlike via while whilst although
    though because whereas whether when where which who whom whose what why how however also
    yet still thus hence therefore moreover furthermore meanwhile instead indeed otherwise
    nevertheless nonetheless accordingly consequently finally first firstly second secondly
    third lastly later earlier today yesterday tomorrow now once often sometimes usually
    always never perhaps maybe probably possibly certainly clearly apparently originally
    initially eventually currently formerly previously recently subsequently together
    according based born located known called named found founded established built made
    released published written directed produced created formed started opened born
    considered described regarded used seen given set held set is are was were be been being
    has have had do does did can could will would shall should may might must yes only just
    even most more many much several few other another same one two three four five six
    seven eight nine ten both despite due given unless upon ever per"""
_COMMON = frozenset(_COMMON_WORDS.split())

_NUM = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
_MONTH_RE = "|".join(_MONTH_NAMES)
_ORD = r"(?:st|nd|rd|th)?"
_DAY = r"(?:[12]\d|3[01]|0?[1-9])"
_VALUE = re.compile(
    rf"""
    (?P<iso>(?<![\w.])(?P<iy>\d{{4}})-(?P<im>\d{{1,2}})-(?P<id>\d{{1,2}})(?![\w]))
  | (?P<dmy>(?<![\w.])(?P<dd>{_DAY}){_ORD}\s+(?:of\s+)?(?P<dm>{_MONTH_RE})\.?,?\s+
      (?P<dy>\d{{4}})(?!\d))
  | (?P<mdy>(?<![\w])(?P<mm>{_MONTH_RE})\.?\s+(?P<md>{_DAY}){_ORD},?\s+(?P<my>\d{{4}})(?!\d))
  | (?P<my2>(?<![\w])(?P<mm2>{_MONTH_RE})\.?,?\s+(?P<my2y>\d{{4}})(?!\d))
  | (?P<md2>(?<![\w])(?P<mm3>{_MONTH_RE})\.?\s+(?P<md3>{_DAY}){_ORD}(?![\w]))
  | (?P<num>(?:(?P<cur>[$€£¥])\s?)?(?<![\w.,])(?P<n>{_NUM})(?P<suffix>st|nd|rd|th|s)?(?![\w])
      (?:\s?(?P<pct>%|percent\b|per\s+cent\b))?
      (?:\s(?P<scale>thousand|million|billion|trillion)\b)?)
    """,
    re.VERBOSE | re.IGNORECASE,
)
_WORD = re.compile(r"[^\W_]+")
_ANCHOR = re.compile(r"(?:[$€£¥]\s?)?\d+")
#: A month name ending just before a number (``March 1``, ``Sept. 4``).
_MONTH_BEFORE = re.compile(rf"(?<![\w])(?:{_MONTH_RE})\.?,?\s+$", re.IGNORECASE)
_MONTH_REACH = 12
#: Punctuation after which a clause starts afresh (its first word may be capitalised),
#: then only what may open one, up to the word.
_OPENERS = " \t\n\"'“‘([`"
_OPENING = re.compile(r"""(?:[;:…]|[.!?](?=\s))[\s"'“‘(\[`]*$""")
_LOOK_BACK = 40
#: A word that may be capitalised: not starting with an ASCII lower-case letter (the
#: rest are checked with ``str.isupper``).
_CAPITALISED = re.compile(r"(?<![^\W_])[^\W\da-z_](?:[^\W_]|['’](?=[^\W\d_]))*")
_COMBINING = re.compile("[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]")


@dataclass(frozen=True, slots=True)
class Value:
    """One value of a claim: how the claim writes it, and what supports it: one of ``keys``
    (a number, date or quantity), or the normalised ``word`` (a name)."""

    surface: str
    keys: frozenset[str]
    #: A name's normalised word pieces (``O'Neal`` -> ``o``, ``neal``): all must be there.
    word: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class PassageIndex:
    """What a passage's text supports: value keys and normalised words."""

    keys: frozenset[str]
    words: frozenset[str]

    def supports(self, value: Value) -> bool:
        """The passage holds the value (its word, or one of its keys)."""
        if value.word is not None:
            return all(w in self.words for w in value.word)
        return not self.keys.isdisjoint(value.keys)


def _fold(text: str) -> str:
    """Text without case or accents."""
    if not text.isascii():
        text = _COMBINING.sub("", unicodedata.normalize("NFKD", text))
    return text.casefold()


def normalise_word(word: str) -> str:
    """A word without case, accents or a possessive ``'s`` (``Alû's`` -> ``alu``)."""
    w = word.replace("’", "'")
    if w.endswith(("'s", "'S")):
        w = w[:-2]
    return _fold(w.rstrip("'"))


def _number(text: str) -> Decimal | None:
    try:
        return Decimal(text.replace(",", ""))
    except InvalidOperation:
        return None


def _canon(value: Decimal) -> str:
    """A number as one string: ``12000``, ``3.5``, ``0.25`` (no exponent, no trailing zeros)."""
    if value == value.to_integral_value():
        return str(int(value))
    return format(value.normalize(), "f")


def _month(name: str) -> int:
    return _MONTHS[name.casefold().rstrip(".")]


@dataclass(frozen=True, slots=True)
class _Found:
    """One value found in a text: its keys, what else it supports in a passage, its span."""

    surface: str
    keys: frozenset[str]
    #: Keys a passage adds for it beyond ``keys`` (a date's month, year and day).
    extra: frozenset[str]
    #: A plain number's canonical form (a unit may follow it).
    number: str | None
    start: int
    end: int


def _date(m: re.Match[str]) -> tuple[frozenset[str], frozenset[str]]:
    g = m.group
    if g("iso"):
        y, mo, d = int(g("iy")), int(g("im")), int(g("id"))
        if not 1 <= mo <= 12 or not 1 <= d <= 31:
            return frozenset({f"n:{y}"}), frozenset({f"n:{int(g('im'))}", f"n:{d}"})
    elif g("dmy"):
        y, mo, d = int(g("dy")), _month(g("dm")), int(g("dd"))
    elif g("mdy"):
        y, mo, d = int(g("my")), _month(g("mm")), int(g("md"))
    elif g("my2"):
        y, mo = int(g("my2y")), _month(g("mm2"))
        return frozenset({f"d:{y:04d}-{mo:02d}"}), frozenset({f"n:{y}"})
    else:
        mo, d = _month(g("mm3")), int(g("md3"))
        return frozenset({f"md:{mo:02d}-{d:02d}"}), frozenset({f"n:{d}"})
    keys = frozenset({f"d:{y:04d}-{mo:02d}-{d:02d}"})
    extra = {f"d:{y:04d}-{mo:02d}", f"n:{y}", f"n:{d}", f"md:{mo:02d}-{d:02d}"}
    return keys, frozenset(extra)


def _matches(text: str) -> Iterator[re.Match[str]]:
    """The value matches of ``text``, tried only where a value can start: at a run of digits
    (or the currency sign before it), or at the month name just before one."""
    done = 0
    for a in _ANCHOR.finditer(text):
        start = a.start()
        if start < done:
            continue
        m = None
        before = _MONTH_BEFORE.search(text, max(done, start - _MONTH_REACH), start)
        if before is not None:
            m = _VALUE.match(text, before.start())
        if m is None:
            m = _VALUE.match(text, start)
        if m is not None and m.end() > m.start():
            done = m.end()
            yield m


def _values(text: str) -> list[_Found]:
    """Every number, date, percentage and amount of ``text``, in order."""
    out: list[_Found] = []
    for m in _matches(text):
        g = m.group
        if not g("num"):
            keys, extra = _date(m)
            out.append(_Found(m.group(0).strip(), keys, extra, None, m.start(), m.end()))
            continue
        value = _number(g("n"))
        if value is None:
            continue
        raw = _canon(value)
        if g("scale"):
            value = value * _SCALES[g("scale").casefold()]
        canon = _canon(value)
        number: str | None = None
        if g("pct"):
            keys = frozenset({f"p:{canon}"})
        elif g("cur"):
            keys = frozenset({f"q:{canon}:{_CURRENCY_SIGNS[g('cur')]}"})
        else:
            keys = frozenset({f"n:{canon}"})
            number = canon
        more = frozenset({f"n:{raw}", f"n:{canon}"})
        out.append(_Found(m.group(0).strip(), keys, more, number, m.start(), m.end()))
    return out


_NEXT_WORDS = re.compile(r"[\s-]*([^\W\d_]+)")


def _units_after(text: str, pos: int, *, window: int) -> list[str]:
    """The units named by the ``window`` words right after ``pos`` (stopping at anything
    but a word): only the next word when ``window`` is 1."""
    units: list[str] = []
    for j in range(window):
        m = _NEXT_WORDS.match(text, pos)
        if m is None:
            break
        pos = m.end()
        w = m.group(1).casefold()
        unit = _UNITS.get(w)
        if unit is not None and (j == 0 or w not in _NEAR_ONLY):
            units.append(unit)
            if window == 1:
                break
    return units


def index_passage(text: str) -> PassageIndex:
    """Every key the passage supports and its normalised words."""
    words = set(_WORD.findall(_fold(text)))
    keys: set[str] = set()
    for f in _values(text):
        keys.update(f.keys)
        keys.update(f.extra)
        if f.number is not None:
            keys.update(f"q:{f.number}:{u}" for u in _units_after(text, f.end, window=_UNIT_WINDOW))
        for k in f.keys | f.extra:
            if k.startswith("d:") and len(k) >= 9:
                words.add(_MONTH_BY_NUMBER[int(k[7:9])])
    keys.update(f"n:{_NUMBER_WORDS[w]}" for w in words & _NUMBER_WORDS.keys())
    return PassageIndex(keys=frozenset(keys), words=frozenset(words))


def _name(word: str, first: bool) -> bool:
    """A capitalised word inside a sentence is a name; the first word only when it is not a
    common word (nor looks like one: ``-ed``, ``-ing``, ``-ly``)."""
    if not word[0].isupper() or word == "I":
        return False
    if not first:
        return True
    low = normalise_word(word)
    return low not in _COMMON and not low.endswith(("ed", "ing", "ly"))


def _opens_clause(text: str, start: int) -> bool:
    """The word at ``start`` opens the text, or a clause: only spaces, quotes and brackets
    lie between it and a ``;``, ``:``, ``…`` or a sentence's final punctuation (not the full
    stop of an initial, ``J. Tolkien``)."""
    lo = max(0, start - _LOOK_BACK)
    m = _OPENING.search(text, lo, start)
    if m is None:
        return start < _LOOK_BACK and not text[:start].strip(_OPENERS)
    if text[m.start()] != ".":
        return True
    before = text[max(0, m.start() - 2) : m.start()]
    return not (before[-1:].isupper() and (len(before) < 2 or not before[0].isalnum()))


def claim_values(text: str) -> tuple[Value, ...]:
    """The checkable values of a claim, in text order, each once."""
    found = _values(text)
    spans = [(f.start, f.end) for f in found]
    items: list[tuple[int, Value]] = []
    for f in found:
        keys, surface = f.keys, f.surface
        if f.number is not None:
            units = _units_after(text, f.end, window=1)
            if units:
                m = _NEXT_WORDS.match(text, f.end)
                keys = frozenset({f"q:{f.number}:{units[0]}"})
                surface = text[f.start : m.end()] if m is not None else surface
                spans.append((f.start, m.end() if m is not None else f.end))
        items.append((f.start, Value(surface, keys)))
    spans.sort()
    j = 0
    for m in _CAPITALISED.finditer(text):
        start, word = m.start(), m.group(0)
        if not word[0].isupper():
            continue
        while j < len(spans) and spans[j][1] <= start:
            j += 1
        if j < len(spans) and spans[j][0] <= start:
            continue  # part of a value: "March" of a date, "Million"
        if _name(word, _opens_clause(text, start)):
            pieces = tuple(_WORD.findall(normalise_word(word)))
            items.append((start, Value(word, frozenset(), pieces)))
    items.sort(key=lambda t: t[0])
    out: list[Value] = []
    seen: set[tuple[frozenset[str], tuple[str, ...] | None]] = set()
    for _, v in items:
        key = (v.keys, v.word)
        if key not in seen:
            seen.add(key)
            out.append(v)
    return tuple(out)
