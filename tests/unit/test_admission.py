"""The admission loop (ctxbudget.admission): a passage that entered on a weak link (a shared
name many passages hold, no query term, not named by the question) stands less surely than
one the question leads to, so the names it hands on link the next passage less."""

from __future__ import annotations

from ctxbudget.admission import GreedyAdmission
from ctxbudget.entities import SHARED_NAME_LINK
from ctxbudget.pipeline import Pipeline
from tests.unit.admission_options import option


def _admission(pipeline: Pipeline) -> GreedyAdmission:
    rules = pipeline.selector.policy.classes["point_lookup"]
    return GreedyAdmission(rules, 1000, frozenset({"born", "painter"}), [])


def test_a_passage_carrying_the_question_stands_whole(pipeline: Pipeline) -> None:
    """An item that brings query terms hands its names on at full strength."""
    run = _admission(pipeline)
    o = option(0, qhits=frozenset({"born"}), uncovered=1, shared_name="lyon", shared_link=0.2)
    assert run._standing(o) == 1.0


def test_a_passage_reached_by_a_weak_shared_name_stands_less(pipeline: Pipeline) -> None:
    """An item that entered only on a shared name held by many passages hands on a weaker
    link: halfway between whole and the share of the strongest link it was reached by."""
    run = _admission(pipeline)
    weak = option(1, shared_name="spain", shared_link=SHARED_NAME_LINK / 2)
    strong = option(2, shared_name="lyon", shared_link=SHARED_NAME_LINK)
    assert run._standing(weak) == 0.75
    assert run._standing(strong) == 1.0
    assert run._standing(option(3)) == 1.0  # on its retrieval score alone
