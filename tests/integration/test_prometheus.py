"""The shipped alert rules in a real Prometheus (Debian's package) scraping a real worker.

A worker runs on a broker of the test's own; Prometheus scrapes it every second on loopback
with ``ops/alerts/ctxbudget-rules.yaml`` loaded. The test then makes a dead letter, stops the
broker, starts it again and kills the worker, and reads what Prometheus saw through its HTTP
API. ``promtool`` checks the rules and runs their unit tests.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.endpoints import (
    READINESS_BACK_BOUND_S,
    READINESS_LOSS_BOUND_S,
    free_port,
    seconds_until,
    wait_for,
)
from tests.integration.lab import Lab, PrivateBroker, batches, produce
from tests.paths import REPO

RULES = REPO / "ops" / "alerts" / "ctxbudget-rules.yaml"
RULE_TESTS = REPO / "ops" / "alerts" / "ctxbudget-rules.test.yaml"
COVERAGE_RULES = REPO / "ops" / "alerts" / "ctxbudget-coverage-rules.yaml"
PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")
NO_PROMETHEUS = "Debian's prometheus package is not installed (apt-get install -y prometheus)"


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(PROMTOOL is None, reason=NO_PROMETHEUS)
def test_promtool_accepts_the_rules_and_their_unit_tests_pass() -> None:
    """`promtool check rules` reads every rule of the shipped files; their unit tests pass."""
    checked = _promtool("check", "rules", str(RULES), str(COVERAGE_RULES))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    for path in (RULES, COVERAGE_RULES):
        groups = yaml.safe_load(path.read_text())["groups"]
        rules = sum(len(group["rules"]) for group in groups)
        assert f"Checking {path}\n  SUCCESS: {rules} rules found" in checked.stdout, checked.stdout
    tested = _promtool("test", "rules", str(RULE_TESTS))
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert yaml.safe_load(RULE_TESTS.read_text())["tests"], "the rule test file holds no tests"
    assert tested.stdout.strip().endswith("SUCCESS"), tested.stdout


class Prometheus:
    """A Prometheus on loopback and its HTTP API."""

    def __init__(self, port: int, proc: subprocess.Popen[bytes]) -> None:
        self.port = port
        self.proc = proc

    def _api(self, path: str, **params: str) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}{query}"
        with urllib.request.urlopen(url, timeout=5) as r:
            body = json.loads(r.read())
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant vector ``expr`` evaluates to now."""
        result: list[dict[str, Any]] = self._api("query", query=expr)["result"]
        return result

    def value(self, expr: str) -> float | None:
        """The one value of ``expr`` now, None when it is empty."""
        got = self.query(expr)
        return float(got[0]["value"][1]) if got else None

    def alert_states(self, name: str) -> set[str]:
        """The states (pending, firing) of the alerts called ``name``."""
        alerts = self._api("alerts")["alerts"]
        return {a["state"] for a in alerts if a["labels"]["alertname"] == name}

    def ready(self) -> bool:
        """Whether the server answers its readiness endpoint."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=2) as r:
                return r.status == 200
        except (urllib.error.URLError, OSError):
            return False


def _until(what: str, check: Callable[[], bool], timeout_s: float) -> float:
    """Seconds until ``check()`` holds; fails naming ``what`` after ``timeout_s``."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        if check():
            return time.monotonic() - t0
        time.sleep(0.5)
    raise AssertionError(f"{what}: not seen within {timeout_s:.0f}s")


