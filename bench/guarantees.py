"""The guarantees against hostile input, measured: ``python -m bench.guarantees fuzz|poison|kill``.

    python -m bench.guarantees fuzz   [--n 2000] [--seed 1] [--policies default@1,lean@1]
    python -m bench.guarantees poison [--seed 1] [--good 200] [--rounds 3] [--work-budget-s 2]
    python -m bench.guarantees kill   [--batches 2000] [--kills 5] [--rate 40] [--poison]
                                      [--kafka 3 [--replicas 3] [--broker-kills 2] [--rolling]]

Exit status 1 when a guarantee did not hold (a leak, a line without exactly one outcome, a
lost request, a dead worker...), else 0.

Each prints a table of figures and, with ``--json-out F``, writes them as JSON.

``fuzz`` (in process, no broker): generated traffic (``bench.traffic.synthetic`` and, when the
data folder holds it, ``from_msmarco``) with every candidate's ``tenant_id`` and
``access_label`` redrawn (the principal's, another one, a look-alike such as ``ACME``,
``acme `` or fullwidth, or ``None``), the principal's labels redrawn, and constructed traps
added: a forbidden passage under the chunk id of a permitted one, a permitted copy of a
forbidden passage under another id, a forbidden newer version of a permitted document, a
forbidden chunk overlapping a permitted one's span, a forbidden sibling under the same parent.
Every forbidden candidate carries a marker of its own in each sentence and its title. Each
batch is packed with every policy, then checked: no admitted chunk id belongs only to
forbidden candidates, no marker appears in ``rendered`` (nor anywhere in the Pack),
``evidence_tokens`` is the exact count of ``rendered`` and at most the evidence budget, and
no permitted candidate was dropped in favour of a forbidden one (a side channel). A control
run with authorization switched off (``ctxbudget.stages.route.authorization_problem`` returning
None) shows that the checker does find leaks, so a zero means something.

``poison``: a mixed JSONL file (good batches interleaved with hostile lines of every kind in
:func:`poison_lines`, and one batch per attack of ``tests/data/injection_corpus.jsonl``
embedded beside benign passages) is packed by the ``ctxbudget pack`` console script in a
child process with ``--dead-letter``. Every line must end as exactly one pack (matched by
request id) or one dead letter (matched by line number); the exit status must be 1. Wall
time, the child's peak RSS (its ``VmHWM``) and its RSS after each round of the mix (``--rounds``:
memory must level off) are reported, and each line is timed alone in process against a
per-batch work budget (``--work-budget-s``, 2 s by default: the input limits bound what a
batch may hold, no code bounds its time, so this is the bench's own bound). Which kinds were
packed and which dead-lettered (with the error), and how many injected attacks were admitted,
are tabled; a dead letter of a type other than the refusals (``InputError``, ``LimitError``,
``TokenizerError``) is an unexpected error, listed.

``kill``: a fresh embedded broker, the shipped topics, one worker process per stage (``ctxbudget
worker route|consolidate|select|compress``), batches produced at a fixed rate, and a random
stage worker SIGKILLed ``--kills`` times during the run and restarted. Then every request must
have at least one pack, duplicates must be byte-identical (and equal to the in-process pack),
nothing lost; duplicates, latency, the time to drain and, per kill, when the packs of the
requests sent in the next 2 s were all out are reported. A worker that exits on its own is
recorded and restarted, as a supervisor would, up to 5 times per stage (then it is left down:
a crash loop). With ``--poison`` the poison lines of ``poison`` (and records a file cannot
hold: a null value, good batches with no key or a non-UTF-8 key) go on the candidates topic
too, and each must end as exactly one pack or one dead letter (identical repeats allowed
after a kill), with every worker alive at the end.

``kill --kafka 3``: the same on a real Apache Kafka cluster of 3 loopback nodes
(:mod:`workers.kafka_cluster`; replication factor 3, ``min.insync.replicas`` 2, acks=all,
SASL/SCRAM, ACLs from :mod:`workers.acls` applied, each stage worker connecting as its own
principal). ``--replicas 3`` runs a consumer group of 3 processes per stage (the worker
SIGKILLs pick among them); ``--broker-kills N`` SIGKILLs the node leading partition 0 of the
candidates topic, then of the packs topic, in turn, and starts it again after
``--broker-restart-delay-s``; ``--rolling`` then stops (SIGTERM) and restarts each node in
turn, waiting for every replica to be back in sync before the next. A record the bench's
producer could not get acknowledged is sent again (counted); a request is lost when the
broker acknowledged it and no pack came.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import orjson

from bench.common import REPO, environment, table, write_json
from ctxbudget.codec import decode_batch, encode
from ctxbudget.envelope import unescape
from ctxbudget.pipeline import Pipeline
from ctxbudget.policy import PolicyStore
from ctxbudget.schemas import Candidate, CandidateBatch, Pack, TraceEvent
from ctxbudget.tokens import TokenizerRegistry

POLICIES = REPO / "policies"
CORPUS = REPO / "tests" / "data" / "injection_corpus.jsonl"
STAGES = ("route", "consolidate", "select", "compress")

Expect = Literal["pack", "dead", "either"]


def _rss_mb(pid: int, field: str = "VmRSS") -> float:
    """A process's resident memory (``VmHWM``: its peak so far), 0 when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


# =============================================================================================
# fuzz: tenants and access labels
# =============================================================================================

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
    from bench.traffic import sentence_spans

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
    from bench.traffic import TrafficError, from_msmarco, synthetic

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


# =============================================================================================
# poison: a mixed file through `ctxbudget pack`
# =============================================================================================


@dataclass(frozen=True, slots=True)
class Attack:
    """An attack of the injection corpus, embedded as one candidate of a batch."""

    corpus_id: str
    style: str
    split: str
    chunk_id: str
    #: A stretch of the attack's text; found in the unescaped rendered block = rendered.
    fragment: str


@dataclass(frozen=True, slots=True)
class PoisonLine:
    """One line of the mixed file: its kind, its bytes, and what must become of it."""

    kind: str
    raw: bytes
    expect: Expect
    #: The request id a pack of this line carries (unique in the file); None when the line
    #: cannot be packed at all.
    request_id: str | None
    attack: Attack | None = None

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.raw).hexdigest()


#: Placeholder strings replaced by raw JSON text after dumping (numbers no encoder writes).
_RAW = "__RAW_{}__"


def _dump(data: Any, raw: dict[str, bytes] | None = None) -> bytes:
    out = orjson.dumps(data)
    for key, value in (raw or {}).items():
        token = orjson.dumps(_RAW.format(key))
        assert token in out, key
        out = out.replace(token, value)
    return out


def _readable_id(raw: bytes) -> str | None:
    """The request id of a line, when the line is a JSON object that names one."""
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    rid = data.get("request_id") if isinstance(data, dict) else None
    return rid if isinstance(rid, str) else None


def _words(rng: random.Random, n: int) -> str:
    return " ".join(f"w{rng.getrandbits(40):x}" for _ in range(n))


def _cand(i: int, text: str, **extra: Any) -> dict[str, Any]:
    return {
        "chunk_id": f"c{i}",
        "doc_id": f"d{i}",
        "source_id": f"s{i % 7}",
        "text": text,
        "retrieval_score": 1.0,
        **extra,
    }


def _near_limit(foreign: bool) -> list[dict[str, Any]]:
    """2,000 candidates in about 8.2 MB (under the 8 MiB limit), of another tenant or not."""
    return [
        _cand(
            i,
            f"w{i:05d} " * 557,
            chunk_id=f"c{i:05d}-" + "x" * 100,
            tenant_id="globex" if foreign else None,
        )
        for i in range(2000)
    ]


def _fragment(text: str) -> str:
    """The longest run of plain words of ``text`` (at most 60 characters)."""
    import re

    runs = re.findall(r"[A-Za-z0-9][A-Za-z0-9 ,;'-]{10,}", " ".join(text.split()))
    best = max(runs, key=len, default=text.strip()[:40]).strip()
    return best[:60].strip()


def _set(path: Sequence[str | int], value: Any) -> Callable[[dict[str, Any]], None]:
    """An edit that sets ``value`` at ``path`` of a batch's data."""

    def edit(d: dict[str, Any]) -> None:
        node: Any = d
        for p in path[:-1]:
            node = node[p]
        node[path[-1]] = value

    return edit


def _raw_at(path: Sequence[str | int], key: str, value: bytes) -> Any:
    """An edit that puts raw JSON text (``value``) at ``path`` (see ``_dump``)."""

    def edit(d: dict[str, Any]) -> dict[str, bytes]:
        _set(path, _RAW.format(key))(d)
        return {key: value}

    return edit


def _nested(depth: int) -> Any:
    node: Any = 1
    for _ in range(depth):
        node = {"m": node}
    return node


