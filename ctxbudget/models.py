"""The model kernel: the base models, the shared field types, reading YAML config files, and
describing a pydantic validation error in one line.

Four bases, one per kind of data; every model of ctxbudget derives from one of them:

* :class:`WireModel`, a versioned document one program writes and another reads (the wire
  messages, the control state, the calibration file): frozen, strict (a string is never
  coerced into a number, nor the reverse), unknown fields ignored so that a writer may add
  fields without breaking a reader, fields settable by name or alias (``schema``);
* :class:`ConfigModel`, a file people write (policies, routing rules): frozen, strict, and an
  unknown key is an error, so a misspelt key is refused rather than silently ignored;
* :class:`ReportModel`, a result computed in process and printed (evaluations, comparisons),
  or a group of values converted from text (the worker settings' topic names): frozen, values
  converted as pydantic does by default, unknown fields ignored;
* :class:`ResultModel`, the closed result of one operation, built only by the code that
  performs it (what a topic apply did, one drift finding): frozen, values converted as
  pydantic does by default, and an unknown field is an error, so a misspelt field in that
  code is caught.

A file that cannot be read or parsed, or that does not validate, is an error naming the file
(and, for YAML syntax, the line and column) in one line.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeAlias, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ctxbudget.errors import ConfigError, CtxBudgetError, one_line_text

__all__ = [
    "ConfigModel",
    "Loc",
    "NonNegInt",
    "ReportModel",
    "ResultModel",
    "Unit",
    "WireModel",
    "describe_validation",
    "field_path",
    "load_yaml_model",
    "read_yaml",
    "validate_config",
]

#: A count or offset: an integer >= 0.
NonNegInt = Annotated[int, Field(ge=0)]
#: A share, probability or threshold: a float within [0, 1].
Unit = Annotated[float, Field(ge=0.0, le=1.0)]

_M = TypeVar("_M", bound=BaseModel)


class WireModel(BaseModel):
    """Base of every versioned document: frozen, strict, unknown fields ignored."""

    model_config = ConfigDict(frozen=True, strict=True, extra="ignore", populate_by_name=True)


class ConfigModel(BaseModel):
    """Base of every model of a hand-written config file: frozen, strict, unknown keys refused."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)


class ReportModel(BaseModel):
    """Base of every computed report (and of a group of values converted from text): frozen,
    lax validation, unknown fields ignored."""

    model_config = ConfigDict(frozen=True, populate_by_name=True)


class ResultModel(BaseModel):
    """Base of every closed operation result: frozen, lax validation, unknown fields refused."""

    model_config = ConfigDict(frozen=True, extra="forbid")


# ---------------------------------------------------------------- validation errors


def _long_int(value: int) -> str:
    return f"<integer of about {int(value.bit_length() * 0.30103) + 1} digits>"


def safe_repr(value: Any) -> str:
    """``repr(value)``, except that an int too long to print (Python refuses over 4300
    digits) is described, and a value whose ``repr`` fails is named by its type."""
    if type(value) is int and value.bit_length() > 128:
        return _long_int(value)
    try:
        return repr(value)
    except Exception:
        return f"<{type(value).__name__}>"


#: A field path as pydantic gives it (``ErrorDetails["loc"]``): keys and list indexes.
Loc: TypeAlias = tuple[int | str, ...]

#: Containers up to this many scalar items are shown as found; larger or nested ones are not.
_SHOWN_ITEMS = 8


def field_path(loc: Loc) -> str:
    """A field path in one string: ``classes.how_to.ceiling``, ``items.3.text``; a key that holds
    a dot is quoted, ``config['retention.ms']``, so that the path reads one way only."""
    out = ""
    for part in loc:
        if isinstance(part, str) and "." in part:
            out += f"[{part!r}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _is_container(value: Any) -> bool:
    return isinstance(value, dict | list | tuple | set | frozenset)


def _small_flat(value: Any) -> bool:
    """A container of at most a few scalars (keys and values, for a mapping)."""
    if len(value) > _SHOWN_ITEMS:
        return False
    items = [*value.keys(), *value.values()] if isinstance(value, dict) else list(value)
    return not any(_is_container(i) for i in items)


