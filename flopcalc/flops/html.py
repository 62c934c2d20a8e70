"""The HTML page's FLOPs section of one model: settings, the component table, the per-block tables and the
symbolic law (MathML, which browsers render natively, and plain text)."""

from __future__ import annotations

import html

import sympy as sp

from flopcalc.flops.report import COMPONENT_NUMERIC, Report, block_rows, component_rows, provenance_lines, settings_line
from flopcalc.flops.symbolic import SYMBOL_TEXT, SymbolicReport
from flopcalc.render.html_tables import html_table


def _components(report: Report) -> str:
    return html_table(component_rows(report), numeric=COMPONENT_NUMERIC)


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


def section(report: Report, law: SymbolicReport | str) -> str:
    """The section of ``report``: ``law`` is its symbolic law, or why it has none (a pipeline whose FLOPs step
    with the size)."""
    blocks = "".join(
        f"<h3>{html.escape(c.component)}{'.' + c.call if c.call != 'forward' else ''} per block (one run)</h3>"
        + html_table(block_rows(c, depth=3), numeric=(1, 2, 3, 4))
        for c in report.components
    )
    notes = "".join(f'<p class="note">{html.escape(n)}</p>' for n in provenance_lines(report))
    notes += "".join(f'<p class="note">note: {html.escape(n)}</p>' for n in report.notes)
    return (
        f"<h2>{html.escape(report.model)} · {html.escape(report.pipeline)}</h2>"
        f"<p>{html.escape(settings_line(report))}</p>"
        f"<p><b>Total: {report.flops / 1e12:,.3f} TFLOPs</b> ({report.macs / 1e12:,.3f} TMACs), "
        f"{report.convention} convention.</p>"
        + _components(report) + notes
        + "<h3>The law</h3>"
        + (_law(law) if not isinstance(law, str) else f'<p class="note">No closed-form law: {html.escape(law)}</p>')
        + blocks
    )
