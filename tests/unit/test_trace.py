"""The stages' trace events (ctxbudget.trace): what each stage accepted and dropped, named by
the ids a reader of the trace can join to the input."""

from __future__ import annotations

from ctxbudget.pipeline import Pipeline
from ctxbudget.testing import batch, candidate
from ctxbudget.trace import consolidate_trace, route_trace, select_trace

TEXT = "The gateway rotates API keys every ninety days and keeps the old key for a day."


def test_route_and_consolidate_events_name_the_candidates_and_the_families(
    pipeline: Pipeline,
) -> None:
    """Routing accepts every admissible chunk id; consolidation accepts one item per family
    and lists the family of two copies under its item id."""
    b = batch(
        [
            candidate("a", TEXT, 2.0),
            candidate("b", TEXT, 1.0),
            candidate("c", "Install the command line tool with the package manager.", 1.5),
        ],
        request_id="req-7",
    )
    routed = pipeline.router.run(b)
    route = route_trace(routed, latency_ms=1.23456)
    assert (route.stage, route.request_id, route.latency_ms) == ("route", "req-7", 1.235)
    assert route.candidate_count == 3 and set(route.accepted_ids) == {"a", "b", "c"}
    assert route.details["labelled"] is False and "cut" not in route.details
    consolidated = pipeline.consolidator.run(routed)
    event = consolidate_trace(consolidated)
    assert event.stage == "consolidate" and sorted(event.accepted_ids) == ["a", "c"]
    assert event.details["families"] == {"a": ["a", "b"]}
    assert [(f.chunk_id, f.reason) for f in event.dropped] == [("b", "duplicate")]


def test_the_select_event_lists_the_admitted_items_in_admission_order(pipeline: Pipeline) -> None:
    """The ranked list holds exactly the admitted item ids, and the estimated tokens are theirs."""
    b = batch(
        [candidate("a", TEXT, 2.0), candidate("c", "Error 502 means the upstream timed out.", 1.5)]
    )
    packed = pipeline.selector.run(pipeline.consolidator.run(pipeline.router.run(b)))
    event = select_trace(packed)
    assert event.stage == "select"
    assert sorted(event.details["ranked"]) == sorted(event.accepted_ids)
    assert event.details["estimated_tokens"] == sum(a.estimated_tokens for a in packed.admitted)