def _version_string(version: str) -> Callable[[dict[str, Any]], None]:
    """Candidate 0 gets ``version``, candidate 1 another version of its document."""

    def edit(d: dict[str, Any]) -> None:
        first, second = d["candidates"][0], d["candidates"][1]
        first["version"] = version
        second.update(doc_id=first["doc_id"], version="2")

    return edit


def _candidates(cands: list[dict[str, Any]]) -> Callable[[dict[str, Any]], None]:
    return _set(["candidates"], cands)


class _PoisonMaker:
    """Builds the hostile lines around generated good batches."""

    def __init__(self, seed: int, tag: str) -> None:
        from bench.traffic import synthetic

        self.rng = random.Random(f"guarantees-poison|{seed}|{tag}")
        self.tag = tag
        self.bases = [g.batch for g in synthetic(12, seed=seed + 7919)]
        self.n = 0

    def rid(self, kind: str) -> str:
        self.n += 1
        return f"{self.tag}-{self.n:04d}-{kind}"

    def base(self, rid: str) -> dict[str, Any]:
        data = self.rng.choice(self.bases).model_dump(mode="json", by_alias=True)
        data["request_id"] = rid
        return data

    def line(
        self,
        kind: str,
        expect: Expect,
        edit: Callable[[dict[str, Any]], dict[str, bytes] | None] | None = None,
    ) -> PoisonLine:
        data = self.base(self.rid(kind))
        raw = _dump(data, edit(data) if edit else None)
        rid = data["request_id"]
        return PoisonLine(kind, raw, expect, rid if isinstance(rid, str) else None)

    def raw(self, kind: str, expect: Expect, make: Callable[[str], bytes]) -> PoisonLine:
        raw = make(self.rid(kind))
        return PoisonLine(kind, raw, expect, _readable_id(raw))

    def hostile(self) -> list[PoisonLine]:
        rng = self.rng
        big = str(2**70).encode()

        def dup_key(rid: str) -> bytes:
            line = _dump(self.base(rid))
            needle = b'"principal":{"tenant_id":"acme"'
            assert needle in line
            return line.replace(needle, b'"principal":{"tenant_id":"globex","tenant_id":"acme"')

        def dup_chunk(rid: str) -> bytes:
            line = _dump(self.base(rid))
            return line.replace(b'{"chunk_id":', b'{"chunk_id":"shadow","chunk_id":', 1)

        def not_utf8_text(rid: str) -> bytes:
            line = _dump(self.base(rid))
            return line.replace(b'"text":"', b'"text":"\xc3\x28\xff ', 1)

        lines = [
            self.raw("invalid_json", "dead", lambda r: b'{"request_id": "' + r.encode() + b'", '),
            self.raw("truncated_batch", "dead", lambda r: _dump(self.base(r))[:1500]),
            self.raw(
                "not_utf8_request_id",
                "dead",
                lambda r: _dump(self.base(r + "\x00")).replace(b"\\u0000", b"\xff\xfe"),
            ),
            self.raw("not_utf8_passage", "dead", not_utf8_text),
            self.raw("nul_bytes", "dead", lambda r: b"\x00" * 64 + r.encode()),
            self.raw("json_array", "dead", lambda r: b"[" + _dump(self.base(r)) + b"]"),
            self.raw("json_string", "dead", lambda r: orjson.dumps(r)),
            self.raw("json_null", "dead", lambda r: b"null"),
            self.raw("deep_array", "dead", lambda r: b"[" * 100_000 + b"]" * 100_000),
            self.raw("deep_object", "dead", lambda r: b'{"a":' * 100_000 + b"1" + b"}" * 100_000),
            self.line(
                "deep_metadata_5000",
                "either",
                _raw_at(["candidates", 0, "metadata"], "a", b'{"m":' * 5000 + b"1" + b"}" * 5000),
            ),
            self.line(
                "deep_metadata_200", "either", _set(["candidates", 0, "metadata"], _nested(200))
            ),
            self.line("int_2^70_input_limit", "dead", _raw_at(["model", "input_limit"], "a", big)),
            self.line(
                "int_2^70_candidate_tokens", "dead", _raw_at(["candidates", 0, "tokens"], "a", big)
            ),
            self.line(
                "int_2^70_in_metadata",
                "dead",
                _raw_at(["candidates", 0, "metadata", "n"], "a", big),
            ),
            self.line(
                "number_5000_digits",
                "dead",
                _raw_at(["candidates", 0, "version"], "a", b"9" * 5000),
            ),
            self.line("string_5000_digits", "either", _version_string("9" * 5000)),
            self.line("string_4000_digits", "either", _version_string("9" * 4000)),
            self.line(
                "float_1e400", "dead", _raw_at(["candidates", 0, "retrieval_score"], "a", b"1e400")
            ),
            self.line(
                "nan_score", "dead", _raw_at(["candidates", 0, "retrieval_score"], "a", b"NaN")
            ),
            self.raw("duplicate_key_tenant", "dead", dup_key),
            self.raw("duplicate_key_chunk_id", "dead", dup_chunk),
            self.line("tenant_mismatch", "dead", _set(["tenant_id"], "globex")),
            self.line(
                "unknown_tokenizer", "dead", _set(["model", "tokenizer"], "no-such-tokenizer")
            ),
            self.line(
                "unavailable_tokenizer", "either", _set(["model", "tokenizer"], "o200k_base")
            ),
            self.line("negative_input_limit", "dead", _set(["model", "input_limit"], -5)),
            self.line("wrong_type_candidates", "dead", _set(["candidates"], "everything")),
            self.raw(
                "null_request_id", "dead", lambda r: _dump({**self.base(r), "request_id": None})
            ),
            self.line(
                "lone_surrogate",
                "either",
                _raw_at(["candidates", 0, "text"], "a", b'"abc \\ud800 def"'),
            ),
            self.line(
                "control_characters",
                "pack",
                _set(
                    ["candidates", 0, "text"],
                    "zero\u0000width\u200b rtl\u202e override\u2028line\u0085next\ufeff bom",
                ),
            ),
            self.line("empty_candidates", "pack", _candidates([])),
            self.line("input_limit_1", "pack", _set(["model", "input_limit"], 1)),
            self.line(
                "passage_200kb",
                "either",
                _set(["candidates", 0, "text"], _words(rng, 200_000 // 12)),
            ),
            self.line(
                "passage_60kb",
                "pack",
                _set(["candidates", 0, "text"], _words(rng, 60_000 // 12)),
            ),
            self.line(
                "near_identical_1999",
                "either",
                _candidates(
                    [
                        _cand(i, f"{'API keys expire after 90 days; rotate them. ' * 4}v{i}")
                        for i in range(1999)
                    ]
                ),
            ),
            self.line(
                "distinct_2000",
                "either",
                _candidates([_cand(i, _words(rng, 40)) for i in range(2000)]),
            ),
            self.line(
                "identical_3000",
                "either",
                _candidates(
                    [_cand(i, "API keys expire after 90 days; rotate them.") for i in range(3000)]
                ),
            ),
            self.line(
                "tiny_30000",
                "either",
                _candidates(
                    [
                        {"chunk_id": f"c{i}", "doc_id": "d", "source_id": "s", "text": f"t{i}"}
                        for i in range(30_000)
                    ]
                ),
            ),
            self.line(
                "oversize_9mb",
                "dead",
                _candidates([_cand(i, _words(rng, 5000)) for i in range(160)]),
            ),
            # Within the 8 MiB message limit, but what the route stage makes of them (the
            # batch again, plus a fate per dropped candidate) is not.
            self.line("near_limit_8mb_foreign", "either", _candidates(_near_limit(True))),
            self.line("near_limit_8mb", "either", _candidates(_near_limit(False))),
            self.raw(
                "long_request_id_100kb",
                "either",
                lambda r: _dump(self.base(r + "-" + "r" * 100_000)),
            ),
            self.line(
                "conversation_10000_turns",
                "either",
                _set(
                    ["conversation"],
                    [
                        {"role": "user" if i % 2 else "assistant", "text": f"turn {i} " * 8}
                        for i in range(10_000)
                    ],
                ),
            ),
            self.line(
                "sub_questions_2000",
                "either",
                _set(["query", "sub_questions"], [f"What about w{i}?" for i in range(2000)]),
            ),
            self.line(
                "overlapping_spans_2000",
                "either",
                _candidates(
                    [
                        _cand(
                            i,
                            _words(rng, 30),
                            doc_id="one",
                            span={"start": i * 10, "end": i * 10 + 400},
                        )
                        for i in range(2000)
                    ]
                ),
            ),
        ]
        return lines

    def attacks(self) -> list[PoisonLine]:
        """One batch per attack of the injection corpus, beside benign passages."""
        rows = [orjson.loads(x) for x in CORPUS.read_bytes().splitlines() if x.strip()]
        attacks = [r for r in rows if r["label"] == "attack"]
        benign = [r for r in rows if r["label"] == "benign"]
        out: list[PoisonLine] = []
        for k, row in enumerate(attacks):
            rid = self.rid("attack")
            data = self.base(rid)
            words = " ".join(str(row.get("title") or row["text"]).split()[:10])
            data["query"] = {"text": f"What does this say about {words}?"}
            data["conversation"] = []
            chunk = f"attack-{row['id']}"
            cands = [
                _cand(
                    0,
                    row["text"],
                    chunk_id=chunk,
                    doc_id=f"doc-{row['id']}",
                    source_id="forum.example",
                    title=row.get("title"),
                    retrieval_score=30.0,
                    rerank_score=0.99,
                )
            ]
            for j in range(2):
                b = benign[(2 * k + j) % len(benign)]
                cands.append(
                    _cand(
                        j + 1,
                        b["text"],
                        chunk_id=f"benign-{b['id']}-{k}",
                        title=b.get("title"),
                        retrieval_score=20.0 - j,
                        rerank_score=0.8 - 0.1 * j,
                    )
                )
            cands += [{**c, "chunk_id": f"{c['chunk_id']}-{k}"} for c in data["candidates"][:3]]
            data["candidates"] = cands
            raw = _dump(data)
            attack = Attack(row["id"], row["style"], row["split"], chunk, _fragment(row["text"]))
            out.append(PoisonLine("injection_attack", raw, "pack", rid, attack))
        return out

    def good(self, n: int, seed: int) -> list[PoisonLine]:
        from bench.traffic import synthetic

        out = []
        for g in synthetic(n, seed=seed):
            rid = self.rid("good")
            raw = encode(g.batch).replace(orjson.dumps(g.batch.request_id), orjson.dumps(rid), 1)
            out.append(PoisonLine("good", raw, "pack", rid))
        return out


def poison_lines(
    seed: int, *, good: int = 200, rounds: int = 1, skip: Sequence[str] = ()
) -> list[PoisonLine]:
    """``rounds`` rounds of good batches, hostile lines and injection attacks, shuffled within
    each round (every line of every round has its own request id and its own bytes)."""
    out: list[PoisonLine] = []
    for r in range(rounds):
        maker = _PoisonMaker(seed, f"r{r}")
        lines = maker.good(good, seed + r) + maker.hostile() + maker.attacks()
        lines = [x for x in lines if x.kind not in skip]
        maker.rng.shuffle(lines)
        out += lines
    return out


def ctxbudget_command() -> list[str]:
    """The ``ctxbudget`` console script beside this interpreter (else ``python -m ctxbudget``)."""
    script = Path(sys.executable).parent / "ctxbudget"
    return [str(script)] if script.exists() else [sys.executable, "-m", "ctxbudget"]


@dataclass
class _Progress:
    """Lines written so far to the outputs of a running ``ctxbudget pack`` (read as they grow)."""

    paths: tuple[Path, ...]
    offsets: list[int] = field(default_factory=list)
    lines: int = 0

    def poll(self) -> int:
        if not self.offsets:
            self.offsets = [0] * len(self.paths)
        for i, path in enumerate(self.paths):
            try:
                with path.open("rb") as f:
                    f.seek(self.offsets[i])
                    chunk = f.read()
            except OSError:
                continue
            self.offsets[i] += len(chunk)
            self.lines += chunk.count(b"\n")
        return self.lines


def pack_file(
    lines: Sequence[PoisonLine], workdir: Path, policy: str = "default@1"
) -> dict[str, Any]:
    """Run ``ctxbudget pack`` on the lines; its exit status, time, RSS and output paths."""
    if any(b"\n" in x.raw for x in lines):
        raise ValueError("a line holds a newline byte: line numbers would shift")
    src = workdir / "mixed.jsonl"
    src.write_bytes(b"\n".join(x.raw for x in lines) + b"\n")
    out, dead, err = workdir / "packs.jsonl", workdir / "dead.jsonl", workdir / "stderr.txt"
    cmd = [
        *ctxbudget_command(),
        "pack",
        str(src),
        "-o",
        str(out),
        "--dead-letter",
        str(dead),
        "--policy",
        policy,
        "--policies",
        str(POLICIES),
        "--no-progress",
    ]
    progress = _Progress((out, dead))
    samples: list[tuple[float, int, float]] = []
    peak = 0.0
    t0 = time.monotonic()
    with err.open("wb") as err_fh:
        proc = subprocess.Popen(cmd, cwd=workdir, stdout=subprocess.DEVNULL, stderr=err_fh)
        status, usage = 0, None
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            samples.append((time.monotonic() - t0, progress.poll(), _rss_mb(proc.pid)))
            peak = max(peak, _rss_mb(proc.pid, "VmHWM"))
            time.sleep(0.05)
    proc.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.monotonic() - t0
    stderr = err.read_text(errors="replace")
    return {
        "command": " ".join(
            [*cmd[:2], "mixed.jsonl", "-o", "packs.jsonl", "--dead-letter", "dead.jsonl"]
        ),
        "exit_status": proc.returncode,
        "seconds": round(seconds, 2),
        # VmHWM, the child's own high-water mark, read every 50 ms until it exits. Not
        # ru_maxrss from wait4: on Linux that counts the parent's pages at fork time (the
        # pre-exec copy), i.e. this process and every line it holds.
        "peak_rss_mb": round(peak, 1),
        "ru_maxrss_mb_with_parent": round(usage.ru_maxrss / 1024, 1),
        "input_mb": round(src.stat().st_size / 1e6, 2),
        "summary": stderr.strip().splitlines()[-1] if stderr.strip() else "",
        "traceback": "Traceback" in stderr,
        "samples": samples,
        "out": out,
        "dead": dead,
    }


@dataclass
class KindTally:
    lines: int = 0
    packed: int = 0
    dead: int = 0
    neither: int = 0
    #: Lines with a pack and a dead letter.
    both: int = 0
    #: Lines with the same outcome more than once (allowed after a crash: at-least-once).
    twice: int = 0
    #: Lines whose repeated outcomes differ in their bytes.
    copies_differ: int = 0
    unexpected: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    max_s: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k != "errors"}
        out["errors"] = dict(self.errors.most_common())
        return out


#: The refusals the code means to make; a dead letter of any other type is an unexpected
#: error (a bug met on the way, caught by the catch-all and kept as a dead letter).
REFUSALS = frozenset({"InputError", "LimitError", "TokenizerError"})


def unexpected_errors(letters: Sequence[dict[str, Any]]) -> list[str]:
    return [
        f"{d.get('request_id')}: {d.get('error_type')}: {str(d.get('error'))[:160]}"
        for d in letters
        if d.get("error_type") not in REFUSALS
    ]


def _error_kind(letter: dict[str, Any]) -> str:
    """Error type and the limit or the first words of the error, for the summary."""
    text = str(letter.get("error", ""))
    limit = text.rsplit("(", 1)[-1].rstrip(")") if text.endswith(")") and "(max_" in text else ""
    stage = "" if letter.get("stage") in (None, "pack") else f"{letter['stage']}:"
    if limit:
        return f"{stage}{letter.get('error_type')}:{limit}"
    return f"{stage}{letter.get('error_type')}: {' '.join(text.split()[:6])}"


def attack_figures(
    lines: Sequence[PoisonLine], packs: dict[int, list[Pack]]
) -> dict[str, dict[str, int]]:
    """Per corpus split: attacks, packed, withheld by the gate, admitted, text rendered."""
    out: dict[str, dict[str, int]] = {}
    for n, line in enumerate(lines, start=1):
        if line.attack is None:
            continue
        a = line.attack
        for key in (a.split, "all"):
            row = out.setdefault(
                key,
                {
                    "attacks": 0,
                    "packed": 0,
                    "withheld": 0,
                    "admitted": 0,
                    "rendered": 0,
                    "benign_withheld": 0,
                },
            )
            row["attacks"] += 1
            for pack in packs.get(n, [])[:1]:
                row["packed"] += 1
                withheld = {w.chunk_id for w in pack.withheld}
                row["withheld"] += a.chunk_id in withheld
                row["benign_withheld"] += sum(1 for w in withheld if w.startswith("benign-"))
                admitted = {cid for item in pack.evidence for cid in item.chunk_ids}
                row["admitted"] += a.chunk_id in admitted
                row["rendered"] += a.fragment in " ".join(unescape(pack.rendered).split())
    return out


def verify_outcomes(
    lines: Sequence[PoisonLine],
    packs_by_line: dict[int, list[Pack]],
    dead_by_line: dict[int, list[dict[str, Any]]],
    *,
    allow_duplicates: bool = False,
) -> tuple[dict[str, KindTally], list[str]]:
    """Per kind: packed / dead / neither / both / twice; and the problems, one line each.

    ``allow_duplicates``: a repeated outcome with identical copies is no problem (after a
    worker was killed, at-least-once delivery may repeat it); a pack and a dead letter for
    one line, or copies that differ, always are."""
    kinds: dict[str, KindTally] = {}
    problems: list[str] = []
    for n, line in enumerate(lines, start=1):
        k = kinds.setdefault(line.kind, KindTally())
        k.lines += 1
        packs, letters = packs_by_line.get(n, []), dead_by_line.get(n, [])
        p, d = len(packs), len(letters)
        if p + d == 0:
            k.neither += 1
            problems.append(f"line {n} ({line.kind}): neither a pack nor a dead letter")
        elif p and d:
            k.both += 1
            problems.append(f"line {n} ({line.kind}): {p} pack(s) and {d} dead letter(s)")
        elif p + d > 1:
            k.twice += 1
            differ = (
                len({encode(x) for x in packs}) > 1
                or len({orjson.dumps(x, option=orjson.OPT_SORT_KEYS) for x in letters}) > 1
            )
            k.copies_differ += differ
            if differ or not allow_duplicates:
                what = "differing" if differ else "identical"
                problems.append(f"line {n} ({line.kind}): {p + d} {what} outcomes")
        if p:
            k.packed += 1
        if d:
            k.dead += 1
            for letter in dead_by_line[n]:
                k.errors[_error_kind(letter)] += 1
        if (line.expect == "pack" and d) or (line.expect == "dead" and p):
            k.unexpected += 1
            what = "dead-lettered" if d else "packed"
            why = f": {dead_by_line[n][0].get('error', '')[:200]}" if d else ""
            problems.append(f"line {n} ({line.kind}): expected {line.expect}, was {what}{why}")
    return kinds, problems


def pack_checks(
    packs: Sequence[Pack], tokenizers: TokenizerRegistry | None = None
) -> dict[str, int]:
    """Over budget and token-count mismatches over packs (cl100k_base unless a pack's batch
    named another tokenizer: every packed line of the poison file uses cl100k_base)."""
    counter = (tokenizers or TokenizerRegistry()).get("cl100k_base")
    over = sum(1 for p in packs if p.evidence_tokens > p.budget.evidence_budget)
    mismatch = sum(1 for p in packs if counter.count(p.rendered) != p.evidence_tokens)
    return {"packs": len(packs), "over_budget": over, "tokens_not_exact": mismatch}


def time_lines(
    lines: Sequence[PoisonLine], policy: str = "default@1"
) -> dict[int, tuple[float, str]]:
    """Each line decoded and packed alone in this process: (seconds, outcome) by line number
    (what one record costs a worker, the stage code being the same)."""
    pipe = Pipeline.from_store(PolicyStore.load(POLICIES), policy)
    for line in lines:  # warm up (tokenizer, caches) on the first good line
        if line.kind == "good":
            pipe.run(decode_batch(line.raw))
            break
    out: dict[int, tuple[float, str]] = {}
    for n, line in enumerate(lines, start=1):
        t0 = time.perf_counter()
        try:
            encode(pipe.run(decode_batch(line.raw)).pack)
            outcome = "pack"
        except Exception as e:
            outcome = type(e).__name__
        out[n] = (time.perf_counter() - t0, outcome)
    return out


def _rss_by_round(
    samples: Sequence[tuple[float, int, float]], bounds: Sequence[int]
) -> list[float]:
    out: list[float] = []
    for b in bounds:
        after = [rss for _, done, rss in samples if done >= b and rss > 0]
        before = [rss for _, done, rss in samples if done < b and rss > 0]
        out.append(round((after[0] if after else (before[-1] if before else 0.0)), 1))
    return out


def run_poison(
    seed: int,
    *,
    good: int,
    rounds: int,
    work_budget_s: float,
    policy: str = "default@1",
    skip: Sequence[str] = (),
    workdir: Path | None = None,
    timing: bool = True,
) -> dict[str, Any]:
    lines = poison_lines(seed, good=good, rounds=rounds, skip=skip)
    with contextlib.ExitStack() as stack:
        if workdir is None:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="guarantees-")))
        run = pack_file(lines, workdir, policy)
        packs: list[Pack] = [
            Pack.model_validate_json(x) for x in run["out"].read_bytes().splitlines() if x.strip()
        ]
        letters = [orjson.loads(x) for x in run["dead"].read_bytes().splitlines() if x.strip()]
    by_rid = {x.request_id: n for n, x in enumerate(lines, start=1) if x.request_id is not None}
    packs_by_line: dict[int, list[Pack]] = {}
    unmatched = 0
    for p in packs:
        n = by_rid.get(p.request_id)
        if n is None:
            unmatched += 1
        else:
            packs_by_line.setdefault(n, []).append(p)
    dead_by_line: dict[int, list[dict[str, Any]]] = {}
    for d in letters:
        dead_by_line.setdefault(int(d.get("line") or 0), []).append(d)
    kinds, problems = verify_outcomes(lines, packs_by_line, dead_by_line)
    if unmatched:
        problems.append(f"{unmatched} pack(s) match no line")
    if run["exit_status"] != 1:
        problems.append(f"exit status {run['exit_status']}, expected 1")
    if run["traceback"]:
        problems.append("a traceback on stderr")
    stalls: list[str] = []
    if timing:
        for n, (secs, outcome) in time_lines(lines, policy).items():
            k = kinds[lines[n - 1].kind]
            k.max_s = max(k.max_s, round(secs, 4))
            if secs > work_budget_s:
                stalls.append(f"line {n} ({lines[n - 1].kind}): {secs:.2f} s ({outcome})")
    per_round = len(lines) // rounds
    bounds = [per_round * (r + 1) for r in range(rounds)]
    exactly_one = sum(
        1
        for n in range(1, len(lines) + 1)
        if len(packs_by_line.get(n, [])) + len(dead_by_line.get(n, [])) == 1
    )
    return {
        "command": "poison",
        "seed": seed,
        "rounds": rounds,
        "lines": len(lines),
        "hostile_lines": sum(1 for x in lines if x.kind not in ("good", "injection_attack")),
        "attack_lines": sum(1 for x in lines if x.attack is not None),
        "good_lines": sum(1 for x in lines if x.kind == "good"),
        "exactly_one": exactly_one,
        "packs": len(packs),
        "dead_letters": len(letters),
        "run": {k: v for k, v in run.items() if k not in ("samples", "out", "dead")},
        "rss_mb_after_round": _rss_by_round(run["samples"], bounds),
        "work_budget_s": work_budget_s,
        "over_work_budget": stalls,
        "pack_checks": pack_checks(packs),
        "unexpected_errors": unexpected_errors(letters),
        "attacks": attack_figures(lines, packs_by_line),
        "attacks_rendered": sorted(
            {
                x.attack.corpus_id
                for n, x in enumerate(lines, start=1)
                if x.attack is not None
                and any(
                    x.attack.chunk_id in item.chunk_ids
                    for p in packs_by_line.get(n, [])
                    for item in p.evidence
                )
            }
        ),
        "kinds": {k: v.as_dict() for k, v in sorted(kinds.items())},
        "problems": problems,
    }


