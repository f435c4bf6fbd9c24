"""Does the live path wait for shadow packs? Live latency with the shadow worker off and on.

    python -m bench.shadow [--rate 50] [--seconds 20]

Starts the embedded broker, one live worker (fused) and, in the second phase, a shadow worker
with shadow turned on; produces synthetic traffic at a fixed rate from this process and
measures, for live packs only, the time from produce to consume. Prints p50/p99 per phase.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench.common import REPO
from ctxbudget.codec import encode
from ctxbudget.testing.traffic import synthetic


def _pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(len(s) * q))] if s else float("nan")


def _phase(
    bootstrap: str, env: dict[str, str], items: list[tuple[str, bytes]], rate: float, tag: str
) -> tuple[list[float], int]:
    from ctxbudget.kafka import io

    sent: dict[str, float] = {}
    lat: list[float] = []
    shadow_seen = 0
    consumer = io.client(
        "consumer",
        None,
        "ctx.packs.v1",
        "ctx.shadow.v1",
        brokers=bootstrap,
        client_id="ctxbudget-bench",
        group_id=None,
        auto_offset_reset="latest",
        consumer_timeout_ms=500,
        fetch_max_wait_ms=10,
    )
    consumer.poll(timeout_ms=1000)
    done = threading.Event()

    def read() -> None:
        nonlocal shadow_seen
        while not done.is_set():
            for msg in consumer:
                rid = msg.key.decode() if msg.key else ""
                if not rid.startswith(tag):
                    continue
                if msg.topic == "ctx.shadow.v1":
                    shadow_seen += 1
                elif rid in sent:
                    lat.append((time.perf_counter() - sent[rid]) * 1000)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    producer = io.client(
        "producer", None, brokers=bootstrap, client_id="ctxbudget-bench", linger_ms=0, acks=1
    )
    t0 = time.perf_counter()
    for i, (rid, raw) in enumerate(items):
        target = t0 + i / rate
        delay = target - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        key = f"{tag}{rid}"
        sent[key] = time.perf_counter()
        producer.send(
            "ctx.candidates.v1", key=key.encode(), value=raw.replace(rid.encode(), key.encode(), 1)
        )
    producer.flush()
    deadline = time.monotonic() + 30
    while len(lat) < len(items) and time.monotonic() < deadline:
        time.sleep(0.2)
    done.set()
    reader.join(5)
    consumer.close()
    return lat, shadow_seen


def main(argv: list[str] | None = None) -> int:
    from ctxbudget.kafka.broker import EmbeddedBroker
    from ctxbudget.kafka.processes import spawn, stop_all
    from ctxbudget.kafka.topic_admin import apply_topics
    from ctxbudget.kafka.topics import load_topic_specs

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rate", type=float, default=50.0)
    ap.add_argument("--seconds", type=float, default=20.0)
    args = ap.parse_args(argv)
    n = int(args.rate * args.seconds)
    items = [(g.batch.request_id, encode(g.batch)) for g in synthetic(n, seed=5)]
    procs: list[subprocess.Popen[bytes]] = []
    from ctxbudget.signing import generate_key_pair

    with EmbeddedBroker() as broker, tempfile.TemporaryDirectory() as keys:
        apply_topics(broker.bootstrap, load_topic_specs(REPO / "topics"))
        private, public = generate_key_pair(Path(keys))
        env = dict(
            os.environ,
            CTXBUDGET_BROKERS=broker.bootstrap,
            CTXBUDGET_POLICIES=str(REPO / "policies"),
            CTXBUDGET_CONTROL_KEY=str(private),
            CTXBUDGET_CONTROL_TRUSTED_KEYS=str(public),
        )
        try:
            worker = [sys.executable, "-m", "ctxbudget", "worker"]
            procs.append(spawn([*worker, "fused"], env, Path(keys) / "fused.log", cwd=REPO))
            warm = items[:5]
            _phase(broker.bootstrap, env, warm, 5, "warm-")
            off, _ = _phase(broker.bootstrap, env, items, args.rate, "off-")
            subprocess.run(
                [sys.executable, "-m", "ctxbudget", "control", "shadow", "on"],
                env=env,
                check=True,
                capture_output=True,
            )
            procs.append(spawn([*worker, "shadow"], env, Path(keys) / "shadow.log", cwd=REPO))
            _phase(broker.bootstrap, env, warm, 5, "warm2-")
            time.sleep(3)
            on, shadow_packs = _phase(broker.bootstrap, env, items, args.rate, "on-")
        finally:
            stop_all(procs)
    print(f"live latency at {args.rate:.0f} batches/s, {n} batches per phase")
    print(f"{'phase':<12}{'packs':>7}{'p50 ms':>9}{'p99 ms':>9}{'shadow packs':>14}")
    print(f"{'shadow off':<12}{len(off):>7}{_pct(off, 0.5):>9.1f}{_pct(off, 0.99):>9.1f}{0:>14}")
    print(
        f"{'shadow on':<12}{len(on):>7}{_pct(on, 0.5):>9.1f}{_pct(on, 0.99):>9.1f}"
        f"{shadow_packs:>14}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
