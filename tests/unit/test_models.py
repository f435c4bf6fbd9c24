"""The model kernel (ctxbudget/models.py): bases, YAML files, validation errors, the error root."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest
from pydantic import BaseModel, Field, ValidationError

import ctxbudget
from ctxbudget.errors import ConfigError, CtxBudgetError, InputError
from ctxbudget.models import (
    ConfigModel,
    ReportModel,
    ResultModel,
    Unit,
    WireModel,
    describe_validation,
    field_path,
    load_yaml_model,
    read_yaml,
    validate_config,
)
from ctxbudget.policy import load_policy


class _Wire(WireModel):
    n: int
    share: Unit = 0.5


class _Config(ConfigModel):
    n: int
    share: Unit = 0.5


class _Report(ReportModel):
    n: int
    names: tuple[str, ...] = ()


class _Result(ResultModel):
    n: int


class _Keyed(ConfigModel):
    config: dict[str, str] = Field(default_factory=dict)
    rows: list[_Config] = Field(default_factory=list)


def _error(model: type[BaseModel], data: object) -> ValidationError:
    with pytest.raises(ValidationError) as caught:
        model.model_validate(data)
    return caught.value


def test_the_bases_keep_their_rules() -> None:
    """Wire: strict, extras ignored; config: strict, extras refused; report: lax, extras
    ignored; result: lax, extras refused; all frozen."""
    assert _Wire.model_validate({"n": 1, "later_field": True}).n == 1
    _error(_Wire, {"n": "1"})
    _error(_Config, {"n": 1, "typo": 2})
    _error(_Config, {"n": "1"})
    assert _Report.model_validate({"n": "1", "names": ["a"]}) == _Report(n=1, names=("a",))
    assert _Report.model_validate({"n": 1, "later_field": True}) == _Report(n=1)
    assert _Result.model_validate({"n": "1"}) == _Result(n=1)
    _error(_Result, {"n": 1, "typo": 2})
    for model in (_Wire(n=1), _Config(n=1), _Report(n=1), _Result(n=1)):
        with pytest.raises(ValidationError):
            model.n = 2  # type: ignore[misc]
    _error(_Wire, {"n": 1, "share": 1.5})


def test_a_validation_error_is_one_line_with_paths_and_found_values() -> None:
    """Each problem names its field path and what was found; past the limit, a count."""
    err = _error(_Config, {"n": "x", "share": 2.0, "a": 1, "b": 2, "c": 3, "d": 4})
    text = describe_validation(err)
    assert "\n" not in text
    assert text.startswith("n: Input should be a valid integer (found 'x'); share: ")
    assert text.endswith("; ... and 1 more")
    assert describe_validation(err, limit=1) == (
        "n: Input should be a valid integer (found 'x'); ... and 5 more"
    )


def test_a_problem_of_the_whole_document_is_named_by_root() -> None:
    """No field path: the root label the caller chose ("(message)" on the wire)."""
    err = _error(_Wire, [1, 2])
    assert describe_validation(err).startswith("(top level): ")
    assert describe_validation(err, root="(message)").startswith("(message): ")


def test_a_key_holding_a_dot_is_quoted_in_the_path() -> None:
    """``config['retention.ms']``, not the ambiguous ``config.retention.ms``; indexes and plain
    keys are joined by dots."""
    assert field_path(("config", "retention.ms")) == "config['retention.ms']"
    assert field_path(("rows", 2, "n")) == "rows.2.n"
    assert field_path(("a.b", "c")) == "['a.b'].c"
    err = _error(_Keyed, {"config": {"retention.ms": [1, 2]}})
    assert describe_validation(err) == (
        "config['retention.ms']: Input should be a valid string (found [1, 2])"
    )


def test_found_containers_are_shown_only_when_small_and_flat() -> None:
    """A short list or mapping of scalars is shown as found; a nested or long one, and the
    enclosing mapping of a missing field, are not."""
    assert describe_validation(_error(_Config, {"n": [1, 2]})).endswith("(found [1, 2])")
    assert "found" not in describe_validation(_error(_Config, {"n": [[1]]}))
    assert "found" not in describe_validation(_error(_Config, {"n": list(range(9))}))
    assert describe_validation(_error(_Config, {"share": 0.1})) == "n: Field required"
    assert describe_validation(_error(_Keyed, {"rows": [{}]})) == "rows.0.n: Field required"


def test_the_caller_may_name_the_field_paths() -> None:
    """``path`` writes each field path (an environment variable, say); the root stays."""
    err = _error(_Keyed, {"rows": [{"n": "x"}]})
    text = describe_validation(err, path=lambda loc: "X_" + "__".join(map(str, loc)).upper())
    assert text == "X_ROWS__0__N: Input should be a valid integer (found 'x')"
    assert describe_validation(_error(_Keyed, [1]), path=str).startswith("(top level): ")


def test_a_yaml_syntax_error_names_file_and_line_in_one_line(tmp_path: Path) -> None:
    """path:line:column, the problem, and where the construct it breaks started."""
    bad = tmp_path / "broken.yaml"
    bad.write_text("a: 1\nb: [unclosed\n")
    with pytest.raises(ConfigError) as caught:
        read_yaml(bad)
    text = str(caught.value)
    assert "\n" not in text
    assert text.startswith(f"{bad}:3:1: not valid YAML: ")
    assert "from line 2" in text


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"- a\n", "expected a mapping at the top level, found ['a'] (list)"),
        (b"", "expected a mapping at the top level, found nothing"),
        (b"\xff\xfe", "not UTF-8 text"),
        (b"n: x\n", "n: Input should be a valid integer (found 'x')"),
    ],
)
def test_a_config_file_problem_is_one_line_naming_the_file(
    tmp_path: Path, content: bytes, expected: str
) -> None:
    """Wrong shape, empty, not text, invalid: a ConfigError naming the file, in one line."""
    path = tmp_path / "c.yaml"
    path.write_bytes(content)
    with pytest.raises(ConfigError) as caught:
        load_yaml_model(_Config, path)
    text = str(caught.value)
    assert text.startswith(f"{path}: ") and expected in text and "\n" not in text


def test_the_caller_chooses_the_error_class(tmp_path: Path) -> None:
    """Every reading and validating error is raised as the class the caller names."""
    missing = tmp_path / "nope.yaml"
    with pytest.raises(InputError, match=r"nope\.yaml: cannot read"):
        read_yaml(missing, error=InputError)
    with pytest.raises(InputError, match="expected a mapping"):
        validate_config(_Config, missing, [], error=InputError)


def test_a_policy_file_error_is_one_line(tmp_path: Path) -> None:
    """A policy with several problems: one line, each with its key path."""
    bad = tmp_path / "p.yaml"
    bad.write_text("name: p\nversion: '1'\nanswer_reserves: {default: -1}\nclasses: {}\nx: 1\n")
    with pytest.raises(ConfigError) as caught:
        load_policy(bad)
    text = str(caught.value)
    assert "\n" not in text and text.startswith(f"{bad}: ")
    assert "answer_reserves.default" in text and "x: Extra inputs are not permitted" in text


def _library_modules() -> list[str]:
    # the command line (click's exceptions) and the Kafka reader (the edge's) are not the core
    skip = ("ctxbudget.cli", "ctxbudget.__main__", "ctxbudget.analytics.kafka_source")
    return [
        m.name
        for m in pkgutil.walk_packages(ctxbudget.__path__, "ctxbudget.")
        if not m.name.startswith(skip)
    ]


@pytest.mark.parametrize("name", _library_modules())
def test_every_library_error_derives_from_the_root(name: str) -> None:
    """``except CtxBudgetError`` catches everything the library raises on purpose."""
    module = importlib.import_module(name)
    for cls_name, cls in inspect.getmembers(module, inspect.isclass):
        if cls.__module__ == name and issubclass(cls, Exception):
            assert issubclass(cls, CtxBudgetError), f"{name}.{cls_name}"
