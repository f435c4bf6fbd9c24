"""``python -m bench verify``: the verifier on labelled answers built from real packs.

Packs are made with a policy from labelled multi-hop traffic: HotpotQA (the development set,
moderate and tight budgets) and MuSiQue (held out: the checks were never tuned on it). From
every pack, answers are written the way a generator would, each claim labelled with what the
verifier should find:

* ``supported``: a sentence of a cited passage, reworded (clauses dropped, a lead-in added,
  numbers and dates written another way), citing its passage, sometimes with a second
  sentence of another passage and both ids;
* ``number`` / ``name``: a supported claim with one number, or one capitalised name, changed
  to one the cited passage does not hold (``unsupported_value``);
* ``wrong_id``: a sentence citing another passage of the pack that lacks one of its words
  (``unsupported_value``);
* ``fabricated``: a citation of an id not in the pack, alone or beside the right one: a
  dropped candidate's chunk id, an id of the pack's shape, a numbered ``E3`` (``fabricated_id``);
* ``uncited``: a supported sentence with its citation taken off (``uncited``).

Claims start from whole sentences of the packed passages that hold a number or an inner
capitalised word; a piece holding an excerpt joiner (``…``), a second sentence or unbalanced
brackets is not used (its claim boundaries would be the generator's guess).

Half the answers are prose with inline citations (placed before or after the final
punctuation, one or two ids per group), half are typed claims. Two phrasing styles: ``dev``
for the development set and ``heldout`` (other lead-ins, citation placements and rewrites)
for the held-out set. The labels come from the generator's own edits, checked with plain
string tests, never from the verifier. The four-way diagnosis of every labelled request is
also computed from the labels and compared with the verifier's.

Prints detection per status and per edit, false flags on supported claims, the diagnosis
agreement, and verdicts per second in process.
"""

from __future__ import annotations

import random
import re
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from bench.common import table
from bench.hotpot import BUDGETS, SYSTEM_PROMPT, from_hotpot
from ctxbudget.pipeline import Pipeline
from ctxbudget.policy import PolicyStore, default_policies_dir
from ctxbudget.schemas import (
    AnswerContract,
    Candidate,
    CandidateBatch,
    Instructions,
    Labels,
    ModelSpec,
    Pack,
    Principal,
    Query,
    Span,
)
from ctxbudget.testing.traffic import (
    PRINCIPAL_LABELS,
    TENANT,
    BM25Index,
    chunk_id_for,
    default_data_dir,
    doc_id_for,
)
from ctxbudget.verification import (
    Answer,
    AnswerClaim,
    AnswerVerifier,
    ClaimStatus,
    RequestFacts,
    Verdict,
    facts_from_batch,
)

Style = Literal["dev", "heldout"]
Kind = Literal["supported", "number", "name", "wrong_id", "fabricated", "uncited"]
KINDS: tuple[Kind, ...] = ("supported", "number", "name", "wrong_id", "fabricated", "uncited")
EXPECTED: dict[Kind, ClaimStatus] = {
    "supported": "supported",
    "number": "unsupported_value",
    "name": "unsupported_value",
    "wrong_id": "unsupported_value",
    "fabricated": "fabricated_id",
    "uncited": "uncited",
}
#: How often each kind is drawn for a claim.
KIND_WEIGHTS = (0.4, 0.12, 0.12, 0.12, 0.12, 0.12)
ANSWERS_PER_PACK = 5
MUSIQUE_DIRNAME = "musique_train100"

_SENTENCE = re.compile(r"(?<=[.!?])[\"”']?\s+(?=[A-Z\"'(`])")
_INNER_END = re.compile(r"[.!?][\"”')]*\s+[\"'“(`]*[A-Z0-9]")
#: A piece ending like this was cut at an abbreviation or an initial, not a sentence end.
_NOT_AN_END = re.compile(r"(?:\b[A-Z]|\b(?:Mr|Mrs|Ms|Dr|St|Jr|Sr|Prof|Mt|No|Co|Inc|Ltd|vs))\.$")
_NUMBER = re.compile(r"(?<![\w.,])\d[\d,]*(?:\.\d+)?(?![\w])")
_CAPITAL = re.compile(r"(?<=\s)[A-Z][a-z]{2,}\b")
_WORD = re.compile(r"\w+")
#: Capitalised words the name edit leaves alone (they are not names).
_NOT_NAMES = frozenset(
    {"The", "This", "That", "These", "Those", "His", "Her", "Their", "Its", "And", "But", "She"}
)
_LEAD_INS: dict[Style, tuple[str, ...]] = {
    "dev": ("According to the evidence, ", "The passages say that ", "It is reported that "),
    "heldout": ("The sources indicate that ", "Per the retrieved text, ", "As documented, "),
}


