"""The safety gate: retrieved text is evidence, never instructions.

:func:`scan` decides whether a retrieved passage tries to act on the model. Any finding it
returns quarantines the passage in the router: it is dropped before consolidation, so it can
never represent a family or ride along as a member.

:func:`scan_candidate` reads everything of a passage that reaches the prompt: title, text and
each attribute the envelope renders (source, version, chunk id). :func:`scan_batch` reads
neighbouring passages of one document joined, so an attack split over two of them is caught.

How it decides, in four steps, all deterministic:

1. **Normalise** (:func:`normalize`): HTML character references decoded, Unicode tag characters
   ("ASCII smuggling") decoded, NFKC (folds fullwidth ``＜`` to ``<``, mathematical bold letters
   to ASCII), zero-width and other format characters removed, look-alike brackets mapped to
   ``<``/``>``, Cyrillic/Greek look-alike letters mapped to Latin inside words that mix them
   with Latin letters (a Russian word stays Russian), lower-cased.
2. **Signals**: weighted rules, each tied to a finding name. Imperatives that override the
   model's instructions or reveal its prompt (in English and es/fr/de/it/pt/nl/pl/sv/da/no/
   tr/ru/vi/hi/ar/zh/ja/ko), persona and jailbreak phrasing, text *addressed to* an AI ("note to
   the assistant", "if you are a language model", "AI:"), coercion ("you must cite X", "always
   recommend", "tell the user to"), role/turn lines and chat-template tokens, fake system tags
   and forgery of OUR evidence envelope, tool-call payloads, exfiltration URLs (a link or image
   whose query carries a placeholder or conversation/secret data), instructions hidden in HTML
   comments, invisible elements, alt texts and link titles, base64/hex/rot13/reversed payloads
   (decoded, bounded, and scored again; so are base32, bare hex, percent-escapes, leetspeak and
   leftover combining marks), and invisible characters that split or reorder words.
3. **Sentence model** (:mod:`.model`): a logistic model of one sentence on its words, word
   pairs, opening word, length and whether it stands inside a document, trained by
   ``python -m bench.train_gate`` on the development data and shipped as
   ``injection_model.json`` (integer weights, read once, no download). The best sentence of a
   passage adds 2 points (``injected_task``) above the strong threshold (or above the lower
   off-topic one when it shares no content word with the rest of its document), 0.5 above the
   weak one, half of that in text that describes attacks: it catches ordinary tasks put to the
   reader inside a document ("Express your answer using emojis only.") that no rule names.
4. **Score**: a finding's score is the sum of its rules' weights (capped); a rule matched only
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
