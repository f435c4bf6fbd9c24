"""faust's aiokafka transport, with the consumer's fetch wait taken from the settings.

faust-streaming builds its aiokafka consumer with ``fetch_max_wait_ms=1500`` written into
the call, and has no app setting for it. A broker may hold a fetch until that wait runs out
even when records arrive (the embedded broker does: a record then waits up to the full wait
before a worker sees it), so the wait bounds the latency every hop adds, and the workers need
``CTXBUDGET_FETCH_MAX_WAIT_MS`` (50 ms by default) instead.

:class:`FetchWaitApp` is a ``faust.App`` whose consumer transport is :class:`FetchWaitTransport`;
its consumer thread sets the wait on each aiokafka consumer it builds, after faust's own
construction and before the consumer starts (aiokafka reads it when it makes its fetcher, at
start). Nothing global is changed: other apps and other aiokafka consumers in the process keep
their own settings.
"""

from __future__ import annotations

import asyncio
from typing import Any

import faust
from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TransportT

__all__ = ["FetchWaitApp", "FetchWaitConsumer", "FetchWaitConsumerThread", "FetchWaitTransport"]

#: The attribute aiokafka's consumer keeps the fetch wait in until :meth:`start` reads it.
_WAIT_ATTRIBUTE = "_fetch_max_wait_ms"


class FetchWaitConsumerThread(faust_aiokafka.AIOKafkaConsumerThread):
    """faust's consumer thread; every aiokafka consumer it builds waits at most the
    transport's ``fetch_max_wait_ms`` for a fetch."""

    def _create_consumer(self, loop: asyncio.AbstractEventLoop) -> Any:
        consumer = super()._create_consumer(loop)
        if not hasattr(consumer, _WAIT_ATTRIBUTE):  # an aiokafka that keeps it elsewhere
            raise RuntimeError(
                f"aiokafka {type(consumer).__name__} has no {_WAIT_ATTRIBUTE}: "
                "the fetch wait cannot be set (see ctxbudget/kafka/transport.py)"
            )
        transport = self.transport
        assert isinstance(transport, FetchWaitTransport)
        setattr(consumer, _WAIT_ATTRIBUTE, transport.fetch_max_wait_ms)
        return consumer


class FetchWaitConsumer(faust_aiokafka.Consumer):
    """faust's aiokafka consumer, run by a :class:`FetchWaitConsumerThread`."""

    def _new_consumer_thread(self) -> FetchWaitConsumerThread:
        return FetchWaitConsumerThread(self, loop=self.loop, beacon=self.beacon)


class FetchWaitTransport(faust_aiokafka.Transport):
    """faust's aiokafka transport whose consumers wait at most ``fetch_max_wait_ms``."""

    Consumer = FetchWaitConsumer

    def __init__(self, *args: Any, fetch_max_wait_ms: int, **kwargs: Any) -> None:
        if fetch_max_wait_ms < 1:
            raise ValueError(f"fetch_max_wait_ms must be >= 1, got {fetch_max_wait_ms}")
        self.fetch_max_wait_ms = fetch_max_wait_ms
        super().__init__(*args, **kwargs)


class FetchWaitApp(faust.App):
    """A ``faust.App`` whose consumer transport is a :class:`FetchWaitTransport`.

    ``fetch_max_wait_ms`` caps every fetch of every consumer the app creates; the other
    keyword arguments are faust's settings. The producer transport is faust's own.
    """

    def __init__(self, id: str, *, fetch_max_wait_ms: int, **options: Any) -> None:
        self.fetch_max_wait_ms = fetch_max_wait_ms
        super().__init__(id, **options)

    def _new_transport(self) -> TransportT:
        return FetchWaitTransport(
            self.conf.broker_consumer, self, fetch_max_wait_ms=self.fetch_max_wait_ms
        )
