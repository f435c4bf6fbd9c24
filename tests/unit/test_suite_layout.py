"""The rules the test suite keeps: tests mirror the package, every test says what it proves, and
what tests share lives in helper modules, never in another test module."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from tests.paths import REPO

TESTS = REPO / "tests"


def _modules(root: Path) -> list[Path]:
    """Every Python file of a suite: test modules, conftest files and helper modules."""
    return sorted(root.rglob("*.py"))


def _test_modules(root: Path) -> list[Path]:
    """The modules pytest collects tests from."""
    return [p for p in _modules(root) if p.name.startswith("test_")]


def _tree(path: Path) -> ast.Module:
    """The parsed module."""
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _test_functions(tree: ast.Module) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    """Test functions at module level and in test classes, as pytest collects them."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith(
            "test"
        ):
            yield node
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            for inner in node.body:
                if isinstance(
                    inner, ast.FunctionDef | ast.AsyncFunctionDef
                ) and inner.name.startswith("test"):
                    yield inner


def _imported_modules(root: Path, path: Path, tree: ast.Module) -> Iterator[str]:
    """The dotted names ``path`` imports (modules, and names that may be modules), with
    relative imports resolved against the package ``root`` is named for."""
    package = ".".join((root.name, *path.relative_to(root).with_suffix("").parts[:-1]))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            yield module
            yield from (f"{module}.{alias.name}" for alias in node.names)


def undocumented_tests(root: Path) -> list[str]:
    """Test functions under ``root`` without a docstring, as ``file:line name``."""
    return [
        f"{path.relative_to(root)}:{fn.lineno} {fn.name}"
        for path in _test_modules(root)
        for fn in _test_functions(_tree(path))
        if not (ast.get_docstring(fn) or "").strip()
    ]


def imports_of_test_modules(root: Path) -> list[str]:
    """Modules under ``root`` (a package named ``root.name``) that import one of its test
    modules, or a name from one."""
    return [
        f"{path.relative_to(root)} imports {name}"
        for path in _modules(root)
        for name in sorted(set(_imported_modules(root, path, _tree(path))))
        if _names_a_test_module(root, name)
    ]


def _names_a_test_module(root: Path, name: str) -> bool:
    """Whether the dotted ``name`` is, or is inside, a test module of the ``root`` package."""
    parts = name.split(".")
    if parts[0] != root.name:
        return False
    return any(part.startswith("test_") for part in parts[1:])


def calls_of_tests(root: Path) -> list[str]:
    """Calls of a ``test_*`` function from inside a test function, as ``file:line name``."""
    found = []
    for path in _test_modules(root):
        for fn in _test_functions(_tree(path)):
            for node in ast.walk(fn):
                if not isinstance(node, ast.Call):
                    continue
                callee = node.func
                name = callee.id if isinstance(callee, ast.Name) else None
                if isinstance(callee, ast.Attribute):
                    name = callee.attr
                if name is not None and name.startswith("test_"):
                    found.append(f"{path.relative_to(root)}:{node.lineno} calls {name}")
    return found


def test_the_suite_is_read_whole() -> None:
    """The rules below see the whole suite: hundreds of test functions, in every folder."""
    counts = {
        folder: sum(len(list(_test_functions(_tree(p)))) for p in _test_modules(TESTS / folder))
        for folder in ("unit", "property", "e2e", "integration")
    }
    assert sum(counts.values()) > 700 and all(n > 0 for n in counts.values()), counts


def test_every_test_function_has_a_docstring() -> None:
    """Each test states, in its docstring, the behaviour it proves."""
    missing = undocumented_tests(TESTS)
    assert missing == [], "\n".join(missing)


def test_no_module_of_the_suite_imports_a_test_module() -> None:
    """What tests share lives in conftest.py or a helper module, so no module imports a test
    module (and so never another module's test functions)."""
    found = imports_of_test_modules(TESTS)
    assert found == [], "\n".join(found)


