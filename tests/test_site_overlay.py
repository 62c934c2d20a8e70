"""The compare mode outside the page: ``flopcalc plot A B`` overlays the models' totals on one axis first (as the
site's chart does), and ``flopcalc report A B`` opens with the side-by-side table of ``flopcalc compare``."""

from __future__ import annotations

import html
import re

import numpy as np
import pytest

SIDES = [256, 512, 768, 1024, 2048]


def test_plot_overlays_the_totals_of_several_models():
    pytest.importorskip("matplotlib")
    from flopcalc.flops.plots import resolution_figure
    from flopcalc.flops.sweep import evaluate
    from flopcalc.flops.symbolic import symbolic_estimate

    laws = [symbolic_estimate(m) for m in ("flux-dev", "sd3-medium", "sd1.5")]
    fig = resolution_figure(laws, SIDES)
    overlay = next(ax for ax in fig.axes if ax.get_title() == "total FLOPs, compared")
    lines = {line.get_label(): line for line in overlay.get_lines()}
    assert list(lines) == ["flux-dev", "sd3-medium", "sd1.5"]
    x = np.asarray(SIDES, dtype=np.int64)
    for law in laws:
        exact = evaluate(law, {"H": x, "W": x}).components  # exact integers, summed
        totals = [sum(int(v[i]) for v in exact.values()) for i in range(len(SIDES))]
        np.testing.assert_allclose(lines[law.model].get_ydata(), totals, rtol=1e-12)
    assert len(fig.axes) == 1 + 2 * len(laws)  # the overlay, then each model's panel and shares
    single = resolution_figure(laws[:1], SIDES)
    assert len(single.axes) == 2 and all(ax.get_title() != "total FLOPs, compared" for ax in single.axes)


def test_report_opens_with_the_compare_table(tmp_path):
    pytest.importorskip("matplotlib")
    import flopcalc
    from flopcalc.cli.main import main
    from flopcalc.flops.report import compare_rows

    out = tmp_path / "r.html"
    assert main(["report", "flux-dev", "sd1.5", "--height", "768", "--width", "768", "--html", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    table = re.search(r'<h2>Side by side</h2><table class="side-by-side">(.*?)</table>', page, re.S).group(1)
    cells = [[html.unescape(c) for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row)]
             for row in re.findall(r"<tr>(.*?)</tr>", table)]
    reports = [flopcalc.estimate(m, height=768, width=768) for m in ("flux-dev", "sd1.5")]
    assert cells == [list(r) for r in compare_rows(reports)]
    assert page.index("Side by side") < page.index("<h2>flux-dev")
    one = tmp_path / "one.html"
    assert main(["report", "sd1.5", "--html", str(one)]) == 0
    assert "Side by side" not in one.read_text(encoding="utf-8")
