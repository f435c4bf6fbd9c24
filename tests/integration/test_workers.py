"""Workers against the real embedded broker: identity, dead letters, failover, restart.

The checks themselves live in :mod:`tests.integration.worker_checks`; the real-Kafka suite
runs the same ones on its cluster.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.lab import Lab
from tests.integration.worker_checks import (
    check_a_killed_worker_hands_its_partitions_to_its_peer,
    check_a_restarted_worker_resumes_from_committed_offsets,
    check_four_stage_workers_make_the_in_process_packs,
)

pytestmark = [pytest.mark.broker, pytest.mark.slow]


def test_four_stage_workers_make_the_in_process_packs(lab: Lab, tmp_path: Path) -> None:
    """300 batches through route → consolidate → select → compress, each its own process."""
    check_four_stage_workers_make_the_in_process_packs(lab, tmp_path)


def test_a_killed_worker_hands_its_partitions_to_its_peer(lab: Lab, tmp_path: Path) -> None:
    """SIGKILL one of two fused workers mid-stream: every request still gets its pack."""
    check_a_killed_worker_hands_its_partitions_to_its_peer(lab, tmp_path)


def test_a_restarted_worker_resumes_from_committed_offsets(lab: Lab, tmp_path: Path) -> None:
    """SIGTERM commits and leaves; the next worker starts after the last committed record."""
    check_a_restarted_worker_resumes_from_committed_offsets(lab, tmp_path)
