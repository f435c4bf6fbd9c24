"""The router stage: authorization, the safety gate, the query class and the budget.

Authorization comes first: a candidate outside the principal's tenant or access labels is
removed before anything else can look at it, so it never becomes a family member or a
representative. Classification is deterministic: the highest-priority matching rule wins,
``query.class_hint`` overrides, and an unmatched or ambiguous query takes the policy's
fallback class (the narrowest one).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ctxbudget.budget import build_ledger
from ctxbudget.cut import cut_passage
from ctxbudget.memo import BoundedMemo
from ctxbudget.policy import (
    Policy,
    PolicyStore,
    RoutingRule,
    RoutingRules,
    default_policies_dir,
)
from ctxbudget.safety import passage_text, scan, scan_batch
from ctxbudget.schemas import (
    QUERY_CLASSES,
    Candidate,
    CandidateBatch,
    CandidateFate,
    CutPassage,
    Lane,
    Query,
    QueryClass,
    RoutedBatch,
)
from ctxbudget.tokens import TokenizerRegistry


@dataclass(frozen=True, slots=True)
class RouteDecision:
    """The class a query is packed as, and the rule that decided it (``class_hint``, a rule's
    name, or ``fallback:...`` saying why none did)."""

    query_class: QueryClass
    rule: str


def classify(query: Query, rules: RoutingRules, fallback: QueryClass) -> RouteDecision:
    """Pick the query class; the decision names the rule that matched (or why none did)."""
    hint = query.class_hint
    if hint is not None and hint in QUERY_CLASSES:
        return RouteDecision(hint, "class_hint")
    best = _top_matches(query.text, rules)
    suffix = f" (ignored class_hint {hint!r})" if hint is not None else ""
    if not best:
        return RouteDecision(fallback, f"fallback:unmatched{suffix}")
    classes = sorted({r.query_class for r in best})
    if len(classes) > 1:
        names = ",".join(sorted(r.name for r in best))
        return RouteDecision(fallback, f"fallback:ambiguous[{names}]{suffix}")
    rule = min(best, key=lambda r: r.name)
    return RouteDecision(rule.query_class, rule.name + suffix)


def _top_matches(text: str, rules: RoutingRules) -> list[RoutingRule]:
    """The matching rules of the highest priority any rule matches at, in file order (empty
    when none matches). Priorities are tried from the highest down, so the patterns of lower
    priorities are not searched once one matches."""
    for group in rules.by_priority:
        best = [r for r in group if r.regex.search(text)]
        if best:
            return best
    return []


def asks_about_history(query: Query, rules: RoutingRules) -> bool:
    """Whether the query matches a history pattern: older versions are then kept, and versions of
    one document placed side by side."""
    rx = rules.history_regex
    return bool(rx is not None and rx.search(query.text))


def authorization_problem(batch: CandidateBatch, cand: Candidate) -> str | None:
    """Why ``cand`` may not be shown to the batch's principal, or None."""
    principal = batch.principal
    if cand.tenant_id is not None and cand.tenant_id != principal.tenant_id:
        return "tenant"
    if cand.access_label is not None and cand.access_label not in principal.access_labels:
        return "access_label"
    return None


def _verdict_bytes(findings: tuple[str, ...]) -> int:
    """What a memoised verdict weighs, about."""
    return 96 + 48 * len(findings)


