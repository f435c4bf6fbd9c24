"""``fuzz``: tenant and access-label fuzzing, in process (see :mod:`bench.guarantees`)."""

from __future__ import annotations

import contextlib
import random
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from bench.common import REPO, table
from ctxbudget.codec import decode_batch, encode
from ctxbudget.pipeline import Pipeline
from ctxbudget.policy import PolicyStore
from ctxbudget.schemas import Candidate, CandidateBatch, Pack, TraceEvent
from ctxbudget.tokens import TokenizerRegistry

POLICIES = REPO / "policies"


PRINCIPAL_TENANT = "acme"
#: Other tenants, look-alikes of the principal's among them: each is a different tenant.
OTHER_TENANTS: tuple[str, ...] = (
    "globex",
    "initech",
    "ACME",
    "acme ",
    "\uff41\uff43\uff4d\uff45",  # fullwidth "acme"
    "acme\u200b",
    "",
)
#: Labels a principal may hold; the look-alikes of "public" are different labels.
LABELS: tuple[str, ...] = (
    "public",
    "internal",
    "restricted",
    "confidential",
    "hr-only",
    "Public",
    "public ",
    "",
)


@dataclass(frozen=True, slots=True)
class FuzzCase:
    """One fuzzed batch and what only the fuzzer knows about it."""

    source: str
    batch: CandidateBatch
    #: Indices (into batch.candidates) of the candidates the principal may not see.
    forbidden: frozenset[int]
    #: Marker planted in each forbidden candidate, by index.
    markers: dict[int, str]
    traps: tuple[str, ...]

    def permitted_ids(self) -> set[str]:
        return {c.chunk_id for i, c in enumerate(self.batch.candidates) if i not in self.forbidden}

    def forbidden_only_ids(self) -> set[str]:
        ids = {c.chunk_id for i, c in enumerate(self.batch.candidates) if i in self.forbidden}
        return ids - self.permitted_ids()


def may_see(batch: CandidateBatch, cand: Candidate) -> bool:
    """The fuzzer's own statement of the rule (written apart from the code under test)."""
    p = batch.principal
    if cand.tenant_id is not None and cand.tenant_id != p.tenant_id:
        return False
    return cand.access_label is None or cand.access_label in p.access_labels


def _sentences(text: str) -> list[str]:
    from ctxbudget.testing.traffic import sentence_spans

    return [text[s:e] for s, e in sentence_spans(text)] or [text]


def _marked(text: str, marker: str) -> str:
    """The text with the marker at the start of every sentence (excerpts keep whole ones)."""
    return " ".join(f"{marker} {s}" for s in _sentences(text))


def _marker(rng: random.Random) -> str:
    return "Fbq" + "".join(rng.choice("bcdfghjkmnpqrstvwxz") for _ in range(10))


