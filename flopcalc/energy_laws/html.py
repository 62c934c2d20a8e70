"""The HTML report's energy section: each model's predicted energy and latency per item on every
calibrated GPU (at the report's settings), and the measured-vs-predicted validation figure."""

from __future__ import annotations

import html
from typing import Sequence

from flopcalc.engine.errors import FlopcalcError
from flopcalc.flops.report import Report
from flopcalc.render.html_tables import html_table


def section(reports: Sequence[Report]) -> str:
    """The energy section of the page of ``reports``."""
    from flopcalc.energy_laws.plot import load_points, measured_vs_predicted
    from flopcalc.energy_laws.predict import law_errors, load_coefficients, predict

    doc = load_coefficients()
    cals = doc["calibrations"]
    rows = [("model", "GPU", "precision", "law", "energy J / item", "90% interval", "latency s / item", "90% interval")]
    notes = []
    for report in reports:
        for key, cal in cals.items():
            try:
                r = predict(report, gpu=cal["gpu"], precision=cal["precision"])
            except FlopcalcError as exc:
                notes.append(f"{report.model} on {key}: {exc}")
                continue
            if r.calibration != key:
                continue
            rows.append((report.model, r.gpu, r.precision, f"{r.law} ({r.stack})", f"{r.energy_j:,.0f}",
                         f"{r.energy_j_interval[0]:,.0f} – {r.energy_j_interval[1]:,.0f}", f"{r.latency_s:,.2f}",
                         f"{r.latency_s_interval[0]:,.2f} – {r.latency_s_interval[1]:,.2f}"))
            notes += [f"{report.model} on {r.gpu} ({r.precision}): {w}" for w in r.warnings]
    errs = [("calibration", "models", "law", "energy % median / p90 / max", "latency % median / p90 / max")]
    for key, cal in cals.items():
        e = law_errors(cal)
        errs.append((key, str(len(cal["models"])), "opclass (nested)",
                     *(f"{e[t]['median_pct']:.1f} / {e[t]['p90_pct']:.1f} / {e[t]['max_pct']:.1f}"
                       for t in ("energy", "latency"))))
    try:
        from flopcalc.render.figures import svg_text

        figure = svg_text(measured_vs_predicted(doc, load_points()))
    except FlopcalcError as exc:  # matplotlib missing
        figure = f'<p class="note">{html.escape(str(exc))}</p>'
    return ("<h2>Energy and latency per item on the calibrated GPUs</h2>"
            "<p>Predicted from the exact counts above by the laws of <code>flopcalc energy</code>, fitted on public "
            "ML.ENERGY measurements (GPU energy only); 90% intervals from nested leave-one-model-out errors (the law's "
            "terms chosen inside each fold). "
            "Other GPUs: <code>flopcalc energy MODEL --gpu NAME</code>.</p>"
            + html_table(rows, numeric=(4, 5, 6, 7))
            + "".join(f'<p class="note">{html.escape(n)}</p>' for n in notes)
            + "<h3>Validation: every measurement, predicted with its model held out</h3>"
            + html_table(errs, numeric=(1,)) + figure)
