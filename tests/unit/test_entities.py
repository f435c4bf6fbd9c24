"""Entity-link helpers (ctxbudget.entities): subjects of titles, and the links of the last
tuple of items, kept only for that tuple."""

from __future__ import annotations

from ctxbudget import entities
from ctxbudget.entities import subject_links, subject_of
from ctxbudget.pipeline import Pipeline
from ctxbudget.schemas import ConsolidatedItem
from ctxbudget.testing import batch, candidate

_TEXTS = (
    "Ilse Varnhagen was born in Kellinghusen, a town on the Stör.",
    "Kellinghusen lies north of Hamburg; Ilse Varnhagen filmed it.",
    "The Stör valley towns include Kellinghusen and Itzehoe.",
)


def _items(pipeline: Pipeline) -> tuple[ConsolidatedItem, ...]:
    routed = pipeline.router.run(batch([candidate(f"c{k}", t) for k, t in enumerate(_TEXTS)]))
    return pipeline.consolidator.run(routed).items


def test_the_same_tuple_is_answered_from_the_kept_links(pipeline: Pipeline) -> None:
    """Asked twice of one tuple, the links are the same object, equal to a fresh answer."""
    items = _items(pipeline)
    first = subject_links(items)
    assert subject_links(items) is first
    assert first == entities._subject_links(items)
    assert " kellinghusen " in first


def test_an_equal_tuple_or_a_list_is_worked_out_again(pipeline: Pipeline) -> None:
    """Another tuple (even an equal one) or a list is never answered by identity: same value."""
    items = _items(pipeline)
    first = subject_links(items)
    again = subject_links(tuple(items))  # tuple() of a tuple is the same object
    assert again is first
    copied = tuple(list(items))
    assert copied is not items
    assert subject_links(copied) == first
    as_list = list(items)
    assert subject_links(as_list) == first
    assert entities._LAST_LINKS["links"][0] is not as_list


def test_the_links_follow_the_items_asked_last(pipeline: Pipeline) -> None:
    """After other items were asked, the first ones are worked out again, not confused."""
    items = _items(pipeline)
    fewer = items[:1]
    assert subject_links(items) == entities._subject_links(items)
    assert subject_links(fewer) == entities._subject_links(fewer)
    assert subject_links(items) == entities._subject_links(items)


def test_subject_drops_the_qualifier() -> None:
    """A title's subject drops its qualifier; a lone article or no title has none."""
    assert subject_of("Big Stone Gap (film)") == "big stone gap"
    assert subject_of("The") is None and subject_of(None) is None


def test_a_comma_qualified_title_has_its_short_name_as_alias() -> None:
    """ "West Chicago, Illinois" is also named "West Chicago"; a title without a comma
    qualifier, or with a stopword head, has no alias."""
    assert entities.subject_alias("West Chicago, Illinois") == "west chicago"
    assert entities.subject_alias("Rochester, New York (city)") == "rochester"
    assert entities.subject_alias("Big Stone Gap (film)") is None
    assert entities.subject_alias("The, Band") is None
    assert entities.subject_alias(None) is None


def _consolidated(pipeline: Pipeline, rows: list[tuple[str | None, str]]) -> list[ConsolidatedItem]:
    cands = [candidate(f"c{k}", text, title=title) for k, (title, text) in enumerate(rows)]
    return list(pipeline.consolidator.run(pipeline.router.run(batch(cands))).items)


def test_the_sections_of_one_article_hold_a_name_once(pipeline: Pipeline) -> None:
    """A name an article repeats over its sections is as rare as any other article's name:
    its link strength counts articles (one title), so two sections do not weaken it."""
    rows: list[tuple[str | None, str]] = [
        ("Akinoshu Kenji", "Akinoshu Kenji is a former sumo wrestler from Hiroshima, Japan."),
        ("Atomic bombings", "The first bomb was dropped on the city of Hiroshima in August."),
        ("Atomic bombings", "Survivors of Hiroshima were studied for decades afterwards."),
        ("Tuna", "The bluefin tuna is a large fish of the open ocean waters."),
        ("Salmon", "The salmon is a fish that swims up rivers to spawn each year."),
    ]
    items = _consolidated(pipeline, rows)
    names = entities.distinctive_names(items)
    held = {n for per in names for n in per}
    assert "hiroshima" in held
    assert {per["hiroshima"] for per in names if "hiroshima" in per} == {2}


def test_untitled_items_hold_names_each_by_themselves(pipeline: Pipeline) -> None:
    """Without titles every item is its own holder: the count is the items holding it."""
    rows: list[tuple[str | None, str]] = [
        (None, "The river passes Kellinghusen before it meets the Elbe."),
        (None, "The town of Kellinghusen has a market square and a church."),
        (None, "A ferry crosses near Kellinghusen in the summer months."),
        (None, "The bluefin tuna is a large fish of the open ocean waters."),
        (None, "The salmon is a fish that swims up rivers to spawn each year."),
    ]
    names = entities.distinctive_names(_consolidated(pipeline, rows))
    assert {per["kellinghusen"] for per in names if "kellinghusen" in per} == {3}
    assert entities.holder_key(_consolidated(pipeline, rows)[0], 7) == "#7"


def test_subject_links_from_names_read_already_equal_a_fresh_reading(pipeline: Pipeline) -> None:
    """Selection hands the subject links the distinctive names it read of the same items: the
    links are those read from the items alone, and the names are not changed."""
    items = list(_items(pipeline))
    names = entities.distinctive_names(items, shared_only=True)
    assert any("kellinghusen" in per for per in names)
    before = [dict(per) for per in names]
    assert entities._subject_links(items, names) == entities._subject_links(items, None)
    assert names == before
