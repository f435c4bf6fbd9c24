"""The load generator of ``bench kafka``: a separate process that produces candidate batches.

    python -m bench.loadgen --bootstrap HOST:PORT --file traffic.jsonl --prefix RUN \\
        --count N --rate R --out sent.json

Batches come from ``--file`` (cycled), each given the request id ``{prefix}-{i:07d}`` and
produced to the candidates topic keyed by it. ``--rate`` paces the sends open-loop (batch
``i`` is due at ``start + i / rate``; a late producer does not slow the schedule down), and
``--rate 0`` sends as fast as the producer takes them. Each batch is parsed once, before the
clock starts, into a template split around its request id, so a message costs two byte
concatenations and a long run holds no more than the file in memory.

The send time of each batch (``time.monotonic()``, which is system-wide on Linux, so the
consumer in another process can subtract it) goes to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import orjson


def templates(lines: Sequence[bytes]) -> list[tuple[bytes, bytes]]:
    """Each batch split around its request id, so a message is ``head + rid + tail``."""
    out = []
    for raw in lines:
        data = orjson.loads(raw)
        data["request_id"] = _MARK
        head, found, tail = orjson.dumps(data).partition(_MARK.encode())
        if not found:
            raise ValueError("request_id marker not found in the re-encoded batch")
        out.append((head, tail))
    return out


_MARK = "@@ctxbudget-bench-request-id@@"


def message(tpl: Sequence[tuple[bytes, bytes]], prefix: str, i: int) -> tuple[bytes, bytes]:
    """The key and value of batch ``i``: template ``i mod len`` with its own request id."""
    rid = f"{prefix}-{i:07d}".encode()
    head, tail = tpl[i % len(tpl)]
    return rid, head + rid + tail


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.loadgen")
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--file", type=Path, required=True)
    p.add_argument("--prefix", required=True)
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--rate", type=float, default=100.0, help="batches/s; 0 = as fast as possible")
    p.add_argument("--topic", default="ctx.candidates.v1")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--start-at", type=float, default=0.0, help="monotonic time to start at")
    args = p.parse_args(argv)

    from ctxbudget.kafka import io

    lines = [x for x in args.file.read_bytes().splitlines() if x.strip()]
    tpl = templates(lines)
    producer = io.client(
        "producer",
        None,
        brokers=args.bootstrap,
        client_id="ctxbudget-loadgen",
        acks=1,
        linger_ms=1,
        max_request_size=8 * 1024 * 1024,
        batch_size=256 * 1024,
    )
    producer.partitions_for(args.topic)  # fetch metadata before the clock starts
    sent: list[float] = []
    if args.start_at:
        time.sleep(max(0.0, args.start_at - time.monotonic()))
    start = time.monotonic()
    late = 0
    for i in range(args.count):
        key, value = message(tpl, args.prefix, i)
        if args.rate > 0:
            due = start + i / args.rate
            now = time.monotonic()
            if now < due:
                time.sleep(due - now)
            elif now - due > 0.005:
                late += 1
        sent.append(time.monotonic())
        producer.send(args.topic, key=key, value=value)
    producer.flush()
    end = time.monotonic()
    producer.close()
    args.out.write_text(
        json.dumps(
            {
                "prefix": args.prefix,
                "count": len(sent),
                "start": start,
                "end": end,
                "offered_rate": args.rate,
                "achieved_rate": len(sent) / (sent[-1] - start) if len(sent) > 1 else 0.0,
                "late_sends": late,
                "sent": sent,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
