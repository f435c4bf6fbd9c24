"""The broker probe: readiness follows its answers; a wrong address fails fast and clearly."""

from __future__ import annotations

import socket
import time

import pytest

from ctxbudget.kafka.probe import BrokerNotAnsweringError, BrokerProbe, ask_brokers


class Recorder:
    """A hand-written reporter: what the probe said, in order."""

    def __init__(self) -> None:
        self.said: list[str] = []

    def broker_answered(self) -> None:
        self.said.append("answered")

    def broker_failed(self, reason: str) -> None:
        self.said.append(f"failed: {reason}")


class FlakyCluster:
    """A fake admin client source: answers while ``up``, raises the client's error otherwise."""

    def __init__(self) -> None:
        self.up = True
        self.connects = 0
        self.closed = 0

    def connect(self) -> FlakyCluster:
        self.connects += 1
        if not self.up:
            raise ConnectionRefusedError(111, "Connection refused")
        return self

    def describe_cluster(self) -> dict[str, object]:
        if not self.up:
            raise TimeoutError("request timed out")
        return {"brokers": [{"node_id": 1}]}

    def close(self) -> None:
        self.closed += 1


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_probe_reports_each_answer_and_failure_and_reconnects() -> None:
    """Answers and failures are reported; after a failure the client is made afresh."""
    cluster, said = FlakyCluster(), Recorder()
    probe = BrokerProbe(reporter=said, connect=cluster.connect, interval_s=1)
    assert probe.ask_once() and probe.ask_once()
    assert cluster.connects == 1  # one client kept between rounds
    cluster.up = False
    assert not probe.ask_once() and not probe.ask_once()
    cluster.up = True
    assert probe.ask_once()
    assert said.said == [
        "answered",
        "answered",
        "failed: TimeoutError: request timed out",
        "failed: ConnectionRefusedError: [Errno 111] Connection refused",
        "answered",
    ]
    assert cluster.connects == 3 and cluster.closed == 1
    probe.stop()
    assert cluster.closed == 2


def test_the_probe_thread_asks_until_stopped() -> None:
    """start() asks at once and then every interval, in a daemon thread."""
    cluster, said = FlakyCluster(), Recorder()
    probe = BrokerProbe(reporter=said, connect=cluster.connect, interval_s=0.05)
    probe.start()
    deadline = time.monotonic() + 5
    while len(said.said) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    probe.stop()
    asked = len(said.said)
    assert asked >= 3 and set(said.said) == {"answered"}
    time.sleep(0.2)
    assert len(said.said) == asked


def test_a_bad_interval_is_refused() -> None:
    """The interval is checked at once, naming the value."""
    with pytest.raises(ValueError, match="interval_s must be > 0, got 0"):
        BrokerProbe(reporter=Recorder(), connect=FlakyCluster().connect, interval_s=0)


def test_a_wrong_broker_address_is_one_clear_error_within_seconds() -> None:
    """No broker on the port: BrokerNotAnsweringError naming HOST:PORT, after about the timeout."""
    pytest.importorskip("kafka", reason="the 'kafka' extra (kafka-python) is not installed")
    port = _closed_port()
    t0 = time.monotonic()
    with pytest.raises(BrokerNotAnsweringError) as caught:
        ask_brokers(None, brokers=f"127.0.0.1:{port}", timeout_s=2)
    took = time.monotonic() - t0
    assert str(caught.value).startswith(f"cannot reach the broker at 127.0.0.1:{port} within 2s")
    assert "\n" not in str(caught.value)
    assert took < 6, f"took {took:.1f}s"
