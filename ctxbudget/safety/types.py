"""What the rules and the signals read of a passage and write to a verdict, as protocols: they
depend on these, the gate implements them (its normalised text and ``Verdict``), and the
imports of the safety modules run one way."""

from __future__ import annotations

from typing import Protocol


class PassageText(Protocol):
    """One normalised passage as the rule gates and the decoders read it."""

    #: The normalised text with its case kept (the decoders and the URL check read it).
    cased: str
    #: The fully normalised text the rules are searched in.
    t: str
    #: ``t`` as ASCII bytes, "?" for each other character.
    t_bytes: bytes
    #: Whether ``t`` is ASCII.
    ascii: bool
    #: The words of ``t`` that some check looks for.
    words: frozenset[str]
    #: The decoded payloads, once worked out (None before).
    decoded: list[str] | None
    #: Those of them that base64, base32 or hex decoding gave (set with ``decoded``).
    exact: list[str] | None


class FindingSink(Protocol):
    """Where a check adds the weight of a finding and the rule that found it."""

    def add(self, finding: str, weight: float, rule: str) -> None:
        """Add ``weight`` to ``finding`` and record ``rule``."""
