"""The shared assembler: drafts of candidates, the plan of awkward cases per batch, the
awkward passages made from the originals, and the wire candidate of a draft."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import date, timedelta

from ctxbudget.schemas import Candidate, Span
from ctxbudget.testing.naive import TokenCounter
from ctxbudget.testing.traffic.base import (
    FORBIDDEN_LABELS,
    OTHER_TENANT,
    PRINCIPAL_LABELS,
    TENANT,
    AwkwardRates,
    Kind,
)
from ctxbudget.testing.traffic.edits import _NUMBER, inject, sentence_spans, stale_text, syndicate
from ctxbudget.testing.traffic.ids import (
    _random_date,
    authority_for,
    chunk_id_for,
    doc_id_for,
    source_for,
)

#: The date the traffic's dated questions ask about (``query.as_of`` on a fifth of the
#: batches). No document version is published after it: the newest version of a document is
#: then the one to pack whether or not the question is dated, as the truth labels it.
AS_OF = "2025-06-30"


@dataclass(frozen=True, slots=True)
class Draft:
    """A candidate before it becomes a wire model, with what only the generator knows."""

    chunk_id: str
    doc_id: str
    source_id: str
    text: str
    retrieval: float
    rerank: float
    kind: Kind = "original"
    relevant: bool = False
    title: str | None = None
    version: str | None = "1"
    published_at: str | None = None
    span_start: int = 0
    span_end: int | None = None
    tenant_id: str = TENANT
    access_label: str = "public"
    family: str | None = None
    retriever: str = "bm25"


@dataclass(frozen=True, slots=True)
class _Plan:
    copies: int
    duplicate: bool
    stale: bool
    cross_tenant: bool
    unauthorized: bool
    injected: bool
    overlap: int

    @property
    def total(self) -> int:
        flags = (self.duplicate, self.stale, self.cross_tenant, self.unauthorized, self.injected)
        return self.copies + self.overlap + sum(flags)

    def shrink_to(self, limit: int) -> _Plan:
        """Drop cases in a fixed order until at most ``limit`` extra candidates are needed."""
        plan = self
        steps: tuple[Callable[[_Plan], _Plan], ...] = (
            lambda p: replace(p, copies=min(p.copies, 1)),
            lambda p: replace(p, overlap=min(p.overlap, 1)),
            lambda p: replace(p, duplicate=False),
            lambda p: replace(p, overlap=0),
            lambda p: replace(p, unauthorized=False),
            lambda p: replace(p, stale=False),
            lambda p: replace(p, cross_tenant=False),
            lambda p: replace(p, injected=False),
            lambda p: replace(p, copies=0),
        )
        for step in steps:
            if plan.total <= limit:
                break
            plan = step(plan)
        return plan


def plan_awkward(rng: random.Random, rates: AwkwardRates) -> _Plan:
    """Which awkward cases one batch gets (draws in a fixed order)."""
    copies = rng.randint(1, 3) if rng.random() < rates.copies else 0
    duplicate = rng.random() < rates.duplicate_id
    stale = rng.random() < rates.stale
    cross_tenant = rng.random() < rates.cross_tenant
    unauthorized = rng.random() < rates.unauthorized
    injected = rng.random() < rates.injected
    overlap = rng.randint(1, 2) if rng.random() < rates.overlap else 0
    return _Plan(copies, duplicate, stale, cross_tenant, unauthorized, injected, overlap)


@dataclass(slots=True)
class _Context:
    request_id: str
    seed: int
    query: str
    rng: random.Random
    counter: TokenCounter


def _targets(originals: Sequence[Draft]) -> list[Draft]:
    """Relevant originals by rerank desc (the passages awkward cases are made from)."""
    pool = [d for d in originals if d.relevant] or list(originals)
    return sorted(pool, key=lambda d: (-d.rerank, d.chunk_id))


def _pick(pool: Sequence[Draft], used: set[str], rng: random.Random, top: int) -> Draft:
    free = [d for d in pool if d.chunk_id not in used] or list(pool)
    choice = rng.choice(free[:top])
    used.add(choice.chunk_id)
    return choice


def _band(rng: random.Random, top: float, lo: float, hi: float) -> float:
    return round(top * rng.uniform(lo, hi), 4)


def _copies(ctx: _Context, target: Draft, k: int, top: tuple[float, float]) -> list[Draft]:
    out: list[Draft] = []
    for j in range(k):
        site = source_for("copy", ctx.seed, ctx.request_id, target.chunk_id, j)
        text = syndicate(target.text, ctx.rng, target.source_id, site)
        published = date.fromisoformat(target.published_at or "2020-01-01") + timedelta(
            days=ctx.rng.randint(1, 400)
        )
        out.append(
            Draft(
                chunk_id=chunk_id_for("copy", ctx.seed, ctx.request_id, target.chunk_id, j),
                doc_id=doc_id_for("copy", ctx.seed, ctx.request_id, target.chunk_id, j),
                source_id=site,
                text=text,
                retrieval=max(target.retrieval, _band(ctx.rng, top[0], 0.95, 1.03)),
                rerank=max(target.rerank, _band(ctx.rng, top[1], 0.96, 1.01)),
                kind="copy",
                title=target.title,
                version=target.version,
                published_at=published.isoformat(),
                family=target.chunk_id,
                retriever=ctx.rng.choice(("bm25", "hybrid")),
            )
        )
    return out


def _stale(ctx: _Context, target: Draft, top: tuple[float, float]) -> tuple[Draft, Draft]:
    """The target becomes version 2; returns (new target, older version 1 beside it)."""
    # Drawn as before, then held to the as-of date (the random stream stays the same).
    newer = min(_random_date(ctx.rng, 2023, 2025), date.fromisoformat(AS_OF))
    older = newer - timedelta(days=ctx.rng.randint(200, 900))
    updated = replace(target, version="2", published_at=newer.isoformat())
    text = stale_text(target.text, ctx.rng)
    old = replace(
        target,
        chunk_id=chunk_id_for("stale", ctx.seed, ctx.request_id, target.chunk_id),
        text=text,
        kind="stale",
        relevant=False,
        version="1",
        published_at=older.isoformat(),
        span_end=target.span_start + len(text),
        retrieval=max(target.retrieval, _band(ctx.rng, top[0], 0.94, 1.02)),
        rerank=max(target.rerank * 0.99, _band(ctx.rng, top[1], 0.95, 1.0)),
        retriever=ctx.rng.choice(("bm25", "hybrid")),
    )
    return updated, old


def _overlaps(ctx: _Context, target: Draft, k: int, top: tuple[float, float]) -> list[Draft]:
    """Windows of the target's document whose spans overlap the target (and each other)."""
    text = target.text
    spans = sentence_spans(text)
    if len(spans) >= 3:
        mid = len(spans) // 2
        windows = [(spans[mid][0], len(text)), (0, spans[mid][1])]
    elif len(spans) == 2:
        windows = [(spans[1][0], len(text)), (0, spans[0][1])]
    else:
        cut = text.find(" ", len(text) // 3)
        cut = cut + 1 if cut >= 0 else len(text) // 3
        windows = [(cut, len(text)), (0, max(cut, (2 * len(text)) // 3))]
    out: list[Draft] = []
    for j, (start, end) in enumerate(windows[:k]):
        out.append(
            replace(
                target,
                chunk_id=chunk_id_for("overlap", ctx.seed, ctx.request_id, target.chunk_id, j),
                text=text[start:end],
                kind="overlap",
                relevant=False,
                span_start=target.span_start + start,
                span_end=target.span_start + end,
                retrieval=max(target.retrieval * 0.97, _band(ctx.rng, top[0], 0.92, 1.0)),
                rerank=max(target.rerank * 0.98, _band(ctx.rng, top[1], 0.94, 1.0)),
                retriever=ctx.rng.choice(("bm25", "hybrid")),
            )
        )
    return out


def _foreign(ctx: _Context, kind: Kind, base: str, top: tuple[float, float]) -> Draft:
    """A cross-tenant, unauthorized or injected passage built on an on-topic text."""
    text = inject(base, ctx.rng) if kind == "injected" else base
    source = source_for(kind, ctx.seed, ctx.request_id)
    return Draft(
        chunk_id=chunk_id_for(kind, ctx.seed, ctx.request_id),
        doc_id=doc_id_for(kind, ctx.seed, ctx.request_id),
        source_id=source,
        text=text,
        retrieval=_band(ctx.rng, top[0], 0.96, 1.05),
        rerank=_band(ctx.rng, top[1], 0.97, 1.02),
        kind=kind,
        published_at=_random_date(ctx.rng, 2019, 2025).isoformat(),
        tenant_id=OTHER_TENANT if kind == "cross_tenant" else TENANT,
        access_label=(
            ctx.rng.choice(FORBIDDEN_LABELS)
            if kind == "unauthorized"
            else ctx.rng.choice(PRINCIPAL_LABELS)
        ),
        retriever=ctx.rng.choice(("bm25", "hybrid")),
    )


def add_awkward(
    ctx: _Context, originals: Sequence[Draft], plan: _Plan, pool_texts: Sequence[str]
) -> list[Draft]:
    """Originals plus the planned awkward cases, all scored in the top band."""
    drafts = list(originals)
    top = (max(d.retrieval for d in originals), max(d.rerank for d in originals))
    targets = _targets(originals)
    used: set[str] = set()
    extra: list[Draft] = []
    if plan.copies:
        extra += _copies(ctx, _pick(targets, used, ctx.rng, 2), plan.copies, top)
    if plan.stale:
        with_numbers = [d for d in targets if _NUMBER.search(d.text)] or targets
        target = _pick(with_numbers, used, ctx.rng, 3)
        updated, old = _stale(ctx, target, top)
        drafts = [updated if d.chunk_id == target.chunk_id else d for d in drafts]
        extra.append(old)
    if plan.overlap:
        long_enough = [d for d in targets if len(sentence_spans(d.text)) >= 2] or targets
        extra += _overlaps(ctx, _pick(long_enough, used, ctx.rng, 4), plan.overlap, top)
    if plan.duplicate:
        current = {d.chunk_id: d for d in drafts}
        target = current[_pick(targets, used, ctx.rng, 5).chunk_id]
        other = "hybrid" if target.retriever == "bm25" else "bm25"
        jitter = ctx.rng.uniform(-0.01, 0.01)
        extra.append(replace(target, rerank=round(target.rerank + jitter, 4), retriever=other))
    bases = list(pool_texts)
    foreign: tuple[tuple[Kind, bool], ...] = (
        ("cross_tenant", plan.cross_tenant),
        ("unauthorized", plan.unauthorized),
        ("injected", plan.injected),
    )
    for kind, wanted in foreign:
        if wanted:
            base = bases.pop(0) if bases else _pick(targets, set(), ctx.rng, 3).text
            extra.append(_foreign(ctx, kind, base, top))
    return drafts + extra


def _candidate(d: Draft, ctx: _Context) -> Candidate:
    end = d.span_end if d.span_end is not None else d.span_start + len(d.text)
    tokens = ctx.counter.count(d.text) if ctx.rng.random() < 0.6 else None
    return Candidate(
        chunk_id=d.chunk_id,
        doc_id=d.doc_id,
        source_id=d.source_id,
        title=d.title,
        text=d.text,
        version=d.version,
        published_at=d.published_at,
        span=Span(start=d.span_start, end=end),
        retrieval_score=round(d.retrieval, 4),
        rerank_score=round(d.rerank, 4),
        authority=authority_for(d.source_id),
        access_label=d.access_label,
        tenant_id=d.tenant_id,
        tokens=tokens,
        metadata={"retriever": d.retriever},
    )
