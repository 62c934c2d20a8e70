"""One self-contained HTML page (no network, no scripts) for one or more models: settings,
component table, per-block table, the symbolic law (MathML, which browsers render natively, and
plain text) and the resolution plot as inline SVG."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any, Sequence

import sympy as sp

from flopcalc.report import (
    COMPONENT_NUMERIC, CONVENTION_TEXT, ELEMENTWISE_TEXT, block_rows, component_rows, provenance_lines, settings_line,
)
from flopcalc.symbolic import SYMBOL_TEXT, SymbolicReport

if TYPE_CHECKING:
    from flopcalc.api import Report

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 72em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.25em; margin-top: 2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: .6em 0; } td, th { padding: .2em .7em; border-bottom: 1px solid #eee; }
th { text-align: left; background: #f4f4f4; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
.law { overflow-x: auto; padding: .5em; background: #fafafa; border: 1px solid #eee; }
code, pre { font-size: 12px; } .note { color: #555; }
"""


def _table(rows: Sequence[Sequence[str]], numeric: Sequence[int] = ()) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in rows[0])

    def cell(i: int, v: str) -> str:
        if i in numeric:
            return f'<td class="n">{html.escape(v)}</td>'
        depth = (len(v) - len(v.lstrip(" "))) // 2  # tree rows are indented two spaces a level
        pad = f' style="padding-left:{0.7 + 1.2 * depth:.1f}em"' if depth else ""
        return f"<td{pad}>{html.escape(v.strip())}</td>"

    body = "".join("<tr>" + "".join(cell(i, v) for i, v in enumerate(r)) + "</tr>" for r in rows[1:])
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _components(report: Report) -> str:
    return _table(component_rows(report), numeric=COMPONENT_NUMERIC)


def _law(law: SymbolicReport) -> str:
    math = sp.mathml(sp.factor_terms(law.flops), printer="presentation")
    symbols = "; ".join(f"<i>{k}</i> = {html.escape(SYMBOL_TEXT[k])}" for k in law.symbols)
    parts = "".join(
        f"<li><code>{html.escape(c.component)}</code>: runs = <code>{html.escape(sp.sstr(c.runs))}</code>, "
        f"MACs per run = <code>{html.escape(sp.sstr(c.macs_per_run))}</code></li>"
        for c in law.components
    )
    return (f'<p>Total FLOPs of one generation:</p><div class="law"><math display="block">{math}</math></div>'
            f"<p>{symbols}.</p><ul>{parts}</ul>"
            f"<p>As text: <code>{html.escape(sp.sstr(law.flops))}</code></p>")


def render(reports: Sequence[Report], laws: Sequence[SymbolicReport | str], figure_svg: str | None,
           extras: Sequence[str] = (), extra_html: str = "") -> str:
    """The page; ``laws[i]`` is the law of ``reports[i]``, or why it has none (a pipeline whose FLOPs step with
    the size); ``extras[i]`` (HTML) closes the section of ``reports[i]``; ``extra_html`` ends the page."""
    from flopcalc import __version__

    sections = []
    for i, (report, law) in enumerate(zip(reports, laws)):
        blocks = "".join(
            f"<h3>{html.escape(c.component)}{'.' + c.call if c.call != 'forward' else ''} per block (one run)</h3>"
            + _table(block_rows(c, depth=3), numeric=(1, 2, 3, 4))
            for c in report.components
        )
        notes = "".join(f'<p class="note">{html.escape(n)}</p>' for n in provenance_lines(report))
        notes += "".join(f'<p class="note">note: {html.escape(n)}</p>' for n in report.notes)
        sections.append(
            f"<h2>{html.escape(report.model)} · {html.escape(report.pipeline)}</h2>"
            f"<p>{html.escape(settings_line(report))}</p>"
            f"<p><b>Total: {report.flops / 1e12:,.3f} TFLOPs</b> ({report.macs / 1e12:,.3f} TMACs), "
            f"{report.convention} convention.</p>"
            + _components(report) + notes
            + "<h3>The law</h3>"
            + (_law(law) if not isinstance(law, str) else f'<p class="note">No closed-form law: {html.escape(law)}</p>')
            + blocks + (extras[i] if i < len(extras) else "")
        )
    figure = (f"<h2>FLOPs against resolution</h2>{figure_svg}" if figure_svg else "")
    convention = reports[0].convention
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>flopcalc report: {html.escape(', '.join(r.model for r in reports))}</title>"
        f"<style>{STYLE}</style></head><body>"
        f"<h1>flopcalc report</h1><p>Counted ({convention} convention): {html.escape(CONVENTION_TEXT[convention])}. "
        f"Not in the totals: {html.escape(ELEMENTWISE_TEXT)}. flopcalc {__version__}.</p>"
        + "".join(sections) + figure + extra_html + "</body></html>\n"
    )


def build(models: Sequence[str], *, convention: str = "torch", **settings: Any) -> str:
    from flopcalc.api import estimate
    from flopcalc.errors import FlopcalcError
    from flopcalc.plots import default_sides, resolution_figure, svg_text
    from flopcalc.symbolic import symbolic_estimate

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
    from flopcalc.html_memory_training import sections

    return render(reports, laws, figure, [sections(m, **settings) for m in models],
                  energy_section(reports, _table))
