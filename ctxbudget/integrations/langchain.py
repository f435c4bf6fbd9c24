"""``CtxBudgetCompressor``: ctxbudget as a LangChain document compressor.

A ``BaseDocumentCompressor`` (langchain-core), so it drops into a
``ContextualCompressionRetriever`` or any LCEL chain that calls ``compress_documents``::

    from ctxbudget.integrations.langchain import CtxBudgetCompressor

    compressor = CtxBudgetCompressor(input_limit=8192, instructions=SYSTEM_PROMPT)
    docs = compressor.compress_documents(retrieved, query)
    prompt = f"{SYSTEM_PROMPT}\\n\\n{docs.evidence}\\n\\nQuestion: {query}"

How a Document becomes a candidate: the id is ``Document.id``, else ``metadata["id"]``, else
``c<n>`` (its 1-based position); the score ``metadata["score"]``; ``title``, ``source``,
``doc_id``, ``version``, ``authority``, ``access_label``, ``tenant_id``, ``rerank_score`` and
``published_at`` from the metadata of those names; the span from ``metadata["start_index"]``
(what ``RecursiveCharacterTextSplitter(add_start_index=True)`` writes). What comes back is
the packed evidence in pack order, one Document per evidence item: the packed text (an
excerpt when the packer cut it) and the metadata of the caller's document it came from, plus
``ctxbudget_id`` (the id the rendered block cites), ``excerpt`` (the text was cut), ``spans``
and ``chunk_ids`` (the ids of every caller's document the item stands for: copies it absorbed
too). The list returned is a :class:`PackedDocuments`, which also holds the rendered block
(``.evidence``) and the Pack; a ``ContextualCompressionRetriever`` returns it as a plain list,
the ids still in each document's metadata.

``pip install 'ctxbudget[langchain]'``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ctxbudget.integrations import MissingExtraError

try:
    from langchain_core.callbacks import Callbacks
    from langchain_core.documents import BaseDocumentCompressor, Document
except ModuleNotFoundError as e:  # pragma: no cover - exercised in a venv without it
    raise MissingExtraError(
        "ctxbudget.integrations.langchain", "langchain-core", "langchain"
    ) from e

from pydantic import ConfigDict, PrivateAttr

from ctxbudget.api import Packer
from ctxbudget.integrations._common import (
    Budget,
    Placed,
    candidate_of,
    evidence_metadata,
    make_packer,
    pack_sources,
    span_from_start,
)
from ctxbudget.schemas import Pack

__all__ = ["CtxBudgetCompressor", "PackedDocuments", "candidates_of"]


class PackedDocuments(list[Document]):
    """The packed evidence as Documents, in pack order, with the rendered block and the Pack."""

    def __init__(self, documents: Sequence[Document], pack: Pack) -> None:
        super().__init__(documents)
        self.pack = pack

    @property
    def evidence(self) -> str:
        """The rendered evidence block, to put in the prompt as it is."""
        return self.pack.rendered


def candidates_of(documents: Sequence[Document]) -> list[dict[str, Any]]:
    """The candidate mappings of ``documents`` (the module docstring says how)."""
    return [
        candidate_of(
            d.id, d.page_content, None, d.metadata,
            span_from_start(d.page_content, d.metadata.get("start_index")),
        )
        for d in documents
    ]  # fmt: skip


class CtxBudgetCompressor(BaseDocumentCompressor):
    """Packs the retrieved Documents under the token budget with a ctxbudget policy.

    ``policy`` and ``policies`` as :class:`ctxbudget.Packer` takes them; the other fields are
    the budget keywords of :meth:`ctxbudget.Packer.pack` (``input_limit`` is required).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)

    input_limit: int
    policy: str = "default@1"
    policies: Any = None
    tokenizer: str = "cl100k_base"
    instructions: Any = None
    conversation: Sequence[Any] = ()
    answer: Any = "short_fact"
    principal: Any = None
    model: str | None = None

    _packer: Packer = PrivateAttr()
    _budget: Budget = PrivateAttr()

    def model_post_init(self, context: Any, /) -> None:
        """Load the policy once, when the compressor is made."""
        self._packer = make_packer(self.policy, self.policies)
        self._budget = Budget(
            input_limit=self.input_limit,
            tokenizer=self.tokenizer,
            instructions=self.instructions,
            conversation=tuple(self.conversation),
            answer=self.answer,
            principal=self.principal,
            model=self.model,
        )

    def pack_documents(self, documents: Sequence[Document], query: str) -> PackedDocuments:
        """The packed evidence of ``documents`` for ``query`` (what compress_documents returns)."""
        packed = pack_sources(self._packer, self._budget, query, candidates_of(documents))
        return PackedDocuments([_document(documents, p) for p in packed.placed], packed.pack)

    def compress_documents(
        self,
        documents: Sequence[Document],
        query: str,
        callbacks: Callbacks | None = None,
    ) -> PackedDocuments:
        """The packed evidence, in pack order, as Documents (a :class:`PackedDocuments`)."""
        return self.pack_documents(documents, query)


def _document(documents: Sequence[Document], placed: Placed) -> Document:
    item = placed.item
    original = documents[placed.positions[0]] if placed.positions else None
    metadata = dict(original.metadata) if original is not None else {}
    metadata.update(evidence_metadata(item))
    return Document(
        page_content=item.text,
        metadata=metadata,
        id=original.id if original is not None else None,
    )
