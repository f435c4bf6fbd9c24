"""The development data of the injection gate, as labelled passages per corpus and style.

Read from ``../shared/data`` (``$CTXBUDGET_DATA_DIR``), never copied into the repository:
BIPIA train (attack instructions inserted at the start, middle and end of its email, table and
code contexts; the clean contexts as benign), deepset prompt-injections train, NotInject (one
trigger word), and benign retrieval traffic: MS MARCO, HotpotQA, MuSiQue and WikiQA train
passages; plus the hand-written corpus ``bench/data/gate_corpus.jsonl`` (attacks in many
languages and disguises, and benign look-alikes).

Every unit belongs to the ``train`` or the ``heldout`` part. The split goes by attack category
or template (BIPIA category, the opening words of a deepset prompt, the style of a hand-written
row, the trigger word of a NotInject prompt) and, for benign traffic, by document, so a figure on
the held-out part measures generalisation to kinds of attack the model was not fitted on.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OWN_CORPUS = REPO / "bench" / "data" / "gate_corpus.jsonl"
LOOKALIKE_CORPUS = REPO / "tests" / "data" / "injection_corpus.jsonl"
#: Hand-written tuning corpora (``split`` dev rows are the training part): everyday documents
#: addressed to people in many languages (recipes, manuals, notices, forms, FAQs, staff emails,
#: articles about AI, security posts, LLM documentation, policies, support scripts) and
#: instructions for an AI put into documents of the same language (planted tasks, exfiltration
#: links, tool calls, agent comments, fields of configs, tickets and invites); and structured
#: documents (tables, JSON, front matter) of both kinds.
TUNE_CORPORA = (
    REPO / "bench" / "data" / "gate_docs_tune.jsonl",
    REPO / "bench" / "data" / "gate_docs_tune2.jsonl",
    REPO / "bench" / "data" / "gate_docs_tune3.jsonl",
    REPO / "bench" / "data" / "gate_kinds_tune.jsonl",
)
POSITIONS = ("start", "middle", "end")
#: Styles of the hand-written corpus kept out of training for the held-out estimate: one of
#: each kind (a polite request, a fake tool result, role JSON) and languages of four families.
OWN_HELDOUT_STYLES = frozenset(
    (
        "polite_request",
        "fake_tool_result",
        "role_json",
        "lang_sv",
        "lang_hi",
        "lang_ko",
        "lang_tr",
        "lang_nl",
        "how_to",
    )
)


def data_dir() -> Path:
    """$CTXBUDGET_DATA_DIR, else ../shared/data beside the repository."""
    env = os.environ.get("CTXBUDGET_DATA_DIR")
    return Path(env) if env else REPO.parent / "shared" / "data"


def held_out(key: str, share: int = 64) -> bool:
    """Whether ``key`` falls in the held-out part (``share``/256 of keys, by a stable digest)."""
    return hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest()[0] < share


@dataclass(frozen=True, slots=True)
class Unit:
    """One labelled passage of a development corpus."""

    corpus: str
    style: str
    label: str  # "attack" or "benign"
    text: str
    part: str  # "train" or "heldout"
    title: str | None = None
    id: str = ""
    #: The instruction put into a benign context, for the units built so.
    inserted: str | None = None


def _part(key: str) -> str:
    return "heldout" if held_out(key) else "train"


# --- BIPIA ---------------------------------------------------------------------------------------


@cache
def bipia_contexts() -> dict[str, list[str]]:
    """The clean contexts of BIPIA train by kind (email, table, code), as passage text."""
    base = data_dir() / "injection_bipia_train"
    out: dict[str, list[str]] = {}
    for kind in ("email", "table", "code"):
        rows = [json.loads(line) for line in (base / kind / "train.jsonl").open(encoding="utf-8")]
        texts = []
        for row in rows:
            ctx = row["context"]
            texts.append("\n".join(ctx) if isinstance(ctx, list) else str(ctx))
        out[kind] = texts
    return out


def bipia_attacks() -> list[tuple[str, str, str]]:
    """(kind, category, instruction) for every BIPIA train attack; kind is text or code."""
    base = data_dir() / "injection_bipia_train"
    out = []
    for kind in ("text", "code"):
        body = json.loads((base / f"{kind}_attack_train.json").read_text(encoding="utf-8"))
        for category, strings in body.items():
            out += [(kind, category, s) for s in strings]
    return out


def insert(attack: str, context: str, where: str) -> str:
    """``attack`` put into ``context`` at its start, middle (a line or sentence boundary near
    the middle) or end, as BIPIA builds its attacked passages."""
    if where == "start":
        return f"{attack}\n{context}"
    if where == "end":
        return f"{context}\n{attack}"
    lines = context.split("\n")
    if len(lines) >= 3:
        mid = len(lines) // 2
        return "\n".join([*lines[:mid], attack, *lines[mid:]])
    sentences = context.split(". ")
    mid = len(sentences) // 2
    if mid == 0:
        return f"{context}\n{attack}"
    return ". ".join(sentences[:mid]) + ". " + attack + " " + ". ".join(sentences[mid:])


def bipia_units() -> Iterator[Unit]:
    """BIPIA attacks in contexts (text attacks in email and table contexts, code attacks in code
    contexts, each at the three positions) and every clean context."""
    contexts = bipia_contexts()
    parts = {
        kind: [_part(f"bipia-{kind}-{i}") for i in range(len(c))] for kind, c in contexts.items()
    }
    for kind, texts in contexts.items():
        for i, text in enumerate(texts):
            yield Unit("bipia", f"clean_{kind}", "benign", text, parts[kind][i], id=f"{kind}-{i}")
    for n, (kind, category, attack) in enumerate(bipia_attacks()):
        part = _part(f"bipia-category-{category}")
        for ctx_kind in ("email", "table") if kind == "text" else ("code",):
            pool = [
                t for t, p in zip(contexts[ctx_kind], parts[ctx_kind], strict=True) if p == part
            ]
            for j, where in enumerate(POSITIONS):
                context = pool[(7 * n + 3 * j) % len(pool)]
                yield Unit(
                    "bipia",
                    category,
                    "attack",
                    insert(attack, context, where),
                    part,
                    id=f"{kind}-{n}-{ctx_kind}-{where}",
                    inserted=attack,
                )


# --- deepset, NotInject ---------------------------------------------------------------------------


def deepset_units() -> Iterator[Unit]:
    """deepset prompt-injections train: injections split by their opening words (a template),
    benign prompts by row."""
    import pyarrow.parquet as pq  # a development dependency, needed here only

    rows = pq.read_table(data_dir() / "injection_deepset_train" / "train.parquet").to_pylist()
    for i, row in enumerate(rows):
        text = str(row["text"])
        attack = int(row["label"]) == 1
        key = " ".join(text.lower().split()[:2]) if attack else f"row-{i}"
        german = any(
            w in f" {text.lower()} " for w in (" der ", " die ", " und ", " ist ", " ich ")
        )
        style = ("injection" if attack else "benign") + ("_de" if german else "_en")
        yield Unit(
            "deepset",
            style,
            "attack" if attack else "benign",
            text,
            _part(f"deepset-{key}"),
            id=f"deepset-{i}",
        )


def notinject_units() -> Iterator[Unit]:
    """NotInject (one trigger word): benign prompts, split by their trigger word."""
    path = data_dir() / "injection_notinject_one" / "NotInject_one.json"
    for i, row in enumerate(json.loads(path.read_text(encoding="utf-8"))):
        words = ",".join(row.get("word_list") or [])
        yield Unit(
            "notinject",
            str(row["category"]),
            "benign",
            str(row["prompt"]),
            _part(f"notinject-{words}"),
            id=f"notinject-{i}",
        )


# --- Benign retrieval traffic ---------------------------------------------------------------------


def msmarco_units(limit: int | None = None) -> Iterator[Unit]:
    """MS MARCO passages (the TREC DL 2019 sub-corpus), split by passage id."""
    path = data_dir() / "msmarco_trecdl19_beir_subset" / "corpus.jsonl"
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f):
            if limit is not None and n >= limit:
                break
            row = json.loads(line)
            yield Unit(
                "msmarco",
                "passage",
                "benign",
                row["text"],
                _part(f"msmarco-{row['_id']}"),
                title=row.get("title") or None,
                id=f"msmarco-{row['_id']}",
            )


def dbpedia_units() -> Iterator[Unit]:
    """DBPedia-Entity abstracts (the BEIR sub-corpus of 5,000 entities): benign retrieval
    traffic of another kind that no fit and no threshold reads (not in :func:`all_units`), so
    the gate's false withholds on it are a figure on traffic it was never fitted to."""
    path = data_dir() / "dbpedia_entity_beir_subset" / "corpus.jsonl"
    with path.open(encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            yield Unit(
                "dbpedia",
                "abstract",
                "benign",
                row["text"],
                "heldout",
                title=row.get("title") or None,
                id=f"dbpedia-{row['_id']}",
            )


def hotpotqa_units() -> Iterator[Unit]:
    """HotpotQA train paragraphs (title and sentences), split by title."""
    path = data_dir() / "hotpotqa_train100" / "hotpotqa_train_corpus.json"
    corpus = json.loads(path.read_text(encoding="utf-8"))
    for title, sents in corpus.items():
        yield Unit(
            "hotpotqa",
            "paragraph",
            "benign",
            "".join(sents),
            _part(f"hotpotqa-{title}"),
            title=title,
            id=f"hotpotqa-{title}",
        )


def musique_units() -> Iterator[Unit]:
    """MuSiQue train paragraphs, split by title."""
    path = data_dir() / "musique_train100" / "musique_train_corpus.json"
    for i, row in enumerate(json.loads(path.read_text(encoding="utf-8"))):
        yield Unit(
            "musique",
            "paragraph",
            "benign",
            row["text"],
            _part(f"musique-{row['title']}"),
            title=row["title"],
            id=f"musique-{i}",
        )


def wikiqa_units(limit: int = 3000) -> Iterator[Unit]:
    """WikiQA train answer sentences (lower-cased, tokenised), split by question."""
    base = data_dir() / "wikiqa_castorini" / "train"
    sentences = (base / "b.toks").read_text(encoding="utf-8").splitlines()
    ids = (base / "id.txt").read_text(encoding="utf-8").splitlines()
    for i, (text, qid) in enumerate(zip(sentences, ids, strict=True)):
        if i >= limit:
            break
        yield Unit("wikiqa", "sentence", "benign", text, _part(f"wikiqa-{qid}"), id=f"wikiqa-{i}")


# --- The hand-written corpus ---------------------------------------------------------------------


def own_units() -> Iterator[Unit]:
    """The hand-written corpus, split by style. A row with ``"insert": true`` is an instruction
    put into a benign passage (the three positions, over benign MS MARCO passages of its part);
    other rows are whole passages."""
    hosts = {
        part: [u.text for u in msmarco_units(600) if u.part == part]
        for part in ("train", "heldout")
    }
    with OWN_CORPUS.open(encoding="utf-8") as f:
        for n, line in enumerate(f):
            if not line.strip():
                continue
            row = json.loads(line)
            style = str(row["style"])
            part = "heldout" if style in OWN_HELDOUT_STYLES else "train"
            if row.get("insert"):
                pool = hosts[part]
                where = POSITIONS[n % 3]
                text = insert(row["text"], pool[n % len(pool)], where)
            else:
                text = row["text"]
            yield Unit(
                "own",
                style,
                row["label"],
                text,
                part,
                title=row.get("title"),
                id=f"own-{n}",
                inserted=row["text"] if row.get("insert") else None,
            )


def lookalike_units() -> Iterator[Unit]:
    """The labelled corpus of the gate's unit tests (``tests/data/injection_corpus.jsonl``):
    attacks of many disguises and benign look-alikes (code, configuration, security writing),
    split as the file splits them (its ``dev`` rows are the training part)."""
    with LOOKALIKE_CORPUS.open(encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            row = json.loads(line)
            yield Unit(
                "lookalike",
                str(row["style"]),
                str(row["label"]),
                str(row["text"]),
                "heldout" if row.get("split") == "heldout" else "train",
                title=row.get("title"),
                id=str(row["id"]),
            )


def tune_units() -> Iterator[Unit]:
    """The tuning corpora (:data:`TUNE_CORPORA`), split as each file splits them. A row with
    ``"insert": true`` is an instruction put into a benign document of its language (the same
    part's when there is one; the three positions in turn); other rows are whole passages."""
    for path in TUNE_CORPORA:
        with path.open(encoding="utf-8") as f:
            rows = [json.loads(line) for line in f if line.strip()]
        hosts: dict[tuple[str, str], list[str]] = {}
        for row in rows:
            if row["label"] == "benign" and row.get("lang"):
                key = (str(row["lang"]), "heldout" if row.get("split") == "heldout" else "train")
                hosts.setdefault(key, []).append(str(row["text"]))
        for n, row in enumerate(rows):
            part = "heldout" if row.get("split") == "heldout" else "train"
            text = str(row["text"])
            inserted = None
            if row.get("insert"):
                lang = str(row.get("lang"))
                pool = hosts.get((lang, part)) or hosts.get((lang, "train")) or [""]
                inserted = text
                text = insert(text, pool[n % len(pool)], POSITIONS[n % 3]).strip()
            yield Unit(
                "tune",
                str(row["style"]),
                str(row["label"]),
                text,
                part,
                title=row.get("title"),
                id=str(row["id"]),
                inserted=inserted,
            )


def benign_traffic() -> Iterator[Unit]:
    """Benign retrieval traffic: MS MARCO, HotpotQA, MuSiQue, WikiQA."""
    yield from msmarco_units()
    yield from hotpotqa_units()
    yield from musique_units()
    yield from wikiqa_units()


def all_units() -> list[Unit]:
    """Every development unit, in a fixed order (the tuning corpora, :func:`tune_units`,
    among them)."""
    out: list[Unit] = []
    sources = (bipia_units, deepset_units, notinject_units, own_units, lookalike_units)
    for source in (*sources, tune_units, benign_traffic):
        out.extend(source())
    return out