def describe_validation(
    err: ValidationError,
    *,
    limit: int = 5,
    root: str = "(top level)",
    path: Callable[[Loc], str] = field_path,
) -> str:
    """A validation error in one line: its first ``limit`` problems as ``field.path: message
    (found value)``, then how many more there are.

    Each field path is written by ``path`` (:func:`field_path` unless the caller names fields
    its own way, an environment variable for instance); a problem of the whole document (no
    field path) is named ``root``. A validator's own message (it names what it checks) is
    shown as it is, without a field path when it is about the whole document. The found value
    is cut to 60 characters; it is left out for a missing field, for a mapping or list that is
    nested or holds more than a few items, and for a validator's own message about one.
    """
    parts = []
    for e in err.errors()[:limit]:
        loc = path(e["loc"]) if e["loc"] else root
        found = e.get("input")
        msg = e["msg"]
        validator = e["type"] == "value_error"
        if validator:
            msg = msg.removeprefix("Value error, ")
            if not e["loc"]:
                parts.append(msg)
                continue
        shown = ""
        if e["type"] != "missing" and (
            not _is_container(found) or (not validator and _small_flat(found))
        ):
            text = safe_repr(found)
            shown = f" (found {text if len(text) <= 60 else text[:57] + '...'})"
        parts.append(f"{loc}: {msg}{shown}")
    more = err.error_count() - limit
    if more > 0:
        parts.append(f"... and {more} more")
    return "; ".join(parts)


# ---------------------------------------------------------------- YAML config files


def _yaml_problem(path: Path, e: yaml.YAMLError) -> str:
    """A YAML syntax error as ``path:line:column: not valid YAML: problem (context)``."""
    if isinstance(e, yaml.MarkedYAMLError) and e.problem_mark is not None:
        mark = e.problem_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}"
        problem = e.problem or "syntax error"
        if e.context:
            context = e.context
            if e.context_mark is not None and e.context_mark.line != mark.line:
                context += f" from line {e.context_mark.line + 1}"
            problem += f" ({context})"
        return one_line_text(f"{where}: not valid YAML: {problem}")
    if isinstance(e, yaml.reader.ReaderError):
        return one_line_text(f"{path}: not valid YAML: {e.reason} at character {e.position}")
    return one_line_text(f"{path}: not valid YAML: {e}")


def read_yaml(path: Path, *, error: type[CtxBudgetError] = ConfigError) -> Any:
    """The document of one YAML file (``yaml.safe_load``; None when empty).

    A file that cannot be read, is not UTF-8 or is not valid YAML raises ``error`` with a
    one-line message naming the file (and, for a syntax error, the line and column).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise error(f"{path}: cannot read: {e.strerror or e}") from e
    except UnicodeDecodeError as e:
        raise error(f"{path}: not UTF-8 text (byte {e.start})") from e
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise error(_yaml_problem(path, e)) from e


def _found(value: Any) -> str:
    if value is None:
        return "nothing"
    text = safe_repr(value)
    if len(text) > 80:
        text = text[:77] + "..."
    return f"{text} ({type(value).__name__})"


def validate_config(
    model: type[_M], path: Path, data: Any, *, error: type[CtxBudgetError] = ConfigError
) -> _M:
    """``data`` (read from ``path``) validated as ``model``.

    ``error`` names the file when the document is not a mapping (saying what it is) or is
    invalid (:func:`describe_validation`: each problem with its key path and what was found).
    """
    if not isinstance(data, dict):
        raise error(f"{path}: expected a mapping at the top level, found {_found(data)}")
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise error(f"{path}: {describe_validation(e)}") from e


def load_yaml_model(
    model: type[_M], path: Path, *, error: type[CtxBudgetError] = ConfigError
) -> _M:
    """Read one YAML file and validate it as ``model``; any problem raises ``error`` in one
    line naming the file (:func:`read_yaml`, :func:`validate_config`)."""
    return validate_config(model, path, read_yaml(path, error=error), error=error)
