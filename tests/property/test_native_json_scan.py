"""The compiled JSON scan vouches for unique keys and short integers only when they hold."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ctxbudget import codec
from ctxbudget.errors import InputError
from ctxbudget.native import NATIVE

pytestmark = pytest.mark.skipif(
    getattr(NATIVE, "scan_json", None) is None,
    reason="the compiled path is off or absent (tests/e2e checks it is built)",
)

_KEYS = st.sampled_from(["a", "b", "id", "é", "a\\u0062", "\\u0061", "x:y", 'q\\"', "\\\\"])
_NUMBERS = st.sampled_from(
    [
        "0",
        "-1",
        "1.5e+10",
        "9223372036854775807",
        "9223372036854775808",
        "-9223372036854775809",
        "1234567890123456789.5",
        "1e19",
        "0.0000000000000000001",
    ]
)
_STRINGS = st.sampled_from(['""', '"x"', '"1234567890123456789012"', '"a\\"b"', '"\\\\"'])
_SCALARS = st.one_of(_NUMBERS, _STRINGS, st.sampled_from(["true", "false", "null"]))
_BLANK = st.sampled_from(["", " ", "\n", "\t ", "\r\n"])


def _object(pairs: list[tuple[str, str]], blank: str) -> str:
    return "{" + ",".join(f'{blank}"{k}"{blank}:{blank}{v}' for k, v in pairs) + blank + "}"


def _array(values: list[str], blank: str) -> str:
    return "[" + f",{blank}".join(values) + "]"


_DOCS = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.builds(_object, st.lists(st.tuples(_KEYS, inner), max_size=6), _BLANK),
        st.builds(_array, st.lists(inner, max_size=5), _BLANK),
    ),
    max_leaves=25,
)


def _exact(doc: bytes) -> tuple[str | None, bool]:
    """The Python path's answer: the error of a repeated key (None without one), and whether
    an integer of the document lies beyond 64 bits."""
    try:
        codec.check_unique_keys(doc)
    except InputError as e:
        return str(e), False
    ints: list[int] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
        elif type(node) is int:
            ints.append(node)

    walk(json.loads(doc))
    return None, any(not codec.INT64_MIN <= i <= codec.INT64_MAX for i in ints)


@settings(max_examples=800, deadline=None)
@given(doc=_DOCS, blank=_BLANK)
@example(doc='{"a":1,"a":2}', blank="")
@example(doc='{"a":{"b":[{"c":1,"c":2}]},"b":1}', blank=" ")
@example(doc='{"a\\u0062":1,"ab":2}', blank="")
@example(doc='[{"n":9223372036854775808}]', blank="")
def test_the_scan_errs_only_towards_the_exact_check(doc: str, blank: str) -> None:
    """No bit means no repeated key and no long integer; a long integer always sets bit 2."""
    data = f"{blank}{doc}{blank}".encode()
    bits = NATIVE.scan_json(data)  # type: ignore[union-attr]
    error, beyond = _exact(data)
    if error is not None:
        assert bits & 1
    if not bits & 1:
        assert error is None
        if beyond:
            assert bits & 2
    with_scan = _decision(data)
    scan, codec._SCAN_JSON = codec._SCAN_JSON, None  # the pure-Python path of the same check
    try:
        without = _decision(data)
    finally:
        codec._SCAN_JSON = scan
    assert with_scan[0] == without[0]  # the same documents refused, with the same message
    if beyond:  # either way the integers are then checked one by one
        assert with_scan[1] and without[1]


def _decision(data: bytes) -> tuple[str | None, bool]:
    """The repeated-key error of ``codec._strict_json`` (None without one), or its answer."""
    try:
        return None, codec._strict_json(data)
    except InputError as e:
        return str(e), False


@pytest.mark.parametrize(
    "data",
    [b"", b"{", b'{"a":1', b'{"a":1}x', b"[1,2,]", b'{"a":NaN}', b'{"a" 1}', b"[1 2]", b'"x'],
)
def test_a_document_the_scan_does_not_expect_goes_to_the_exact_check(data: bytes) -> None:
    """Broken or unusual JSON answers 'maybe a repeated key', never 'clean'."""
    assert NATIVE.scan_json(data) & 1  # type: ignore[union-attr]
