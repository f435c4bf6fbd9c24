"""The budget ledger (ctxbudget.budget): every line item subtracted, the conversation kept
newest first, never below zero."""

from __future__ import annotations

from ctxbudget.budget import TURN_OVERHEAD_TOKENS, build_ledger, kept_conversation
from ctxbudget.policy import PolicyStore
from ctxbudget.schemas import Turn
from ctxbudget.testing import batch
from ctxbudget.tokens import ApproximateCounter


def test_conversation_keeps_the_newest_turns_within_the_cap() -> None:
    """A long conversation keeps its tail; the current question side is preserved."""
    turns = [
        Turn(role="user", text="word " * 100),
        Turn(role="assistant", text="short answer"),
        Turn(role="user", text="and now?"),
    ]
    counter = ApproximateCounter()
    used, kept = kept_conversation(turns, counter, cap=20)
    assert kept == 2
    tail = counter.count("short answer") + counter.count("and now?")
    assert used == tail + 2 * TURN_OVERHEAD_TOKENS


def test_the_ledger_subtracts_every_line_item(store: PolicyStore) -> None:
    """evidence = input_limit - instructions - conversation - reserve - margin, capped."""
    policy, _ = store.get("default@1")
    rules = policy.classes["point_lookup"]
    b = batch(
        [],
        input_limit=3000,
        instructions={"text": None, "tokens": 200},
        conversation=({"role": "user", "text": "hi there"},),
    )
    ledger, kept = build_ledger(b, policy, rules, ApproximateCounter())
    conv = ApproximateCounter().count("hi there") + TURN_OVERHEAD_TOKENS
    assert kept == 1
    assert ledger.answer_reserve == policy.reserve_for("short_fact") == 300
    expected = 3000 - 200 - conv - 300 - policy.safety_margin
    assert ledger.evidence_budget == min(rules.ceiling, expected)


def test_an_explicit_reserve_wins_and_the_ceiling_caps(store: PolicyStore) -> None:
    """reserve_tokens on the contract beats the policy; the ceiling caps a large window."""
    policy, _ = store.get("default@1")
    rules = policy.classes["point_lookup"]
    ledger, _ = build_ledger(
        batch([], input_limit=128000, reserve_tokens=1234), policy, rules, ApproximateCounter()
    )
    assert ledger.answer_reserve == 1234
    assert ledger.evidence_budget == rules.ceiling


def test_a_budget_below_zero_is_clamped_to_zero(store: PolicyStore) -> None:
    """No negative budgets: the pack will say insufficient_budget."""
    policy, _ = store.get("default@1")
    ledger, _ = build_ledger(
        batch([], input_limit=100), policy, policy.classes["how_to"], ApproximateCounter()
    )
    assert ledger.evidence_budget == 0
