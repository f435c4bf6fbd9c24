"""Dataset-free traffic of the same shape (:func:`synthetic`): generated products, settings,
numbers, dates and negations, for tests and benchmarks that must not depend on the data
folder."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from ctxbudget.schemas import Turn
from ctxbudget.testing.naive import TokenCounter, default_counter
from ctxbudget.testing.traffic.assemble import (
    AS_OF,
    Draft,
    _Context,
    add_awkward,
    plan_awkward,
)
from ctxbudget.testing.traffic.base import SYNTHETIC_EVIDENCE_FRACTION, AwkwardRates
from ctxbudget.testing.traffic.frame import _check_range, _finish, _originals_cost
from ctxbudget.testing.traffic.ids import _random_date, chunk_id_for, doc_id_for, source_for
from ctxbudget.testing.traffic.truth import GeneratedBatch

_PRODUCTS = (
    "Orion",
    "Vega",
    "Lyra",
    "Atlas",
    "Nimbus",
    "Quasar",
    "Helix",
    "Pulsar",
    "Cobalt",
    "Zephyr",
    "Aurora",
    "Talon",
)
_COMPONENTS = (
    "API gateway",
    "object store",
    "message queue",
    "audit log",
    "backup service",
    "search index",
    "billing export",
    "identity service",
)
_ATTRIBUTES = (
    ("retention period", "days"),
    ("maximum upload size", "MB"),
    ("rate limit", "requests per second"),
    ("default timeout", "seconds"),
    ("replication factor", "replicas"),
    ("maximum batch size", "records"),
)
_REGIONS = ("eu-west-1", "us-east-2", "ap-south-1", "sa-east-1", "ca-central-1", "eu-north-1")
_FILLERS = (
    "Changes are recorded in the audit trail.",
    "Administrators receive an email when the setting changes.",
    "The console shows the current value on the settings page.",
    "Support can confirm the value for a specific account.",
    "This behaviour is the same on the free and the paid plans.",
    "The setting is not inherited by sandbox projects.",
    "Older clients may cache the previous value for up to 10 minutes.",
)


@dataclass(frozen=True, slots=True)
class _Topic:
    product: str
    component: str
    attribute: str
    unit: str
    value: int
    version: str
    region: str
    error: str
    other: str


def _topic(rng: random.Random) -> _Topic:
    product, other = rng.sample(_PRODUCTS, 2)
    attribute, unit = rng.choice(_ATTRIBUTES)
    return _Topic(
        product=product,
        component=rng.choice(_COMPONENTS),
        attribute=attribute,
        unit=unit,
        value=rng.randint(2, 500),
        version=f"3.{rng.randint(1, 12)}",
        region=rng.choice(_REGIONS),
        error=f"E{rng.randint(1000, 9999)}",
        other=other,
    )


def _synthetic_query(t: _Topic, rng: random.Random) -> str:
    return rng.choice(
        (
            f"What is the {t.attribute} of the {t.product} {t.component}?",
            f"How do I change the {t.attribute} of the {t.product} {t.component}?",
            f"How does the {t.attribute} of the {t.product} {t.component} compare with {t.other}?",
            f"List all regions where the {t.product} {t.component} is available.",
            f"The {t.product} {t.component} fails with error {t.error} after upgrading to "
            f"{t.version}. How do I fix it?",
        )
    )


N_FACT_TEMPLATES = 6


def _relevant_sentence(t: _Topic, rng: random.Random, template: int) -> str:
    """A sentence that answers the topic's question; ``template`` picks one of the forms."""
    d = _random_date(rng, 2021, 2025).isoformat()
    low = max(1, t.value // rng.randint(2, 5))
    options = (
        f"The {t.attribute} of the {t.product} {t.component} is {t.value} {t.unit} as of {d}.",
        f"Since version {t.version}, the {t.product} {t.component} no longer accepts a "
        f"{t.attribute} above {t.value} {t.unit}.",
        f"The {t.attribute} of the {t.product} {t.component} cannot be changed in {t.region}; "
        f"other regions allow values between {low} and {t.value} {t.unit}.",
        f"To change the {t.attribute} of the {t.product} {t.component}, open the console, "
        f"select {t.component}, and set a value of at most {t.value} {t.unit}; the change takes "
        f"effect within {rng.randint(2, 30)} minutes.",
        f"Error {t.error} in the {t.product} {t.component} means the {t.attribute} exceeds "
        f"{t.value} {t.unit}; lower it and retry.",
        f"The {t.product} {t.component} is available in {t.region} and "
        f"{rng.choice(_REGIONS)}, but not in {rng.choice(_REGIONS)} before {d}.",
    )
    return options[template % len(options)]


def _distractor_sentence(t: _Topic, rng: random.Random) -> str:
    attribute, unit = rng.choice(_ATTRIBUTES)
    product = rng.choice(_PRODUCTS)
    value = rng.randint(2, 900)
    return rng.choice(
        (
            f"The {attribute} of the {product} {t.component} is {value} {unit}.",
            f"The {t.product} {rng.choice(_COMPONENTS)} does not support a custom {attribute}.",
            f"{product} {t.component} release {rng.randint(1, 4)}.{rng.randint(0, 9)} "
            f"changed the default {attribute} to {value} {unit}.",
            f"Pricing for the {t.product} {t.component} starts at {value} dollars per month.",
        )
    )


def _passage(first: str, rng: random.Random) -> str:
    fillers = rng.sample(_FILLERS, k=rng.randint(1, 2))
    return " ".join([first, *fillers])


def _synthetic_turns(rng: random.Random, n: int) -> list[Turn]:
    out: list[Turn] = []
    for i in range(n):
        t = _topic(rng)
        if i % 2 == 0:
            out.append(Turn(role="user", text=_synthetic_query(t, rng)))
        else:
            forms = rng.sample(range(N_FACT_TEMPLATES), k=rng.randint(2, 4))
            text = " ".join(_relevant_sentence(t, rng, k) for k in forms)
            out.append(Turn(role="assistant", text=text))
    return out


def _synthetic_originals(
    ctx: _Context, t: _Topic, forms: Sequence[int], n_relevant: int, n_distractors: int
) -> list[Draft]:
    rng = ctx.rng
    drafts: list[Draft] = []
    for i in range(n_relevant + n_distractors):
        relevant = i < n_relevant
        first = (
            _relevant_sentence(t, rng, forms[i % len(forms)])
            if relevant
            else _distractor_sentence(t, rng)
        )
        text = _passage(first, rng)
        mean, spread = (0.74, 0.1) if relevant else (0.5, 0.15)
        rerank = min(0.99, max(0.01, rng.gauss(mean, spread)))
        retrieval = 6.0 + 14.0 * min(1.0, max(0.0, rerank + rng.gauss(0.0, 0.12)))
        source = source_for("synthetic", ctx.seed, ctx.request_id, i)
        drafts.append(
            Draft(
                chunk_id=chunk_id_for("synthetic", ctx.seed, ctx.request_id, i),
                doc_id=doc_id_for("synthetic", ctx.seed, ctx.request_id, i),
                source_id=source,
                text=text,
                retrieval=retrieval,
                rerank=rerank,
                relevant=relevant,
                title=f"{t.product} {t.component} reference",
                version=rng.choice(("1", "1", "2")),
                published_at=_random_date(rng, 2018, 2025).isoformat(),
                span_start=rng.randrange(0, 20000, 10),
                retriever=rng.choice(("bm25", "hybrid")),
            )
        )
    return drafts


def synthetic(
    n_batches: int,
    *,
    seed: int,
    candidates: int = 22,
    rates: AwkwardRates | None = None,
    relevant_range: tuple[int, int] = (2, 5),
    evidence_fraction: tuple[float, float] = SYNTHETIC_EVIDENCE_FRACTION,
    counter: TokenCounter | None = None,
) -> list[GeneratedBatch]:
    """Dataset-free traffic of the same shape; identical for the same arguments."""
    if n_batches < 0:
        raise ValueError(f"n_batches must be >= 0, got {n_batches}")
    r_lo, r_hi = relevant_range
    if not 1 <= r_lo <= r_hi or candidates < r_hi + 1:
        raise ValueError(
            f"need 1 <= relevant_range[0] <= relevant_range[1] < candidates, got "
            f"{relevant_range!r} with candidates={candidates}"
        )
    _check_range("evidence_fraction", evidence_fraction, 0.0, 3.0)
    awkward = rates if rates is not None else AwkwardRates()
    tc = counter if counter is not None else default_counter()
    out: list[GeneratedBatch] = []
    for i in range(n_batches):
        rng = random.Random(f"synthetic|{seed}|{i}")
        t = _topic(rng)
        n_relevant = rng.randint(r_lo, r_hi)
        plan = plan_awkward(rng, awkward).shrink_to(candidates - n_relevant - 1)
        n_distractors = candidates - n_relevant - plan.total
        ctx = _Context(f"syn-{seed}-{i:06d}", seed, _synthetic_query(t, rng), rng, tc)
        forms = rng.sample(range(N_FACT_TEMPLATES), k=N_FACT_TEMPLATES)
        originals = _synthetic_originals(ctx, t, forms, n_relevant, n_distractors)
        spare = (forms[(n_relevant + k) % len(forms)] for k in range(3))
        pool = [_passage(_relevant_sentence(t, rng, k), rng) for k in spare]
        drafts = add_awkward(ctx, originals, plan, pool)
        cost = _originals_cost(originals, tc)
        as_of = AS_OF if rng.random() < 0.2 else None
        out.append(
            _finish(ctx, drafts, cost, awkward, evidence_fraction, _synthetic_turns, as_of=as_of)
        )
    return out
