"""Worker logs: JSON lines, the level honoured everywhere, request ids bound, no evidence."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
import structlog

from ctxbudget.kafka.logs import REPEAT_WINDOW_S, RepeatLimiter, bind_request, cause_of, configure


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
    """A JSON line has the bound request id, level and logger; evidence shows only its length."""
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
    """At ERROR our info and aiokafka's warning are dropped; faust's error is kept."""
    buf = io.StringIO()
    configure(level="ERROR", fmt="json", stream=buf)
    structlog.get_logger("ctxbudget.worker").info("quiet")
    logging.getLogger("aiokafka.consumer").warning("also quiet")
    logging.getLogger("faust.app").error("heard")
    lines = _lines(buf)
    assert [entry["event"] for entry in lines] == ["heard"]
    assert lines[0]["logger"] == "faust.app" and lines[0]["level"] == "error"


def test_the_evidence_switch_shows_text() -> None:
    """With the evidence switch on, a text field is logged as it is."""
    buf = io.StringIO()
    configure(level="DEBUG", fmt="json", evidence=True, stream=buf)
    structlog.get_logger("x").debug("dump", text="the passage")
    assert _lines(buf)[0]["text"] == "the passage"


def test_console_in_a_terminal() -> None:
    """With no format given, a terminal gets console lines, not JSON."""

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    buf = Tty()
    assert configure(level="INFO", stream=buf) == "console"
    structlog.get_logger("x").info("hello", n=1)
    assert "hello" in buf.getvalue() and not buf.getvalue().lstrip().startswith("{")


def test_an_outage_is_one_line_per_cause_with_a_count() -> None:
    """Hundreds of identical client errors (numbers aside) are one line, then one with a count."""
    buf = io.StringIO()
    configure(level="INFO", fmt="json", stream=buf)
    (limiter,) = [
        f for f in logging.getLogger().handlers[0].filters if isinstance(f, RepeatLimiter)
    ]
    now = [0.0]
    limiter.clock = lambda: now[0]
    client = logging.getLogger("aiokafka")
    for i in range(300):
        client.error("Unable connect to node with id %s: [Errno 111] port %d", 1, 40000 + i)
        client.error("Unable to update metadata from [%s]", 1)
        now[0] += 0.1
    structlog.get_logger("ctxbudget.worker").error("outputs not acknowledged", inputs=3)
    now[0] = REPEAT_WINDOW_S + 1
    client.error("Unable connect to node with id %s: [Errno 111] port %d", 1, 41000)
    lines = _lines(buf)
    events = [str(line["event"]) for line in lines]
    assert len(lines) == 4, events
    assert events[0].startswith("Unable connect") and events[1].startswith("Unable to update")
    assert events[2] == "outputs not acknowledged"
    assert lines[3]["repeated"] == 299 and "port 41000" in events[3]


def test_library_debug_lines_are_never_held_back() -> None:
    """At DEBUG every line of a library is kept (only INFO and above repeat-limited)."""
    buf = io.StringIO()
    configure(level="DEBUG", fmt="json", stream=buf)
    for _ in range(5):
        logging.getLogger("kafka.conn").debug("sent request %d", 7)
    assert len(_lines(buf)) == 5


def test_distinct_causes_are_not_merged() -> None:
    """Different loggers, levels or messages each get their own line."""
    limiter = RepeatLimiter(clock=lambda: 0.0)

    def record(name: str, level: int, msg: str) -> logging.LogRecord:
        return logging.LogRecord(name, level, __file__, 1, msg, None, None)

    assert limiter.filter(record("aiokafka", logging.ERROR, "node 1 down"))
    assert not limiter.filter(record("aiokafka", logging.ERROR, "node 2 down"))
    assert limiter.filter(record("aiokafka", logging.WARNING, "node 1 down"))
    assert limiter.filter(record("kafka", logging.ERROR, "node 1 down"))
    assert limiter.filter(record("aiokafka", logging.ERROR, "metadata failed"))
    assert cause_of(record("a", logging.ERROR, "x 12 y 3")) == ("a", logging.ERROR, "x # y #")


def test_library_lines_never_carry_record_payloads() -> None:
    """Bytes arguments, long texts and messages with a bytes literal are withheld."""
    buf = io.StringIO()
    configure(level="DEBUG", fmt="json", stream=buf)
    secret = "the secret evidence passage " * 20
    lib = logging.getLogger("kafka.producer.kafka")
    lib.debug("Sending (key=%r value=%r) to %s", b"req-1", secret.encode(), "ctx.packs.v1-0")
    lib.debug("Appending %s", secret)
    logging.getLogger("aiokafka.producer").debug(f"batch {secret.encode()!r}")
    logging.getLogger("faust.agent").debug("assigned %s", {("ctx.candidates.v1", 0)})
    out = buf.getvalue()
    assert "secret" not in out
    events = [str(line["event"]) for line in _lines(buf)]
    assert events[0] == (
        "Sending (key='<5 bytes withheld>' value='<560 bytes withheld>') to ctx.packs.v1-0"
    )
    assert events[1] == "Appending <str of 560 chars withheld>"
    assert events[2].startswith("batch ... <") and events[2].endswith("chars withheld>")
    assert events[3] == "assigned {('ctx.candidates.v1', 0)}"


def test_the_evidence_switch_lets_library_payloads_through() -> None:
    """CTXBUDGET_LOG_EVIDENCE (evidence=True) turns the payload guard off too."""
    buf = io.StringIO()
    configure(level="DEBUG", fmt="json", evidence=True, stream=buf)
    logging.getLogger("kafka.producer.kafka").debug("value=%r", b"the passage")
    assert _lines(buf)[0]["event"] == "value=b'the passage'"


def test_lines_about_one_record_are_never_merged() -> None:
    """Each skipped record keeps its own line (its offset is what a replay needs)."""
    buf = io.StringIO()
    configure(level="INFO", fmt="json", stream=buf)
    log = structlog.get_logger("ctxbudget.worker")
    for offset in range(3):
        log.error("RECORD SKIPPED: too large", source="ctx.candidates.v1", offset=offset)
    for _ in range(3):
        log.error("control topic unreadable", topic="ctx.control.v1")
    events = [(line["event"], line.get("offset")) for line in _lines(buf)]
    assert events == [
        ("RECORD SKIPPED: too large", 0),
        ("RECORD SKIPPED: too large", 1),
        ("RECORD SKIPPED: too large", 2),
        ("control topic unreadable", None),
    ]


def test_events_naming_different_reasons_are_different_causes() -> None:
    """Two refusals for different reasons are two causes (each gets its line); the same
    reason again within the window is held back."""
    limiter = RepeatLimiter(window_s=60.0, clock=lambda: 0.0)

    def record(reason: str) -> logging.LogRecord:
        rec = logging.LogRecord(
            "ctxbudget.kafka.control_follower", logging.ERROR, __file__, 1, "", None, None
        )
        rec.msg = {"event": "control record refused", "reason": reason}
        return rec

    assert limiter.filter(record("unsigned"))
    assert limiter.filter(record("oversize"))
    assert not limiter.filter(record("unsigned"))
