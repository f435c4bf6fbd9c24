"""The Python API: :class:`Packer`, which packs a query and its candidates into a Pack.

``Packer.pack`` takes what a RAG program has at hand (a query string, candidates as plain
mappings, bare strings or :class:`~ctxbudget.schemas.Candidate` models, an input limit) and
builds the strict wire batch from it; ``Packer.pack_batch`` packs a
:class:`~ctxbudget.schemas.CandidateBatch` (or its JSON mapping, or its JSON text) exactly as
``ctxbudget pack`` does. Both go through the wire bytes (:func:`ctxbudget.codec.encode`, then
:func:`ctxbudget.codec.decode_batch` with the input limits), so a pack from Python is
byte-identical to the pack ``ctxbudget pack`` and the workers make of the same batch.

The leniency lives here, never in the wire models: a mapping's friendly keys (``id``,
``score``, ``source``) are renamed, integers become floats where a score is expected, lists
become tuples. Anything that still does not fit is an :class:`ArgumentError` naming the field
(``candidates[2].authority``) and the value found.

Single-tenant use: without ``principal`` the request is from tenant :data:`DEFAULT_TENANT`
with no access labels. Candidates that name no ``tenant_id`` and no ``access_label`` are
visible to it; a candidate that names another tenant or any access label is dropped as
unauthorized, as it would be for any principal not granted that label.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeAlias

import orjson
from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticSerializationError, to_json

from ctxbudget.codec import decode_batch, encode
from ctxbudget.errors import InputError
from ctxbudget.limits import InputLimits
from ctxbudget.models import Loc, describe_validation, safe_repr
from ctxbudget.pipeline import Pipeline, PipelineResult
from ctxbudget.policy import PolicyStore, default_policies_dir
from ctxbudget.schemas import (
    AnswerContract,
    Candidate,
    CandidateBatch,
    Instructions,
    Lane,
    ModelSpec,
    Pack,
    Principal,
    Query,
    Turn,
)
from ctxbudget.tokens import TokenizerRegistry

__all__ = [
    "DEFAULT_TENANT",
    "ArgumentError",
    "CandidateLike",
    "Packer",
    "to_candidate",
    "to_candidates",
]

#: The tenant of a request that names no principal (single-tenant use).
DEFAULT_TENANT = "default"
#: The request id prefix of a request that names none (the rest is a digest of the request).
REQUEST_ID_PREFIX = "py-"

#: What ``Packer.pack`` accepts as one candidate.
CandidateLike: TypeAlias = Candidate | Mapping[str, Any] | str
AnswerLike: TypeAlias = str | Mapping[str, Any] | AnswerContract
InstructionsLike: TypeAlias = str | int | Mapping[str, Any] | Instructions | None
TurnLike: TypeAlias = Turn | Mapping[str, Any] | tuple[str, str]
PrincipalLike: TypeAlias = Principal | Mapping[str, Any] | None

#: A candidate mapping's friendly keys and the Candidate field each one sets.
ALIASES: Mapping[str, str] = {
    "id": "chunk_id",
    "score": "retrieval_score",
    "source": "source_id",
}
#: Keys a candidate mapping may hold: the friendly ones and every Candidate field.
CANDIDATE_KEYS: frozenset[str] = frozenset(ALIASES) | frozenset(Candidate.model_fields)

_STR_FIELDS = frozenset(
    {"chunk_id", "doc_id", "source_id", "parent_id", "title", "text", "version"}
    | {"published_at", "access_label", "tenant_id"}
)
_FLOAT_FIELDS = frozenset({"retrieval_score", "rerank_score", "authority"})


class ArgumentError(InputError):
    """An argument of the Python API that cannot be packed: ``field`` names it as the caller
    wrote it (``candidates[2].score``), ``value`` is what was found."""

    def __init__(self, field: str, problem: str, value: Any = None, *, show: bool = True) -> None:
        found = f" (found {_shown(value)})" if show else ""
        super().__init__(f"{field}: {problem}{found}")
        self.field = field
        self.value = value

    @classmethod
    def from_validation(
        cls, e: ValidationError, root: str, path: Callable[[Loc], str]
    ) -> ArgumentError:
        """The first problem of a validation error as the field, the whole error (each
        problem with its field path and value, :func:`describe_validation`) as the text."""
        first = e.errors()[0]
        field = path(first["loc"]) if first["loc"] else root
        error = cls(field, "", first.get("input"), show=False)
        error.args = (describe_validation(e, root=root, path=path),)
        return error


def _shown(value: Any) -> str:
    text = safe_repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{text}, {type(value).__name__}"


# ---------------------------------------------------------------- candidates


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _lenient_value(where: str, name: str, value: Any) -> Any:
    """One candidate field as the strict model wants it: ints to floats for scores, an id
    given as an integer to its decimal string, lists to tuples."""
    if value is None:
        return None
    if name in _FLOAT_FIELDS:
        if not _is_number(value) or not math.isfinite(value):
            raise ArgumentError(f"{where}", "expected a finite number", value)
        return float(value)
    if name in ("chunk_id", "doc_id") and type(value) is int:
        return str(value)
    if name in _STR_FIELDS and not isinstance(value, str):
        raise ArgumentError(where, "expected a string", value)
    if name == "embedding" and isinstance(value, list | tuple):
        return tuple(float(x) if _is_number(x) else x for x in value)
    if name == "span" and isinstance(value, list | tuple) and len(value) == 2:
        return {"start": value[0], "end": value[1]}
    return value


def _from_mapping(value: Mapping[str, Any], index: int, where: str) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    named: dict[str, str] = {}
    for key, raw in value.items():
        if not isinstance(key, str) or key not in CANDIDATE_KEYS:
            known = ", ".join(sorted(CANDIDATE_KEYS))
            raise ArgumentError(f"{where}.{key}", f"unknown key (known: {known})", show=False)
        name = ALIASES.get(key, key)
        if name in named:
            raise ArgumentError(
                f"{where}.{key}", f"sets {name} again (also given as {named[name]!r})", raw
            )
        named[name] = key
        fields[name] = _lenient_value(f"{where}.{key}", name, raw)
    if "text" not in fields:
        raise ArgumentError(f"{where}.text", "missing: every candidate needs its text", show=False)
    if fields.get("chunk_id") is None:
        fields["chunk_id"] = f"c{index + 1}"
    elif fields["chunk_id"] == "":
        key = named["chunk_id"]
        raise ArgumentError(f"{where}.{key}", "an id must not be empty", "")
    if fields.get("metadata") is not None:
        try:
            to_json(fields["metadata"])
        except PydanticSerializationError as e:
            key = named["metadata"]
            raise ArgumentError(f"{where}.{key}", f"not JSON data: {e}", show=False) from e
    if fields.get("doc_id") is None:
        fields["doc_id"] = fields["chunk_id"]
    if fields.get("source_id") is None:
        fields["source_id"] = fields["doc_id"]
    if fields.get("metadata") is None:
        fields.pop("metadata", None)
    return fields


def _candidate_path(where: str, named: Mapping[str, str]) -> Callable[[Loc], str]:
    def path(loc: Loc) -> str:
        if not loc:
            return where
        head, *rest = loc
        key = named.get(str(head), str(head))
        return ".".join([f"{where}.{key}", *(str(p) for p in rest)])

    return path


def to_candidate(value: CandidateLike, index: int = 0) -> Candidate:
    """One candidate from a :class:`Candidate`, a mapping or a bare string (its text).

    A mapping holds ``text`` and optionally ``id`` (or ``chunk_id``; default ``c<n>``, its
    1-based position), ``score`` (or ``retrieval_score``), ``rerank_score``, ``title``,
    ``source`` (or ``source_id``; default the ``doc_id``), ``doc_id`` (default the id),
    ``version``, ``authority``, ``access_label``, ``tenant_id``, ``metadata``, and any other
    Candidate field. :class:`ArgumentError` names ``candidates[index].<key>`` and the value.
    """
    where = f"candidates[{index}]"
    if isinstance(value, Candidate):
        return value
    if isinstance(value, str):
        value = {"text": value}
    if not isinstance(value, Mapping):
        raise ArgumentError(
            where, "expected a Candidate, a mapping with 'text', or a string", value
        )
    fields = _from_mapping(value, index, where)
    named = {ALIASES.get(k, k): k for k in value if isinstance(k, str)}
    try:
        return Candidate.model_validate(fields)
    except ValidationError as e:
        raise ArgumentError.from_validation(e, where, _candidate_path(where, named)) from e


def to_candidates(values: Iterable[CandidateLike]) -> tuple[Candidate, ...]:
    """Every candidate of ``values`` (:func:`to_candidate`), in order."""
    if isinstance(values, str | bytes | Mapping):
        raise ArgumentError(
            "candidates", "expected a sequence of candidates, not one", values, show=False
        )
    return tuple(to_candidate(v, i) for i, v in enumerate(values))


# ---------------------------------------------------------------- the other parts


def _model(model: type[BaseModel], field: str, value: Any) -> Any:
    """``value`` validated as ``model``; lists inside become tuples (the strict models hold
    tuples); an error names ``field``."""
    if isinstance(value, model):
        return value
    if not isinstance(value, Mapping):
        raise ArgumentError(field, f"expected a {model.__name__} or a mapping", value)
    data = {k: tuple(v) if isinstance(v, list) else v for k, v in value.items()}
    try:
        return model.model_validate(data)
    except ValidationError as e:

        def path(loc: Loc) -> str:
            return ".".join([field, *(str(p) for p in loc)])

        raise ArgumentError.from_validation(e, field, path) from e


def _answer(answer: AnswerLike) -> AnswerContract:
    if isinstance(answer, str):
        return AnswerContract(kind=answer)
    result: AnswerContract = _model(AnswerContract, "answer", answer)
    return result


def _instructions(instructions: InstructionsLike) -> Instructions:
    if instructions is None:
        return Instructions()
    if isinstance(instructions, str):
        return Instructions(text=instructions)
    if type(instructions) is int:
        if instructions < 0:
            raise ArgumentError("instructions", "a token count must be >= 0", instructions)
        return Instructions(tokens=instructions)
    result: Instructions = _model(Instructions, "instructions", instructions)
    return result


def _turn(value: TurnLike, index: int) -> Turn:
    where = f"conversation[{index}]"
    if isinstance(value, tuple | list) and len(value) == 2:
        value = {"role": value[0], "text": value[1]}
    result: Turn = _model(Turn, where, value)
    return result


def _principal(principal: PrincipalLike) -> Principal:
    if principal is None:
        return Principal(tenant_id=DEFAULT_TENANT)
    result: Principal = _model(Principal, "principal", principal)
    return result


def _positive_int(field: str, value: Any) -> int:
    if type(value) is not int or value <= 0:
        raise ArgumentError(field, "expected a positive integer", value)
    return value


def _optional_str(field: str, value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise ArgumentError(field, "expected a string", value)
    return value


def _request_id(batch: CandidateBatch) -> str:
    """A request id that names the request by its content: the same request, the same id."""
    digest = hashlib.sha256(encode(batch)).hexdigest()[:16]
    return f"{REQUEST_ID_PREFIX}{digest}"


# ---------------------------------------------------------------- the packer


def _store(policies: str | Path | PolicyStore | None) -> PolicyStore:
    if isinstance(policies, PolicyStore):
        return policies
    if policies is None:
        return PolicyStore.load(default_policies_dir())
    return PolicyStore.load(Path(policies))


class Packer:
    """Packs evidence with one policy; build one and call it for every request.

    ``policy`` is ``name@version`` (``default@1``, ``lean@1`` ship with ctxbudget);
    ``policies`` the folder holding it (``policies/packing/*.yaml``), a loaded
    :class:`~ctxbudget.policy.PolicyStore`, or None for the shipped policies (the current
    directory and the environment are not looked at). ``limits`` are the input limits a batch
    is held to (the workers' defaults). A :class:`~ctxbudget.errors.ConfigError` for an
    unknown policy or an invalid folder.

    A Packer keeps bounded caches between requests (token counts, sentence analyses, the
    safety gate's verdicts); use one per thread.
    """

    def __init__(
        self,
        policy: str = "default@1",
        policies: str | Path | PolicyStore | None = None,
        *,
        limits: InputLimits | None = None,
        tokenizers: TokenizerRegistry | None = None,
    ) -> None:
        self.limits = limits if limits is not None else InputLimits()
        self.store = _store(policies)
        self.pipeline = Pipeline.from_store(
            self.store,
            policy,
            tokenizers=tokenizers,
            max_pair_checks=self.limits.max_pair_checks,
        )
        self.policy = str(self.pipeline.policy.ref)

    def __repr__(self) -> str:
        return f"Packer(policy={self.policy!r}, policies={str(self.store.root)!r})"

    def batch(
        self,
        query: str,
        candidates: Iterable[CandidateLike],
        *,
        input_limit: int,
        tokenizer: str = "cl100k_base",
        instructions: InstructionsLike = None,
        conversation: Sequence[TurnLike] = (),
        answer: AnswerLike = "short_fact",
        principal: PrincipalLike = None,
        model: str | None = None,
        request_id: str | None = None,
        class_hint: str | None = None,
        sub_questions: Sequence[str] | None = None,
        as_of: str | None = None,
    ) -> CandidateBatch:
        """The CandidateBatch :meth:`pack` packs (the same arguments): what ``ctxbudget pack``
        or the Kafka topic would be given for the same request."""
        if not isinstance(query, str):
            raise ArgumentError("query", "expected a string", query)
        if isinstance(conversation, str):
            raise ArgumentError("conversation", "expected a sequence of turns", conversation)
        if sub_questions is not None and (
            isinstance(sub_questions, str) or not all(isinstance(s, str) for s in sub_questions)
        ):
            raise ArgumentError("sub_questions", "expected a sequence of strings", sub_questions)
        who = _principal(principal)
        fields: dict[str, Any] = {
            "request_id": _optional_str("request_id", request_id) or "-",
            "tenant_id": who.tenant_id,
            "principal": who,
            "query": Query(
                text=query,
                class_hint=_optional_str("class_hint", class_hint),
                as_of=_optional_str("as_of", as_of),
                sub_questions=tuple(sub_questions) if sub_questions is not None else None,
            ),
            "conversation": tuple(_turn(t, i) for i, t in enumerate(conversation)),
            "instructions": _instructions(instructions),
            "model": ModelSpec(
                name=_optional_str("model", model) or tokenizer,
                input_limit=_positive_int("input_limit", input_limit),
                tokenizer=_optional_str("tokenizer", tokenizer) or "cl100k_base",
            ),
            "answer_contract": _answer(answer),
            "candidates": to_candidates(candidates),
        }
        batch = CandidateBatch.model_validate(fields)
        if request_id is None:
            batch = batch.model_copy(update={"request_id": _request_id(batch)})
        return batch

    def pack(
        self,
        query: str,
        candidates: Iterable[CandidateLike],
        *,
        input_limit: int,
        tokenizer: str = "cl100k_base",
        instructions: InstructionsLike = None,
        conversation: Sequence[TurnLike] = (),
        answer: AnswerLike = "short_fact",
        principal: PrincipalLike = None,
        model: str | None = None,
        request_id: str | None = None,
        class_hint: str | None = None,
        sub_questions: Sequence[str] | None = None,
        as_of: str | None = None,
        lane: Lane = "live",
        cohort: str = "baseline",
    ) -> Pack:
        """Pack ``candidates`` for ``query`` into a model of ``input_limit`` tokens.

        ``candidates``: Candidates, mappings or bare strings (:func:`to_candidate`).
        ``tokenizer``: the model's tokenizer (a tiktoken encoding name). ``instructions``: the
        system prompt's text, or its token count. ``conversation``: earlier turns as
        ``(role, text)`` pairs, mappings or Turns. ``answer``: the answer contract's kind
        (``short_fact``, ``explanation``, ``procedure``, ...) or a mapping such as
        ``{"kind": "short_fact", "reserve_tokens": 200}``. ``principal``: who asks (a
        Principal or ``{"tenant_id": ..., "access_labels": [...]}``); None for
        single-tenant use (module docstring). ``request_id``: default a digest of the
        request, so the same request always gets the same id and the same pack bytes.

        Raises :class:`ArgumentError` (or another :class:`~ctxbudget.errors.InputError`)
        naming the field and value that cannot be packed.
        """
        batch = self.batch(
            query,
            candidates,
            input_limit=input_limit,
            tokenizer=tokenizer,
            instructions=instructions,
            conversation=conversation,
            answer=answer,
            principal=principal,
            model=model,
            request_id=request_id,
            class_hint=class_hint,
            sub_questions=sub_questions,
            as_of=as_of,
        )
        return self.pack_batch(batch, lane=lane, cohort=cohort)

    def pack_batch(
        self,
        batch: CandidateBatch | Mapping[str, Any] | str | bytes,
        *,
        lane: Lane = "live",
        cohort: str = "baseline",
    ) -> Pack:
        """Pack one CandidateBatch v1 (the model, its JSON mapping or its JSON text) as
        ``ctxbudget pack`` packs that line: held to strict JSON and the input limits, the
        same Pack bytes. An :class:`~ctxbudget.errors.InputError` (a
        :class:`~ctxbudget.errors.LimitError` over a limit) when it cannot be packed."""
        return self.run(batch, lane=lane, cohort=cohort).pack

    def run(
        self,
        batch: CandidateBatch | Mapping[str, Any] | str | bytes,
        *,
        lane: Lane = "live",
        cohort: str = "baseline",
    ) -> PipelineResult:
        """:meth:`pack_batch`, returning every stage's output and the traces besides."""
        return self.pipeline.run(self._wire(batch), lane=lane, cohort=cohort)

    def _wire(self, batch: CandidateBatch | Mapping[str, Any] | str | bytes) -> CandidateBatch:
        if isinstance(batch, CandidateBatch):
            raw = encode(batch)
        elif isinstance(batch, Mapping):
            try:
                raw = orjson.dumps(batch if isinstance(batch, dict) else dict(batch))
            except TypeError as e:
                raise ArgumentError("batch", f"not JSON-serialisable: {e}", show=False) from e
        elif isinstance(batch, str | bytes):
            raw = batch.encode("utf-8", "surrogatepass") if isinstance(batch, str) else batch
        else:
            raise ArgumentError(
                "batch", "expected a CandidateBatch, its JSON mapping or its JSON text", batch
            )
        return decode_batch(raw, limits=self.limits)