class _Fuzzer:
    """Redraws tenants and labels and adds traps; builds one FuzzCase per batch."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def principal(self) -> tuple[str, tuple[str, ...]]:
        rng = self.rng
        r = rng.random()
        tenant = (
            PRINCIPAL_TENANT if r < 0.75 else ("" if r < 0.8 else rng.choice(("globex", "ACME")))
        )
        labels = tuple(sorted(rng.sample(LABELS, k=rng.choice((0, 1, 2, 2, 3, 3)))))
        return tenant, labels

    def tenant(self, principal: str) -> str | None:
        r = self.rng.random()
        if r < 0.5:
            return principal
        if r < 0.75:
            return None
        return self.rng.choice([t for t in (*OTHER_TENANTS, PRINCIPAL_TENANT) if t != principal])

    def label(self, held: tuple[str, ...]) -> str | None:
        r = self.rng.random()
        if r < 0.5 and held:
            return self.rng.choice(held)
        if r < 0.75:
            return None
        return self.rng.choice([x for x in LABELS if x not in held])

    def forbidden_tenant(self, principal: str) -> str:
        return self.rng.choice([t for t in (*OTHER_TENANTS, PRINCIPAL_TENANT) if t != principal])

    def case(self, source: str, batch: CandidateBatch) -> FuzzCase:
        rng = self.rng
        tenant, held = self.principal()
        cands: list[dict[str, Any]] = []
        for c in batch.candidates:
            d = c.model_dump(mode="json")
            d["tenant_id"] = self.tenant(tenant)
            d["access_label"] = self.label(held)
            cands.append(d)
        b = _CaseBuilder(self, tenant, held, cands)
        if not b.permitted() and cands:
            cands[0] = b.permit(cands[0])
        traps: list[str] = []
        extra: list[dict[str, Any]] = []
        for name, make in b.traps():
            if rng.random() < 0.5:
                made = make()
                if made is not None:
                    extra.append(made)
                    traps.append(name)
        cands.extend(extra)
        rng.shuffle(cands)
        markers: dict[int, str] = {}
        for i, d in enumerate(cands):
            if not b.allowed(d):
                m = _marker(rng)
                markers[i] = m
                d["text"] = _marked(d["text"], m)
                d["title"] = f"{d['title']} {m}" if d.get("title") else m
                d["tokens"] = None
        data = batch.model_dump(mode="json", by_alias=True)
        data["tenant_id"] = tenant
        data["principal"] = {**data["principal"], "tenant_id": tenant, "access_labels": held}
        data["candidates"] = cands
        data["labels"] = None
        fuzzed = decode_batch(orjson.dumps(data))  # the wire's own checks
        forbidden = frozenset(i for i, c in enumerate(fuzzed.candidates) if not may_see(fuzzed, c))
        assert forbidden == frozenset(markers), "the fuzzer's own bookkeeping disagrees"
        return FuzzCase(source, fuzzed, forbidden, markers, tuple(traps))


Cand = dict[str, Any]


@dataclass
class _CaseBuilder:
    """The traps of one batch: each builds one extra candidate around the batch's own."""

    fuzzer: _Fuzzer
    tenant: str
    held: tuple[str, ...]
    cands: list[Cand]

    @property
    def rng(self) -> random.Random:
        return self.fuzzer.rng

    def allowed(self, d: Cand) -> bool:
        return (d["tenant_id"] is None or d["tenant_id"] == self.tenant) and (
            d["access_label"] is None or d["access_label"] in self.held
        )

    def permitted(self) -> list[Cand]:
        return [d for d in self.cands if self.allowed(d)]

    def permit(self, d: Cand) -> Cand:
        tenant = self.tenant if self.rng.random() < 0.7 else None
        return {**d, "tenant_id": tenant, "access_label": None}

    def forbid(self, d: Cand) -> Cand:
        if self.rng.random() < 0.5:
            return {**d, "tenant_id": self.fuzzer.forbidden_tenant(self.tenant)}
        return {**d, "access_label": self.rng.choice([x for x in LABELS if x not in self.held])}

    def best(self, d: Cand) -> Cand:
        """``d`` scored above every candidate of the batch, with top authority."""
        top = max((c["rerank_score"] or 0.0) for c in self.cands)
        return {
            **d,
            "rerank_score": round(top + self.rng.uniform(0.01, 0.1), 4),
            "retrieval_score": round((d["retrieval_score"] or 10.0) * 1.2, 4),
            "authority": 0.99,
        }

    def traps(self) -> list[tuple[str, Callable[[], Cand | None]]]:
        return [
            ("same_id_other_tenant", self.same_id),
            ("permitted_copy_of_forbidden", self.permitted_copy),
            ("forbidden_newer_version", self.newer_version),
            ("forbidden_overlapping_span", self.overlapping),
            ("forbidden_sibling_same_parent", self.sibling),
            ("forbidden_principal_tenant", self.old_tenant),
        ]

    def _target(self) -> Cand | None:
        permitted = self.permitted()
        return self.rng.choice(permitted) if permitted else None

    def same_id(self) -> Cand | None:
        """A forbidden passage under a permitted candidate's chunk id."""
        p = self._target()
        return None if p is None else self.forbid(self.best(p))

    def permitted_copy(self) -> Cand | None:
        """A permitted copy (another id, another source) of a forbidden passage."""
        forbidden = [d for d in self.cands if not self.allowed(d)]
        if not forbidden:
            return None
        f = self.rng.choice(forbidden)
        return {
            **self.permit(f),
            "chunk_id": f"{f['chunk_id']}-copy",
            "doc_id": f"{f['doc_id']}-copy",
            "source_id": "mirror.example",
        }

    def newer_version(self) -> Cand | None:
        """A forbidden newer version of a permitted candidate's document."""
        p = self._target()
        if p is None:
            return None
        newer = self.forbid(self.best(p))
        newer.update(chunk_id=f"{p['chunk_id']}-v99", version="99", published_at="2099-01-01")
        return newer

    def overlapping(self) -> Cand | None:
        """A forbidden chunk of the same document overlapping a permitted chunk's span."""
        p = self._target()
        if p is None:
            return None
        span = p.get("span") or {"start": 0, "end": len(p["text"])}
        p["span"] = span
        over = self.forbid(self.best(p))
        start = span["start"] + max(1, (span["end"] - span["start"]) // 2)
        over.update(chunk_id=f"{p['chunk_id']}-ov", span={"start": start, "end": start + 100})
        return over

    def sibling(self) -> Cand | None:
        """A forbidden chunk under the same parent as a permitted one."""
        p = self._target()
        if p is None:
            return None
        parent = f"parent-{self.rng.getrandbits(32):08x}"
        p["parent_id"] = parent
        span = p.get("span") or {"start": 0, "end": len(p["text"])}
        sib = self.forbid(self.best(p))
        end = span["end"] + 500
        sib.update(
            chunk_id=f"{p['chunk_id']}-sib",
            parent_id=parent,
            span={"start": end, "end": end + len(p["text"])},
        )
        return sib

    def old_tenant(self) -> Cand | None:
        """When the principal is not "acme", a passage marked with the traffic's own tenant."""
        if self.tenant == PRINCIPAL_TENANT or not self.cands:
            return None
        p = self.rng.choice(self.cands)
        return {**self.best(p), "chunk_id": f"{p['chunk_id']}-acme", "tenant_id": "acme"}


@dataclass
class FuzzTally:
    """Counts over the packs of one policy (one run: guarded or control)."""

    batches: int = 0
    candidates: int = 0
    forbidden: int = 0
    forbidden_tenant: int = 0
    forbidden_label: int = 0
    traps: Counter[str] = field(default_factory=Counter)
    packs: int = 0
    errors: int = 0
    evidence_items: int = 0
    #: Admitted chunk ids that belong to no permitted candidate of the batch.
    unauthorized_ids_admitted: int = 0
    #: Admitted ids shared by a permitted and a forbidden candidate (the marker check decides).
    shared_ids_admitted: int = 0
    markers_in_rendered: int = 0
    markers_in_pack: int = 0
    packs_leaking: int = 0
    token_mismatch: int = 0
    over_budget: int = 0
    #: Permitted candidates dropped as a duplicate/older version of a forbidden one.
    decided_by_forbidden: int = 0
    error_examples: list[str] = field(default_factory=list)
    leak_examples: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k != "traps"}
        out["traps"] = dict(sorted(self.traps.items()))
        return out


