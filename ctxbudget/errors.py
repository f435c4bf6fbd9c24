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


class LimitError(InputError):
    """A batch (or a stage's output) is over a size or work limit; the message names it.

    ``limit`` is the name of the limit (the setting that raises it, or the topic config),
    ``size`` what was found and ``allowed`` the limit's value, in the limit's unit.
    """

    def __init__(self, message: str, *, limit: str, size: int, allowed: int) -> None:
        super().__init__(message)
        self.limit = limit
        self.size = size
        self.allowed = allowed


class KafkaEdgeError(CtxBudgetError):
    """Kafka, the broker or the topics are not as the command needs them (the edge's root)."""


def one_line_text(text: str) -> str:
    """``text`` on one line: every run of whitespace (line breaks included) one space."""
    return " ".join(text.split())


def one_line(e: BaseException, limit: int = 500) -> str:
    """An error as one bounded line; the type is named unless it is one of ours."""
    try:
        text = str(e)
    except Exception:
        text = ""
    name = type(e).__name__
    if not isinstance(e, CtxBudgetError) and not text.startswith(name):
        text = f"{name}: {text}" if text else name
    text = one_line_text(text)
    return text if len(text) <= limit else text[: limit - 3] + "..."
