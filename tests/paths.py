"""Where the repository and the labelled data sets are, for tests."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def data_dir() -> Path:
    """The labelled data sets: $CTXBUDGET_DATA_DIR, else ../shared/data beside the repo."""
    env = os.environ.get("CTXBUDGET_DATA_DIR")
    return Path(env) if env else REPO.parent / "shared" / "data"
