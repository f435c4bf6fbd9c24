"""The escapes of the envelope (ctxbudget.escaping) equal one plain substitution pass."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxbudget.envelope import escape_attr, escape_text

SETTINGS = settings(max_examples=300, deadline=None)


@SETTINGS
@given(st.text(alphabet='ab&<>"\n\r\t;#1', max_size=40))
def test_escapes_match_one_substitution_pass(text: str) -> None:
    """Chained str.replace (ampersand first) equals one regex substitution pass."""
    text_map = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
    attr_map = {**text_map, '"': "&quot;", "\n": "&#10;", "\r": "&#13;", "\t": "&#9;"}
    assert escape_text(text) == re.sub("[&<>]", lambda m: text_map[m.group(0)], text)
    assert escape_attr(text) == re.sub('[&<>"\n\r\t]', lambda m: attr_map[m.group(0)], text)
