"""The layout of ctxbudget.safety: a module uses only the public names of another, and the
imports between its modules (those under ``if TYPE_CHECKING`` too) run one way."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.paths import REPO

PACKAGE = "ctxbudget.safety"
SAFETY = REPO / "ctxbudget" / "safety"


def _module_name(path: Path, package: str) -> str:
    """The dotted name of a module file of ``package`` (the package itself for __init__.py)."""
    return package if path.stem == "__init__" else f"{package}.{path.stem}"


def _resolved(node: ast.ImportFrom, current: str, is_package: bool) -> str:
    """The absolute module an ``from ... import`` reads from, relative levels resolved."""
    if not node.level:
        return node.module or ""
    parts = current.split(".")
    base = parts if is_package else parts[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def _imports(path: Path, package: str) -> tuple[set[str], list[str]]:
    """What the module at ``path`` imports, at any depth of its body: the modules of
    ``package`` it depends on, and each private name it takes from another module
    (``from m import _x`` or ``m._x`` on an imported module ``m``), as ``"m._x"``."""
    current = _module_name(path, package)
    is_package = path.stem == "__init__"
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    deps: set[str] = set()
    private: list[str] = []
    bound: dict[str, str] = {}  # local name -> the module it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source = _resolved(node, current, is_package)
            for alias in node.names:
                target = f"{source}.{alias.name}"
                if alias.name.startswith("_") and source != "__future__":
                    private.append(target)
                if target.startswith(f"{package}.") or target == package:
                    # ``from . import gate`` names a module; ``from .gate import scan`` a name.
                    named = source == package and (path.parent / f"{alias.name}.py").exists()
                    deps.add(target if named else source)
                    bound[alias.asname or alias.name] = target
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(package):
                    deps.add(alias.name)
                if alias.asname:
                    bound[alias.asname] = alias.name
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in bound
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
        ):
            private.append(f"{bound[node.value.id]}.{node.attr}")
    deps.discard(current)
    return {d for d in deps if d.startswith(package)}, private


def _graph(root: Path, package: str) -> dict[str, set[str]]:
    """Each module of the package under ``root`` and the modules of the package it imports."""
    return {_module_name(p, package): _imports(p, package)[0] for p in sorted(root.glob("*.py"))}


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle of ``graph`` as the modules along it (first repeated last), or []."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return []

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return []


def test_the_checks_read_the_whole_package() -> None:
    """The graph holds every safety module, and the gate's dependencies on its siblings."""
    graph = _graph(SAFETY, PACKAGE)
    names = {f"{PACKAGE}.{m}" for m in ("gate", "rules", "signals", "normalization", "model")}
    assert names | {PACKAGE, f"{PACKAGE}.types"} <= set(graph)
    assert names - {f"{PACKAGE}.gate"} <= graph[f"{PACKAGE}.gate"]


def test_no_safety_module_imports_a_private_name_from_another_module() -> None:
    """What one safety module uses of another is public there; private names stay in the
    module that defines them."""
    offences = {
        f"{p.name}: {name}" for p in sorted(SAFETY.glob("*.py")) for name in _imports(p, PACKAGE)[1]
    }
    assert offences == set()


def test_the_imports_of_the_safety_modules_form_no_cycle() -> None:
    """No chain of imports between safety modules, type-checking ones included, comes back
    to where it started."""
    assert _cycle(_graph(SAFETY, PACKAGE)) == []


def test_the_checks_find_what_they_forbid(tmp_path: Path) -> None:
    """On a package whose modules import a private name and each other, the checks name the
    private import and the cycle."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .b import _hidden, shown\n")
    (pkg / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import Thing\n"
    )
    (pkg / "c.py").write_text("from pkg import a\nx = a._inner\n")
    assert _imports(pkg / "a.py", "pkg")[1] == ["pkg.b._hidden"]
    assert _imports(pkg / "c.py", "pkg")[1] == ["pkg.a._inner"]
    assert _cycle(_graph(pkg, "pkg")) in (["pkg.a", "pkg.b", "pkg.a"], ["pkg.b", "pkg.a", "pkg.b"])
