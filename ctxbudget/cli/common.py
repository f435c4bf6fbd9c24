"""Helpers shared by the commands: policy location, line reading, output files."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING, TypeVar

import click

from ctxbudget.errors import ConfigError, one_line
from ctxbudget.jsonl import count_lines, iter_lines, read_lines
from ctxbudget.limits import InputLimits
from ctxbudget.models import Loc, describe_validation
from ctxbudget.policy import PolicyStore, default_policies_dir

if TYPE_CHECKING:
    from ctxbudget.kafka import TopicSpec, WorkerSettings

__all__ = [
    "Pacer",
    "UsageFailure",
    "count_lines",
    "iter_lines",
    "load_store",
    "one_line",
    "open_in",
    "open_out",
    "policies_dir",
    "read_lines",
    "topic_specs",
    "worker_settings",
]


class UsageFailure(click.ClickException):
    """A usage error told in one line ("Error: ..."), exit status 2 like click's own."""

    exit_code = 2


def _os_reason(e: OSError) -> str:
    return e.strerror or str(e)


def _env_name(loc: Loc) -> str:
    """The environment variable of a settings field: ``("topics", "packs")`` is
    ``CTXBUDGET_TOPICS__PACKS``."""
    return "CTXBUDGET_" + "__".join(str(p) for p in loc).upper()


S = TypeVar("S")


def _from_env(settings_class: Callable[[], S]) -> S:
    """Settings read from the CTXBUDGET_* variables; a bad value is a usage error naming each
    variable (``bad setting: CTXBUDGET_CONCURRENCY: ...``)."""
    from pydantic import ValidationError

    try:
        return settings_class()
    except ValidationError as e:
        bad = describe_validation(e, limit=e.error_count(), path=_env_name)
        raise UsageFailure(f"bad setting: {bad}") from e


def worker_settings() -> WorkerSettings:
    """The CTXBUDGET_* settings (brokers, topics, security); a bad value is a usage error
    naming each variable (``bad setting: CTXBUDGET_CONCURRENCY: ...``)."""
    from ctxbudget.kafka import WorkerSettings

    return _from_env(WorkerSettings)


def topic_specs() -> list[TopicSpec]:
    """The topic specs the workers use (``CTXBUDGET_TOPIC_SPECS``, ``./topics``, the shipped
    ones); none when they cannot be loaded (the lane guards then go by topic names alone)."""
    from ctxbudget.kafka import TopicError, load_specs

    try:
        return load_specs(worker_settings())
    except TopicError:
        return []


def env_input_limits() -> InputLimits:
    """The input limits the workers apply, from the same CTXBUDGET_* variables
    (``CTXBUDGET_MAX_MESSAGE_BYTES``, ``CTXBUDGET_MAX_CANDIDATES``, ``CTXBUDGET_MAX_TEXT_BYTES``,
    ``CTXBUDGET_MAX_JSON_DEPTH``, ``CTXBUDGET_MAX_PAIR_CHECKS``); a bad value is a usage error
    naming the variable."""
    from ctxbudget.limit_settings import LimitSettings

    return _from_env(LimitSettings).input_limits()


class Pacer:
    """Holds a stream of records to a rate (records/s) or to a speed-up of recorded time."""

    def __init__(self, rate: float | None, speed: float | None = None) -> None:
        self.rate, self.speed = rate, speed
        self.t0 = time.monotonic()
        self.first_ts: float | None = None
        self.n = 0

    def wait(self, ts: float | None = None) -> None:
        self.n += 1
        target = None
        if self.rate:
            target = self.t0 + self.n / self.rate
        elif self.speed and ts is not None:
            if self.first_ts is None:
                self.first_ts = ts
            target = self.t0 + (ts - self.first_ts) / self.speed
        if target is not None:
            delay = target - time.monotonic()
            if delay > 0:
                time.sleep(delay)


def policies_dir(option: str | None) -> Path:
    """--policies, else $CTXBUDGET_POLICIES, else ./policies, else the shipped folder."""
    if option:
        return Path(option)
    env = os.environ.get("CTXBUDGET_POLICIES")
    if env:
        return Path(env)
    local = Path("policies")
    if (local / "packing").is_dir():
        return local
    return default_policies_dir()


def load_store(option: str | None, *, usage: bool = False) -> PolicyStore:
    """The policies; a folder that cannot be loaded is an error (a usage error if ``usage``)."""
    try:
        return PolicyStore.load(policies_dir(option))
    except ConfigError as e:
        raise (UsageFailure if usage else click.ClickException)(str(e)) from e


def open_in(path: str, *, what: str = "input") -> IO[bytes]:
    """A binary input, stdin for '-'; one that cannot be opened is a :class:`UsageFailure`."""
    if path == "-":
        return sys.stdin.buffer
    try:
        return open(path, "rb")
    except OSError as e:
        raise UsageFailure(f"cannot read {what} {path!r}: {_os_reason(e)}") from e


@contextmanager
def open_out(path: str | None, *, what: str = "output") -> Iterator[IO[bytes] | None]:
    """A binary output: None when not asked for, stdout for '-', else the file.

    A file that cannot be created is a :class:`UsageFailure` (exit status 2)."""
    if path is None:
        yield None
    elif path == "-":
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
    else:
        try:
            fh = open(path, "wb")  # noqa: SIM115
        except OSError as e:
            raise UsageFailure(f"cannot write {what} {path!r}: {_os_reason(e)}") from e
        with fh:
            yield fh
