"""ctxbudget: pack retrieved evidence for LLM prompts under a hard token budget."""

__version__ = "0.1.0"
