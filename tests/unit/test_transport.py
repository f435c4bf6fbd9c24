"""Every consumer faust builds for a worker waits at most CTXBUDGET_FETCH_MAX_WAIT_MS per fetch.

The aiokafka consumers are built as faust builds them when it starts (no broker is needed to
build one) and their fetch wait is read back; nothing in aiokafka or faust is patched.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from tests.paths import REPO

aiokafka = pytest.importorskip("aiokafka", reason="the 'kafka' extra is not installed")
pytest.importorskip("faust", reason="the 'kafka' extra is not installed")

from ctxbudget.kafka.settings import WorkerSettings  # noqa: E402
from ctxbudget.kafka.transport import FetchWaitApp, FetchWaitTransport  # noqa: E402


@pytest.fixture
def worker(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> Iterator[Any]:
    from ctxbudget.kafka.app import WorkerApp

    monkeypatch.chdir(tmp_path)  # no .env file
    app = WorkerApp(WorkerSettings(policies=REPO / "policies", fetch_max_wait_ms=37), ["route"])
    try:
        yield app
    finally:
        app.executor.shutdown()
        shutil.rmtree(app._datadir, ignore_errors=True)


async def _built(app: Any, *, client_only: bool) -> tuple[int, int]:
    """The fetch wait of the aiokafka consumer faust builds at start, and of a plain one."""
    app.client_only = client_only
    consumer = app.consumer._thread._create_consumer(asyncio.get_running_loop())
    plain = aiokafka.AIOKafkaConsumer(bootstrap_servers="127.0.0.1:1")
    try:
        return consumer._fetch_max_wait_ms, plain._fetch_max_wait_ms
    finally:
        await consumer.stop()
        await plain.stop()


def test_the_worker_consumer_waits_the_setting(worker: Any) -> None:
    """The worker's faust consumer waits the configured 37 ms a fetch; a plain one keeps 500."""
    assert isinstance(worker.app, FetchWaitApp)
    assert isinstance(worker.app.transport, FetchWaitTransport)
    assert asyncio.run(_built(worker.app, client_only=False)) == (37, 500)


def test_a_client_only_consumer_waits_the_setting_too(worker: Any) -> None:
    """A client-only app's consumer waits the configured 37 ms a fetch too."""
    assert asyncio.run(_built(worker.app, client_only=True)) == (37, 500)


def test_nothing_global_is_patched(worker: Any) -> None:
    """aiokafka's class is untouched, and another app keeps faust's own wait."""
    from aiokafka.consumer.consumer import AIOKafkaConsumer

    assert aiokafka.AIOKafkaConsumer is AIOKafkaConsumer
    assert AIOKafkaConsumer.__init__.__module__ == "aiokafka.consumer.consumer"
    import faust

    other = faust.App("ctxbudget-test-other", broker="kafka://127.0.0.1:1", store="memory://")
    other.client_only = False

    async def build() -> int:
        consumer = other.consumer._thread._create_consumer(asyncio.get_running_loop())
        try:
            wait: int = consumer._fetch_max_wait_ms
            return wait
        finally:
            await consumer.stop()

    assert asyncio.run(build()) == 1500


def test_the_wait_must_be_positive() -> None:
    """A fetch wait of 0 ms is refused, naming fetch_max_wait_ms."""
    with pytest.raises(ValueError, match="fetch_max_wait_ms"):
        FetchWaitTransport("kafka://127.0.0.1:1", None, fetch_max_wait_ms=0)