def render_poison(report: dict[str, Any]) -> str:
    r = report["run"]
    parts = [
        table(
            ["figure", "value"],
            [
                [
                    "lines (good / hostile / attack)",
                    "{lines} ({good_lines} / {hostile_lines} / {attack_lines})".format(**report),
                ],
                [
                    "exactly one pack or dead letter",
                    f"{report['exactly_one']} of {report['lines']}",
                ],
                ["packs / dead letters", f"{report['packs']} / {report['dead_letters']}"],
                ["exit status (1 expected)", r["exit_status"]],
                ["wall time s", r["seconds"]],
                ["input MB", r["input_mb"]],
                ["peak RSS MB (ctxbudget pack)", r["peak_rss_mb"]],
                [
                    "RSS MB after each round",
                    " / ".join(str(x) for x in report["rss_mb_after_round"]),
                ],
                [
                    f"lines over the {report['work_budget_s']} s work budget",
                    len(report["over_work_budget"]),
                ],
                ["dead letters from unexpected errors", len(report["unexpected_errors"])],
                ["packs over budget", report["pack_checks"]["over_budget"]],
                ["packs whose tokens != exact count", report["pack_checks"]["tokens_not_exact"]],
                ["problems", len(report["problems"])],
            ],
        )
    ]
    rows = []
    for kind, k in report["kinds"].items():
        errors = ", ".join(f"{e} x{c}" if c > 1 else e for e, c in k["errors"].items())
        rows.append(
            [
                kind,
                k["lines"],
                k["packed"],
                k["dead"],
                k["neither"],
                k["both"],
                k["twice"],
                k["unexpected"],
                k["max_s"],
                errors[:90],
            ]
        )
    parts.append(
        table(
            [
                "kind",
                "lines",
                "packed",
                "dead",
                "neither",
                "both",
                "twice",
                "unexpected",
                "max s alone",
                "dead-letter errors",
            ],
            rows,
        )
    )
    arows = [
        [
            split,
            a["attacks"],
            a["packed"],
            a["withheld"],
            a["admitted"],
            a["rendered"],
            a["benign_withheld"],
        ]
        for split, a in sorted(report["attacks"].items())
    ]
    parts.append(
        table(
            [
                "corpus split",
                "attacks",
                "packed",
                "withheld",
                "admitted",
                "text rendered",
                "benign withheld",
            ],
            arows,
        )
    )
    if report["attacks_rendered"]:
        parts.append("attacks admitted: " + ", ".join(report["attacks_rendered"]))
    if report["problems"]:
        parts.append("problems:\n  " + "\n  ".join(report["problems"][:40]))
    if report["unexpected_errors"]:
        parts.append("unexpected errors:\n  " + "\n  ".join(report["unexpected_errors"][:10]))
    if report["over_work_budget"]:
        parts.append("over the work budget:\n  " + "\n  ".join(report["over_work_budget"][:20]))
    return "\n\n".join(parts)


