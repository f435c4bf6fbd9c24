"""Admission options built by hand for the tests of the admission loop and of hop links: an
item of fixed estimates and scores, with only the fields a test is about set."""

from __future__ import annotations

from ctxbudget.admission import Option


def option(item: int, **fields: object) -> Option:
    """Item ``item`` ranked at its own index, mid relevance, 50 tokens, from the wiki source."""
    return Option(
        item=item,
        rank=item,
        rel=0.5,
        auth=0.5,
        grams=frozenset(),
        est=50,
        header_est=10,
        match=0.0,
        source="wiki",
        **fields,  # type: ignore[arg-type]
    )