@pytest.fixture
def prometheus_for(tmp_path: Path) -> Iterator[Callable[[int], Prometheus]]:
    """Start a Prometheus scraping ``127.0.0.1:<port>`` as job ctxbudget every second, with
    the shipped rules evaluated every second; stopped after the test."""
    if PROMETHEUS is None:
        pytest.skip(NO_PROMETHEUS)
    started: list[subprocess.Popen[bytes]] = []

    def start(metrics_port: int) -> Prometheus:
        config = tmp_path / "prometheus.yml"
        config.write_text(
            "global: {scrape_interval: 1s, evaluation_interval: 1s, scrape_timeout: 1s}\n"
            f"rule_files: [{json.dumps(str(RULES))}]\n"
            "scrape_configs:\n"
            "  - job_name: ctxbudget\n"
            f"    static_configs: [{{targets: ['127.0.0.1:{metrics_port}']}}]\n"
        )
        port = free_port()
        assert PROMETHEUS is not None
        proc = subprocess.Popen(
            [
                PROMETHEUS,
                f"--config.file={config}",
                f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=warn",
            ],
            stdout=(tmp_path / "prometheus.log").open("wb"),
            stderr=subprocess.STDOUT,
        )
        started.append(proc)
        server = Prometheus(port, proc)
        _until("Prometheus ready", server.ready, 60)
        return server

    yield start
    for proc in started:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_prometheus_sees_the_first_dead_letter_a_broker_loss_and_a_dead_worker(
    private_lab: tuple[Lab, PrivateBroker],
    prometheus_for: Callable[[int], Prometheus],
    tmp_path: Path,
) -> None:
    """Scraped by a real Prometheus: the first dead letter shows in increase() and fires its
    alert; a lost broker turns readiness false within 30 s and fires CtxbudgetBrokerUnreachable;
    back, ready again; a killed worker is `up == 0` and CtxbudgetWorkerDown."""
    lab, own = private_lab
    port = free_port()
    lab.env_overrides.update(CTXBUDGET_METRICS_PORT=str(port), CTXBUDGET_LOG_FORMAT="json")
    worker = lab.start("fused", log_dir=tmp_path)
    prom = prometheus_for(port)
    wait_for(port, "/readyz", 200, 90)
    _until("ready in Prometheus", lambda: prom.value("ctxbudget_worker_ready") == 1, 30)
    dead = 'ctxbudget_dead_letters_total{stage="fused", error_type="InputError"}'
    assert prom.value(dead) == 0  # exported at 0 before any dead letter

    # the first dead letter: increase() sees it, and the alert fires at once (for: 0m)
    produce(lab, [("bad-json", b"{nope"), *batches(3, seed=8)])
    increase = f"increase({dead}[1m])"
    _until("a dead letter in increase()", lambda: (prom.value(increase) or 0) > 0, 60)
    _until(
        "CtxbudgetDeadLetters firing",
        lambda: "firing" in prom.alert_states("CtxbudgetDeadLetters"),
        60,
    )
    _until("lag scraped", lambda: bool(prom.query("ctxbudget_consumer_lag")), 30)

    # the broker goes away
    own.stop()
    lost = seconds_until(port, "/readyz", 503, READINESS_LOSS_BOUND_S)
    _until("not ready in Prometheus", lambda: prom.value("ctxbudget_worker_ready") == 0, 15)
    assert prom.value("ctxbudget_broker_reachable") == 0
    assert prom.query("ctxbudget_consumer_lag") == []  # no stale "caught up"
    assert prom.value('up{job="ctxbudget"}') == 1  # the process is alive and scraped
    _until(
        "CtxbudgetBrokerUnreachable pending",
        lambda: bool(prom.alert_states("CtxbudgetBrokerUnreachable")),
        15,
    )
    _until(
        "CtxbudgetBrokerUnreachable firing",
        lambda: "firing" in prom.alert_states("CtxbudgetBrokerUnreachable"),
        90,
    )
    assert prom.alert_states("CtxbudgetWorkerNotReady") == {"pending"}  # fires after 5m

    # and comes back
    lab.broker = own.start()
    back = seconds_until(port, "/readyz", 200, READINESS_BACK_BOUND_S)
    _until("ready again in Prometheus", lambda: prom.value("ctxbudget_worker_ready") == 1, 15)
    _until(
        "CtxbudgetBrokerUnreachable resolved",
        lambda: not prom.alert_states("CtxbudgetBrokerUnreachable"),
        15,
    )

    # the worker dies: up == 0, and the down alert is pending (it fires after a minute)
    worker.kill()
    worker.wait(30)
    _until("up == 0", lambda: prom.value('up{job="ctxbudget"}') == 0, 15)
    _until(
        "CtxbudgetWorkerDown pending",
        lambda: "pending" in prom.alert_states("CtxbudgetWorkerDown"),
        15,
    )
    print(f"readiness false {lost:.1f}s after the broker stopped, true {back:.1f}s after return")
