"""What the control tests share: the CLI run against a lab, the audit events read back, a
wait for a control version to be applied, the policies packs were made with, warm workers."""

from __future__ import annotations

import subprocess
import sys
import time

import orjson

from tests.integration.lab import Lab, batches, collect, produce
from tests.paths import REPO


def run_cli(
    lab: Lab, *args: str, env_extra: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    """The ``ctxbudget`` CLI run against ``lab``'s broker and topics."""
    env = {**lab.env(), **(env_extra or {})}
    return subprocess.run(
        [sys.executable, "-m", "ctxbudget", *args],
        env=env,
        cwd=REPO,
        capture_output=True,
        timeout=120,
        check=False,
    )


def audit_events(lab: Lab, schema: str) -> list[dict[str, object]]:
    """The audit events of ``schema`` on the lab's audit topic, in order."""
    out = []
    consumer = lab.consumer(lab.topics.audit)
    for msg in consumer:
        ev = orjson.loads(msg.value)
        if ev.get("schema") == schema:
            out.append(ev)
    consumer.close()
    return out


def wait_applied(
    lab: Lab, version: int, workers: int, timeout_s: float = 30
) -> list[dict[str, object]]:
    """The audit events of ``workers`` workers applying control ``version``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = [e for e in audit_events(lab, "ctx.control_applied.v1") if e["version"] == version]
        if len({e["worker"] for e in got}) >= workers:
            return got
        time.sleep(0.2)
    raise AssertionError(f"control version {version} not applied by {workers} workers")


def policies_of(packs: dict[str, list[bytes]]) -> set[str]:
    """The policies (name@version) the latest pack of each request was made with."""
    out = set()
    for values in packs.values():
        p = orjson.loads(values[-1])
        out.add(f"{p['policy']['name']}@{p['policy']['version']}")
    return out


def warm(lab: Lab, seed: int) -> None:
    """One batch through the workers, so they are up and have joined their groups."""
    items = batches(1, seed=seed)
    produce(lab, items)
    got, _ = collect(lab, lab.topics.packs, {items[0][0]}, timeout_s=90)
    assert got, "workers did not start"