@dataclass(frozen=True, slots=True)
class LabelledAnswer:
    """An answer, the kind of each of its claims, and the pack it was written from."""

    answer: Answer
    kinds: tuple[Kind, ...]
    #: The ids each claim cites, as the generator wrote them.
    cited: tuple[tuple[str, ...], ...]
    pack: Pack
    facts: RequestFacts | None


@dataclass(slots=True)
class _Parts:
    text: str
    ids: list[str]
    kind: Kind


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text)}


def _marks(text: str) -> set[str]:
    """The numbers and inner capitalised words of a text (what a claim must keep)."""
    return {m.group(0).lower() for m in _CAPITAL.finditer(text)} | set(_NUMBER.findall(text))


def _split(text: str) -> list[str]:
    pieces: list[str] = []
    for piece in _SENTENCE.split(text):
        if pieces and _NOT_AN_END.search(pieces[-1]):
            pieces[-1] = f"{pieces[-1]} {piece}"
        else:
            pieces.append(piece)
    return pieces


def _sentences(text: str) -> list[str]:
    """Sentences of a passage with something to check (a number or an inner capital)."""
    out = []
    for s in _split(text):
        s = s.strip()
        n = len(s.split())
        opens = re.match(r"[\"'`(]*[A-Z0-9]", s) is not None
        # one sentence only: no excerpt joiner, no inner sentence end, balanced brackets
        whole = "…" not in s and not _INNER_END.search(s) and s.count("(") == s.count(")")
        if (
            opens
            and whole
            and 5 <= n <= 60
            and s[-1:] in ".!?"
            and (_NUMBER.search(s) or _CAPITAL.search(s))
        ):
            out.append(s)
    return out


