"""``CtxBudgetPostprocessor``: ctxbudget as a LlamaIndex node postprocessor.

A ``BaseNodePostprocessor`` (llama-index-core), so it goes in a query engine's
``node_postprocessors`` or is called on retrieved nodes directly::

    from ctxbudget.integrations.llama_index import CtxBudgetPostprocessor

    packer = CtxBudgetPostprocessor(input_limit=8192, instructions=SYSTEM_PROMPT)
    engine = RetrieverQueryEngine.from_args(retriever, node_postprocessors=[packer])

How a node becomes a candidate: the id is the node id (``node.node_id``), the text its
content without metadata, the score ``NodeWithScore.score`` (else ``metadata["score"]``);
``title``, ``source``, ``doc_id``, ``version``, ``authority``, ``access_label``,
``tenant_id``, ``rerank_score`` and ``published_at`` from the node's metadata of those names,
and the span from the node's ``start_char_idx`` and ``end_char_idx``. What comes back
is the packed evidence in pack order, one ``NodeWithScore`` per evidence item: a TextNode with
the caller's node id, the packed text (an excerpt when the packer cut it), the caller's
metadata plus ``ctxbudget_id``, ``excerpt``, ``spans`` and ``chunk_ids`` (the ids of every
caller's node the item stands for; hidden from the LLM and embedding views), and the caller's
score. The list returned is a :class:`PackedNodes`, which also holds the rendered block
(``.evidence``) and the Pack.

``pip install 'ctxbudget[llama-index]'``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ctxbudget.integrations import MissingExtraError

try:
    from llama_index.core.postprocessor.types import BaseNodePostprocessor
    from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle, TextNode
except ModuleNotFoundError as e:  # pragma: no cover - exercised in a venv without it
    raise MissingExtraError(
        "ctxbudget.integrations.llama_index", "llama-index-core", "llama-index"
    ) from e

from pydantic import PrivateAttr

from ctxbudget.api import ArgumentError, Packer
from ctxbudget.integrations._common import (
    Budget,
    Placed,
    candidate_of,
    evidence_metadata,
    make_packer,
    pack_sources,
)
from ctxbudget.schemas import Pack

__all__ = ["CtxBudgetPostprocessor", "PackedNodes", "candidates_of"]

_EVIDENCE_KEYS = ["ctxbudget_id", "excerpt", "spans", "chunk_ids"]


class PackedNodes(list[NodeWithScore]):
    """The packed evidence as nodes, in pack order, with the rendered block and the Pack."""

    def __init__(self, nodes: Sequence[NodeWithScore], pack: Pack) -> None:
        super().__init__(nodes)
        self.pack = pack

    @property
    def evidence(self) -> str:
        """The rendered evidence block, to put in the prompt as it is."""
        return self.pack.rendered


def candidates_of(nodes: Sequence[NodeWithScore]) -> list[dict[str, Any]]:
    """The candidate mappings of ``nodes`` (the module docstring says how)."""
    return [_candidate(n) for n in nodes]


def _candidate(n: NodeWithScore) -> dict[str, Any]:
    text = n.node.get_content(metadata_mode=MetadataMode.NONE)
    node = n.node
    start = getattr(node, "start_char_idx", None)
    end = getattr(node, "end_char_idx", None)
    span = None
    if type(start) is int and type(end) is int and 0 <= start <= end:
        span = (start, end)
    return candidate_of(node.node_id, text, n.score, node.metadata, span)


class CtxBudgetPostprocessor(BaseNodePostprocessor):
    """Packs the retrieved nodes under the token budget with a ctxbudget policy.

    ``policy`` and ``policies`` as :class:`ctxbudget.Packer` takes them; the other fields are
    the budget keywords of :meth:`ctxbudget.Packer.pack` (``input_limit`` is required).
    """

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
        """Load the policy once, when the postprocessor is made."""
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

    @classmethod
    def class_name(cls) -> str:
        """The name LlamaIndex serialises the component under."""
        return "CtxBudgetPostprocessor"

    def pack_nodes(self, nodes: Sequence[NodeWithScore], query: str) -> PackedNodes:
        """The packed evidence of ``nodes`` for ``query`` (what the postprocessor returns)."""
        packed = pack_sources(self._packer, self._budget, query, candidates_of(nodes))
        return PackedNodes([_node(nodes, p) for p in packed.placed], packed.pack)

    def _postprocess_nodes(
        self,
        nodes: list[NodeWithScore],
        query_bundle: QueryBundle | None = None,
    ) -> list[NodeWithScore]:
        if query_bundle is None:
            raise ArgumentError("query_bundle", "the packer needs the query", show=False)
        return self.pack_nodes(nodes, query_bundle.query_str)


def _node(nodes: Sequence[NodeWithScore], placed: Placed) -> NodeWithScore:
    item = placed.item
    original = nodes[placed.positions[0]] if placed.positions else None
    if original is None:
        return NodeWithScore(node=TextNode(text=item.text, metadata=evidence_metadata(item)))
    source = original.node
    metadata = dict(source.metadata)
    metadata.update(evidence_metadata(item))
    node = TextNode(
        id_=source.node_id,
        text=item.text,
        metadata=metadata,
        relationships=dict(source.relationships),
        excluded_llm_metadata_keys=[*source.excluded_llm_metadata_keys, *_EVIDENCE_KEYS],
        excluded_embed_metadata_keys=[*source.excluded_embed_metadata_keys, *_EVIDENCE_KEYS],
    )
    return NodeWithScore(node=node, score=original.score)
