"""The error hierarchy: one root, so callers can catch everything ctxbudget raises."""

from __future__ import annotations


class CtxBudgetError(Exception):
    """Root of every error ctxbudget raises on purpose."""


class InputError(CtxBudgetError):
    """A message or batch is invalid; it goes to the dead letters, the run goes on."""


class TokenizerError(InputError):
    """The batch names a tokenizer that cannot be loaded on this machine."""


class ConfigError(CtxBudgetError):
    """A policy, routing, topic or calibration file is invalid; raised at load time."""
