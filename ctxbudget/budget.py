"""The budget ledger: every line item counted with the model's tokenizer.

evidence budget = min(ceiling, input_limit - instructions - conversation - answer reserve
- safety margin), never below zero. The answer reserve is decided first, from the answer
contract: an explicit ``reserve_tokens`` wins, else the policy's value for the contract kind.
"""

from __future__ import annotations

from collections.abc import Sequence

from ctxbudget.policy import ClassPolicy, Policy
from ctxbudget.schemas import BudgetLedger, CandidateBatch, Turn
from ctxbudget.tokens import TokenCounter

#: Chat formats add a few tokens per message (role markers, separators).
TURN_OVERHEAD_TOKENS = 4


def kept_conversation(turns: Sequence[Turn], counter: TokenCounter, cap: int) -> tuple[int, int]:
    """Keep the newest turns that fit in ``cap`` tokens, as one contiguous tail.

    Returns (tokens, number of turns kept). Blank turns cost nothing and are skipped.
    """
    used = 0
    kept = 0
    for turn in reversed(turns):
        if not turn.text.strip():
            continue
        cost = counter.count(turn.text) + TURN_OVERHEAD_TOKENS
        if used + cost > cap:
            break
        used += cost
        kept += 1
    return used, kept


def instruction_tokens(batch: CandidateBatch, counter: TokenCounter) -> int:
    """Tokens of the system instructions: ``instructions.tokens`` when the sender states it, else
    the count of their text (0 without text)."""
    ins = batch.instructions
    if ins.tokens is not None:
        return ins.tokens
    return counter.count(ins.text) if ins.text else 0


def build_ledger(
    batch: CandidateBatch, policy: Policy, rules: ClassPolicy, counter: TokenCounter
) -> tuple[BudgetLedger, int]:
    """The ledger for ``batch`` and the number of conversation turns kept."""
    contract = batch.answer_contract
    reserve = (
        contract.reserve_tokens
        if contract.reserve_tokens is not None
        else policy.reserve_for(contract.kind)
    )
    instructions = instruction_tokens(batch, counter)
    conversation, kept = kept_conversation(batch.conversation, counter, policy.conversation_cap)
    available = (
        batch.model.input_limit - instructions - conversation - reserve - policy.safety_margin
    )
    ledger = BudgetLedger(
        input_limit=batch.model.input_limit,
        instructions=instructions,
        conversation=conversation,
        answer_reserve=reserve,
        safety_margin=policy.safety_margin,
        ceiling=rules.ceiling,
        evidence_budget=max(0, min(rules.ceiling, available)),
    )
    return ledger, kept
