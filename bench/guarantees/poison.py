"""``poison``: a mixed hostile file through ``ctxbudget pack`` (see :mod:`bench.guarantees`)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import random
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import orjson

from bench.common import REPO, table
from ctxbudget.codec import decode_batch, encode
from ctxbudget.envelope import unescape
from ctxbudget.kafka.processes import ctxbudget_command, rss_mb
from ctxbudget.pipeline import Pipeline
from ctxbudget.policy import PolicyStore
from ctxbudget.schemas import Pack
from ctxbudget.tokens import TokenizerRegistry

POLICIES = REPO / "policies"
CORPUS = REPO / "tests" / "data" / "injection_corpus.jsonl"

Expect = Literal["pack", "dead", "either"]


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
        from ctxbudget.testing.traffic import synthetic

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
        from ctxbudget.testing.traffic import synthetic

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
            samples.append((time.monotonic() - t0, progress.poll(), rss_mb(proc.pid)))
            peak = max(peak, rss_mb(proc.pid, "VmHWM"))
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


#: The outcome columns of a table of poison kinds (:func:`kind_cells` fills them).
KIND_HEADERS = ("kind", "lines", "packed", "dead", "neither", "both", "twice", "unexpected")


def kind_cells(kind: str, tally: dict[str, Any]) -> list[Any]:
    """The :data:`KIND_HEADERS` cells of one kind's tally (:meth:`KindTally.as_dict`)."""
    return [kind, *(tally[h] for h in KIND_HEADERS[1:])]


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
        rows.append([*kind_cells(kind, k), k["max_s"], errors[:90]])
    parts.append(table([*KIND_HEADERS, "max s alone", "dead-letter errors"], rows))
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
