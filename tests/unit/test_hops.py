"""The links admitted evidence makes to waiting passages (ctxbudget.hops): a bridge is whole
when the admitted text names few of the waiting titles and shared among them when it names
many (a passage listing many countries leads to none of them as surely as a passage naming
one place leads to it); a shared name links by the standing of the item handing it on."""

from __future__ import annotations

from ctxbudget.admission import Option
from ctxbudget.entities import SHARED_NAME_LINK
from ctxbudget.extractive import analyse, query_stems
from ctxbudget.hops import BRIDGE_FANOUT, HopLinks, hop_sentences, passer, share_name
from tests.unit.admission_options import option


def _option(item: int, title: str, text: str) -> Option:
    subject = title.lower()
    return option(
        item,
        text=text,
        spaced_words=f" {' '.join((title + ' ' + text).lower().split())} ",
        subject=subject,
        subject_key=f" {subject} ",
    )


def test_a_text_naming_few_titles_bridges_whole() -> None:
    """One place named: the bridge to its passage is whole."""
    run = HopLinks()
    hop = _option(0, "Signmark", "Signmark is a rapper from Helsinki")
    waiting = [_option(1, "Helsinki", "Helsinki is a city")]
    run.link_from(hop, [waiting])
    assert waiting[0].linked_from == "signmark" and waiting[0].bridge_link == 1.0


def test_a_text_naming_many_titles_shares_the_bridge() -> None:
    """Four countries named: each bridge is the fan-out share; a later text naming one of
    them alone bridges it whole, and that stronger bridge is kept."""
    run = HopLinks()
    hub = _option(0, "Euro", "The euro is used in Belgium Greece Malta and Finland")
    waiting = [
        _option(k, name, f"{name} is a country")
        for k, name in enumerate(("Belgium", "Greece", "Malta", "Finland"), start=1)
    ]
    run.link_from(hub, [waiting])
    assert {r.bridge_link for r in waiting} == {BRIDGE_FANOUT / 4}
    assert {r.linked_from for r in waiting} == {"euro"}
    run.link_from(_option(5, "Signmark", "Signmark is a rapper from Finland"), [waiting])
    finland = waiting[3]
    assert finland.linked_from == "signmark" and finland.bridge_link == 1.0
    assert waiting[0].linked_from == "euro"


def test_a_weak_standing_scales_the_link_it_hands_on() -> None:
    """The shared-name link handed on is scaled by the standing of the item handing it."""
    r = _option(4, "Madrid", "Madrid is a city")
    r.names = {"madrid": 2}
    share_name(r, "madrid", 2, 0.75)
    assert r.shared_name == "madrid" and r.shared_link == SHARED_NAME_LINK * 0.75
    share_name(r, "toledo", 2, 1.0)
    assert r.shared_name == "toledo" and r.shared_link == SHARED_NAME_LINK


def test_hop_sentences_carry_the_question_or_the_link() -> None:
    """Only the sentences of an admitted text that carry a query term or the name it was
    reached by count as its hop: a name in a sentence about something else leads nowhere."""
    text = "Lisbon is a port. The painter was born near Porto. Rain fell in Faro."
    o = _option(0, "Lisbon", text)
    hop = hop_sentences(analyse(text), o, query_stems(frozenset({"born"})))
    assert hop == [" lisbon is a port ", " the painter was born near porto "]
    o.names = {"porto": 2, "faro": 2}
    assert passer(analyse, frozenset({"born"}))(o) == {"porto": 2}


def _holders_by_scan(options: list[Option], name: str) -> tuple[int, int]:
    key = f" {name} "
    return (
        sum(1 for r in options if key in r.subject_key),
        sum(1 for r in options if key in r.spaced_words),
    )


def test_title_holders_are_the_titles_holding_the_name_as_a_phrase() -> None:
    """A name's title holders are the titles holding its words in order as whole words
    ("York New" holds the words of "new york" but not the name), as a search of every title
    counts them; a name of irregular spacing is searched for in every title."""
    options = [
        _option(0, "New York", "New York is a city"),
        _option(1, "History of New York", "The history of the city"),
        _option(2, "York New", "A made-up title"),
        _option(3, "Newark", "Newark is near New York"),
        _option(4, "York", "York is in England"),
    ]
    run = HopLinks()
    run.options = options
    for name in ("new york", "york", "new", "york new", "newark", "new  york", "paris", "ork"):
        assert (run._title_holders(name), run._text_holders(name)) == _holders_by_scan(
            options, name
        ), name
    assert run._title_holders("new york") == 2


def test_a_name_no_title_holds_never_has_its_texts_searched() -> None:
    """Handing names to titles counts a name's text holders only when some title holds it:
    a name no title holds links nothing, whatever the texts."""
    options = [
        _option(0, "Signmark", "Signmark is a rapper from Helsinki and Vantaa"),
        _option(1, "History of Helsinki", "The history of the city"),
        _option(2, "Espoo", "Espoo lies west of Helsinki"),
    ]
    run = HopLinks(hands=lambda o: ("helsinki", "vantaa"))
    run.options = options
    run.link_from(options[0], [options[1:]])
    assert "vantaa" not in run.holders and run.title_holders["vantaa"] == 0
    assert options[1].title_name == "helsinki" and options[1].title_link == 1.0
    assert options[2].title_name is None
