"""Short runs of ``python -m bench.guarantees kill`` on a broker of their own.

SIGKILLed stage workers lose nothing and their duplicates are byte-identical; the poison lines
on the candidates topic each end as exactly one pack or one dead letter, and every worker is
alive at the end.
"""

from __future__ import annotations

from typing import Any

import pytest

from bench.guarantees.kill import run_kill
from ctxbudget.kafka.broker import BrokerStartError

pytestmark = [pytest.mark.broker, pytest.mark.slow]


def _run(**kwargs: Any) -> dict[str, Any]:
    try:
        return run_kill(**kwargs)
    except BrokerStartError as e:
        pytest.skip(f"the embedded broker cannot start here: {e}")


def test_killed_stage_workers_lose_nothing() -> None:
    """Two SIGKILLs of stage workers in 200 batches: none lost, duplicates identical, all alive."""
    r = _run(batches=200, kills=2, rate=40.0, seed=21, poison=False, drain_timeout_s=120.0)
    assert len(r["kill_events"]) == 2
    assert r["lost"] == 0, r["lost_examples"]
    assert r["with_pack"] == r["requests"] == 200
    assert r["duplicates_differing"] == 0
    assert r["first_pack_not_in_process_pack"] == 0
    assert r["good_dead_letters"] == 0
    assert r["workers_dead_at_end"] == [] and r["unexpected_worker_exits"] == []


def test_poison_on_the_topic_is_one_pack_or_one_dead_letter_each() -> None:
    """Each poison line on the topic ends as exactly one pack or dead letter; no worker dies."""
    r = _run(batches=60, kills=0, rate=40.0, seed=22, poison=True, drain_timeout_s=120.0)
    poison = r["poison"]
    assert poison["problems"] == []
    assert poison["exactly_one"] == r["poison_lines"]
    assert r["lost"] == 0 and r["duplicate_packs"] == 0
    assert r["workers_dead_at_end"] == [] and r["unexpected_worker_exits"] == []
