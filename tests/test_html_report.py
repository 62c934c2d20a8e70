"""The HTML report as a person sees it: one self-contained page (no network, no scripts),
rendered by real headless Chromium (Debian's package), showing the numbers."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import flopcalc

pytest.importorskip("matplotlib")
from flopcalc.html.page import build  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("report") / "report.html"
    path.write_text(build(["flux-dev", "sd1.5"]), encoding="utf-8")
    return path


def test_page_is_self_contained(page):
    text = page.read_text()
    assert "<script" not in text
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text)
    assert "<link" not in text
    assert text.count("<svg") >= 1 and "<math" in text


def _chromium(page: Path, tmp: Path, *extra: str) -> subprocess.CompletedProcess:
    assert CHROMIUM, "chromium is not installed (the README's test command installs Debian's chromium)"
    return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp / 'profile'}", *extra, page.as_uri()],
                          capture_output=True, text=True, timeout=120)


def test_chromium_renders_the_numbers(page, tmp_path):
    dom = _chromium(page, tmp_path, "--dump-dom").stdout
    for model in ("flux-dev", "sd1.5"):
        report = flopcalc.estimate(model)
        assert f"{report.flops / 1e12:,.3f} TFLOPs" in dom
        for c in report.components:
            assert f"{2 * c.macs_per_run / 1e9:,.2f}" in dom
    assert "single_transformer_blocks" in dom and "down_blocks" in dom


def test_chromium_screenshot(page, tmp_path):
    shot = tmp_path / "page.png"
    _chromium(page, tmp_path, f"--screenshot={shot}", "--window-size=1280,2400")
    assert shot.exists() and shot.stat().st_size > 50_000  # a blank page is a few KB


@pytest.mark.parametrize("ext", ["png", "svg"])
def test_plot_command_writes_png_and_svg(tmp_path, ext):
    out = tmp_path / f"flops.{ext}"
    res = subprocess.run([sys.executable, "-m", "flopcalc", "plot", "flux-dev", "sd1.5", "--out", str(out),
                          "--sides", "256:2048:128"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    data = out.read_bytes()
    assert data.startswith(b"\x89PNG") if ext == "png" else b"<svg" in data
    if ext == "svg":
        text = data.decode()
        assert "attention &gt; linear" in text or "attention > linear" in text  # the crossover is marked


def test_a_pipeline_without_a_law_still_gets_its_report():
    """HiDream rescales every size and Wan 2.2 A14B splits its steps by the scheduler's floating-point timesteps:
    no closed-form law, so the page says why in the law's place and plots the models that have one; the numbers,
    the blocks and the memory section are all there."""
    from flopcalc.engine.pipelines.hidream_image import NO_LAW

    page = build(["hidream-i1-full", "flux-dev"])
    assert f"No closed-form law: {NO_LAW}".replace("'", "&#x27;") in page
    assert page.count("No closed-form law") == 1
    assert f"{flopcalc.estimate('hidream-i1-full').flops / 1e12:,.3f} TFLOPs" in page
    assert "Memory: weights" in page and "<svg" in page
    alone = build(["hidream-i1-full"])
    assert "no model here has a closed-form law" in alone
    with pytest.raises(flopcalc.FlopcalcError, match="multiple of 8"):
        build(["sd1.5"], height=17)