# =============================================================================================
# kill: SIGKILL stage workers on the embedded broker
# =============================================================================================


class _Collector(threading.Thread):
    """Reads the packs and dead-letter topics from the start: every record, with its time."""

    def __init__(self, bootstrap: str, packs: str, deadletter: str, settings: Any = None) -> None:
        super().__init__(daemon=True, name="guarantees-collector")
        from ctxbudget.kafka import io

        self.packs_topic, self.dead_topic = packs, deadletter
        self.consumer = io.client(
            "consumer",
            settings,
            brokers=bootstrap,
            client_id="ctxbudget-bench",
            group_id=None,
            enable_auto_commit=False,
            fetch_max_wait_ms=50,
            max_partition_fetch_bytes=32 * 1024 * 1024,
            fetch_max_bytes=64 * 1024 * 1024,
            consumer_timeout_ms=1000,
        )
        io.assign_all(self.consumer, (packs, deadletter), wait_s=60.0)
        self.packs: dict[str, list[bytes]] = {}
        self.first_at: dict[str, float] = {}
        self.dead: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            polled = self.consumer.poll(timeout_ms=100, max_records=5000)
            now = time.monotonic()
            with self.lock:
                for tp, records in polled.items():
                    for r in records:
                        if tp.topic == self.dead_topic:
                            self.dead.append(orjson.loads(r.value))
                        elif r.key is not None:
                            key = r.key.decode("utf-8", "replace")
                            self.packs.setdefault(key, []).append(r.value)
                            self.first_at.setdefault(key, now)

    def have(self, keys: set[str]) -> int:
        with self.lock:
            return sum(1 for k in keys if k in self.packs)

    def stop(self) -> None:
        self.stopping.set()
        self.join(10)
        self.consumer.close()


