"""A bridge from an admitted text is whole when the text names few of the waiting titles,
and shared among them when it names many: a passage listing many countries leads to none
of them as surely as a passage naming one place leads to it."""

from __future__ import annotations

from ctxbudget.pipeline import Pipeline
from ctxbudget.stages.select import BRIDGE_FANOUT, _Admission, _Option


def _admission(pipeline: Pipeline) -> _Admission:
    rules = pipeline.selector.policy.classes["point_lookup"]
    return _Admission(rules, 1000, frozenset({"currency"}), [])


def _option(item: int, title: str, text: str) -> _Option:
    subject = title.lower()
    return _Option(
        item=item,
        rank=item,
        rel=0.5,
        auth=0.5,
        grams=frozenset(),
        est=50,
        header_est=10,
        match=0.0,
        source="wiki",
        text=text,
        spaced_words=f" {' '.join((title + ' ' + text).lower().split())} ",
        subject=subject,
        subject_key=f" {subject} ",
    )


def test_a_text_naming_few_titles_bridges_whole(pipeline: Pipeline) -> None:
    """One place named: the bridge to its passage is whole."""
    run = _admission(pipeline)
    hop = _option(0, "Signmark", "Signmark is a rapper from Helsinki")
    waiting = [_option(1, "Helsinki", "Helsinki is a city")]
    run._link_from(hop, [waiting])
    assert waiting[0].linked_from == "signmark" and waiting[0].bridge_link == 1.0


def test_a_text_naming_many_titles_shares_the_bridge(pipeline: Pipeline) -> None:
    """Four countries named: each bridge is the fan-out share; a later text naming one of
    them alone bridges it whole, and that stronger bridge is kept."""
    run = _admission(pipeline)
    hub = _option(0, "Euro", "The euro is used in Belgium Greece Malta and Finland")
    waiting = [
        _option(k, name, f"{name} is a country")
        for k, name in enumerate(("Belgium", "Greece", "Malta", "Finland"), start=1)
    ]
    run._link_from(hub, [waiting])
    assert {r.bridge_link for r in waiting} == {BRIDGE_FANOUT / 4}
    assert {r.linked_from for r in waiting} == {"euro"}
    run._link_from(_option(5, "Signmark", "Signmark is a rapper from Finland"), [waiting])
    finland = waiting[3]
    assert finland.linked_from == "signmark" and finland.bridge_link == 1.0
    assert waiting[0].linked_from == "euro"
