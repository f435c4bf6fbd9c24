"""The report in a real browser (headless Chromium): figures render with no network."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ctxbudget.testing.traffic import synthetic, write_traffic

pytestmark = pytest.mark.e2e

CHROMIUM = next(
    (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None
)
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


SHADOW_OUT = ("-o", "ps.jsonl", "--trace", "ts.jsonl")
SINK_IN = ("--from-file", "t.jsonl", "--from-file", "ts.jsonl", "--packs", "p.jsonl")
SINK_IN += ("--packs", "ps.jsonl")


def _ctxbudget(*args: str, cwd: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "ctxbudget", *args],
        cwd=cwd,
        capture_output=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode()


def _chromium(*args: str, profile: Path) -> subprocess.CompletedProcess[bytes]:
    assert CHROMIUM is not None
    return subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        timeout=180,
        check=False,
    )


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The analyst's path: pack live and shadow with traces, sink the files, write the report."""
    tmp = tmp_path_factory.mktemp("report")
    write_traffic(synthetic(60, seed=3), tmp / "b.jsonl")
    steps = [
        ("pack", "b.jsonl", "-o", "p.jsonl", "--trace", "t.jsonl"),
        ("pack", "b.jsonl", "--policy", "lean@1", "--lane", "shadow", *SHADOW_OUT),
        ("audit-sink", "--to", "audit.duckdb", *SINK_IN),
        ("report", "audit.duckdb", "-o", "report.html"),
    ]
    for step in steps:
        _ctxbudget(*step, cwd=tmp)
    return tmp / "report.html"


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_the_browser_sees_every_figure_inline(report: Path, tmp_path: Path) -> None:
    """--dump-dom shows an <img> per figure, each a data: URI, and nothing fetched."""
    proc = _chromium("--dump-dom", report.as_uri(), profile=tmp_path / "profile")
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    dom = proc.stdout.decode()
    imgs = re.findall(r"<img [^>]*src=\"([^\"]{0,40})", dom)
    assert len(imgs) == 5, imgs  # no conformal policy here: no coverage figure; over time
    assert all(src.startswith("data:image/png;base64,") for src in imgs)
    assert "Diagnosis of needed evidence" in dom and "retrieved but dropped" in dom


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_the_screenshot_is_not_blank(report: Path, tmp_path: Path) -> None:
    """The page paints: many colours, and the figures' blue and orange among them."""
    from PIL import Image

    shot = tmp_path / "shot.png"
    proc = _chromium(
        f"--screenshot={shot}",
        "--window-size=1280,4000",
        report.as_uri(),
        profile=tmp_path / "profile",
    )
    assert proc.returncode == 0 and shot.exists(), proc.stderr.decode()[-2000:]
    image = Image.open(shot).convert("RGB")
    assert image.size == (1280, 4000)
    colours = image.getcolors(maxcolors=1 << 20) or []
    assert len(colours) > 200
    white = max(n for n, c in colours if c == (255, 255, 255))
    assert white < 0.95 * image.size[0] * image.size[1]
    near = {c for _, c in colours}
    assert any(abs(r - 0x1F) < 12 and abs(g - 0x77) < 12 and abs(b - 0xB4) < 12 for r, g, b in near)
    shutil.copy(shot, report.with_name("screenshot.png"))
