"""Worker logs: JSON lines, the level honoured everywhere, request ids bound, no evidence."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
import structlog

from workers.logs import bind_request, configure


@pytest.fixture(autouse=True)
def _restore() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    structlog.reset_defaults()


def _lines(buf: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in buf.getvalue().splitlines() if line.strip()]


def test_json_lines_with_request_id_and_no_evidence() -> None:
    buf = io.StringIO()
    assert configure(level="INFO", fmt="json", stream=buf) == "json"
    log = structlog.get_logger("ctxbudget.worker")
    with bind_request("req-9"):
        log.info("packed", tokens=120, text="secret evidence passage")
    (line,) = _lines(buf)
    assert line["event"] == "packed" and line["request_id"] == "req-9" and line["tokens"] == 120
    assert line["level"] == "info" and line["logger"] == "ctxbudget.worker"
    assert "secret" not in json.dumps(line) and line["text"] == "<23 chars withheld>"


def test_the_level_applies_to_library_loggers_too() -> None:
    buf = io.StringIO()
    configure(level="ERROR", fmt="json", stream=buf)
    structlog.get_logger("ctxbudget.worker").info("quiet")
    logging.getLogger("aiokafka.consumer").warning("also quiet")
    logging.getLogger("faust.app").error("heard")
    lines = _lines(buf)
    assert [entry["event"] for entry in lines] == ["heard"]
    assert lines[0]["logger"] == "faust.app" and lines[0]["level"] == "error"


def test_the_evidence_switch_shows_text() -> None:
    buf = io.StringIO()
    configure(level="DEBUG", fmt="json", evidence=True, stream=buf)
    structlog.get_logger("x").debug("dump", text="the passage")
    assert _lines(buf)[0]["text"] == "the passage"


def test_console_in_a_terminal() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    buf = Tty()
    assert configure(level="INFO", stream=buf) == "console"
    structlog.get_logger("x").info("hello", n=1)
    assert "hello" in buf.getvalue() and not buf.getvalue().lstrip().startswith("{")
