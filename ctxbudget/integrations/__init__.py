"""Components for RAG frameworks, each behind its own optional extra.

* :mod:`ctxbudget.integrations.langchain`: ``CtxBudgetCompressor``, a LangChain
  ``BaseDocumentCompressor`` (``pip install 'ctxbudget[langchain]'``);
* :mod:`ctxbudget.integrations.llama_index`: ``CtxBudgetPostprocessor``, a LlamaIndex
  ``BaseNodePostprocessor`` (``pip install 'ctxbudget[llama-index]'``);
* :mod:`ctxbudget.integrations.haystack`: ``CtxBudgetPacker``, a Haystack ``@component``
  (``pip install 'ctxbudget[haystack]'``).

Importing one without its framework raises :class:`MissingExtraError`, one line naming the
extra to install.
"""

from __future__ import annotations

from ctxbudget.errors import CtxBudgetError

__all__ = ["MissingExtraError"]


class MissingExtraError(CtxBudgetError, ImportError):
    """A component's framework is not installed; the message names the extra to install."""

    def __init__(self, component: str, framework: str, extra: str) -> None:
        super().__init__(
            f"{component} needs {framework}, which is not installed: "
            f"pip install 'ctxbudget[{extra}]'"
        )
        self.extra = extra
