"""The report's figures: plain rows in, PNG bytes out (matplotlib, Agg, no display needed)."""

from __future__ import annotations

import datetime
import io
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

LANE_COLORS = {"live": "#1f77b4", "shadow": "#ff7f0e"}
STAGES = ("route", "consolidate", "select", "compress")


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=100, metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()


def _nan(v: float | None) -> float:
    return float("nan") if v is None else v


def _lanes(rows: Sequence[tuple[object, ...]]) -> list[str]:
    return sorted({str(r[0]) for r in rows}, key=lambda lane: (lane != "live", lane))


def tokens_by_class(rows: Sequence[tuple[str, str, int]]) -> bytes:
    """Box plots of evidence tokens per pack, per query class, live and shadow side by side.

    ``rows``: (lane, query_class, evidence_tokens).
    """
    lanes = _lanes(rows)
    classes = sorted({r[1] for r in rows})
    data: dict[tuple[str, str], list[int]] = defaultdict(list)
    for lane, cls, tokens in rows:
        data[(lane, cls)].append(tokens)
    fig, ax = plt.subplots(figsize=(10, 4.5))
    width = 0.8 / max(len(lanes), 1)
    for i, lane in enumerate(lanes):
        pos = [c + (i - (len(lanes) - 1) / 2) * width for c in range(len(classes))]
        values = [data.get((lane, cls), []) or [0] for cls in classes]
        box = ax.boxplot(values, positions=pos, widths=width * 0.85, patch_artist=True)
        for patch in box["boxes"]:
            patch.set_facecolor(LANE_COLORS.get(lane, "#999999"))
            patch.set_alpha(0.75)
        ax.plot([], [], "s", color=LANE_COLORS.get(lane, "#999999"), label=lane)
    ax.set_xticks(range(len(classes)), classes)
    ax.set_ylabel("evidence tokens per pack")
    ax.set_title("Tokens per pack by query class")
    ax.legend()
    ax.grid(axis="y", alpha=0.3)
    return _png(fig)


def drop_reasons(rows: Sequence[tuple[str, str, int]]) -> bytes:
    """Horizontal bars: candidates dropped per reason, per lane. ``rows``: (lane, reason, n)."""
    lanes = _lanes(rows)
    totals: dict[str, int] = defaultdict(int)
    for _, reason, n in rows:
        totals[reason] += n
    reasons = sorted(totals, key=lambda r: totals[r])
    counts = {(lane, reason): n for lane, reason, n in rows}
    fig, ax = plt.subplots(figsize=(10, 0.45 * max(len(reasons), 2) + 1.5))
    height = 0.8 / max(len(lanes), 1)
    for i, lane in enumerate(lanes):
        ys = [y + (i - (len(lanes) - 1) / 2) * height for y in range(len(reasons))]
        xs = [counts.get((lane, r), 0) for r in reasons]
        bars = ax.barh(ys, xs, height=height, color=LANE_COLORS.get(lane), label=lane)
        ax.bar_label(bars, padding=2, fontsize=8)
    ax.set_yticks(range(len(reasons)), reasons)
    ax.set_xlabel("candidates dropped (sum of the packs' `dropped` counts)")
    ax.set_title("Drop reasons")
    ax.legend(loc="lower right")
    ax.grid(axis="x", alpha=0.3)
    return _png(fig)


def needed_by_class(rows: Sequence[tuple[str, str, int, int, int]]) -> bytes:
    """Per lane, per class: needed, retrieved and admitted evidence chunks (labelled requests).

    ``rows``: (lane, query_class, needed, retrieved, admitted).
    """
    lanes = _lanes(rows)
    classes = sorted({r[1] for r in rows})
    by = {(r[0], r[1]): r[2:] for r in rows}
    fig, axes = plt.subplots(1, len(lanes), figsize=(5.2 * len(lanes), 4.5), squeeze=False)
    series = (("needed", "#bbbbbb"), ("retrieved", "#6baed6"), ("admitted", "#2ca02c"))
    for ax, lane in zip(axes[0], lanes, strict=True):
        for k, (name, color) in enumerate(series):
            xs = [c + (k - 1) * 0.27 for c in range(len(classes))]
            ys = [by.get((lane, cls), (0, 0, 0))[k] for cls in classes]
            ax.bar(xs, ys, width=0.27, color=color, label=name)
        ax.set_xticks(range(len(classes)), classes, rotation=20)
        ax.set_title(f"{lane}: needed evidence")
        ax.set_ylabel("needed chunks (labels)")
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=8)
    return _png(fig)


def coverage(rows: Sequence[tuple[str, str, float, float, float | None, float | None]]) -> bytes:
    """Observed coverage against the 1 - alpha target, per alpha.

    ``rows``: (lane, policy, alpha, target, observed_coverage, filter_coverage).
    """
    fig, ax = plt.subplots(figsize=(7, 4.5))
    alphas = sorted({r[2] for r in rows})
    ax.plot(alphas, [1 - a for a in alphas], "k--", label="target 1 - alpha")
    groups: dict[tuple[str, str], list[tuple[float, float | None, float | None]]] = defaultdict(
        list
    )
    for lane, policy, alpha, _, observed, filtered in rows:
        groups[(lane, policy)].append((alpha, observed, filtered))
    for (lane, policy), pts in sorted(groups.items()):
        pts.sort()
        color = LANE_COLORS.get(lane)
        xs = [p[0] for p in pts]
        ax.plot(xs, [_nan(p[2]) for p in pts], "o:", color=color, label=f"{lane} {policy}: filter")
        ax.plot(xs, [_nan(p[1]) for p in pts], "s-", color=color, label=f"{lane} {policy}: pack")
    ax.set_xlabel("alpha")
    ax.set_ylabel("share of retrieved needed chunks kept")
    ax.set_ylim(0, 1.05)
    ax.set_title("Coverage against target per alpha")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return _png(fig)