def _decided_by_forbidden(case: FuzzCase, traces: Sequence[TraceEvent]) -> int:
    only_forbidden = case.forbidden_only_ids()
    permitted = case.permitted_ids()
    n = 0
    for t in traces:
        for fate in t.dropped:
            if (
                fate.chunk_id in permitted
                and fate.kept_as is not None
                and fate.kept_as in only_forbidden
            ):
                n += 1
    return n


def check_pack(
    case: FuzzCase,
    pack: Pack,
    traces: Sequence[TraceEvent],
    count: Callable[[str], int],
    tally: FuzzTally,
) -> None:
    """Add what ``pack`` did wrong (if anything) to ``tally``."""
    tally.packs += 1
    permitted = case.permitted_ids()
    forbidden_ids = {case.batch.candidates[i].chunk_id for i in case.forbidden}
    leaked = False
    for item in pack.evidence:
        tally.evidence_items += 1
        for cid in item.chunk_ids:
            if cid not in permitted:
                tally.unauthorized_ids_admitted += 1
                leaked = True
            elif cid in forbidden_ids:
                tally.shared_ids_admitted += 1
    whole = encode(pack).decode("utf-8")
    for marker in case.markers.values():
        if marker in pack.rendered:
            tally.markers_in_rendered += 1
            leaked = True
        if marker in whole:
            tally.markers_in_pack += 1
            leaked = True
    if leaked:
        tally.packs_leaking += 1
        if len(tally.leak_examples) < 5:
            tally.leak_examples.append(f"{case.source}:{pack.request_id}:{pack.policy.name}")
    if count(pack.rendered) != pack.evidence_tokens:
        tally.token_mismatch += 1
    if pack.evidence_tokens > pack.budget.evidence_budget:
        tally.over_budget += 1
    tally.decided_by_forbidden += _decided_by_forbidden(case, traces)