def test_no_test_calls_another_test() -> None:
    """A test never runs another test's body: the shared part is a helper both call."""
    found = calls_of_tests(TESTS)
    assert found == [], "\n".join(found)


def test_the_rules_find_what_they_forbid(tmp_path: Path) -> None:
    """On a suite that breaks each rule once, each check names the one offence, and no more."""
    root = tmp_path / "tests"
    (root / "unit").mkdir(parents=True)
    for init in (root / "__init__.py", root / "unit" / "__init__.py"):
        init.write_text("")
    (root / "unit" / "helpers.py").write_text("def shared() -> int:\n    return 1\n")
    (root / "unit" / "test_a.py").write_text(
        "from tests.unit.helpers import shared\n\n\n"
        "def test_documented() -> None:\n"
        '    """Says what it proves."""\n'
        "    assert shared() == 1\n\n\n"
        "def test_silent() -> None:\n"
        "    assert shared() == 1\n"
    )
    (root / "unit" / "test_b.py").write_text(
        "from tests.unit.test_a import test_documented\n"
        "from . import test_a\n\n\n"
        "class TestB:\n"
        "    def test_calls(self) -> None:\n"
        '        """Runs another test."""\n'
        "        test_documented()\n"
        "        test_a.test_silent()\n"
    )
    assert undocumented_tests(root) == ["unit/test_a.py:9 test_silent"]
    assert imports_of_test_modules(root) == [
        "unit/test_b.py imports tests.unit.test_a",
        "unit/test_b.py imports tests.unit.test_a.test_documented",
    ]
    assert calls_of_tests(root) == [
        "unit/test_b.py:8 calls test_documented",
        "unit/test_b.py:9 calls test_silent",
    ]


def test_each_stage_has_a_unit_test_module_named_for_it() -> None:
    """The tests of ``ctxbudget/stages/<stage>.py`` are in ``tests/unit/test_<stage>.py``."""
    stages = sorted(
        p.stem for p in (REPO / "ctxbudget" / "stages").glob("*.py") if p.stem != "__init__"
    )
    assert {"route", "consolidate", "select", "compress"} <= set(stages)
    for stage in stages:
        module = TESTS / "unit" / f"test_{stage}.py"
        assert module.is_file(), f"no {module.relative_to(REPO)} for ctxbudget/stages/{stage}.py"
        assert list(_test_functions(_tree(module))), f"{module.relative_to(REPO)} holds no test"


#: Top-level modules of ctxbudget/ with no test module named for them, and why.
UNMIRRORED = {
    "__init__": "the package's exports: every test imports through it",
    "__main__": "`python -m ctxbudget` only calls the CLI, tested in test_cli_*.py",
    "compare": "tested by aspect: test_compare_answers.py and test_compare_drops.py",
    "errors": "the exception types, raised and caught in the tests of every stage",
    "native": "the compiled hot path: test_native_loader.py and tests/property/test_native_*.py",
}


def test_each_top_level_module_has_a_test_module_named_for_it() -> None:
    """``ctxbudget/<module>.py`` has ``tests/unit/test_<module>.py`` or
    ``tests/property/test_<module>_properties.py``, unless listed with the reason."""
    modules = sorted(p.stem for p in (REPO / "ctxbudget").glob("*.py"))
    assert {"budget", "query", "ranking"} <= set(modules)
    missing = []
    for module in modules:
        unit = TESTS / "unit" / f"test_{module}.py"
        prop = TESTS / "property" / f"test_{module}_properties.py"
        named = [p for p in (unit, prop) if p.is_file() and list(_test_functions(_tree(p)))]
        if bool(named) == (module in UNMIRRORED):
            missing.append(module)
    assert missing == [], f"mirror these, or list (or unlist) them in UNMIRRORED: {missing}"
    assert set(UNMIRRORED) <= set(modules), set(UNMIRRORED) - set(modules)
