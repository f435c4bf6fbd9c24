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
_TOKEN = re.compile(
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
  | (?P<word>[^\W\d_]+(?:['’][^\W\d_]+)*)
    """,
    re.VERBOSE | re.IGNORECASE,
)
_WORD = re.compile(r"[^\W_]+")
#: Punctuation after which a clause starts afresh (its first word may be capitalised).
_CLAUSE_BREAK = re.compile(r"[;:…]|[.!?]\s")


@dataclass(frozen=True, slots=True)
class Value:
    """One value of a claim: how the claim writes it, and the keys that support it (any one)."""

    surface: str
    keys: frozenset[str]


@dataclass(frozen=True, slots=True)
class PassageIndex:
    """What a passage's text supports: value keys (its words among them, as ``w:word``) and
    its normalised words."""

    keys: frozenset[str]
    words: frozenset[str]

    def supports(self, value: Value) -> bool:
        """The passage holds the value (one of its keys)."""
        return not self.keys.isdisjoint(value.keys)


def normalise_word(word: str) -> str:
    """A word without case, accents or a possessive ``'s`` (``Alû's`` -> ``alu``)."""
    w = word.replace("’", "'")
    if w.endswith(("'s", "'S")):
        w = w[:-2]
    w = w.rstrip("'")
    if not w.isascii():
        w = "".join(c for c in unicodedata.normalize("NFKD", w) if not unicodedata.combining(c))
    return w.casefold()


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


def _date_keys(year: int, month: int | None, day: int | None) -> frozenset[str]:
    if month is None or not 1 <= month <= 12:
        return frozenset({f"n:{year}"})
    if day is None or not 1 <= day <= 31:
        return frozenset({f"d:{year:04d}-{month:02d}"})
    return frozenset({f"d:{year:04d}-{month:02d}-{day:02d}"})


def _month(name: str) -> int:
    return _MONTHS[name.casefold().rstrip(".")]


@dataclass(frozen=True, slots=True)
class _Token:
    """One token of a text: a value (with its keys) or a word."""

    surface: str
    keys: frozenset[str]
    #: Keys a passage adds for this token beyond ``keys`` (a date's month, year and day).
    extra: frozenset[str]
    number: str | None
    word: str | None
    start: int
    end: int


def _date_token(m: re.Match[str]) -> tuple[frozenset[str], frozenset[str]]:
    g = m.group
    if g("iso"):
        y, mo, d = int(g("iy")), int(g("im")), int(g("id"))
    elif g("dmy"):
        y, mo, d = int(g("dy")), _month(g("dm")), int(g("dd"))
    elif g("mdy"):
        y, mo, d = int(g("my")), _month(g("mm")), int(g("md"))
    elif g("my2"):
        y, mo = int(g("my2y")), _month(g("mm2"))
        return _date_keys(y, mo, None), frozenset({f"n:{y}", f"w:{_MONTH_BY_NUMBER[mo]}"})
    else:
        mo, d = _month(g("mm3")), int(g("md3"))
        return frozenset({f"md:{mo:02d}-{d:02d}"}), frozenset(
            {f"n:{d}", f"w:{_MONTH_BY_NUMBER[mo]}"}
        )
    keys = _date_keys(y, mo, d)
    if not 1 <= mo <= 12 or not 1 <= d <= 31:
        return keys, frozenset({f"n:{y}", f"n:{d}"})
    extra = {
        f"d:{y:04d}-{mo:02d}",
        f"n:{y}",
        f"n:{d}",
        f"md:{mo:02d}-{d:02d}",
        f"w:{_MONTH_BY_NUMBER[mo]}",
    }
    return keys, frozenset(extra)


def _tokens(text: str) -> list[_Token]:
    out: list[_Token] = []
    for m in _TOKEN.finditer(text):
        g = m.group
        surface = m.group(0).strip()
        if g("word"):
            word = normalise_word(g("word"))
            n = _NUMBER_WORDS.get(word)
            extra = frozenset({f"n:{n}"}) if n is not None else frozenset()
            out.append(_Token(g("word"), frozenset(), extra, None, g("word"), m.start(), m.end()))
            continue
        if not g("num"):
            keys, extra = _date_token(m)
            out.append(_Token(surface, keys, extra, None, None, m.start(), m.end()))
            continue
        value = _number(g("n"))
        if value is None:
            continue
        raw = _canon(value)
        if g("scale"):
            value = value * _SCALES[g("scale").casefold()]
        canon = _canon(value)
        extra_keys = {f"n:{raw}"}
        if g("pct"):
            keys = frozenset({f"p:{canon}"})
            extra_keys.add(f"n:{canon}")
        elif g("cur"):
            keys = frozenset({f"q:{canon}:{_CURRENCY_SIGNS[g('cur')]}"})
            extra_keys.add(f"n:{canon}")
        else:
            keys = frozenset({f"n:{canon}"})
        out.append(_Token(surface, keys, frozenset(extra_keys), canon, None, m.start(), m.end()))
    return out


def _unit_of(tokens: list[_Token], i: int, *, window: int) -> list[str]:
    """The units named by the words after token ``i`` (only the next word when ``window`` is 1,
    and never across another number)."""
    units: list[str] = []
    for j in range(i + 1, min(len(tokens), i + 1 + window)):
        tok = tokens[j]
        if tok.word is None:
            break
        w = tok.word.casefold()
        unit = _UNITS.get(w)
        if unit is not None and (j == i + 1 or w not in _NEAR_ONLY):
            units.append(unit)
            if window == 1:
                break
    return units


def index_passage(text: str) -> PassageIndex:
    """Every key the passage supports and its normalised words."""
    tokens = _tokens(text)
    keys: set[str] = set()
    words: set[str] = set()
    for i, tok in enumerate(tokens):
        keys.update(tok.keys)
        keys.update(tok.extra)
        if tok.word is not None:
            words.update(normalise_word(p) for p in _WORD.findall(tok.word))
            words.add(normalise_word(tok.word))
        elif tok.number is not None:
            keys.update(f"q:{tok.number}:{u}" for u in _unit_of(tokens, i, window=_UNIT_WINDOW))
    words.update(k[2:] for k in keys if k.startswith("w:"))
    keys.update(f"w:{w}" for w in words)
    return PassageIndex(keys=frozenset(keys), words=frozenset(words))


def _name_word(tok: _Token, first: bool) -> bool:
    """A capitalised word inside a sentence is a name; the first word only when it is not a
    common word (nor looks like one: ``-ed``, ``-ing``, ``-ly``)."""
    word = tok.word
    if word is None or not word[0].isupper() or word == "I":
        return False
    if not first:
        return True
    low = normalise_word(word)
    return low not in _COMMON and not low.endswith(("ed", "ing", "ly"))


def claim_values(text: str) -> tuple[Value, ...]:
    """The checkable values of a claim, in text order, each once (by its keys)."""
    tokens = _tokens(text)
    values: list[Value] = []
    seen: set[frozenset[str]] = set()
    previous_end = 0
    for i, tok in enumerate(tokens):
        first = i == 0 or _CLAUSE_BREAK.search(text, previous_end, tok.start) is not None
        previous_end = tok.end
        if tok.word is not None:
            if _name_word(tok, first):
                key = frozenset({f"w:{normalise_word(tok.word)}"})
                if key not in seen:
                    seen.add(key)
                    values.append(Value(tok.word, key))
            continue
        keys = tok.keys
        surface = tok.surface
        if tok.number is not None and not any(k.startswith(("p:", "q:")) for k in keys):
            units = _unit_of(tokens, i, window=1)
            if units:
                keys = frozenset({f"q:{tok.number}:{units[0]}"})
                surface = f"{surface} {tokens[i + 1].surface}"
        if keys not in seen:
            seen.add(keys)
            values.append(Value(surface, keys))
    return tuple(values)