class AnswerGenerator:
    """Writes labelled answers from packs, one phrasing style, seeded."""

    def __init__(self, *, style: Style, seed: int, name_pool: Sequence[str]) -> None:
        self.style: Style = style
        self.rng = random.Random(f"verify|{style}|{seed}")
        self.name_pool = tuple(sorted(set(name_pool)))

    # ------------------------------------------------------------ rewording (meaning kept)

    def _reword(self, s: str) -> str:
        """``s`` reworded; the original when the rewording lost every value it held."""
        out = self._rewrite(s)
        return out if _marks(out) else s

    def _rewrite(self, s: str) -> str:
        rng = self.rng
        body = s[:-1]
        end = s[-1]
        if self.style == "dev":
            choice = rng.random()
            if choice < 0.25 and ", " in body:
                head = body.rsplit(", ", 1)[0]
                if len(head.split()) >= 5:
                    body = head
            elif choice < 0.45:
                body = rng.choice(_LEAD_INS["dev"]) + _lower_first(body)
            elif choice < 0.6:
                body = _regroup_numbers(body)
        else:
            choice = rng.random()
            if choice < 0.2:
                body = re.sub(r"\s*\([^()]*\)", "", body)
            elif choice < 0.4:
                body = rng.choice(_LEAD_INS["heldout"]) + _lower_first(body)
            elif choice < 0.55 and ", " in body:
                first, rest = body.split(", ", 1)
                if len(rest.split()) >= 4:
                    body = _upper_first(rest) + ", " + _lower_first(first)
            elif choice < 0.7:
                body = _redate(_regroup_numbers(body))
            elif choice < 0.8:
                body = body.replace(" and ", " as well as ", 1)
        return body.strip() + end

    # ------------------------------------------------------------ edits (meaning broken)

    def _change_number(self, s: str, cited: str) -> str | None:
        nums = list(_NUMBER.finditer(s))
        self.rng.shuffle(nums)
        have = set(_NUMBER.findall(cited.replace(",", "")))
        for m in nums:
            raw = m.group(0).replace(",", "")
            if "." in raw:
                continue
            n = int(raw)
            for _ in range(10):
                step = self.rng.choice((1, 2, 3, 5, 7, 10, 11, 13, 20))
                new = n + step if self.rng.random() < 0.5 or n < step + 1 else n - step
                if str(new) not in have and str(new) != raw:
                    return s[: m.start()] + str(new) + s[m.end() :]
        return None

    def _change_name(self, s: str, cited: str) -> str | None:
        caps = [m for m in _CAPITAL.finditer(s) if m.group(0) not in _NOT_NAMES]
        self.rng.shuffle(caps)
        have = _words(cited)
        for m in caps:
            for _ in range(20):
                new = self.rng.choice(self.name_pool)
                if new.lower() not in have and new != m.group(0):
                    return s[: m.start()] + new + s[m.end() :]
        return None

    def _fabricated(self, pack: Pack, dropped: Sequence[str]) -> str:
        known = {e.evidence_id for e in pack.evidence}
        for _ in range(50):
            form = self.rng.random()
            if form < 0.35 and dropped:
                fake = self.rng.choice(list(dropped))
            elif form < 0.7:
                fake = "".join(
                    self.rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in "xyz"
                )
            elif form < 0.85:
                fake = f"E{self.rng.randint(1, 12)}"
            else:
                base = self.rng.choice(sorted(known)) if known else "e1"
                fake = base[:-1] + ("x" if base[-1] != "x" else "y")
            if fake not in known:
                return fake
        return "no-such-id"

    # ------------------------------------------------------------ answers

    def _claim(self, kind: Kind, pack: Pack, dropped: Sequence[str]) -> _Parts | None:
        items = [e for e in pack.evidence if _sentences(e.text)]
        if not items:
            return None
        item = self.rng.choice(items)
        sentence = self.rng.choice(_sentences(item.text))
        cited = f"{item.title or ''}\n{item.text}"
        if kind == "number":
            edited = self._change_number(sentence, cited)
            return _Parts(edited, [item.evidence_id], kind) if edited else None
        if kind == "name":
            edited = self._change_name(sentence, cited)
            return _Parts(edited, [item.evidence_id], kind) if edited else None
        if kind == "wrong_id":
            marks = _marks(sentence)
            others = []
            for e in pack.evidence:
                other = f"{e.title or ''} {e.text}"
                if e.evidence_id != item.evidence_id and marks - _words(other) - set(
                    _NUMBER.findall(other)
                ):
                    others.append(e)
            if not others:
                return None
            return _Parts(self._reword(sentence), [self.rng.choice(others).evidence_id], kind)
        text = self._reword(sentence)
        if kind == "uncited":
            return _Parts(text, [], kind)
        ids = [item.evidence_id]
        if kind == "fabricated":
            fake = self._fabricated(pack, dropped)
            ids = [fake] if self.rng.random() < 0.6 else [item.evidence_id, fake]
            return _Parts(text, ids, kind)
        if len(items) > 1 and self.rng.random() < 0.2:
            other = self.rng.choice([e for e in items if e is not item])
            second = self._reword(self.rng.choice(_sentences(other.text)))
            text = f"{text[:-1]}; {second[:1].lower()}{second[1:]}"
            ids.append(other.evidence_id)
        return _Parts(text, ids, kind)

    def _cite(self, parts: _Parts) -> str:
        if not parts.ids:
            return parts.text
        if self.style == "dev":
            groups = "[" + ", ".join(parts.ids) + "]"
            return f"{parts.text[:-1]} {groups}{parts.text[-1]}"
        if self.rng.random() < 0.5:
            groups = "".join(f"[{i}]" for i in parts.ids)
            return f"{parts.text} {groups}"
        return f"{parts.text}[{','.join(parts.ids)}]"

    def answer(
        self, pack: Pack, *, dropped: Sequence[str], facts: RequestFacts | None
    ) -> LabelledAnswer | None:
        """One labelled answer to ``pack`` (None when the pack has nothing to write from)."""
        claims: list[_Parts] = []
        for _ in range(self.rng.randint(1, 4)):
            kind = self.rng.choices(KINDS, weights=KIND_WEIGHTS)[0]
            parts = self._claim(kind, pack, dropped)
            if parts is not None:
                claims.append(parts)
        if not claims:
            return None
        kinds = tuple(c.kind for c in claims)
        if self.rng.random() < 0.5:
            typed = tuple(AnswerClaim(text=c.text, evidence_ids=tuple(c.ids)) for c in claims)
            answer = Answer(request_id=pack.request_id, lane=pack.lane, claims=typed)
        else:
            sep = "\n" if self.rng.random() < 0.2 else " "
            text = sep.join(self._cite(c) for c in claims)
            answer = Answer(request_id=pack.request_id, lane=pack.lane, text=text)
        cited = tuple(tuple(c.ids) for c in claims)
        return LabelledAnswer(answer=answer, kinds=kinds, cited=cited, pack=pack, facts=facts)


