"""Entity-link helpers (ctxbudget.entities)."""

from __future__ import annotations

from ctxbudget.entities import subject_of


def test_subject_drops_the_qualifier() -> None:
    """A title's subject drops its qualifier; a lone article or no title has none."""
    assert subject_of("Big Stone Gap (film)") == "big stone gap"
    assert subject_of("The") is None and subject_of(None) is None
