"""Where the shipped data folders are (ctxbudget.resources): the checkout's when running from
one, else the installed package's copy."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.paths import REPO


def test_shipped_data_falls_back_to_the_package_copy(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Outside a checkout, the default look-ups use ctxbudget/_data (the wheel's copy)."""
    from ctxbudget import resources
    from ctxbudget.policy import default_policies_dir

    assert resources.shipped("policies") == REPO / "policies"
    monkeypatch.setattr(resources, "SOURCE_TREE", tmp_path / "site-packages")
    monkeypatch.setattr(resources, "PACKAGE_DATA", tmp_path / "ctxbudget" / "_data")
    assert default_policies_dir() == tmp_path / "ctxbudget" / "_data" / "policies"
    assert resources.shipped("topics") == tmp_path / "ctxbudget" / "_data" / "topics"
