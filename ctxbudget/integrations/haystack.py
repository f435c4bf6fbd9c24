"""``CtxBudgetPacker``: ctxbudget as a Haystack pipeline component.

A Haystack ``@component`` with ``run(query, documents)``, so it sits between a retriever (or a
ranker) and the prompt builder of a ``Pipeline``::

    from ctxbudget.integrations.haystack import CtxBudgetPacker

    pipe.add_component("packer", CtxBudgetPacker(input_limit=8192, instructions=SYSTEM_PROMPT))
    pipe.connect("retriever.documents", "packer.documents")
    pipe.connect("packer.evidence", "prompt_builder.evidence")

How a Document becomes a candidate: the id is ``Document.id``, the text ``Document.content``
(a document without text is an error naming it), the score ``Document.score`` (else
``meta["score"]``); ``title``, ``source``, ``doc_id``, ``version``, ``authority``,
``access_label``, ``tenant_id``, ``rerank_score`` and ``published_at`` from ``Document.meta``,
and the span from ``meta["split_idx_start"]`` (what ``DocumentSplitter`` writes). The outputs:
``documents``, the packed evidence in pack order, one Document per evidence item (the
caller's id and score, the packed text, an excerpt when the packer cut it, and the caller's
meta plus ``ctxbudget_id``, ``excerpt``, ``spans`` and ``chunk_ids``, the ids of every
caller's document the item stands for); ``evidence``, the rendered block for the prompt; and
``pack``, the Pack.

``pip install 'ctxbudget[haystack]'``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ctxbudget.integrations import MissingExtraError

try:
    from haystack import Document, component, default_from_dict, default_to_dict
except ModuleNotFoundError as e:  # pragma: no cover - exercised in a venv without it
    raise MissingExtraError("ctxbudget.integrations.haystack", "haystack-ai", "haystack") from e

from pydantic import BaseModel

from ctxbudget.api import (
    AnswerLike,
    ArgumentError,
    InstructionsLike,
    PrincipalLike,
    TurnLike,
)
from ctxbudget.integrations._common import (
    Budget,
    Placed,
    candidate_of,
    evidence_metadata,
    make_packer,
    pack_sources,
    span_from_start,
)
from ctxbudget.policy import PolicyStore
from ctxbudget.schemas import Pack

__all__ = ["CtxBudgetPacker", "candidates_of"]


def candidates_of(documents: Sequence[Document]) -> list[dict[str, Any]]:
    """The candidate mappings of ``documents`` (the module docstring says how)."""
    out = []
    for i, d in enumerate(documents):
        if d.content is None:
            raise ArgumentError(f"documents[{i}].content", "the packer reads text", d.content)
        span = span_from_start(d.content, d.meta.get("split_idx_start"))
        out.append(candidate_of(d.id, d.content, d.score, d.meta, span))
    return out


@component
class CtxBudgetPacker:
    """Packs the retrieved Documents under the token budget with a ctxbudget policy.

    ``policy`` and ``policies`` as :class:`ctxbudget.Packer` takes them; the other keywords are
    the budget keywords of :meth:`ctxbudget.Packer.pack` (``input_limit`` is required).
    """

    def __init__(
        self,
        *,
        input_limit: int,
        policy: str = "default@1",
        policies: str | Path | PolicyStore | None = None,
        tokenizer: str = "cl100k_base",
        instructions: InstructionsLike = None,
        conversation: Sequence[TurnLike] = (),
        answer: AnswerLike = "short_fact",
        principal: PrincipalLike = None,
        model: str | None = None,
    ) -> None:
        self._init = {
            "input_limit": input_limit,
            "policy": policy,
            "policies": str(policies.root if isinstance(policies, PolicyStore) else policies)
            if policies is not None
            else None,
            "tokenizer": tokenizer,
            "instructions": _plain(instructions),
            "conversation": _plain(list(conversation)),
            "answer": _plain(answer),
            "principal": _plain(principal),
            "model": model,
        }
        self._packer = make_packer(policy, policies)
        self._budget = Budget(
            input_limit=input_limit,
            tokenizer=tokenizer,
            instructions=instructions,
            conversation=tuple(conversation),
            answer=answer,
            principal=principal,
            model=model,
        )

    def to_dict(self) -> dict[str, Any]:
        """The component as Haystack serialises it (``Pipeline.dumps``): its init keywords,
        models written as mappings and a loaded policy store as its folder."""
        result: dict[str, Any] = default_to_dict(self, **self._init)
        return result

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CtxBudgetPacker:
        """The component :meth:`to_dict` wrote (``Pipeline.loads``)."""
        result: CtxBudgetPacker = default_from_dict(cls, data)
        return result

    @component.output_types(documents=list[Document], evidence=str, pack=Pack)
    def run(self, query: str, documents: list[Document]) -> dict[str, Any]:
        """Pack ``documents`` for ``query``: the packed Documents, the rendered block, the Pack."""
        packed = pack_sources(self._packer, self._budget, query, candidates_of(documents))
        return {
            "documents": [_document(documents, p) for p in packed.placed],
            "evidence": packed.pack.rendered,
            "pack": packed.pack,
        }


def _plain(value: Any) -> Any:
    """A keyword's value as plain data: models as mappings, tuples as lists."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _document(documents: Sequence[Document], placed: Placed) -> Document:
    item = placed.item
    original = documents[placed.positions[0]] if placed.positions else None
    meta = dict(original.meta) if original is not None else {}
    meta.update(evidence_metadata(item))
    if original is None:
        return Document(content=item.text, meta=meta)
    return Document(id=original.id, content=item.text, meta=meta, score=original.score)
