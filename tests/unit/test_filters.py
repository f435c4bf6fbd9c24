"""The conformal filters a policy asks for (ctxbudget.filters): none without a calibration,
one per class that sets an alpha, and candidates of other classes never filtered."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxbudget.conformal import CalibrationError, save_calibration
from ctxbudget.filters import filter_for
from ctxbudget.policy import PolicyStore
from tests.unit.conformal_batches import batch, simple_calibration


def test_a_policy_without_a_calibration_filters_nothing(store: PolicyStore) -> None:
    """The shipped policy names no calibration file and sets no alpha: no filter at all; an
    alpha with no file is refused."""
    policy, _rules = store.get("default@1")
    assert policy.calibration is None and filter_for(policy, Path("unused")) is None
    cls = next(iter(policy.classes))
    with_alpha = policy.model_copy(
        update={
            "classes": {
                **policy.classes,
                cls: policy.classes[cls].model_copy(update={"alpha": 0.5}),
            }
        }
    )
    with pytest.raises(CalibrationError, match="names no calibration"):
        filter_for(with_alpha, Path("unused"))


def test_only_the_classes_with_an_alpha_are_filtered(store: PolicyStore, tmp_path: Path) -> None:
    """A class with an alpha keeps what passes its threshold and states its coverage; any other
    class keeps every candidate and states none."""
    save_calibration(simple_calibration(), tmp_path / "cal.json")
    policy, _rules = store.get("default@1")
    filtered, other = sorted(policy.classes)[:2]
    rules = policy.classes[filtered].model_copy(update={"alpha": 0.5})
    policy = policy.model_copy(
        update={"calibration": "cal.json", "classes": {**policy.classes, filtered: rules}}
    )
    pf = filter_for(policy, tmp_path)
    assert pf is not None
    assert pf.applies_to(filtered) and not pf.applies_to(other)
    assert pf.coverage(filtered) is not None and pf.coverage(other) is None
    b = batch("t", [9.0, -50.0], [0])
    bound = pf.bind(b)
    strong, weak = b.candidates
    assert [bound.keep(c, filtered) for c in (strong, weak)] == [True, False]
    assert [bound.keep(c, other) for c in (strong, weak)] == [True, True]