def latency(rows: Sequence[tuple[str, str, float]]) -> bytes:
    """Box plots of latency per stage and lane (log scale). ``rows``: (lane, stage, ms)."""
    lanes = _lanes(rows)
    data: dict[tuple[str, str], list[float]] = defaultdict(list)
    for lane, stage, ms in rows:
        data[(lane, stage)].append(max(ms, 1e-3))
    fig, ax = plt.subplots(figsize=(10, 4.5))
    width = 0.8 / max(len(lanes), 1)
    for i, lane in enumerate(lanes):
        pos = [s + (i - (len(lanes) - 1) / 2) * width for s in range(len(STAGES))]
        values = [data.get((lane, st), []) or [1e-3] for st in STAGES]
        box = ax.boxplot(values, positions=pos, widths=width * 0.85, patch_artist=True)
        for patch in box["boxes"]:
            patch.set_facecolor(LANE_COLORS.get(lane, "#999999"))
            patch.set_alpha(0.75)
        ax.plot([], [], "s", color=LANE_COLORS.get(lane, "#999999"), label=lane)
    ax.set_xticks(range(len(STAGES)), STAGES)
    ax.set_yscale("log")
    ax.set_ylabel("latency (ms, log scale)")
    ax.set_title("Latency per stage")
    ax.legend()
    ax.grid(axis="y", alpha=0.3)
    return _png(fig)


def over_time(
    packs: Sequence[tuple[str, datetime.datetime, int, float | None, int]],
    rejects: Sequence[tuple[datetime.datetime, int]],
    controls: Sequence[tuple[datetime.datetime, str]],
    *,
    unit: str,
) -> bytes:
    """Three panels sharing a time axis (one point per ``unit`` bucket): packs per lane, mean
    evidence tokens per pack per lane, and candidates dropped per lane beside rejected records.
    Control changes are drawn as vertical lines on every panel.

    ``packs``: (lane, bucket, packs, mean evidence tokens, dropped); ``rejects``: (bucket, n);
    ``controls``: (time, action).
    """
    lanes = _lanes(packs)
    fig, axes = plt.subplots(3, 1, figsize=(10, 8), sharex=True)
    for lane in lanes:
        pts = sorted((r[1], r[2], r[3], r[4]) for r in packs if r[0] == lane)
        xs = [p[0] for p in pts]
        color = LANE_COLORS.get(lane, "#999999")
        axes[0].plot(xs, [p[1] for p in pts], "o-", color=color, label=lane)
        axes[1].plot(xs, [_nan(p[2]) for p in pts], "o-", color=color, label=lane)
        axes[2].plot(xs, [p[3] for p in pts], "o-", color=color, label=f"{lane}: dropped")
    if rejects:
        pts_r = sorted(rejects)
        axes[2].plot(
            [p[0] for p in pts_r], [p[1] for p in pts_r], "x--", color="#d62728", label="rejects"
        )
    for ax in axes:
        for at, _action in controls:
            ax.axvline(at, color="#555555", linestyle=":", linewidth=1)
        ax.grid(alpha=0.3)
    if controls:
        axes[0].plot([], [], ":", color="#555555", label="control change")
    axes[0].set_ylabel(f"packs per {unit}")
    axes[1].set_ylabel("mean evidence tokens / pack")
    axes[2].set_ylabel(f"per {unit}")
    axes[2].set_xlabel(f"time (UTC, {unit} buckets)")
    axes[0].set_title("Over time")
    for ax in axes:
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    fig.autofmt_xdate()
    return _png(fig)


def label_coverage(rows: Sequence[tuple[str, str, datetime.datetime, float | None]]) -> bytes:
    """The filter's coverage of labelled relevant chunks over time, per source and class.

    ``rows``: (source, query_class, time bucket, coverage).
    """
    fig, ax = plt.subplots(figsize=(8, 4.5))
    lines: dict[tuple[str, str], list[tuple[datetime.datetime, float]]] = defaultdict(list)
    for source, query_class, t, cov in rows:
        lines[(source, query_class)].append((t, _nan(cov)))
    for (source, query_class), pts in sorted(lines.items()):
        pts.sort()
        xs: list[Any] = [p[0] for p in pts]  # matplotlib plots datetimes as dates
        ax.plot(xs, [p[1] for p in pts], "o-", label=f"{source}: {query_class}")
    ax.set_ylabel("relevant chunks kept by the filter")
    ax.set_ylim(0, 1.05)
    ax.set_title("Coverage of labelled relevant chunks over time (live lane)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.autofmt_xdate()
    return _png(fig)