def fuzz_cases(n: int, seed: int, *, msmarco: bool = True) -> list[FuzzCase]:
    """``n`` synthetic batches (and the MS MARCO batches when present), fuzzed."""
    from ctxbudget.testing.traffic import TrafficError, from_msmarco, synthetic

    rng = random.Random(f"guarantees-fuzz|{seed}")
    fuzzer = _Fuzzer(rng)
    sources: list[tuple[str, CandidateBatch]] = [
        ("synthetic", g.batch) for g in synthetic(n, seed=seed)
    ]
    if msmarco:
        try:
            variants = max(1, min(10, n // 400))
            ms = from_msmarco(None, seed=seed, variants_per_query=variants)
        except (TrafficError, OSError):
            ms = []
        sources += [("msmarco", g.batch) for g in ms]
    return [fuzzer.case(src, b) for src, b in sources]


@contextlib.contextmanager
def authorization_off() -> Iterator[None]:
    """The control: ``ctxbudget.stages.route.authorization_problem`` lets everything through."""
    import ctxbudget.stages.route as routing

    original = routing.authorization_problem

    def allow_all(batch: CandidateBatch, cand: Candidate) -> str | None:
        return None

    routing.authorization_problem = allow_all
    try:
        yield
    finally:
        routing.authorization_problem = original


def pack_cases(
    cases: Sequence[FuzzCase], policy: str, *, store: PolicyStore | None = None
) -> dict[str, FuzzTally]:
    """Pack every case with ``policy``; tallies per traffic source (and "all"). Rendered
    blocks are recounted with a registry of their own, not the pipeline's."""
    pipe = Pipeline.from_store(store or PolicyStore.load(POLICIES), policy)
    recount = TokenizerRegistry()
    tallies: dict[str, FuzzTally] = {}
    for case in cases:
        for key in (case.source, "all"):
            t = tallies.setdefault(key, FuzzTally())
            t.batches += 1
            t.candidates += len(case.batch.candidates)
            t.forbidden += len(case.forbidden)
            for i in case.forbidden:
                c = case.batch.candidates[i]
                if c.tenant_id is not None and c.tenant_id != case.batch.principal.tenant_id:
                    t.forbidden_tenant += 1
                else:
                    t.forbidden_label += 1
            t.traps.update(case.traps)
        try:
            result = pipe.run(case.batch)
        except Exception as e:  # a crash is a finding of its own, not a pass
            for key in (case.source, "all"):
                tallies[key].errors += 1
                if len(tallies[key].error_examples) < 5:
                    tallies[key].error_examples.append(
                        f"{case.batch.request_id}: {type(e).__name__}: {str(e)[:200]}"
                    )
            continue
        counter = recount.get(case.batch.model.tokenizer)  # cl100k_base in all this traffic
        for key in (case.source, "all"):
            check_pack(case, result.pack, result.traces, counter.count, tallies[key])
    return tallies


def run_fuzz(
    n: int, seed: int, policies: Sequence[str], *, msmarco: bool = True, control: bool = True
) -> dict[str, Any]:
    t0 = time.perf_counter()
    cases = fuzz_cases(n, seed, msmarco=msmarco)
    store = PolicyStore.load(POLICIES)
    runs: list[dict[str, Any]] = []
    for policy in policies:
        for mode in ("guarded", "control") if control else ("guarded",):
            ctx = authorization_off() if mode == "control" else contextlib.nullcontext()
            with ctx:
                tallies = pack_cases(cases, policy, store=store)
            for source, tally in sorted(tallies.items()):
                runs.append({"policy": policy, "mode": mode, "source": source, **tally.as_dict()})
    return {
        "command": "fuzz",
        "n": n,
        "seed": seed,
        "policies": list(policies),
        "seconds": round(time.perf_counter() - t0, 1),
        "runs": runs,
    }


def render_fuzz(report: dict[str, Any]) -> str:
    rows = [
        [
            r["policy"],
            r["mode"],
            r["source"],
            r["batches"],
            r["candidates"],
            r["forbidden"],
            sum(r["traps"].values()),
            r["evidence_items"],
            r["unauthorized_ids_admitted"],
            r["markers_in_rendered"],
            r["markers_in_pack"],
            r["packs_leaking"],
            r["decided_by_forbidden"],
            r["token_mismatch"],
            r["over_budget"],
            r["errors"],
        ]
        for r in report["runs"]
    ]
    head = table(
        [
            "policy",
            "authz",
            "traffic",
            "batches",
            "cands",
            "forbidden",
            "traps",
            "items",
            "foreign ids",
            "markers rendered",
            "markers in pack",
            "packs leaking",
            "decided by forbidden",
            "tokens != count",
            "over budget",
            "errors",
        ],
        rows,
    )
    return head + f"\n({report['seconds']} s)"