class QueryRouter:
    """Stage 1: candidate batch in, routed batch out."""

    def __init__(
        self, *, policy: Policy, rules: RoutingRules, tokenizers: TokenizerRegistry
    ) -> None:
        self.policy = policy
        self.rules = rules
        self.tokenizers = tokenizers
        #: The gate's findings per passage (keyed by a digest of title and text): retrieval
        #: returns popular passages again and again, and the gate is the router's main cost.
        self.verdicts: BoundedMemo[bytes, tuple[str, ...]] = BoundedMemo(
            max_entries=65536, max_bytes=16 * 1024 * 1024
        )

    def scan(self, title: str | None, text: str, *attributes: str | None) -> tuple[str, ...]:
        """The safety gate's findings for a passage (:func:`scan_candidate`): its title, text
        and rendered attributes, memoised by a digest of the very string the gate reads."""
        scanned = passage_text(title, text, *attributes)
        key = hashlib.blake2b(scanned.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        return self.verdicts.get_or_make(key, lambda: scan(scanned), _verdict_bytes)

    def scan_rendered(self, cand: Candidate) -> tuple[str, ...]:
        """The gate's findings for every field of ``cand`` the envelope renders: title, text,
        source, version and chunk id (the location)."""
        return self.scan(cand.title, cand.text, cand.source_id, cand.version, cand.chunk_id)

    def _gate_with_attributes(self, cand: Candidate) -> Callable[[str | None, str], Sequence[str]]:
        """The gate on a title and a piece of ``cand``'s text, read with its attributes."""

        def gate(title: str | None, text: str) -> Sequence[str]:
            return self.scan(title, text, cand.source_id, cand.version, cand.chunk_id)

        return gate

    def split_attacks(self, batch: CandidateBatch) -> list[tuple[str, ...]]:
        """Per candidate, the findings of an attack split over it and a neighbour of the same
        document (:func:`~ctxbudget.safety.scan_batch`); in reading order: by span start where
        both have a span, else batch order. Only authorized candidates are read."""
        allowed = [
            i for i, c in enumerate(batch.candidates) if authorization_problem(batch, c) is None
        ]
        order = sorted(
            allowed,
            key=lambda i: (
                (c := batch.candidates[i]).source_id,
                c.doc_id,
                c.span.start if c.span is not None else -1,
                i,
            ),
        )
        cands = [batch.candidates[i] for i in order]
        found = scan_batch(
            [(f"{c.source_id}\x1f{c.doc_id}", c.text) for c in cands],
            [self.scan_rendered(c) for c in cands],
        )
        out: list[tuple[str, ...]] = [()] * len(batch.candidates)
        for k, i in enumerate(order):
            out[i] = found[k]
        return out

    def run(
        self, batch: CandidateBatch, *, lane: Lane = "live", cohort: str = "baseline"
    ) -> RoutedBatch:
        """Route one batch in one lane and cohort: authorization and the safety gate for each
        candidate (with ``injection: cut``, a flagged passage whose offending sentences can be
        cut out is admitted as its clean rest, :mod:`ctxbudget.cut`), the query class, the
        budget ledger. :class:`~ctxbudget.errors.TokenizerError` when the batch's tokenizer
        cannot load."""
        counter = self.tokenizers.get(batch.model.tokenizer)
        decision = classify(batch.query, self.rules, self.policy.fallback_class)
        class_rules = self.policy.classes[decision.query_class]
        ledger, turns = build_ledger(batch, self.policy, class_rules, counter)
        admissible: list[int] = []
        dropped: list[CandidateFate] = []
        flagged: list[int] = []
        flags: list[CandidateFate] = []
        cuts: list[CutPassage] = []
        low_trust = self.policy.flagged_passages == "low_trust"
        cutting = self.policy.injection == "cut"
        split = self.split_attacks(batch)
        for i, cand in enumerate(batch.candidates):
            problem = authorization_problem(batch, cand)
            if problem is not None:
                dropped.append(
                    CandidateFate(chunk_id=cand.chunk_id, reason="unauthorized", detail=problem)
                )
                continue
            findings = self.scan_rendered(cand) or split[i]
            if findings and cutting and not split[i]:
                # each sentence is judged with the passage's rendered attributes, so an
                # instruction in an attribute flags every sentence and nothing is cut
                cut = cut_passage(i, cand, self._gate_with_attributes(cand))
                if cut is not None:
                    cuts.append(cut)
                    admissible.append(i)
                    continue
            # Markup that imitates the envelope is withheld whatever the policy says.
            if findings and low_trust and "envelope_markup" not in findings:
                flagged.append(i)
                flags.append(
                    CandidateFate(
                        chunk_id=cand.chunk_id, reason="quarantined", detail=",".join(findings)
                    )
                )
            elif findings:
                dropped.append(
                    CandidateFate(
                        chunk_id=cand.chunk_id, reason="quarantined", detail=",".join(findings)
                    )
                )
                continue
            admissible.append(i)
        return RoutedBatch(
            request_id=batch.request_id,
            lane=lane,
            cohort=cohort,
            policy=self.policy.ref,
            query_class=decision.query_class,
            route_rule=decision.rule,
            history=asks_about_history(batch.query, self.rules),
            budget=ledger,
            conversation_turns=turns,
            admissible=tuple(admissible),
            dropped=tuple(dropped),
            batch=batch,
            flagged=tuple(flagged),
            flags=tuple(flags),
            cuts=tuple(cuts),
        )


def default_classifier(policies: Path | None = None) -> Callable[[CandidateBatch], QueryClass]:
    """The query class under the shipped default policy's rules (for calibration tooling):
    the rules are loaded once, here, and held by the returned function."""
    store = PolicyStore.load(policies or default_policies_dir())
    policy, rules = store.get(store.names()[0])
    fallback = policy.fallback_class

    def classify_batch(batch: CandidateBatch) -> QueryClass:
        return classify(batch.query, rules, fallback).query_class

    return classify_batch