@dataclass
class _Stage:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path
    started: int = 1
    rss_mb: list[float] = field(default_factory=list)


class _Topology:
    """Stage worker processes (``replicas`` per stage) on a fresh embedded broker, or on a
    real Kafka cluster (``kafka_nodes``), with the shipped topics."""

    def __init__(
        self,
        logdir: Path,
        env_extra: dict[str, str],
        *,
        kafka_nodes: int = 0,
        replicas: int = 1,
        cluster: Any = None,
    ) -> None:
        from workers.broker import EmbeddedBroker
        from workers.topic_admin import apply_topics
        from workers.topics import load_topic_specs

        self.logdir = logdir
        self.cluster: Any = None
        self.client_settings: Any = None
        group_prefix = f"guarantees-{uuid.uuid4().hex[:8]}"
        specs = load_topic_specs(REPO / "topics")
        self.stage_env: dict[str, dict[str, str]] = {stage: {} for stage in STAGES}
        self.own_cluster = cluster is None
        if cluster is not None or kafka_nodes:
            self.cluster = self._start_cluster(kafka_nodes, specs, group_prefix, cluster)
            self.bootstrap = self.cluster.bootstrap
        else:
            self.broker = EmbeddedBroker().start()
            self.bootstrap = self.broker.bootstrap
            apply_topics(self.bootstrap, specs)
        self.env = dict(
            os.environ,
            CTXBUDGET_BROKERS=self.bootstrap,
            CTXBUDGET_POLICIES=str(POLICIES),
            CTXBUDGET_GROUP_PREFIX=group_prefix,
            CTXBUDGET_LOG_LEVEL="WARNING",
            **env_extra,
        )
        self.slots = [
            stage if replicas == 1 else f"{stage}-{i}"
            for stage in STAGES
            for i in range(1, replicas + 1)
        ]
        self.stages: dict[str, _Stage] = {}
        self.lock = threading.Lock()
        self.exits: list[tuple[str, int | None]] = []

    def _start_cluster(
        self, nodes: int, specs: Sequence[Any], group_prefix: str, given: Any
    ) -> Any:
        """The cluster (``given``, or a new one of ``nodes``), topics and ACLs applied."""
        from workers.acls import acl_plan, apply_acls, principals
        from workers.kafka_cluster import KafkaCluster
        from workers.topic_admin import apply_topics

        names = principals()
        cluster = given or KafkaCluster(nodes=nodes, users=list(names.values())).start()
        nodes = cluster.nodes
        try:
            self.client_settings = cluster.settings()
            apply_topics(
                cluster.bootstrap, specs, replication_factor=nodes, settings=self.client_settings
            )
            plan = acl_plan(cluster.settings(group_prefix=group_prefix))
            admin = cluster.admin()
            try:
                apply_acls(admin, plan)
            finally:
                admin.close()
            cluster.wait_in_sync([spec.name for spec in specs])
        except BaseException:
            if given is None:
                cluster.stop()
            raise
        self.stage_env = {stage: cluster.env(names[stage]) for stage in STAGES}
        return cluster

    def spawn(self, slot: str) -> _Stage:
        from workers.broker import _die_with_parent

        stage = slot.split("-")[0]
        n = self.stages[slot].started + 1 if slot in self.stages else 1
        log = self.logdir / f"{slot}-{n}.log"
        with log.open("wb") as fh:
            proc = subprocess.Popen(
                [*ctxbudget_command(), "worker", stage],
                env={**self.env, **self.stage_env[stage]},
                cwd=REPO,
                stdout=fh,
                stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent,
            )
        s = _Stage(slot, proc, log, started=n)
        with self.lock:
            self.stages[slot] = s
        return s

    def start_all(self) -> None:
        for slot in self.slots:
            self.spawn(slot)

    def kill(self, stage: str) -> None:
        with self.lock:
            s = self.stages[stage]
        s.proc.send_signal(signal.SIGKILL)
        s.proc.wait(30)

    def dead_workers(self) -> list[str]:
        with self.lock:
            return [
                f"{s.name} (exit {s.proc.returncode})"
                for s in self.stages.values()
                if s.proc.poll() is not None
            ]

    def sample_rss(self) -> None:
        with self.lock:
            for s in self.stages.values():
                s.rss_mb.append(round(_rss_mb(s.proc.pid), 1))

    def stop(self) -> dict[str, int | None]:
        codes: dict[str, int | None] = {}
        with self.lock:
            stages = list(self.stages.values())
        for s in stages:
            if s.proc.poll() is None:
                s.proc.send_signal(signal.SIGTERM)
        for s in stages:
            try:
                codes[s.name] = s.proc.wait(30)
            except subprocess.TimeoutExpired:
                s.proc.kill()
                codes[s.name] = s.proc.wait(5)
        if self.cluster is not None:
            if self.own_cluster:
                self.cluster.stop()
        else:
            self.broker.stop()
        return codes

    def log_findings(self) -> dict[str, list[str]]:
        """Lines of the worker logs that tell of trouble (tracebacks, critical, exits)."""
        out: dict[str, list[str]] = {}
        for log in sorted(self.logdir.glob("*.log")):
            bad = [
                line.strip()[:300]
                for line in log.read_text(errors="replace").splitlines()
                if any(
                    w in line
                    for w in ("Traceback", "CRITICAL", "critical", "not acknowledged", "Error:")
                )
            ]
            if bad:
                out[log.name] = bad[:8]
        return out


@dataclass(frozen=True, slots=True)
class _Record:
    key: str
    value: bytes | None
    poison: PoisonLine | None = None
    #: The record's key on the wire when it is not ``key`` (None: a record without a key).
    wire_key: bytes | Literal["same"] | None = "same"

    def kafka_key(self) -> bytes | None:
        return self.key.encode() if self.wire_key == "same" else self.wire_key


def topic_only_lines(seed: int) -> list[tuple[_Record, PoisonLine]]:
    """Records a file cannot hold: a null value (a tombstone), and good batches without a
    key or with a key that is not UTF-8 (their packs are keyed by the request id)."""
    from bench.traffic import synthetic

    out: list[tuple[_Record, PoisonLine]] = []
    tomb = PoisonLine("tombstone", b"", "dead", None)
    out.append((_Record("poison-tombstone", None, tomb), tomb))
    for kind, key in (("good_null_key", None), ("good_binary_key", b"\xff\xfe\x00key")):
        g = synthetic(1, seed=seed + len(out) + 4242)[0]
        rid = f"topic-{kind}"
        raw = encode(g.batch).replace(orjson.dumps(g.batch.request_id), orjson.dumps(rid), 1)
        line = PoisonLine(kind, raw, "pack", rid)
        out.append((_Record(rid, raw, line, wire_key=key), line))
    return out


