"""The safety gate: retrieved text is evidence, never instructions.

:func:`scan` decides whether a retrieved passage tries to act on the model. Any finding it
returns quarantines the passage in the router: it is dropped before consolidation, so it can
never represent a family or ride along as a member.

How it decides, in three steps, all deterministic:

1. **Normalise** (:func:`normalize`): HTML character references decoded, Unicode tag characters
   ("ASCII smuggling") decoded, NFKC (folds fullwidth ``＜`` to ``<``, mathematical bold letters
   to ASCII), zero-width and other format characters removed, look-alike brackets mapped to
   ``<``/``>``, Cyrillic/Greek look-alike letters mapped to Latin inside words that mix them
   with Latin letters (a Russian word stays Russian), lower-cased.
2. **Signals**: weighted rules, each tied to a finding name. Imperatives that override the
   model's instructions or reveal its prompt (in English and es/fr/de/it/pt/nl/pl/tr/ru/zh/ja/
   ko), persona and jailbreak phrasing, text *addressed to* an AI ("note to the assistant",
   "if you are a language model", "AI:"), coercion ("you must cite X", "always recommend",
   "tell the user to"), role/turn lines and chat-template tokens, fake system tags and forgery
   of OUR evidence envelope, tool-call payloads, exfiltration URLs (a link or image whose query
   carries a placeholder or conversation/secret data), instructions hidden in HTML comments,
   invisible elements, alt texts and link titles, base64/hex/rot13/reversed payloads (decoded,
   bounded, and scored again), and invisible characters that split or reorder words.
3. **Score**: a finding's score is the sum of its rules' weights (capped); a rule matched only
   inside quotation marks counts half; structural signals (chat tokens, tool JSON, fake tags)
   count half in text that reads as technical documentation (templates, placeholders,
   schemas); text that *describes* attacks ("an attacker", "for example", "prompt
   injection", ...) loses up to 2 points. The passage is quarantined when the total reaches
   :data:`THRESHOLD`; :func:`scan` then returns the names of the findings that contributed, in
   the fixed order of :data:`FINDINGS`. :func:`explain` shows the arithmetic.

Every pattern is linear-time on adversarial input: no unbounded quantifier sits next to an
overlapping one (runs of spaces are ``[ \\t]{0,n}``, gaps are ``[^.\\n]{0,n}``, line starts are
checked outside the regex), and decoding work is bounded (a few runs, a few KB). Each rule has a
gate, words or substrings one of which every match contains: a passage only runs the regexes
whose gate words it holds (a speed-up only; ``CHECKS`` evaluates without the gates).
"""

from __future__ import annotations

from .gate import (
    CHECKS,
    FINDINGS,
    THRESHOLD,
    Verdict,
    explain,
    passage_text,
    scan,
    scan_batch,
    scan_candidate,
)
from .normalization import normalize

__all__ = [
    "CHECKS",
    "FINDINGS",
    "THRESHOLD",
    "Verdict",
    "explain",
    "normalize",
    "passage_text",
    "scan",
    "scan_batch",
    "scan_candidate",
]
