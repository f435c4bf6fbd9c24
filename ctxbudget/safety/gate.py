"""Scoring: a passage's findings, their weights and the frame penalty, and the verdict
(:func:`scan`, :func:`explain`, :func:`scan_candidate`)."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field

from ctxbudget.native import NATIVE, RuleGates

from .addressee import (
    ASCII_TASK,
    CONDITIONED_WEIGHT,
    addressed_labels,
    conditioned_orders,
    may_hold_order,
)
from .addressee import CUE_WORDS as ADDRESSEE_WORDS
from .model import shipped_model
from .normalization import prepare
from .rules import (
    BY_NEEDLE,
    BY_NONASCII,
    CLAUSE_CHARS,
    CLAUSE_WORDS,
    CODE_LINE,
    DOC_BRACES,
    DOC_PHRASE_WORDS,
    DOC_PHRASES,
    DOC_WORDS,
    FRAME,
    MD_LINK_BEFORE,
    OPENED_BY,
    OTHER_SCRIPTS,
    QUOTED,
    RULE_WORDS,
    RULES,
    SECOND,
    SKIPPABLE,
    VALUE_BEFORE,
    Rule,
    ascii_words,
    candidate_rules,
    frame_weight,
)
from .signals import (
    HINT_WORDS,
    MAX_HIDDEN_CHARS,
    RAW_ANY,
    decoded_payloads,
    encoded_prose,
    first_matches,
    hidden_segments,
    raw_checks,
    url_signal,
)

#: Total score at or above which a passage is quarantined.
THRESHOLD = 2.0

#: Finding names, in the order :func:`scan` reports them.
FINDINGS: tuple[str, ...] = (
    "instruction",
    "role_text",
    "tool_call",
    "hidden_characters",
    "envelope_markup",
    "exfiltration",
    "coercion",
    "hidden_text",
    "encoded_payload",
    "addressed_to_model",
    "homoglyphs",
    "injected_task",
    "split_attack",
)
#: Cap on one finding's score (many phrasings of one idea are still one idea).
_CAP = 4.0
#: Most the "describes an attack" frame can take away.
_MAX_FRAME_PENALTY = 2.0
#: A sum of finding scores that quarantines a passage whatever its frame penalty.
_SETTLED = THRESHOLD + _MAX_FRAME_PENALTY


# ---------------------------------------------------------------------------------------------
# Scoring
# ---------------------------------------------------------------------------------------------


@dataclass(slots=True)
class Verdict:
    """Why :func:`scan` said what it said: per-finding scores, the rules that fired, the
    frame penalty and the total (quarantine when ``total >= THRESHOLD``)."""

    scores: dict[str, float] = field(default_factory=dict)
    rules: list[str] = field(default_factory=list)
    frame_penalty: float = 0.0
    documentation: bool = False

    @property
    def total(self) -> float:
        """The sum of the finding scores, less the frame penalty."""
        return sum(self.scores.values()) - self.frame_penalty

    @property
    def quarantined(self) -> bool:
        """Whether ``total`` reaches :data:`THRESHOLD`."""
        return self.total >= THRESHOLD

    @property
    def findings(self) -> tuple[str, ...]:
        """The findings that scored, in :data:`FINDINGS` order; empty unless quarantined."""
        if not self.scores or not self.quarantined:
            return ()
        return tuple(name for name in FINDINGS if self.scores.get(name, 0.0) > 0.0)

    def add(self, finding: str, weight: float, rule: str) -> None:
        """Add ``weight`` to ``finding`` (each finding's score is capped) and record ``rule``; a
        weight of zero or less is ignored."""
        if weight <= 0.0:
            return
        self.scores[finding] = min(_CAP, self.scores.get(finding, 0.0) + weight)
        self.rules.append(f"{rule}:{weight:g}")


#: Every word a check looks for among the words of a passage: rule gates, the documentation
#: test, decoding hints. A word-set test ``S.isdisjoint(x.words)`` is exact for any ``S``
#: within this set (a test checks that each such ``S`` is).
_CUE_WORDS = RULE_WORDS | HINT_WORDS | ADDRESSEE_WORDS


#: The compiled twin of the rule gates (``native/src/gate.rs``): a passage's cue words and
#: :func:`~.rules.candidate_rules` in one pass, when the extension has it.
_NATIVE_GATES: RuleGates | None = (
    _make(
        cue_words=sorted(_CUE_WORDS),
        opened_by={w: [i for i, _w2, _req in opened] for w, opened in OPENED_BY.items()},
        needles=list(BY_NEEDLE.items()),
        nonascii=list(BY_NONASCII.items()),
        second=[(sorted(words2), list(requires)) for words2, requires in SECOND],
    )
    if (_make := getattr(NATIVE, "RuleGates", None))
    else None
)


def _read_gates(t: str, ascii: bool) -> tuple[frozenset[str], list[int]] | None:
    """The cue words of normalised text ``t`` and its candidate rules, compiled; None on the
    pure-Python path (and for text with lone surrogates, which the extension cannot read)."""
    if _NATIVE_GATES is None:
        return None
    try:
        return _NATIVE_GATES.read(t, not ascii and OTHER_SCRIPTS.search(t) is not None)
    except UnicodeEncodeError:
        return None


#: What every line :data:`~.rules.CODE_LINE` matches holds (a quick test before the regex).
_CODE_CUES = ("=", "def ", "class ", "import ", "assert ", "@")


class _Text:
    """One normalised passage and what the rules need to know about it (quoted stretches and
    the documentation test computed when first asked for)."""

    __slots__ = (
        "_candidates",
        "_code",
        "_doc",
        "_padded",
        "_spans",
        "ascii",
        "cased",
        "decoded",
        "exact",
        "lookalikes",
        "t",
        "t_bytes",
        "words",
    )

    def __init__(self, raw: str) -> None:
        self.cased, self.t, self.lookalikes = prepare(raw)
        self.ascii = self.t.isascii()
        #: ``t`` as ASCII bytes, "?" for each other character (the word gates and the base64
        #: test read it).
        self.t_bytes = self.t.encode("ascii", "replace")
        #: The words of the text that some check looks for (:data:`_CUE_WORDS`): a small set,
        #: cheaper to build than the set of all its words (words as :func:`~.rules._word_list`
        #: splits them).
        gates = _read_gates(self.t, self.ascii)
        #: The rules whose gates are open (:func:`~.rules.candidate_rules`), once known.
        self._candidates: list[int] | None = None
        if gates is None:
            self.words = _CUE_WORDS.intersection(ascii_words(self.t_bytes))
        else:
            self.words, self._candidates = gates
        self._spans: tuple[list[int], list[int]] | None = None
        self._doc: bool | None = None
        self._code: bool | None = None
        self._padded: str | None = None
        #: The decoded payloads (:func:`~.signals.decoded_payloads`), once worked out, and
        #: those base64, base32 or hex decoding gave.
        self.decoded: list[str] | None = None
        self.exact: list[str] | None = None

    @property
    def candidates(self) -> list[int]:
        """:func:`~.rules.candidate_rules` of this text."""
        if self._candidates is None:
            self._candidates = candidate_rules(self)
        return self._candidates

    @property
    def padded(self) -> str:
        """``t`` with a space put before it, where the rules' ``ascii_rx`` are searched."""
        if self._padded is None:
            self._padded = " " + self.t
        return self._padded

    @property
    def spans(self) -> tuple[list[int], list[int]]:
        """Start and end offsets of quoted stretches (“…”, «…», "…" after a space, ...)."""
        if self._spans is None:
            starts: list[int] = []
            ends: list[int] = []
            t = self.t
            if '"' in t or "'" in t or not self.ascii:
                links = "](" in t
                for m in QUOTED.finditer(t):
                    start = m.start()
                    if (
                        links
                        and t[start] == '"'
                        and MD_LINK_BEFORE.search(t, max(0, start - 520), start)
                    ):
                        continue  # a markdown link title: hidden text, not a quotation
                    if t[start] == '"' and VALUE_BEFORE.search(t, max(0, start - 48), start):
                        continue  # a JSON or YAML value: data of the document, not a quotation
                    starts.append(start)
                    ends.append(m.end())
            self._spans = (starts, ends)
        return self._spans

    @property
    def code(self) -> bool:
        """Reads as source code: two lines or more that open as statements do (``def``,
        ``import``, ``assert``, a decorator, an assignment of a literal)."""
        if self._code is None:
            t = self.t
            self._code = (
                "\n" in t
                and any(c in t for c in _CODE_CUES)
                and len(first_matches(CODE_LINE.finditer(t), 2)) >= 2
            )
        return self._code

    @property
    def documentation(self) -> bool:
        """Reads as technical documentation: templates, placeholders, schemas, examples."""
        if self._doc is None:
            t = self.t
            self._doc = (
                not DOC_WORDS.isdisjoint(self.words)
                or ("{" in t and bool(DOC_BRACES.search(t)))
                or (not DOC_PHRASE_WORDS.isdisjoint(self.words) and bool(DOC_PHRASES.search(t)))
            )
        return self._doc


def _line_start(t: str, pos: int) -> bool:
    """Only spaces, tabs and markdown/quote markers ("> ", "**", "# ", "//") precede ``pos``
    on its line (at most 12 of them)."""
    i = pos
    while i > 0 and t[i - 1] != "\n":
        if pos - i >= 12 or t[i - 1] not in " \t>*#/":
            return False
        i -= 1
    return True


def _clause_start(t: str, pos: int) -> bool:
    i = pos
    while i > 0 and pos - i < 3 and t[i - 1] in " \t":
        i -= 1
    if i == 0 or t[i - 1] in CLAUSE_CHARS:
        return True
    if i == pos:  # a softener must stand apart: "please ignore", not "pleaseignore"
        return False
    k = i
    while k > 0 and i - k < 12 and "a" <= t[k - 1] <= "z":
        k -= 1
    return t[k:i] in CLAUSE_WORDS


def _sentence_case_start(x: _Text, pos: int) -> bool:
    """A capital letter after a space, with a lower-case word after it ("Deutschland Ignore all
    previous orders"): a sentence that begins without the full stop before it. "Ignore
    Previous Instructions", a title in title case, is not one."""
    cased = x.cased
    if pos == 0 or len(cased) != len(x.t) or not cased[pos].isupper() or cased[pos - 1] != " ":
        return False
    end = cased.find(" ", pos)
    return 0 < end < len(cased) - 1 and cased[end + 1].islower()


#: Matches of one rule looked at (later ones are ignored): searches resume after each match, so
#: the work stays linear, and decoys (quoted or mid-clause matches) cannot exhaust it cheaply.
_MAX_MATCHES = 500


def _rule_weight(rule: Rule, x: _Text, *, quotes: bool = True) -> float:
    """The rule's weight if it matches outside quotation marks, half of it if every match
    is quoted (in code, where quoted text is a string literal: nothing for an order in words,
    a quarter for markup), 0 if it does not match (at most :data:`_MAX_MATCHES` matches are
    looked at).
    In ASCII text the rule's ``ascii_rx`` is searched when it has one (same offsets, found
    faster)."""
    t = x.t
    rx, subject = rule.rx, t
    if rule.ascii_rx is not None and x.ascii:
        rx, subject = rule.ascii_rx, x.padded
    seen_quoted = False
    pos = 0
    for _ in range(_MAX_MATCHES):
        m = rx.search(subject, pos)
        if m is None:
            break
        start = m.start()
        pos = start + 1
        if rule.clause and not (_clause_start(t, start) or _sentence_case_start(x, start)):
            continue
        if rule.line_start and not _line_start(t, start):
            continue
        if not (quotes and rule.quotable) or not _inside(x.spans, start):
            return rule.weight
        seen_quoted = True
    if not seen_quoted:
        return 0.0
    if x.code:  # a string literal of code is data the program holds (test cases, fixtures)
        return 0.0 if rule.directive else rule.weight / 4
    return rule.weight / 2


def _inside(spans: tuple[list[int], list[int]], pos: int) -> bool:
    i = bisect.bisect_right(spans[0], pos) - 1
    return i >= 0 and pos < spans[1][i]


#: Every rule's index, for the unfiltered evaluation.
_ALL_RULES = tuple(range(len(RULES)))


def _score(
    raw: str,
    *,
    fast: bool,
    depth: int,
    complete: bool = True,
    x: _Text | None = None,
    candidates: Sequence[int] | None = None,
) -> Verdict:
    """The verdict on ``raw``: every rule's weight (only the rules whose gates are open when
    ``fast``), the other signals, and the frame penalty.

    With ``complete`` false, the work stops short once the quarantine is settled (the scores
    sum to :data:`_SETTLED`): a rule whose finding has already scored is skipped when that can
    change no other finding (``SKIPPABLE``), and the frame penalty is not computed. The
    findings are the same either way; scores, rules and penalty are whole only when complete.
    ``x``, when given, is ``_Text(raw)`` already made, and ``candidates`` the rules to run
    when they are already known (its :func:`~.rules.candidate_rules` when ``fast``).
    """
    v = Verdict()
    raw_checks(raw, v)
    if x is None:
        x = _Text(raw)
    if x.lookalikes:
        v.add("homoglyphs", 1.0, "mixed_script_words")
    scores = v.scores
    settled = not complete and sum(scores.values()) >= _SETTLED
    groups: dict[str, float] = {}
    if candidates is None:
        candidates = x.candidates if fast else _ALL_RULES
    for i in candidates:
        rule = RULES[i]
        if settled and rule.finding in scores and SKIPPABLE[i]:
            continue
        weight = _rule_weight(rule, x)
        if weight and rule.doc and x.documentation:
            weight /= 2
        if weight and rule.group is not None:
            best = groups.get(rule.group, 0.0)
            groups[rule.group] = max(best, weight)
            weight = max(0.0, weight - best)
        v.add(rule.finding, weight, rule.name)
        if weight > 0.0 and not complete:
            settled = sum(scores.values()) >= _SETTLED
    url_weight, url_rule = url_signal(x.cased)
    if url_weight:
        v.add("exfiltration", url_weight, url_rule)
    _addressee_signal(x, v)
    _hidden_text(x, v, fast=fast)
    if depth == 0:
        _encoded(x, v, fast=fast, complete=complete)
    v.documentation = bool(x._doc)
    if scores and v.total >= THRESHOLD and (complete or sum(scores.values()) < _SETTLED):
        v.frame_penalty = min(_MAX_FRAME_PENALTY, frame_weight(x.t))
    _model_signal(x, v, depth=depth)
    return v


#: What prose hidden by base64, base32 or hex adds to what its own rules and model say, and
#: what the model's weak threshold counts for in such prose (twice :data:`_MODEL_WEAK`: the
#: hiding makes a weak sign surer).
_HIDDEN_PROSE = 1.0
_MODEL_WEAK_HIDDEN = 1.0

#: What the sentence model adds when a passage's best sentence reaches its strong threshold
#: (enough alone to quarantine) or its weak one (a tie-breaker for rules that nearly fired).
_MODEL_STRONG = THRESHOLD
_MODEL_WEAK = 0.5


def _model_signal(x: _Text, v: Verdict, *, depth: int = 0) -> None:
    """The sentence model's sign (:mod:`.model`): an instruction put to the reader, strong from
    the model's ``strong`` probability, or from its lower ``offtopic`` one when the sentence is
    off the subject of the document around it (:meth:`~.model.LinearModel.off_topic`). It counts
    half in text that describes attacks (a bag of words cannot tell a quoted attack from one),
    and is added after the frame penalty, which it does not take part in. Decoded payloads
    (``depth`` 1) are left to the rules: rot13 and reversed text "decode" to word salad."""
    if depth:
        return
    model = shipped_model()
    text = x.t
    if ('"' in text or "'" in text) and x.code:
        text = _outside_literals(x)
    p = model.weak_probability(text)
    if p < model.weak:
        return
    weight, how = _MODEL_WEAK, "model"
    if p >= model.strong:
        weight = _MODEL_STRONG
    elif p >= model.offtopic and model.off_topic(text):
        weight, how = _MODEL_STRONG, "model-offtopic"
    if FRAME.search(x.t) and frame_weight(x.t, 1_000) >= 1.0:
        weight /= 2
    v.add("injected_task", weight, f"{how}:{p:.3f}")


def _addressee_signal(x: _Text, v: Verdict) -> None:
    """The two checks of :mod:`.addressee`. A line opening with a label addressed to an AI
    system, the strongest of them: half its weight when every such label is quoted, nothing
    when quoted in code (a string literal is data the program holds). A sentence ordering
    what a summary or answer about this text must claim, unless quoted. Most passages hold no
    colon and, in ASCII text, no task word: both are tested before anything is built."""
    t = x.t
    if ":" in t:
        best, quoted = 0.0, 0.0
        for offset, weight, _label in addressed_labels(t):
            if _inside(x.spans, offset):
                quoted = max(quoted, weight)
            else:
                best = max(best, weight)
        if not best and quoted and not x.code:
            best = quoted / 2
        if best:
            v.add("addressed_to_model", best, "addressed_label")
    if (x.ascii and ASCII_TASK.isdisjoint(x.words)) or not may_hold_order(t, x.words):
        return
    for offset in conditioned_orders(t):
        if not _inside(x.spans, offset):
            v.add("instruction", CONDITIONED_WEIGHT, "conditioned_order")
            break


def _outside_literals(x: _Text) -> str:
    """The text of code with its quoted stretches (string literals) blanked out: what the
    program says, not the data it holds."""
    starts, ends = x.spans
    if not starts:
        return x.t
    t = x.t
    pieces: list[str] = []
    last = 0
    for start, end in zip(starts, ends, strict=True):
        if start < last:
            continue
        pieces += (t[last:start], " ")
        last = end
    pieces.append(t[last:])
    return "".join(pieces)


def _hidden_text(x: _Text, v: Verdict, *, fast: bool) -> None:
    t = x.t
    if "<" not in t and "](" not in t and "]:" not in t:
        return
    hidden = "\n".join(hidden_segments(t))[:MAX_HIDDEN_CHARS]
    if not hidden.strip():
        return
    h = _Text(hidden)
    for i in h.candidates if fast else range(len(RULES)):
        rule = RULES[i]
        if rule.directive and _rule_weight(rule, h, quotes=False):
            v.add("hidden_text", 1.0, f"hidden:{rule.name}")
            return


def _encoded(x: _Text, v: Verdict, *, fast: bool, complete: bool) -> None:
    """A decoded payload the rules quarantine; else prose hidden by base64, base32 or hex
    whose rules and sentence model (read where it was hidden) reach the threshold with
    :data:`_HIDDEN_PROSE` for the hiding: a document has no cause to encode an order to
    its reader, and encoded prose is rare in documents (1 of some 18,000 benign development
    passages, a MIME body)."""
    inners = []
    for decoded in decoded_payloads(x):
        inner = _score(decoded, fast=fast, depth=1, complete=complete)
        if inner.quarantined:
            v.add("encoded_payload", 3.0, "decoded:" + "+".join(inner.findings))
            return
        inners.append((decoded, inner))
    prose = encoded_prose(x)
    if not prose:
        return
    model = shipped_model()
    around = len(x.t.split())
    for decoded, inner in inners:
        if decoded not in prose:
            continue
        p = model.probability_within(_Text(decoded).t, around)
        if p >= model.strong:
            read = _MODEL_STRONG
        elif p >= model.weak:
            read = _MODEL_WEAK_HIDDEN
        else:
            read = 0.0
        said = inner.total + read
        if _HIDDEN_PROSE + said >= THRESHOLD:
            v.add("encoded_payload", THRESHOLD, f"decoded-prose:{said:g}:{p:.3f}")
            return


def explain(text: str) -> Verdict:
    """The full verdict for ``text``: scores, fired rules, penalty, total."""
    return _score(text, fast=True, depth=0)


def scan(text: str) -> tuple[str, ...]:
    """The names of the findings that quarantine ``text``, in :data:`FINDINGS` order; empty
    when the passage is clean (its score stays below :data:`THRESHOLD`)."""
    x = _Text(text)
    candidates = x.candidates
    if not candidates and _nothing_else_to_score(text, x):
        v = Verdict()
        _addressee_signal(x, v)
        _model_signal(x, v)  # the one check that reads every passage
        return v.findings
    return _score(text, fast=True, depth=0, complete=False, x=x, candidates=candidates).findings


def _nothing_else_to_score(raw: str, x: _Text) -> bool:
    """Whether no check of :func:`_score` but the rules can add a score to ``raw``: no
    invisible characters (ASCII, or none of those :func:`~.signals.raw_checks` looks for),
    no look-alike letters, no URL, no hidden HTML or markdown and nothing to decode. The tests
    are the ones :func:`_score` starts with, so when this holds and no rule's gates are open
    (most passages) the verdict is the model's alone."""
    t = x.t
    return (
        (raw.isascii() or not RAW_ANY.search(raw))
        and not x.lookalikes
        and ("//" not in x.cased or "=" not in x.cased)
        and "<" not in t
        and "](" not in t
        and "]:" not in t
        and not decoded_payloads(x)
    )


def passage_text(title: str | None, text: str, *attributes: str | None) -> str:
    """What the gate reads of a passage: its title and text together (either can carry an
    injection), then each other field the envelope renders (source, version, chunk id), one
    per line; empty fields are left out."""
    body = text if not title else f"{title}\n{text}"
    extra = [a for a in attributes if a]
    return "\n".join([body, *extra]) if extra else body


def scan_candidate(title: str | None, text: str, *attributes: str | None) -> tuple[str, ...]:
    """Scan a passage's title, text and rendered attributes together (:func:`passage_text`)."""
    return scan(passage_text(title, text, *attributes))


#: Joined pairs one batch reads, at most (a bound on the work of one batch).
_MAX_JOINED = 256


def scan_batch(
    passages: Sequence[tuple[str, str]], alone: Sequence[Sequence[str]] | None = None
) -> list[tuple[str, ...]]:
    """Findings of attacks split over several passages of one batch: ``passages`` are (document
    key, text) in reading order. Each two neighbours of one document that the gate passes
    alone (``alone``: their own findings, computed here when not given) are read joined; when
    the joined text is quarantined both get its findings and ``split_attack``. Passages of
    other documents, and those quarantined alone, get ``()``."""
    verdicts = [tuple(scan(t)) for _k, t in passages] if alone is None else alone
    out: list[tuple[str, ...]] = [() for _ in passages]
    last: dict[str, int] = {}
    joins = 0
    for i, (key, text) in enumerate(passages):
        j = last.get(key)
        last[key] = i
        if j is None or joins >= _MAX_JOINED or verdicts[i] or verdicts[j]:
            continue
        joins += 1
        joined = scan(f"{passages[j][1]} {text}")
        if joined:
            found = tuple(n for n in FINDINGS if n in joined or n == "split_attack")
            out[i] = out[j] = found
    return out


class _FindingCheck:
    """One finding as a predicate with a regex-like ``search``: true when the gate, run
    without its word/needle prefilter, reports the finding. ``scan`` must agree with these
    (the prefilter is a speed-up only), which the property tests check."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def search(self, text: str) -> bool:
        return self.name in _score(text, fast=False, depth=0).findings


CHECKS: tuple[tuple[str, _FindingCheck], ...] = tuple((n, _FindingCheck(n)) for n in FINDINGS)