def _traffic(batches: int, seed: int) -> tuple[list[_Record], dict[str, bytes]]:
    """The good records and the in-process pack of each (what the workers must produce)."""
    from bench.traffic import synthetic

    pipe = Pipeline.from_store(PolicyStore.load(POLICIES), "default@1")
    records, expected = [], {}
    for g in synthetic(batches, seed=seed):
        raw = encode(g.batch)
        records.append(_Record(g.batch.request_id, raw))
        expected[g.batch.request_id] = encode(pipe.run(g.batch).pack)
    return records, expected


def _warm_up(
    topo: _Topology, collector: _Collector, timeout_s: float, resend_every_s: float = 30.0
) -> float:
    """Six requests through the whole topology before the measured run. Each send is
    retried and acknowledged (a leader that refuses the first connection loses no warm-up
    record), and the requests still without a pack are sent again every ``resend_every_s``
    (warm-up packs are never counted, so a copy costs nothing)."""
    from bench.traffic import synthetic
    from ctxbudget.kafka import io

    t0 = time.monotonic()
    producer = io.client(
        "producer",
        topo.client_settings,
        brokers=topo.bootstrap,
        client_id="ctxbudget-bench",
        acks="all",
        retries=2**31 - 1,
        retry_backoff_ms=200,
        request_timeout_ms=15000,
    )
    records: dict[str, bytes] = {}
    for i, g in enumerate(synthetic(6, seed=987654)):
        rid = f"warmup-{i}"
        raw = encode(g.batch).replace(orjson.dumps(g.batch.request_id), orjson.dumps(rid), 1)
        records[rid] = raw

    def send(keys: Sequence[str]) -> None:
        futures = [
            producer.send("ctx.candidates.v1", key=k.encode(), value=records[k]) for k in keys
        ]
        producer.flush()
        for f in futures:
            f.get(timeout=60)

    try:
        send(sorted(records))
        resent_at = time.monotonic()
        while collector.have(set(records)) < len(records):
            missing = sorted(k for k in records if collector.have({k}) == 0)
            if time.monotonic() - t0 > timeout_s:
                raise RuntimeError(
                    f"workers not ready after {timeout_s:.0f} s: no pack for {missing}, "
                    f"{len(collector.dead)} dead letters; {topo.log_findings()}"
                )
            if topo.dead_workers():
                raise RuntimeError(f"a worker exited during warm-up: {topo.dead_workers()}")
            if time.monotonic() - resent_at > resend_every_s:
                send(missing)
                resent_at = time.monotonic()
            time.sleep(0.1)
    finally:
        producer.close()
    return time.monotonic() - t0


class _Chaos:
    """SIGKILLs stage workers on schedule and restarts them; run from the main thread only
    (a worker's parent-death signal is tied to the thread that started it). A worker that
    exits on its own is recorded and restarted too, as a supervisor would."""

    def __init__(
        self,
        topo: _Topology,
        kill_times: Sequence[float],
        rng: random.Random,
        restart_delay_s: float,
        t0: float,
    ) -> None:
        self.topo, self.rng, self.delay, self.t0 = topo, rng, restart_delay_s, t0
        self.kills = list(kill_times)
        self.restarts: list[tuple[float, str, dict[str, Any]]] = []
        self.events: list[dict[str, Any]] = []
        self.unexpected: list[dict[str, Any]] = []
        self.given_up: set[str] = set()
        self.max_restarts = 5

    def _down(self) -> set[str]:
        return {stage for _, stage, _ in self.restarts}

    def tick(self) -> None:
        now = time.monotonic() - self.t0
        while self.kills and self.kills[0] <= now:
            self.kills.pop(0)
            up = [s for s in self.topo.slots if s not in self._down()]
            if not up:
                continue
            stage = self.rng.choice(up)
            self.topo.kill(stage)
            event = {"stage": stage, "killed_at_s": round(now, 2), "restarted_at_s": None}
            self.events.append(event)
            self.restarts.append((now + self.delay, stage, event))
        for item in list(self.restarts):
            at, stage, event = item
            if at <= now:
                self.topo.spawn(stage)
                event["restarted_at_s"] = round(time.monotonic() - self.t0, 2)
                self.restarts.remove(item)
        down = self._down()
        with self.topo.lock:
            exited = [s for s in self.topo.stages.values() if s.proc.poll() is not None]
        for s in exited:
            if s.name in down or s.name in self.given_up:
                continue
            tail = s.log.read_text(errors="replace")[-1500:]
            self.unexpected.append(
                {
                    "stage": s.name,
                    "exit": s.proc.returncode,
                    "at_s": round(now, 2),
                    "log_tail": tail,
                }
            )
            if sum(1 for u in self.unexpected if u["stage"] == s.name) > self.max_restarts:
                self.given_up.add(s.name)  # a crash loop: left down, and the report says so
            else:
                self.topo.spawn(s.name)

    @property
    def idle(self) -> bool:
        return not self.kills and not self.restarts


class _BrokerChaos(threading.Thread):
    """SIGKILLs the leader of the candidates and packs partitions, then rolls every node.

    Runs its schedule in a thread of its own, so the producer and the worker chaos of the
    main thread never wait on a broker restart (the cluster starts the JVMs from its own
    long-lived thread, so they outlive this one).
    """

    def __init__(
        self,
        cluster: Any,
        *,
        kill_times: Sequence[float],
        rolling_at: float | None,
        restart_delay_s: float,
        t0: float,
        topics: Sequence[str],
    ) -> None:
        super().__init__(daemon=True, name="guarantees-broker-chaos")
        self.cluster, self.t0, self.delay, self.topics = cluster, t0, restart_delay_s, topics
        self.plan: list[tuple[float, str]] = [
            (at, ("ctx.candidates.v1", "ctx.packs.v1")[i % 2]) for i, at in enumerate(kill_times)
        ]
        if rolling_at is not None:
            self.plan.append((rolling_at, "rolling"))
        self.events: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self.done = threading.Event()
        self.finished = threading.Event()

    def _now(self) -> float:
        return round(time.monotonic() - self.t0, 1)

    def _kill_leader(self, topic: str) -> None:
        node = self.cluster.leader(topic, 0)
        event: dict[str, Any] = {"action": f"kill -9 leader of {topic}[0]", "node": node}
        event["at_s"] = self._now()
        self.cluster.kill(node)
        time.sleep(self.delay)
        self.cluster.start_node(node)
        event["restarted_at_s"] = self._now()
        self.cluster.wait_in_sync(self.topics, timeout_s=300)
        event["in_sync_at_s"] = self._now()
        self.events.append(event)

    def _rolling(self) -> None:
        for node in (1, 2, 3):
            event: dict[str, Any] = {"action": "rolling restart", "node": node}
            event["at_s"] = self._now()
            event["sigterm_exit"] = self.cluster.stop_node(node)
            self.cluster.start_node(node)
            event["restarted_at_s"] = self._now()
            self.cluster.wait_in_sync(self.topics, timeout_s=300)
            event["in_sync_at_s"] = self._now()
            self.events.append(event)

    def run(self) -> None:
        try:
            for at, action in sorted(self.plan):
                while time.monotonic() - self.t0 < at:
                    time.sleep(0.1)
                if action == "rolling":
                    self._rolling()
                else:
                    self._kill_leader(action)
        except Exception as e:  # reported: the run's figures say what happened
            self.errors.append(f"{type(e).__name__}: {e}")
        finally:
            self.done.set()
        self.finished.wait()

    def finish(self) -> None:
        self.finished.set()
        self.join(5)


def _poison_outcomes(
    lines: Sequence[PoisonLine],
    keys: Sequence[str],
    packs: dict[str, list[bytes]],
    dead: Sequence[dict[str, Any]],
    *,
    allow_duplicates: bool,
) -> tuple[dict[str, KindTally], list[str], int]:
    """Each poison line's packs (by key) and dead letters (by the original's sha256 for the
    first stage, else by request id)."""
    by_sha = {x.sha256: n for n, x in enumerate(lines, start=1)}
    by_rid = {x.request_id: n for n, x in enumerate(lines, start=1) if x.request_id}
    dead_by_line: dict[int, list[dict[str, Any]]] = {}
    for d in dead:
        n = by_sha.get(str(d.get("original_sha256")))
        if n is None and d.get("request_id") is not None:
            n = by_rid.get(str(d["request_id"]))
        if n is not None:
            dead_by_line.setdefault(n, []).append(d)
    packs_by_line: dict[int, list[Pack]] = {}
    for n, key in enumerate(keys, start=1):
        for value in packs.get(key, []):
            packs_by_line.setdefault(n, []).append(Pack.model_validate_json(value))
    kinds, problems = verify_outcomes(
        lines, packs_by_line, dead_by_line, allow_duplicates=allow_duplicates
    )
    exactly_one = sum(
        1
        for n in range(1, len(lines) + 1)
        if len(packs_by_line.get(n, [])) + len(dead_by_line.get(n, [])) == 1
    )
    return kinds, problems, exactly_one


