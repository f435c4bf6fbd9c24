"""The verify stage: an Answer checked against its Pack, deterministically, into a Verdict.

For each claim (a sentence of ``text``, or an entry of ``claims``), in answer order:

1. a cited id that is not an evidence id of the pack makes it ``fabricated_id``;
2. else, with citations, every value of the claim (:func:`~ctxbudget.verification.values.
   claim_values`) must be in one of the cited passages (its title or text), or the claim is
   ``unsupported_value`` and ``missing`` lists what is not there;
3. a claim without citations is ``uncited`` when it carries values, else ``uncheckable``;
   a sentence saying the evidence is insufficient is an abstention, never a claim to cite.

A citation (claim, id) supports its claim when the claim is supported and the passage holds
at least one of the claim's values (or the claim has none): citation precision is the share
of citations that do, completeness the share of claims needing evidence (cited, or carrying
values) that are supported. The abstention check compares what the answer says of the
evidence with the pack's answerability. With the request's facts (labels, candidates, fates)
the verdict also holds the four-way diagnosis (:mod:`ctxbudget.verification.diagnosis`).

No model, no clock: the same answer and pack give the same verdict, byte for byte.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from ctxbudget.errors import InputError
from ctxbudget.memo import BoundedMemo
from ctxbudget.schemas import Pack
from ctxbudget.verification.citations import ParsedClaim, parse_text
from ctxbudget.verification.diagnosis import RequestFacts, diagnose
from ctxbudget.verification.models import (
    CLAIM_STATUSES,
    AbstentionCheck,
    Answer,
    ClaimStatus,
    ClaimVerdict,
    Verdict,
)
from ctxbudget.verification.values import PassageIndex, Value, claim_values, index_passage

__all__ = ["AnswerVerifier", "VerifyError", "says_insufficient"]

#: Phrases by which an answer says the evidence does not hold the answer.
_INSUFFICIENT = re.compile(
    r"""\b(?:
        (?:evidence|passages?|sources?|context|documents?|information\ provided|provided
           \ (?:evidence|information|passages?))\s+(?:does|do|did)\s*(?:not|n't)\s+
           (?:say|state|mention|contain|include|specify|provide|give|indicate|support|answer)
      | (?:not|n't)\ enough\ (?:information|evidence|context)
      | insufficient\ (?:information|evidence|context)
      | (?:cannot|can't|can\ not|unable\ to)\ (?:be\ )?(?:determine|answer|tell|find|say)
      | no\ (?:relevant\ )?(?:information|evidence|passage)\ (?:about|on|regarding|for|that|to|is)
      | (?:i|we)\ (?:do\ not|don't)\ know
    )""",
    re.IGNORECASE | re.VERBOSE,
)
#: Estimated bytes of one memoised passage index, per character of its text.
_INDEX_WEIGHT = 24


class VerifyError(InputError):
    """An answer cannot be checked against the pack given (another request or lane)."""


def says_insufficient(text: str) -> bool:
    """The text says the evidence is not enough to answer."""
    return _INSUFFICIENT.search(text) is not None


class _Cited:
    """The pack's passages by evidence id, each indexed the first time a claim cites it."""

    __slots__ = ("_index", "_indexes", "texts")

    def __init__(self, pack: Pack, index: Callable[[str], PassageIndex]) -> None:
        self.texts: dict[str, str] = {}
        for e in pack.evidence:
            self.texts.setdefault(e.evidence_id, f"{e.title}\n{e.text}" if e.title else e.text)
        self._index = index
        self._indexes: dict[str, PassageIndex] = {}

    def __contains__(self, evidence_id: str) -> bool:
        return evidence_id in self.texts

    def __getitem__(self, evidence_id: str) -> PassageIndex:
        found = self._indexes.get(evidence_id)
        if found is None:
            found = self._indexes[evidence_id] = self._index(self.texts[evidence_id])
        return found


def _status(
    parsed: ParsedClaim, values: Sequence[Value], known: _Cited
) -> tuple[ClaimStatus, tuple[str, ...], tuple[str, ...]]:
    ids = parsed.evidence_ids
    if not ids:
        if says_insufficient(parsed.text) or not values:
            return "uncheckable", (), ()
        return "uncited", tuple(v.surface for v in values), ()
    unknown = tuple(i for i in ids if i not in known)
    if unknown:
        return "fabricated_id", (), unknown
    cited = [known[i] for i in ids]
    missing = tuple(v.surface for v in values if not any(p.supports(v) for p in cited))
    if missing:
        return "unsupported_value", missing, ()
    return "supported", (), ()


def _abstention(abstained: bool, answered: bool, pack: Pack) -> AbstentionCheck:
    if abstained and pack.answerability == "ok":
        return "abstained_with_evidence"
    if answered and not abstained and pack.answerability == "no_evidence":
        return "answered_without_evidence"
    return "consistent"


def _share(part: int, whole: int) -> float | None:
    return round(part / whole, 6) if whole else None


class AnswerVerifier:
    """Checks answers against their packs; passage indexes are memoised by text."""

    def __init__(self, *, indexes: BoundedMemo[str, PassageIndex] | None = None) -> None:
        self._indexes: BoundedMemo[str, PassageIndex] = (
            indexes if indexes is not None else BoundedMemo(max_entries=16384)
        )

    def _index(self, text: str) -> PassageIndex:
        return self._indexes.get_or_make(
            text, lambda: index_passage(text), lambda _: _INDEX_WEIGHT * len(text)
        )

    def run(self, answer: Answer, pack: Pack, *, facts: RequestFacts | None = None) -> Verdict:
        """The verdict of ``answer`` against ``pack`` (same request and lane), with the
        diagnosis when ``facts`` hold the request's labels."""
        if answer.request_id != pack.request_id or answer.lane != pack.lane:
            raise VerifyError(
                f"answer {answer.request_id!r} ({answer.lane}) is checked against the pack "
                f"of {pack.request_id!r} ({pack.lane})"
            )
        known = _Cited(pack, self._index)
        if answer.claims is not None:
            parsed = tuple(ParsedClaim(c.text, c.evidence_ids) for c in answer.claims)
        else:
            parsed = parse_text(answer.text or "", known=frozenset(known.texts))
        verdicts: list[ClaimVerdict] = []
        citations = supporting = needing = supported = 0
        abstained = answer.answerability == "no_evidence"
        answered = False
        for i, p in enumerate(parsed):
            values = claim_values(p.text)
            status, missing, unknown = _status(p, values, known)
            if not p.evidence_ids and says_insufficient(p.text):
                abstained = True
            verdicts.append(
                ClaimVerdict(
                    index=i,
                    text=p.text,
                    evidence_ids=p.evidence_ids,
                    status=status,
                    missing=missing,
                    unknown_ids=unknown,
                )
            )
            citations += len(p.evidence_ids)
            if status == "supported":
                supporting += sum(
                    1
                    for eid in p.evidence_ids
                    if not values or any(known[eid].supports(v) for v in values)
                )
            if status != "uncheckable":
                needing += 1
                supported += status == "supported"
                answered = True
        counts: dict[str, int] = dict.fromkeys(CLAIM_STATUSES, 0)
        for v in verdicts:
            counts[v.status] += 1
        expected = diagnose(pack, verdicts, facts) if facts is not None else None
        return Verdict(
            request_id=answer.request_id,
            lane=answer.lane,
            cohort=pack.cohort,
            policy=pack.policy,
            query_class=pack.query_class,
            form="claims" if answer.claims is not None else "text",
            claims=tuple(verdicts),
            counts=counts,
            citations=citations,
            citations_supporting=supporting,
            citation_precision=_share(supporting, citations),
            claims_needing_evidence=needing,
            claims_supported=supported,
            citation_completeness=_share(supported, needing),
            abstained=abstained,
            pack_answerability=pack.answerability,
            abstention=_abstention(abstained, answered, pack),
            expected=expected,
        )
