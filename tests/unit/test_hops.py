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