def _lower_first(s: str) -> str:
    """The first letter in lower case unless the first word looks like a name (or is "I")."""
    first = s.split(" ", 1)[0]
    if first.lower() in {"the", "a", "an", "in", "it", "this", "he", "she", "they", "his", "her"}:
        return s[:1].lower() + s[1:]
    return s


def _upper_first(s: str) -> str:
    return s[:1].upper() + s[1:]


def _regroup_numbers(s: str) -> str:
    """Thousands separators added to plain numbers of five digits or more, or taken off."""

    def swap(m: re.Match[str]) -> str:
        raw = m.group(0)
        if "," in raw:
            return raw.replace(",", "")
        if "." not in raw and len(raw) >= 5:
            return f"{int(raw):,}"
        return raw

    return _NUMBER.sub(swap, s)


_MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
_MDY = re.compile(rf"\b({_MONTHS}) (\d{{1,2}}), (\d{{4}})\b")
_DMY = re.compile(rf"\b(\d{{1,2}}) ({_MONTHS}) (\d{{4}})\b")


def _redate(s: str) -> str:
    """``March 1, 2024`` written ``1 March 2024`` and the other way round."""
    if _MDY.search(s):
        return _MDY.sub(r"\2 \1 \3", s)
    return _DMY.sub(r"\2 \1, \3", s)


# ---------------------------------------------------------------- traffic and packs


def musique_batches(data_dir: Path | None = None) -> list[CandidateBatch]:
    """MuSiQue-Ans train questions as labelled batches: each question's 20 paragraphs,
    scored by BM25 over them, the supporting ones labelled; the moderate budget frame."""
    import json

    base = Path(data_dir) if data_dir is not None else default_data_dir()
    rows = json.loads((base / MUSIQUE_DIRNAME / "musique_train.json").read_text("utf-8"))
    setting = BUDGETS["moderate"]
    out = []
    for row in rows:
        paras = row["paragraphs"]
        index = BM25Index([f"{p['title']} {p['paragraph_text']}" for p in paras])
        scores = index.score_all(row["question"])
        cands = []
        for p, score in zip(paras, scores, strict=True):
            cid = chunk_id_for("musique", row["id"], p["idx"])
            text = p["paragraph_text"]
            cands.append(
                Candidate(
                    chunk_id=cid,
                    doc_id=doc_id_for("musique", row["id"], p["idx"]),
                    source_id="wikipedia",
                    title=p["title"],
                    text=text,
                    version="1",
                    span=Span(start=0, end=len(text)),
                    retrieval_score=round(float(score), 6),
                    access_label="public",
                    tenant_id=TENANT,
                )
            )
        cands.sort(key=lambda c: (-(c.retrieval_score or 0.0), c.chunk_id))
        relevant = sorted(
            chunk_id_for("musique", row["id"], p["idx"]) for p in paras if p["is_supporting"]
        )
        out.append(
            CandidateBatch(
                request_id=f"musique-{row['id']}",
                tenant_id=TENANT,
                principal=Principal(tenant_id=TENANT, access_labels=PRINCIPAL_LABELS),
                query=Query(text=row["question"]),
                instructions=Instructions(text=SYSTEM_PROMPT),
                model=ModelSpec(name=setting.model, input_limit=setting.input_limit),
                answer_contract=AnswerContract(
                    kind=setting.answer_kind, reserve_tokens=setting.reserve_tokens
                ),
                candidates=tuple(cands),
                labels=Labels(relevant_chunk_ids=tuple(relevant)),
            )
        )
    return out


