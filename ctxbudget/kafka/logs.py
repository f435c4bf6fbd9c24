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
  debugging switch, off by default); and the libraries' own lines (at DEBUG the Kafka
  clients log requests and records) pass :class:`PayloadGuard`, which withholds every bytes
  argument, every long argument and any message carrying a bytes literal;
* a warning or error repeated for one cause (the same logger, level and message, numbers
  aside; a line about one record, with its request id or offset, is never merged) is logged
  once per :data:`REPEAT_WINDOW_S`, and so are the libraries' repeated INFO lines; the next
  line of that cause after the window says how many were held back (``repeated``). A broker
  outage is then a few dozen lines a minute, not dozens a second (:class:`RepeatLimiter`).
"""

from __future__ import annotations

import logging
import os
import re
import sys
import time
from collections.abc import Callable, Iterator, MutableMapping
from contextlib import contextmanager
from typing import Any, TextIO

import structlog

#: Event fields that may hold evidence or user text.
SENSITIVE = frozenset({"text", "rendered", "raw", "query", "evidence", "passage"})
#: Third-party loggers routed through the formatter (their own level follows ours).
THIRD_PARTY = ("faust", "mode", "aiokafka", "kafka", "asyncio")
#: One line per cause per this many seconds for warnings and errors.
REPEAT_WINDOW_S = 60.0
#: Longest text argument, or message, of a library's line that is shown as it is (characters).
MAX_LIBRARY_ARG_CHARS = 200
#: Longest rendering of any other argument (a set of partitions, a request) shown as it is.
MAX_LIBRARY_OBJECT_CHARS = 1000
_NUMBERS = re.compile(r"\d+")
_BYTES_LITERAL = re.compile(r"""\bb['"]""")


def _withheld(value: object) -> object:
    """``value`` as a library's log line may show it: bytes and long values withheld."""
    if isinstance(value, bytes | bytearray | memoryview):
        return f"<{len(value)} bytes withheld>"
    if isinstance(value, int | float | bool) or value is None:
        return value
    try:
        text = value if isinstance(value, str) else repr(value)
    except Exception:
        return f"<{type(value).__name__}>"
    limit = MAX_LIBRARY_ARG_CHARS if isinstance(value, str) else MAX_LIBRARY_OBJECT_CHARS
    if len(text) > limit or _BYTES_LITERAL.search(text):
        return f"<{type(value).__name__} of {len(text)} chars withheld>"
    return value


class PayloadGuard(logging.Filter):
    """Keeps record payloads out of the libraries' lines (our own lines are structlog's and
    redacted by field name): bytes arguments, long arguments and messages carrying a bytes
    literal are withheld, leaving their type and length."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Rewrite ``record`` in place; never drops it."""
        if isinstance(record.msg, dict):  # structlog's own event: redacted by field
            return True
        if record.args:
            args = record.args
            if isinstance(args, tuple):
                record.args = tuple(_withheld(a) for a in args)
            else:
                record.args = {k: _withheld(v) for k, v in args.items()}
        try:
            message = record.getMessage()
        except Exception:
            return True
        if len(message) > MAX_LIBRARY_OBJECT_CHARS or _BYTES_LITERAL.search(message):
            found = _BYTES_LITERAL.search(message)
            cut = min(found.start() if found else len(message), MAX_LIBRARY_ARG_CHARS)
            record.msg = f"{message[:cut]}... <{len(message) - cut} chars withheld>"
            record.args = None
        return True


def cause_of(record: logging.LogRecord) -> tuple[str, int, str]:
    """What makes two lines "the same": logger, level and message with numbers blanked, and
    for our own events the ``reason`` they name (refusals for different reasons are different
    causes)."""
    if isinstance(record.msg, dict):
        message = str(record.msg.get("event", ""))
        if "reason" in record.msg:
            message += f" [reason={record.msg['reason']}]"
    else:
        try:
            message = record.getMessage()
        except Exception:
            message = str(record.msg)
    return record.name, record.levelno, _NUMBERS.sub("#", message)[:300]


#: Fields of our own events that make a line about one record, which is never merged.
_RECORD_FIELDS = frozenset({"request_id", "offset"})


class RepeatLimiter(logging.Filter):
    """Lets one line per cause through per ``window_s``: for warnings and errors, and for the
    libraries' INFO lines too (a client reconnecting says the same every second); DEBUG, and
    our own lines about one record (with a ``request_id`` or ``offset``), are never held
    back. The first line of a cause after its window carries ``repeated``: how many were held
    back meanwhile."""

    def __init__(
        self, window_s: float = REPEAT_WINDOW_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__()
        self.window_s = window_s
        self.clock = clock
        self._open: dict[tuple[str, int, str], tuple[float, int]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        """False for a repeat within its cause's window."""
        event = record.msg if isinstance(record.msg, dict) else None
        if record.levelno < (logging.INFO if event is None else logging.WARNING):
            return True
        if event is not None and _RECORD_FIELDS & event.keys():
            return True  # about one record (a skip, a bad control record): never merged
        key = cause_of(record)
        now = self.clock()
        opened = self._open.get(key)
        if opened is not None and now - opened[0] < self.window_s:
            self._open[key] = (opened[0], opened[1] + 1)
            return False
        if opened is not None and opened[1]:
            record.repeated = opened[1]
        self._open[key] = (now, 0)
        if len(self._open) > 10_000:  # bounded: forget causes whose window has closed
            self._open = {k: v for k, v in self._open.items() if now - v[0] < self.window_s}
        return True


def _repeated(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    record = event.get("_record")
    held = getattr(record, "repeated", 0)
    if held:
        event["repeated"] = held
    return event


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
                _repeated,
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.format_exc_info,
                renderer,
            ],
        )
    )
    if not show_evidence:
        handler.addFilter(PayloadGuard())
    handler.addFilter(RepeatLimiter())
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