def _produce_all(
    producer: Any,
    records: Sequence[_Record],
    rate: float,
    chaos: _Chaos,
    topo: _Topology,
    t0: float,
) -> tuple[dict[str, float], int, float]:
    """Send ``records`` at ``rate``, ticking the chaos; send again, as a retriever would,
    every record the broker did not acknowledge. Returns when each was first sent, how many
    were sent again, and when the next memory sample is due."""
    sent_at: dict[str, float] = {}
    pending: list[tuple[_Record, Any]] = []
    next_rss = t0
    for i, rec in enumerate(records):
        due = t0 + i / rate
        while (now := time.monotonic()) < due:
            chaos.tick()
            time.sleep(min(0.01, max(0.0, due - now)))
        future = producer.send("ctx.candidates.v1", key=rec.kafka_key(), value=rec.value)
        pending.append((rec, future))
        sent_at.setdefault(rec.key, time.monotonic())
        if now >= next_rss:
            topo.sample_rss()
            next_rss = now + 5.0
    resent = 0
    while pending:
        producer.flush()
        retry = [rec for rec, fut in pending if fut.failed()]
        pending = []
        for rec in retry:
            resent += 1
            future = producer.send("ctx.candidates.v1", key=rec.kafka_key(), value=rec.value)
            pending.append((rec, future))
        chaos.tick()
    return sent_at, resent, next_rss


