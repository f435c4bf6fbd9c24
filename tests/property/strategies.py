"""Hypothesis strategies shared by the property tests: prose pieces that stress sentence
analysis (months, abbreviations, contractions, conditions, numbers)."""

from __future__ import annotations

from hypothesis import strategies as st

PIECES = [
    "May",
    "mayor",
    "Jan.",
    "janx2",
    "DECember",
    "Dez",
    "only if",
    "Provided that",
    "at least",
    "at   most",
    "less-than",
    "more than",
    "don't",
    "WON'T",
    "it's",
    "not",
    "g",
    "5",
    "42%",
    "3°",
    "a",
    "the",
    "x",
    "İstanbul",
    "ſep",
    "café",
    "²",
    "٣",
    "the Big Stone Gap",
    ". ",
    "! ",
    "\n",
    " ",
    ", ",
]


texts = st.lists(st.sampled_from(PIECES), max_size=30).map(" ".join) | st.text(
    alphabet="abjnmyMJ '.\n1%°İſéxt", max_size=60
)


SENTENCE_PIECES = [
    "Mr.",
    "U.S.",
    "e.g.",
    "St.",
    "A.",
    "c.",
    "Big Stone Gap",
    "ends.",
    "ends!",
    "ends?!",
    'said."',
    "(so.)",
    "x.y",
    "...",
    "\n",
    "\n\n",
    " \n ",
    "\t",
    "\u2028",
    "\u00a0",
    "–J.",
    "İ.",
]
