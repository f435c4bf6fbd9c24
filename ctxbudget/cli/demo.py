"""The demo's traffic generator and reader: produce batches, read packs back, compare."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ctxbudget.codec import decode_batch, encode
from ctxbudget.kafka import io
from ctxbudget.pipeline import Pipeline
from ctxbudget.policy import PolicyStore

POISON = b'{"schema": "ctx.candidate_batch.v1", "request_id": "demo-poison", "query": 42}'


@dataclass(frozen=True)
class DemoTraffic:
    """Batches keyed by request id, in the order they are produced."""

    lines: tuple[tuple[str, bytes], ...]

    @classmethod
    def from_file(cls, path: Path, *, repeat: int) -> DemoTraffic:
        if repeat < 1:
            raise ValueError(f"repeat must be >= 1, got {repeat}")
        base = [orjson.loads(x) for x in path.read_bytes().splitlines() if x.strip()]
        out = []
        for r in range(repeat):
            for data in base:
                rid = f"{data['request_id']}-{r:04d}"
                out.append((rid, orjson.dumps({**data, "request_id": rid})))
        return cls(tuple(out))


@dataclass
class DemoSummary:
    produced: int
    packs: int = 0
    dead_letters: int = 0
    identical: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    elapsed_s: float = 0.0
    warmup_s: float = 0.0
    missing: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.missing and self.identical == self.packs == self.produced

    def lines(self) -> list[str]:
        lat = sorted(self.latencies_ms)
        p50 = statistics.median(lat) if lat else 0.0
        p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))] if lat else 0.0
        rate = self.packs / self.elapsed_s if self.elapsed_s else 0.0
        return [
            f"demo: workers ready after {self.warmup_s:.1f} s (first pack of a warm-up batch)",
            f"demo: {self.produced} batches produced, {self.packs} packs received, "
            f"{self.dead_letters} dead letter(s) (1 poison message was sent on purpose)",
            f"demo: {self.identical}/{self.packs} packs byte-identical to `ctxbudget pack`",
            f"demo: end-to-end latency p50 {p50:.1f} ms, p99 {p99:.1f} ms; "
            f"{rate:.0f} packs/s over {self.elapsed_s:.1f} s",
            *(f"demo: missing pack for {rid}" for rid in self.missing[:10]),
        ]


def _warm_up(writer: io.TopicWriter, consumer: Any, raw: bytes, timeout_s: float) -> float:
    """Send one batch and wait for its pack: the workers have then joined their groups."""
    t0 = time.perf_counter()
    data = orjson.loads(raw)
    rid = "demo-warmup"
    writer.send(
        "ctx.candidates.v1", key=rid.encode(), value=orjson.dumps({**data, "request_id": rid})
    )
    writer.flush()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for msg in io.follow(consumer):
            if msg.topic == "ctx.packs.v1" and msg.key == rid.encode():
                return time.perf_counter() - t0
    raise TimeoutError(f"no pack for the warm-up batch within {timeout_s:.0f} s")


def run_demo(
    bootstrap: str, traffic: DemoTraffic, *, timeout_s: float, policies: Path
) -> DemoSummary:
    """Feed ``traffic`` (and one poison message) to the workers on ``bootstrap``; read the
    packs and dead letters back and compare each pack with the in-process one."""
    pipeline = Pipeline.from_store(PolicyStore.load(policies), "default@1")
    expected = {rid: encode(pipeline.run(decode_batch(raw)).pack) for rid, raw in traffic.lines}
    # the embedded broker speaks plaintext: no security settings (settings=None)
    consumer = io.client(
        "consumer",
        None,
        "ctx.packs.v1",
        "ctx.deadletter.v1",
        brokers=bootstrap,
        client_id="ctxbudget-demo",
        auto_offset_reset="earliest",
        group_id=None,
        consumer_timeout_ms=1000,
    )
    writer = io.TopicWriter(
        io.client(
            "producer", None, brokers=bootstrap, client_id="ctxbudget-demo", linger_ms=2, acks="all"
        )
    )
    summary = DemoSummary(produced=len(traffic.lines))
    warmup_s = _warm_up(writer, consumer, traffic.lines[0][1], timeout_s)
    summary.warmup_s = warmup_s
    sent_at: dict[str, float] = {}
    start = time.perf_counter()
    writer.send("ctx.candidates.v1", key=b"demo-poison", value=POISON)
    for rid, raw in traffic.lines:
        sent_at[rid] = time.perf_counter()
        writer.send("ctx.candidates.v1", key=rid.encode(), value=raw)
    writer.flush()
    seen: set[str] = set()
    deadline = time.monotonic() + timeout_s

    def done() -> bool:
        return len(seen) == len(expected) and summary.dead_letters >= 1

    elapsed = None
    while not done() and time.monotonic() < deadline:
        for msg in io.follow(consumer):
            now = time.perf_counter()
            if msg.topic == "ctx.deadletter.v1":
                summary.dead_letters += 1
            else:
                rid = msg.key.decode() if msg.key else ""
                if rid in seen or rid not in expected:
                    continue
                seen.add(rid)
                summary.packs += 1
                summary.latencies_ms.append((now - sent_at[rid]) * 1000)
                summary.identical += msg.value == expected[rid]
                if len(seen) == len(expected):
                    elapsed = now - start
            if done():
                break
    summary.elapsed_s = elapsed if elapsed is not None else time.perf_counter() - start
    summary.missing = sorted(set(expected) - seen)
    consumer.close()
    writer.close()
    return summary