def run_kill(
    *,
    batches: int,
    kills: int,
    rate: float,
    seed: int,
    poison: bool,
    restart_delay_s: float = 1.0,
    drain_timeout_s: float = 300.0,
    skip: Sequence[str] = (),
    env_extra: dict[str, str] | None = None,
    kafka_nodes: int = 0,
    replicas: int = 1,
    broker_kills: int = 0,
    rolling: bool = False,
    broker_restart_delay_s: float = 5.0,
    cluster: Any = None,
) -> dict[str, Any]:
    """``cluster``: a running :class:`~workers.kafka_cluster.KafkaCluster` to use (and leave
    running) instead of a new broker; its shipped topics must not hold records yet."""
    from ctxbudget.kafka import io

    kafka_nodes = cluster.nodes if cluster is not None else kafka_nodes
    if (broker_kills or rolling) and kafka_nodes != 3:
        raise ValueError("broker kills and the rolling restart need a 3-node cluster (--kafka 3)")
    rng = random.Random(f"guarantees-kill|{seed}")
    records, expected = _traffic(batches, seed)
    poison_lines_: list[PoisonLine] = []
    poison_keys: list[str] = []
    if poison:
        extra = [
            (_Record(x.request_id or f"poison-line-{n}", x.raw, x), x)
            for n, x in enumerate(poison_lines(seed, good=0), start=1)
        ] + topic_only_lines(seed)
        extra = [(r, x) for r, x in extra if x.kind not in skip]
        poison_lines_ = [x for _, x in extra]
        poison_keys = [r.key for r, _ in extra]
        step = max(1, len(records) // (len(extra) + 1))
        for n, (rec, _) in enumerate(extra, start=1):
            records.insert(min(len(records), n * step + n - 1), rec)
    produce_s = len(records) / rate
    kill_times = sorted(rng.uniform(0.1 * produce_s, 0.9 * produce_s) for _ in range(kills))
    report: dict[str, Any] = {
        "command": "kill",
        "batches": batches,
        "poison_lines": len(poison_lines_),
        "kills": kills,
        "rate": rate,
        "seed": seed,
        "restart_delay_s": restart_delay_s,
        "broker": f"Apache Kafka, {kafka_nodes} node(s)" if kafka_nodes else "embedded",
        "workers_per_stage": replicas,
    }
    broker_times = sorted(
        rng.uniform(0.15 * produce_s, 0.45 * produce_s) for _ in range(broker_kills)
    )
    rolling_at = 0.5 * produce_s if rolling else None
    with tempfile.TemporaryDirectory(prefix="guarantees-kill-") as tmp:
        topo = _Topology(
            Path(tmp), env_extra or {}, kafka_nodes=kafka_nodes, replicas=replicas, cluster=cluster
        )
        collector: _Collector | None = None
        brokers: _BrokerChaos | None = None
        try:
            topo.start_all()
            collector = _Collector(
                topo.bootstrap, "ctx.packs.v1", "ctx.deadletter.v1", topo.client_settings
            )
            collector.start()
            report["warmup_s"] = round(_warm_up(topo, collector, 180.0), 1)
            producer = io.client(
                "producer",
                topo.client_settings,
                brokers=topo.bootstrap,
                client_id="ctxbudget-bench",
                acks="all",
                linger_ms=5,
                retries=2**31 - 1,
                retry_backoff_ms=200,
                request_timeout_ms=15000,
                max_request_size=32 * 1024 * 1024,
            )
            t0 = time.monotonic()
            chaos = _Chaos(topo, kill_times, rng, restart_delay_s, t0)
            if broker_times or rolling_at is not None:
                brokers = _BrokerChaos(
                    topo.cluster,
                    kill_times=broker_times,
                    rolling_at=rolling_at,
                    restart_delay_s=broker_restart_delay_s,
                    t0=t0,
                    topics=("ctx.candidates.v1", "ctx.packs.v1"),
                )
                brokers.start()
            sent_at, resent, next_rss = _produce_all(producer, records, rate, chaos, topo, t0)
            producer.close()
            produced_at = time.monotonic()
            want = {r.key for r in records if r.poison is None}
            deadline = time.monotonic() + drain_timeout_s
            while time.monotonic() < deadline and (
                collector.have(want) < len(want)
                or not chaos.idle
                or (brokers is not None and not brokers.done.is_set())
            ):
                chaos.tick()
                if time.monotonic() >= next_rss:
                    topo.sample_rss()
                    next_rss = time.monotonic() + 5.0
                time.sleep(0.1)
            done_at = time.monotonic()
            settle = time.monotonic() + 3.0  # late duplicates and dead letters
            while time.monotonic() < settle:
                chaos.tick()
                time.sleep(0.1)
            topo.sample_rss()
            events, unexpected = chaos.events, chaos.unexpected
            alive_problems = topo.dead_workers()
            collector.stop()
            packs, first_at, dead = collector.packs, collector.first_at, collector.dead
        finally:
            if collector is not None and collector.is_alive():
                collector.stop()
            exit_codes = topo.stop()
            if brokers is not None:
                brokers.finish()
        findings = topo.log_findings()
        rss = {s.name: s.rss_mb for s in topo.stages.values()}
        restarts = {s.name: s.started - 1 for s in topo.stages.values()}
    lost = sorted(want - set(packs))
    dup = {k: len(v) - 1 for k, v in packs.items() if k in want and len(v) > 1}
    differing = sorted(k for k, v in packs.items() if k in want and len(set(v)) > 1)
    not_inproc = sorted(k for k in want if k in packs and packs[k][0] != expected.get(k))
    latency = sorted(first_at[k] - sent_at[k] for k in want if k in first_at)
    good_dead = [d for d in dead if d.get("request_id") in want]
    last_restart = max((e["restarted_at_s"] or 0.0 for e in events), default=0.0)
    for e in events:
        # requests sent in the 2 s after the kill: when the last of their packs came
        hit = [k for k in want if 0.0 <= sent_at[k] - t0 - e["killed_at_s"] <= 2.0]
        done = [first_at[k] for k in hit if k in first_at]
        e["requests_hit"] = len(hit)
        e["their_packs_done_after_s"] = (
            round(max(done) - t0 - e["killed_at_s"], 1) if done and len(done) == len(hit) else None
        )
    report.update(
        {
            "kill_events": events,
            "produce_s": round(produced_at - t0, 1),
            "packs_for_all_s": round(done_at - t0, 1),
            "drain_after_last_send_s": round(done_at - produced_at, 1),
            "recovery_after_kill_s": [e["their_packs_done_after_s"] for e in events],
            "drain_after_last_restart_s": (
                round(done_at - t0 - last_restart, 1) if events else None
            ),
            "requests": len(want),
            "with_pack": len(want) - len(lost),
            "lost": len(lost),
            "lost_examples": lost[:5],
            "duplicate_requests": len(dup),
            "duplicate_packs": sum(dup.values()),
            "duplicates_differing": len(differing),
            "first_pack_not_in_process_pack": len(not_inproc),
            "good_dead_letters": len(good_dead),
            "latency_s": {
                "p50": round(latency[len(latency) // 2], 3) if latency else None,
                "p99": round(latency[int(len(latency) * 0.99)], 3) if latency else None,
                "max": round(latency[-1], 3) if latency else None,
            },
            "workers_dead_at_end": alive_problems,
            "unexpected_worker_exits": unexpected,
            "worker_exit_codes_on_sigterm": exit_codes,
            "restarts": restarts,
            "worker_rss_mb": {
                k: {
                    "first": v[0] if v else None,
                    "last": v[-1] if v else None,
                    "max": max(v) if v else None,
                }
                for k, v in rss.items()
            },
            "log_findings": findings,
            "producer_resent": resent,
            "broker_events": brokers.events if brokers is not None else [],
            "broker_chaos_errors": brokers.errors if brokers is not None else [],
            "dead_letters_total": len(dead),
            "unexpected_errors": unexpected_errors(dead),
        }
    )
    if poison:
        kinds, problems, exactly_one = _poison_outcomes(
            poison_lines_, poison_keys, packs, dead, allow_duplicates=kills > 0
        )
        report["poison"] = {
            "exactly_one": exactly_one,
            "kinds": {k: v.as_dict() for k, v in sorted(kinds.items())},
            "problems": problems,
        }
    return report


def render_kill(report: dict[str, Any]) -> str:
    lat = report["latency_s"]
    rows = [
        ["broker / workers per stage", f"{report['broker']} / {report['workers_per_stage']}"],
        ["requests produced (good)", report["requests"]],
        ["poison lines produced", report["poison_lines"]],
        ["rate /s", report["rate"]],
        [
            "SIGKILLs (stage @ s)",
            ", ".join(f"{e['stage']}@{e['killed_at_s']}" for e in report["kill_events"]) or "-",
        ],
        [
            "broker events (node @ s)",
            ", ".join(f"{e['action']} n{e['node']}@{e['at_s']}" for e in report["broker_events"])
            or "-",
        ],
        ["records the producer sent again", report["producer_resent"]],
        ["requests with >= 1 pack", report["with_pack"]],
        ["lost", report["lost"]],
        [
            "requests with duplicates / extra packs",
            f"{report['duplicate_requests']} / {report['duplicate_packs']}",
        ],
        ["duplicates not byte-identical", report["duplicates_differing"]],
        ["first pack != in-process pack", report["first_pack_not_in_process_pack"]],
        ["dead letters of good requests", report["good_dead_letters"]],
        ["dead letters from unexpected errors", len(report["unexpected_errors"])],
        ["produce s / all packs at s", f"{report['produce_s']} / {report['packs_for_all_s']}"],
        ["drain after last send s", report["drain_after_last_send_s"]],
        [
            "per kill: packs of the next 2 s of requests done after s",
            " / ".join(str(x) for x in report["recovery_after_kill_s"]) or "-",
        ],
        ["latency p50 / p99 / max s", f"{lat['p50']} / {lat['p99']} / {lat['max']}"],
        ["workers dead at end", ", ".join(report["workers_dead_at_end"]) or "none"],
        [
            "workers that exited on their own (restarted)",
            ", ".join(
                f"{u['stage']} exit {u['exit']} @{u['at_s']}"
                for u in report["unexpected_worker_exits"]
            )
            or "none",
        ],
        [
            "exit codes on SIGTERM",
            ", ".join(f"{k} {v}" for k, v in report["worker_exit_codes_on_sigterm"].items()),
        ],
        [
            "worker RSS MB first -> last (max)",
            ", ".join(
                f"{k} {v['first']}->{v['last']} ({v['max']})"
                for k, v in report["worker_rss_mb"].items()
            ),
        ],
    ]
    if "poison" in report:
        p = report["poison"]
        rows.append(
            [
                "poison lines: exactly one pack or dead letter",
                f"{p['exactly_one']} of {report['poison_lines']}",
            ]
        )
        rows.append(["poison problems", len(p["problems"])])
    parts = [table(["figure", "value"], rows)]
    if "poison" in report:
        prow = [
            [
                kind,
                k["lines"],
                k["packed"],
                k["dead"],
                k["neither"],
                k["both"],
                k["twice"],
                k["unexpected"],
                ", ".join(k["errors"])[:80],
            ]
            for kind, k in report["poison"]["kinds"].items()
        ]
        parts.append(
            table(
                [
                    "kind",
                    "lines",
                    "packed",
                    "dead",
                    "neither",
                    "both",
                    "twice",
                    "unexpected",
                    "errors",
                ],
                prow,
            )
        )
        if report["poison"]["problems"]:
            parts.append("problems:\n  " + "\n  ".join(report["poison"]["problems"][:40]))
    if report["unexpected_errors"]:
        parts.append("unexpected errors:\n  " + "\n  ".join(report["unexpected_errors"][:10]))
    if report["log_findings"]:
        parts.append(
            "worker logs:\n"
            + "\n".join(
                f"  {name}: {lines[0]}" + (f" (+{len(lines) - 1})" if len(lines) > 1 else "")
                for name, lines in report["log_findings"].items()
            )
        )
    return "\n\n".join(parts)


# =============================================================================================
# command line
# =============================================================================================


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench.guarantees", description=__doc__.split("\n")[0] if __doc__ else ""
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("fuzz", help="tenant and access-label fuzzing, in process")
    p.add_argument("--n", type=int, default=2000, help="synthetic batches")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--policies", default="default@1,lean@1")
    p.add_argument("--no-msmarco", action="store_true")
    p.add_argument("--no-control", action="store_true", help="skip the authorization-off run")
    p.add_argument("--json-out")
    p = sub.add_parser("poison", help="a mixed hostile file through `ctxbudget pack`")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--good", type=int, default=200, help="good batches per round")
    p.add_argument("--rounds", type=int, default=3, help="the whole mix this many times")
    p.add_argument("--work-budget-s", type=float, default=2.0)
    p.add_argument("--policy", default="default@1")
    p.add_argument("--skip", default="", help="kinds to leave out, comma-separated")
    p.add_argument("--no-timing", action="store_true", help="skip timing each line alone")
    p.add_argument("--json-out")
    p = sub.add_parser("kill", help="SIGKILL stage workers on the embedded broker")
    p.add_argument("--batches", type=int, default=2000)
    p.add_argument("--kills", type=int, default=5)
    p.add_argument("--rate", type=float, default=40.0, help="records produced per second")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--poison", action="store_true", help="put the poison lines on the topic too")
    p.add_argument("--skip", default="", help="poison kinds to leave out, comma-separated")
    p.add_argument("--restart-delay-s", type=float, default=1.0)
    p.add_argument("--drain-timeout-s", type=float, default=300.0)
    p.add_argument(
        "--kafka", type=int, choices=(0, 1, 3), default=0, help="nodes of a real Kafka cluster"
    )
    p.add_argument("--replicas", type=int, default=1, help="worker processes per stage")
    p.add_argument("--broker-kills", type=int, default=0, help="SIGKILL partition leaders")
    p.add_argument("--rolling", action="store_true", help="then restart each node in turn")
    p.add_argument("--broker-restart-delay-s", type=float, default=5.0)
    p.add_argument("--json-out")
    return parser


def _skip(value: str) -> list[str]:
    return [x for x in value.split(",") if x]


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    report: dict[str, Any]
    if args.command == "fuzz":
        policies = [x for x in args.policies.split(",") if x]
        report = run_fuzz(
            args.n, args.seed, policies, msmarco=not args.no_msmarco, control=not args.no_control
        )
        print(render_fuzz(report))
        guarded = [r for r in report["runs"] if r["mode"] == "guarded" and r["source"] == "all"]
        control = [r for r in report["runs"] if r["mode"] == "control" and r["source"] == "all"]
        failed = any(
            r["packs_leaking"]
            or r["over_budget"]
            or r["token_mismatch"]
            or r["errors"]
            or r["decided_by_forbidden"]
            for r in guarded
        ) or any(r["packs_leaking"] == 0 for r in control)
    elif args.command == "poison":
        report = run_poison(
            args.seed,
            good=args.good,
            rounds=args.rounds,
            work_budget_s=args.work_budget_s,
            policy=args.policy,
            skip=_skip(args.skip),
            timing=not args.no_timing,
        )
        print(render_poison(report))
        failed = bool(report["problems"] or report["over_work_budget"])
    else:
        report = run_kill(
            batches=args.batches,
            kills=args.kills,
            rate=args.rate,
            seed=args.seed,
            poison=args.poison,
            restart_delay_s=args.restart_delay_s,
            drain_timeout_s=args.drain_timeout_s,
            skip=_skip(args.skip),
            kafka_nodes=args.kafka,
            replicas=args.replicas,
            broker_kills=args.broker_kills,
            rolling=args.rolling,
            broker_restart_delay_s=args.broker_restart_delay_s,
        )
        print(render_kill(report))
        failed = bool(
            report["broker_chaos_errors"]
            or report["lost"]
            or report["duplicates_differing"]
            or report["workers_dead_at_end"]
            or report.get("poison", {}).get("problems")
        )
    report["environment"] = environment()
    write_json(args.json_out, report)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
