"""The input limits from ``CTXBUDGET_MAX_*`` variables: the one place they are read.

``ctxbudget pack``, the Python API's callers and the Kafka workers hold every batch to the same
:class:`~ctxbudget.limits.InputLimits`; this class reads them from the environment (or a
``.env`` file) and makes that object. Each limit has one variable and one carrier: the
message cap, ``CTXBUDGET_MAX_MESSAGE_BYTES``, lives here too (the workers also size their
Kafka clients from it), never in the Kafka settings. The core never builds this class; the
command line and the Kafka edge do, and hand the core the :class:`InputLimits` it makes.
"""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from ctxbudget.limits import (
    DEFAULT_MAX_CANDIDATES,
    DEFAULT_MAX_JSON_DEPTH,
    DEFAULT_MAX_PAIR_CHECKS,
    DEFAULT_MAX_TEXT_BYTES,
    MAX_MESSAGE_BYTES,
    InputLimits,
)

__all__ = ["LimitSettings"]


class LimitSettings(BaseSettings):
    """The input limits, from CTXBUDGET_* variables (or a .env file)."""

    model_config = SettingsConfigDict(
        env_prefix="CTXBUDGET_", env_file=".env", frozen=True, extra="ignore"
    )

    max_message_bytes: int = Field(default=MAX_MESSAGE_BYTES, gt=0)
    max_candidates: int = Field(default=DEFAULT_MAX_CANDIDATES, ge=1)
    max_text_bytes: int = Field(default=DEFAULT_MAX_TEXT_BYTES, ge=1)
    max_json_depth: int = Field(default=DEFAULT_MAX_JSON_DEPTH, ge=4, le=200)
    max_pair_checks: int = Field(default=DEFAULT_MAX_PAIR_CHECKS, ge=1)

    def input_limits(self, cap: int | None = None) -> InputLimits:
        """The limits a batch is held to; ``cap``, when given (the largest record the batch's
        topic takes), lowers the message limit to it."""
        size = self.max_message_bytes if cap is None else min(self.max_message_bytes, cap)
        return InputLimits(
            max_message_bytes=size,
            max_candidates=self.max_candidates,
            max_text_bytes=self.max_text_bytes,
            max_json_depth=self.max_json_depth,
            max_pair_checks=self.max_pair_checks,
        )
