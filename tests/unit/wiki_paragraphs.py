"""Wiki-like paragraphs for the selection tests: a titled candidate from one source, and filler
sentences that share no name with any question, so only the sentences a test writes can link."""

from __future__ import annotations

from collections.abc import Sequence

from ctxbudget.schemas import Candidate
from ctxbudget.testing import candidate

#: Country-life sentences that name nothing a test question asks about.
TOPICS = (
    "The church tower was rebuilt after a fire and now holds six bells",
    "Dairy farms line the river meadows and sell cheese at the weekly fair",
    "A narrow railway once carried peat from the moor to the brickworks",
    "The old mill grinds rye for the bakers of the neighbouring villages",
    "Storks nest on the chimneys of the barns along the northern dike",
    "A rowing club trains on the quiet reach below the lock every spring",
)


def filler(k: int, sentences: int = 4, topics: Sequence[str] = TOPICS) -> str:
    """``sentences`` filler sentences starting at topic ``k``, numbered so no two are equal."""
    return " ".join(f"{topics[(k + j) % len(topics)]} ({k}-{j})." for j in range(sentences))


def paragraph(title: str, text: str, score: float) -> Candidate:
    """A paragraph of the article ``title`` (its id the title in lower case, spaces as dashes)."""
    return candidate(
        title.lower().replace(" ", "-").replace(",", ""),
        text,
        score,
        title=title,
        source_id="wiki",
        doc_id=title,
    )
