"""Where the shipped data folders are: the source checkout's, else the installed package's.

``policies/``, ``topics/`` and ``examples/`` live at the top of the repository, for people to
edit. A wheel carries a copy of them inside the package (``ctxbudget/_data/``, written by the
build; see ``pyproject.toml``), so an installed ``ctxbudget`` works from site-packages in any
directory. Running from a checkout (an editable install, the tests), the checkout's folders
are used, so an edit there takes effect at once.

The commands look in the current directory first (``./policies``, ``./topics``); this module
only says where the shipped defaults are. No environment variable is read here.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["PACKAGE_DATA", "SOURCE_TREE", "shipped"]

#: The copy inside the installed package (present in a wheel, absent in a checkout).
PACKAGE_DATA = Path(__file__).resolve().parent / "_data"
#: The checkout the package runs from, when it runs from one.
SOURCE_TREE = Path(__file__).resolve().parent.parent


def shipped(name: str) -> Path:
    """The shipped folder ``name`` ("policies", "topics", "examples", "ops/kafka").

    The checkout's when the package runs from a source tree (recognised by its
    ``pyproject.toml``), else the package's own copy.
    """
    source = SOURCE_TREE / name
    if source.is_dir() and (SOURCE_TREE / "pyproject.toml").is_file():
        return source
    return PACKAGE_DATA / name
