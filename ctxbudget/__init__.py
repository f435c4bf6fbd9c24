"""ctxbudget: pack retrieved evidence for LLM prompts under a hard token budget.

The public API, importable from here::

    from ctxbudget import Packer

    packer = Packer()  # the shipped default@1 policy
    pack = packer.pack("Who wrote it?", ["passage one", "passage two"], input_limit=4096)
    print(pack.rendered)

:class:`Packer` (:mod:`ctxbudget.api`), the wire models (:mod:`ctxbudget.schemas`) and the
errors (:mod:`ctxbudget.errors`, all under :class:`CtxBudgetError`). The names are loaded on
first use, so ``import ctxbudget`` stays cheap for the command line and the workers.
"""

from __future__ import annotations

import importlib

from ctxbudget.errors import (
    ConfigError,
    CtxBudgetError,
    InputError,
    LimitError,
    TokenizerError,
)

__version__ = "0.1.0"

#: ``typing.TYPE_CHECKING`` without importing typing (it would triple the import time).
TYPE_CHECKING = False

#: Each lazily loaded public name and the module that defines it.
_LAZY: dict[str, str] = {
    "Packer": "ctxbudget.api",
    "ArgumentError": "ctxbudget.api",
    "DEFAULT_TENANT": "ctxbudget.api",
    "InputLimits": "ctxbudget.limits",
    "PolicyStore": "ctxbudget.policy",
    "encode": "ctxbudget.codec",
    **dict.fromkeys(
        (
            "AnswerContract",
            "BudgetLedger",
            "Candidate",
            "CandidateBatch",
            "Coverage",
            "DeadLetter",
            "EvidenceItem",
            "EvidenceSpan",
            "Instructions",
            "Labels",
            "ModelSpec",
            "Pack",
            "PolicyRef",
            "Principal",
            "Query",
            "Span",
            "TraceEvent",
            "Turn",
            "Withheld",
        ),
        "ctxbudget.schemas",
    ),
}

__all__ = [
    "ConfigError",
    "CtxBudgetError",
    "InputError",
    "LimitError",
    "TokenizerError",
    "__version__",
    *sorted(_LAZY),
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ctxbudget' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


if TYPE_CHECKING:
    from typing import Any

    from ctxbudget.api import DEFAULT_TENANT as DEFAULT_TENANT
    from ctxbudget.api import ArgumentError as ArgumentError
    from ctxbudget.api import Packer as Packer
    from ctxbudget.codec import encode as encode
    from ctxbudget.limits import InputLimits as InputLimits
    from ctxbudget.policy import PolicyStore as PolicyStore
    from ctxbudget.schemas import AnswerContract as AnswerContract
    from ctxbudget.schemas import BudgetLedger as BudgetLedger
    from ctxbudget.schemas import Candidate as Candidate
    from ctxbudget.schemas import CandidateBatch as CandidateBatch
    from ctxbudget.schemas import Coverage as Coverage
    from ctxbudget.schemas import DeadLetter as DeadLetter
    from ctxbudget.schemas import EvidenceItem as EvidenceItem
    from ctxbudget.schemas import EvidenceSpan as EvidenceSpan
    from ctxbudget.schemas import Instructions as Instructions
    from ctxbudget.schemas import Labels as Labels
    from ctxbudget.schemas import ModelSpec as ModelSpec
    from ctxbudget.schemas import Pack as Pack
    from ctxbudget.schemas import PolicyRef as PolicyRef
    from ctxbudget.schemas import Principal as Principal
    from ctxbudget.schemas import Query as Query
    from ctxbudget.schemas import Span as Span
    from ctxbudget.schemas import TraceEvent as TraceEvent
    from ctxbudget.schemas import Turn as Turn
    from ctxbudget.schemas import Withheld as Withheld
