"""One self-contained HTML page (no network, no scripts) for one or more models (``flopcalc report``): with
several models a side-by-side summary (``flopcalc compare``'s table) first, then each model's FLOPs section
(:mod:`flopcalc.flops.html`) followed by its memory and training sections (:mod:`flopcalc.gpu_memory.html`,
:mod:`flopcalc.training.html`), then the resolution plot as inline SVG and the energy section
(:mod:`flopcalc.energy_laws.html`)."""

from __future__ import annotations

import html
from typing import Any, Sequence

from flopcalc.engine.errors import FlopcalcError
from flopcalc.engine.version import __version__
from flopcalc.flops.html import section
from flopcalc.flops.report import CONVENTION_TEXT, ELEMENTWISE_TEXT, Report
from flopcalc.flops.symbolic import SymbolicReport

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 72em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.25em; margin-top: 2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: .6em 0; } td, th { padding: .2em .7em; border-bottom: 1px solid #eee; }
th { text-align: left; background: #f4f4f4; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
.law { overflow-x: auto; padding: .5em; background: #fafafa; border: 1px solid #eee; }
code, pre { font-size: 12px; } .note { color: #555; }
"""


def render(reports: Sequence[Report], laws: Sequence[SymbolicReport | str], figure_svg: str | None,
           extras: Sequence[str] = (), extra_html: str = "") -> str:
    """The page; ``laws[i]`` is the law of ``reports[i]``, or why it has none (a pipeline whose FLOPs step with
    the size); ``extras[i]`` (HTML) closes the section of ``reports[i]``; ``extra_html`` ends the page."""
    sections = [section(report, law) + (extras[i] if i < len(extras) else "")
                for i, (report, law) in enumerate(zip(reports, laws))]
    figure = (f"<h2>FLOPs against resolution</h2>{figure_svg}" if figure_svg else "")
    summary = side_by_side(reports) if len(reports) > 1 else ""
    convention = reports[0].convention
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>flopcalc report: {html.escape(', '.join(r.model for r in reports))}</title>"
        f"<style>{STYLE}</style></head><body>"
        f"<h1>flopcalc report</h1><p>Counted ({convention} convention): {html.escape(CONVENTION_TEXT[convention])}. "
        f"Not in the totals: {html.escape(ELEMENTWISE_TEXT)}. flopcalc {__version__}.</p>"
        + summary + "".join(sections) + figure + extra_html + "</body></html>\n"
    )


def side_by_side(reports: Sequence[Report]) -> str:
    """The models side by side, the cells of ``flopcalc compare``'s table
    (:func:`flopcalc.flops.report.compare_rows`)."""
    from flopcalc.flops.report import compare_rows

    head, *rows = compare_rows(reports)
    cells = "".join(f"<th>{html.escape(c)}</th>" for c in head)
    body = "".join("<tr><th>" + html.escape(name) + "</th>" + "".join(f"<td class=\"n\">{html.escape(v)}</td>"
                                                                     for v in values) + "</tr>"
                   for name, *values in rows)
    return (f"<h2>Side by side</h2><table class=\"side-by-side\"><thead><tr>{cells}</tr></thead>"
            f"<tbody>{body}</tbody></table>")


def build(models: Sequence[str], *, convention: str = "torch", **settings: Any) -> str:
    from flopcalc.flops.estimate import estimate
    from flopcalc.flops.plots import default_sides, resolution_figure
    from flopcalc.flops.symbolic import symbolic_estimate
    from flopcalc.render.figures import svg_text

    laws: list[SymbolicReport | str] = []
    reports = []
    for m in models:
        why = None
        try:
            laws.append(symbolic_estimate(m, convention=convention, **settings))
        except FlopcalcError as exc:  # no law (FLOPs stepping with the size): the page says why
            why = exc
            laws.append(str(exc))
        try:
            reports.append(estimate(m, convention=convention, **settings))
        except FlopcalcError:  # bad input, a row no count can express: the law's reason, as before
            if why is None:
                raise
            raise why from None
    plotted = [law for law in laws if not isinstance(law, str)]
    try:
        if not plotted:
            raise FlopcalcError("no model here has a closed-form law: nothing to plot against resolution")
        figure = svg_text(resolution_figure(plotted, default_sides()))
    except Exception as exc:  # matplotlib missing: the page says so instead of the plot
        if not isinstance(exc, FlopcalcError):
            raise
        figure = f"<p class=\"note\">{html.escape(str(exc))}</p>"
    from flopcalc.energy_laws.html import section as energy_section
    from flopcalc.gpu_memory.html import section as memory_section
    from flopcalc.training.html import section as training_section

    # the sizes change weights and a training sample; other settings do not
    sizes = {k: settings[k] for k in ("height", "width", "num_frames", "max_sequence_length") if settings.get(k)}
    extras = [memory_section(m, **sizes) + training_section(m, **sizes) for m in models]
    return render(reports, laws, figure, extras, energy_section(reports))
