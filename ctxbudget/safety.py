"""The safety gate: retrieved text is evidence, never instructions.

:func:`scan` looks for the signs of a passage that tries to act on the model: instruction
phrases aimed at the assistant, chat-role lines, tool-call payloads, hidden or direction-
changing characters, and markup that imitates the evidence envelope or chat templates.
Any finding quarantines the passage: it is dropped before consolidation, so it can never
represent a family or ride along as a member.
"""

from __future__ import annotations

import re

_INSTRUCTION = re.compile(
    r"\b(ignore|disregard|forget|override|bypass)\b[^.\n]{0,40}\b(previous|prior|above|earlier|"
    r"all|any|your|the|these)\b[^.\n]{0,30}\b(instructions?|prompts?|rules|directions|"
    r"guidelines|context|messages?)\b"
    r"|\byou are now\b|\bfrom now on,? you\b|\bnew instructions?\s*:"
    r"|\b(reveal|print|output|repeat|leak)\b[^.\n]{0,30}\b(system prompt|hidden prompt|"
    r"instructions|api key|password|secret)s?\b"
    r"|\bdo not (tell|inform|mention (this )?to) the user\b"
    r"|\b(act|behave|respond) as (an?|the) (unrestricted|jailbroken|different)\b"
    r"|\bpretend (to be|you are)\b",
    re.IGNORECASE,
)
_ROLE_LINE = re.compile(
    r"(?m)^\s*(#+\s*)?(system|assistant|developer)\s*(message|prompt)?\s*:\s*\S"
    r"|<\|(im_start|im_end|system|user|assistant|endoftext|start_header_id|eot_id)\|?>"
    r"|\[/?INST\]|<<SYS>>|^\s*###\s*(instruction|system)\b",
    re.IGNORECASE,
)
_TOOL_CALL = re.compile(
    r"\"(tool_calls?|function_call|tool_use)\"\s*:"
    r"|<\s*/?\s*(tool_call|function_call|tool_use|invoke|function_calls)\b"
    r"|\{\s*\"name\"\s*:\s*\"[^\"]+\"\s*,\s*\"(arguments|parameters|input)\"\s*:",
    re.IGNORECASE,
)
_MARKUP = re.compile(
    r"<\s*/?\s*(evidence|evidence_set|system|instructions?|context|document|documents|"
    r"source|sources|prompt|untrusted)\b[^>]*>",
    re.IGNORECASE,
)
# Zero-width, bidirectional controls, tag characters, and C0/C1 controls except \t \n \r.
_HIDDEN = re.compile(
    "[\u200b-\u200f\u2028\u2029\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff\ufff9-\ufffb"
    "\U000e0000-\U000e007f\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]"
)

CHECKS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("instruction", _INSTRUCTION),
    ("role_text", _ROLE_LINE),
    ("tool_call", _TOOL_CALL),
    ("hidden_characters", _HIDDEN),
    ("envelope_markup", _MARKUP),
)


#: For each case-insensitive check, lower-case literals one of which every match contains.
#: A text whose folded form holds none of them cannot match, so the regex (the costly part:
#: ``re.IGNORECASE`` alternations run at every position) is skipped. Only a speed-up: the
#: findings are exactly those of the regexes.
_NEEDLES: dict[str, tuple[str, ...]] = {
    "instruction": (
        "ignore",
        "disregard",
        "forget",
        "override",
        "bypass",
        "you are now",
        "from now on",
        "new instruction",
        "reveal",
        "print",
        "output",
        "repeat",
        "leak",
        "do not ",
        "act as ",
        "behave as ",
        "respond as ",
        "pretend ",
    ),
    "role_text": ("system", "assistant", "developer", "<|", "inst]", "<<sys>>", "###"),
    "tool_call": ("tool_call", "function_call", "tool_use", "invoke", '"name"'),
}
#: The only non-ASCII characters ``re.IGNORECASE`` matches to an ASCII letter (checked against
#: every code point in the tests): fold them before lower-casing so no needle is missed.
_FOLD = (("\u0130", "i"), ("\u0131", "i"), ("\u017f", "s"), ("\u212a", "k"))


def _folded(text: str) -> str:
    if not text.isascii():
        for char, ascii_letter in _FOLD:
            if char in text:
                text = text.replace(char, ascii_letter)
    return text.lower()


def scan(text: str) -> tuple[str, ...]:
    """The names of the checks that ``text`` trips, in a fixed order; empty when clean."""
    folded = _folded(text)
    found = []
    for name, rx in CHECKS:
        needles = _NEEDLES.get(name)
        if needles is not None and not any(map(folded.__contains__, needles)):
            continue
        if rx.search(text):
            found.append(name)
    return tuple(found)


def scan_candidate(title: str | None, text: str) -> tuple[str, ...]:
    """Scan a passage's title and text together (either can carry an injection)."""
    return scan(text if not title else f"{title}\n{text}")
