"""`ctxbudget compare`: drop reasons are means per pack, per lane."""

from __future__ import annotations

import pytest

from ctxbudget.compare import compare, drops_per_pack, render
from ctxbudget.pipeline import Pipeline
from ctxbudget.schemas import Pack
from ctxbudget.testing.traffic import synthetic


def _packs(pipeline: Pipeline, n: int, dropped: dict[str, int], lane: str) -> list[Pack]:
    out = []
    for g in synthetic(n, seed=7):
        pack = pipeline.run(g.batch).pack
        out.append(pack.model_copy(update={"dropped": dropped, "lane": lane}))
    return out


def test_drop_reasons_are_normalised_per_pack_when_lanes_differ_in_size(
    pipeline: Pipeline,
) -> None:
    """Live 6 packs with 2 budget drops each, shadow 3 (paired) with 2 each: equal per pack."""
    live = _packs(pipeline, 6, {"budget": 2, "relevance": 1}, "live")
    shadow = _packs(pipeline, 3, {"budget": 2}, "shadow")
    c = compare(live, shadow)
    assert (c.live_packs, c.shadow_packs, c.pairs) == (6, 3, 3)
    assert c.dropped_live_per_pack == pytest.approx({"budget": 2.0, "relevance": 1.0})
    assert c.dropped_shadow_per_pack == pytest.approx({"budget": 2.0})
    text = render(c)
    assert "drop reasons per pack (live 6 packs -> shadow 3 packs)" in text
    assert "budget 2.00->2.00" in text and "relevance 1.00->0.00" in text


def test_drops_per_pack_counts_a_missing_reason_as_zero(pipeline: Pipeline) -> None:
    """A reason missing from a pack counts 0 in the mean per pack; no packs give no reasons."""
    packs = _packs(pipeline, 2, {}, "live")
    packs[0] = packs[0].model_copy(update={"dropped": {"budget": 3}})
    assert drops_per_pack(packs) == {"budget": 1.5}
    assert drops_per_pack([]) == {}
