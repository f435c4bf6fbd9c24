"""Logging of the workers and commands, configured once.

* JSON lines (one object per event: ``timestamp``, ``level``, ``logger``, ``event`` and the
  event's fields) when ``CTXBUDGET_LOG_FORMAT=json`` or stderr is not a terminal (a container,
  a pipe), a readable console format in a terminal (``CTXBUDGET_LOG_FORMAT=console`` forces it);
* the level from ``CTXBUDGET_LOG_LEVEL`` (default INFO) applies to everything, including the
  standard-library loggers of faust, mode, aiokafka and kafka-python, which are routed through
  the same formatter (so a worker's log is one format);
* ``request_id`` is bound per record with :func:`bind_request` (structlog contextvars), so
  every line logged while handling a record names it;
* evidence text is never logged: fields named ``text``, ``rendered``, ``raw``, ``query`` or
  ``evidence`` are replaced by their length unless ``CTXBUDGET_LOG_EVIDENCE=true`` (a
  debugging switch, off by default).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from typing import Any, TextIO

import structlog

#: Event fields that may hold evidence or user text.
SENSITIVE = frozenset({"text", "rendered", "raw", "query", "evidence", "passage"})
#: Third-party loggers routed through the formatter (their own level follows ours).
THIRD_PARTY = ("faust", "mode", "aiokafka", "kafka", "asyncio")


def _redact(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    for key in SENSITIVE & event.keys():
        value = event[key]
        if isinstance(value, str | bytes):
            event[key] = f"<{len(value)} chars withheld>"
    return event


def configure(
    *,
    level: str | None = None,
    fmt: str | None = None,
    evidence: bool | None = None,
    stream: TextIO | None = None,
) -> str:
    """Configure structlog and the standard library once; returns the format chosen."""
    out = stream if stream is not None else sys.stderr
    level_name = (level or os.environ.get("CTXBUDGET_LOG_LEVEL") or "INFO").upper()
    numeric = logging.getLevelName(level_name)
    if not isinstance(numeric, int):
        numeric = logging.INFO
    chosen = (fmt or os.environ.get("CTXBUDGET_LOG_FORMAT") or "").lower()
    if chosen not in ("json", "console"):
        chosen = "console" if out.isatty() else "json"
    show_evidence = (
        evidence
        if evidence is not None
        else os.environ.get("CTXBUDGET_LOG_EVIDENCE", "").lower() in ("1", "true", "yes")
    )
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    if not show_evidence:
        shared.append(_redact)
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if chosen == "json"
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        cache_logger_on_first_use=False,
    )
    handler = logging.StreamHandler(out)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=shared,
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.format_exc_info,
                renderer,
            ],
        )
    )
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(numeric)
    for name in THIRD_PARTY:
        lib = logging.getLogger(name)
        lib.handlers.clear()
        lib.propagate = True
        lib.setLevel(numeric)
    return chosen


@contextmanager
def bind_request(request_id: str | None) -> Iterator[None]:
    """Every line logged inside names ``request_id``."""
    if request_id is None:
        yield
        return
    with structlog.contextvars.bound_contextvars(request_id=request_id):
        yield
