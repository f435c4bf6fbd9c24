"""The input limits read from ``CTXBUDGET_MAX_*`` variables (ctxbudget.limit_settings), and
the limits a batch is held to that they make."""

from __future__ import annotations

import pytest

from ctxbudget.kafka.settings import WorkerSettings
from ctxbudget.limit_settings import LimitSettings
from ctxbudget.limits import InputLimits
from tests.paths import REPO


def test_limit_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """CTXBUDGET_MAX_CANDIDATES and friends (the message cap among them) are the limit
    settings, the topic specs folder a worker setting; a bad value is refused."""
    monkeypatch.setenv("CTXBUDGET_MAX_CANDIDATES", "50")
    monkeypatch.setenv("CTXBUDGET_MAX_MESSAGE_BYTES", "12345")
    monkeypatch.setenv("CTXBUDGET_TOPIC_SPECS", str(REPO / "topics"))
    limits = LimitSettings()
    assert limits.max_candidates == 50
    assert limits.input_limits() == InputLimits(max_message_bytes=12345, max_candidates=50)
    assert limits.input_limits(cap=100).max_message_bytes == 100
    assert WorkerSettings().specs_dir() == REPO / "topics"
    assert "max_message_bytes" not in WorkerSettings.model_fields
    monkeypatch.setenv("CTXBUDGET_MAX_JSON_DEPTH", "2")
    with pytest.raises(ValueError, match="max_json_depth"):
        LimitSettings()