def hotpot_batches(data_dir: Path | None = None, *, seed: int = 1) -> list[CandidateBatch]:
    """HotpotQA at the moderate and tight budgets, with the awkward cases."""
    out: list[CandidateBatch] = []
    for budget in ("moderate", "tight"):
        out.extend(g.batch for g in from_hotpot(data_dir, seed=seed, budget=budget, awkward=True))
    return out


def labelled_answers(
    batches: Sequence[CandidateBatch],
    pipeline: Pipeline,
    *,
    style: Style,
    seed: int,
    per_pack: int = ANSWERS_PER_PACK,
) -> list[LabelledAnswer]:
    """``per_pack`` labelled answers for the pack of every batch."""
    pool = [w for b in batches for c in b.candidates for w in (c.title or "").split()]
    names = [w for w in pool if re.fullmatch(r"[A-Z][a-z]{3,}", w)]
    gen = AnswerGenerator(style=style, seed=seed, name_pool=names)
    out: list[LabelledAnswer] = []
    for batch in batches:
        result = pipeline.run(batch)
        pack = result.pack
        kept = {c for e in pack.evidence for c in e.chunk_ids}
        dropped = [c.chunk_id for c in batch.candidates if c.chunk_id not in kept]
        facts = facts_from_batch(batch, result.traces)
        for _ in range(per_pack):
            la = gen.answer(pack, dropped=dropped, facts=facts)
            if la is not None:
                out.append(la)
    return out


# ---------------------------------------------------------------- scoring


def expected_outcomes(la: LabelledAnswer) -> list[str] | None:
    """The four-way diagnosis from the generator's labels alone (no verifier)."""
    if la.facts is None:
        return None
    claims = list(zip(la.cited, la.kinds, strict=True))
    holder = {cid: e.evidence_id for e in la.pack.evidence for cid in e.chunk_ids}
    ok: dict[str, bool] = {}
    for ids, kind in claims:
        for i in ids:
            ok[i] = ok.get(i, True) and kind == "supported"
    out = []
    for cid in la.facts.relevant:
        if cid in holder:
            eid = holder[cid]
            out.append("ignored" if eid not in ok else "used" if ok[eid] else "unsupported")
        elif la.facts.candidates is not None and cid not in la.facts.candidates:
            out.append("retrieval_miss")
        else:
            out.append("packing_drop")
    return out


@dataclass(slots=True)
class Score:
    """Detection per kind and status, false flags, diagnosis agreement, throughput."""

    answers: int = 0
    claims: Counter[str] = field(default_factory=Counter)
    found: Counter[str] = field(default_factory=Counter)
    confusions: Counter[tuple[str, str]] = field(default_factory=Counter)
    diagnosed: int = 0
    diagnosis_equal: int = 0
    split_mismatch: int = 0
    examples: list[dict[str, Any]] = field(default_factory=list)


def score(answers: Sequence[LabelledAnswer], verdicts: Sequence[Verdict]) -> Score:
    s = Score()
    for la, v in zip(answers, verdicts, strict=True):
        s.answers += 1
        statuses = [c.status for c in v.claims]
        if len(statuses) != len(la.kinds):
            # read as another number of claims: every claim of the answer counts as missed
            s.split_mismatch += 1
            s.claims.update(la.kinds)
            continue
        for kind, status, c in zip(la.kinds, statuses, v.claims, strict=True):
            s.claims[kind] += 1
            s.found[kind] += status == EXPECTED[kind]
            if status != EXPECTED[kind]:
                s.confusions[(kind, status)] += 1
                if len(s.examples) < 12:
                    s.examples.append(
                        {"kind": kind, "status": status, "claim": c.text, "missing": c.missing}
                    )
        exp = expected_outcomes(la)
        if exp is not None and v.expected is not None:
            s.diagnosed += 1
            s.diagnosis_equal += exp == [e.outcome for e in v.expected]
    return s


def _rate(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def render(name: str, s: Score, per_second: float, per_cpu_second: float) -> str:
    rows = []
    by_status: Counter[str] = Counter()
    by_status_found: Counter[str] = Counter()
    for kind in KINDS:
        status = EXPECTED[kind]
        by_status[status] += s.claims[kind]
        by_status_found[status] += s.found[kind]
        rows.append(
            [kind, status, s.claims[kind], s.found[kind], _rate(s.found[kind], s.claims[kind])]
        )
    out = [
        f"== {name}: {s.answers} answers ==",
        table(["edit", "expected status", "claims", "found", "rate"], rows),
    ]
    rows2 = [
        [st, by_status[st], by_status_found[st], _rate(by_status_found[st], by_status[st])]
        for st in by_status
    ]
    out.append(table(["status", "claims", "found", "detection"], rows2))
    n_supported = s.claims["supported"]
    flagged = n_supported - s.found["supported"]
    out.append(f"supported claims flagged: {flagged}/{n_supported} ({_rate(flagged, n_supported)})")
    out.append(f"diagnosis equal to the labels' on {s.diagnosis_equal}/{s.diagnosed} requests")
    if s.split_mismatch:
        out.append(f"answers read as another number of claims (all missed): {s.split_mismatch}")
    out.append(
        f"verdicts per second (in process, one core): {per_second:,.0f} wall clock, "
        f"{per_cpu_second:,.0f} per CPU second"
    )
    if s.confusions:
        out.append(
            "misses: " + ", ".join(f"{k}->{st} {n}" for (k, st), n in s.confusions.most_common())
        )
    return "\n".join(out)


def _timed(answers: Sequence[LabelledAnswer], repeats: int) -> tuple[list[Verdict], float, float]:
    """The verdicts, and answers per second of the best pass: by the wall clock and by the
    process's CPU time (steadier on a shared machine)."""
    best_wall = best_cpu = float("inf")
    verdicts: list[Verdict] = []
    for _ in range(repeats):
        verifier = AnswerVerifier()
        t0, c0 = time.perf_counter(), time.process_time()
        verdicts = [verifier.run(la.answer, la.pack, facts=la.facts) for la in answers]
        best_wall = min(best_wall, time.perf_counter() - t0)
        best_cpu = min(best_cpu, time.process_time() - c0)
    n = len(answers)
    return verdicts, n / best_wall if best_wall > 0 else 0.0, n / best_cpu if best_cpu > 0 else 0.0


def run(args: Any) -> dict[str, Any]:
    store = PolicyStore.load(default_policies_dir())
    pipeline = Pipeline.from_store(store, args.policy)
    sets: list[tuple[str, Style, list[CandidateBatch]]] = [
        ("development: HotpotQA, dev phrasing", "dev", hotpot_batches(seed=args.seed)),
        ("held out: MuSiQue, held-out phrasing", "heldout", musique_batches()),
    ]
    if args.sets:
        wanted = set(args.sets.split(","))
        sets = [s for s in sets if s[1] in wanted]
    report: dict[str, Any] = {"sets": []}
    for name, style, batches in sets:
        answers = labelled_answers(
            batches, pipeline, style=style, seed=args.seed, per_pack=args.per_pack
        )
        verdicts, per_second, per_cpu = _timed(answers, args.repeats)
        s = score(answers, verdicts)
        print(render(name, s, per_second, per_cpu), end="\n\n", flush=True)
        if args.examples:
            for e in s.examples:
                print(e)
        report["sets"].append(
            {
                "name": name,
                "answers": s.answers,
                "claims": dict(s.claims),
                "found": dict(s.found),
                "diagnosed": s.diagnosed,
                "diagnosis_equal": s.diagnosis_equal,
                "verdicts_per_second": round(per_second, 1),
                "verdicts_per_cpu_second": round(per_cpu, 1),
            }
        )
    return report
