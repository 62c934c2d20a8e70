"""Measured against predicted, log-log, every validation record (each predicted with its model held
out of the fit), one column per calibration (GPU × precision × stack), energy and latency rows, the
90% interval band shaded. Uses :mod:`flopcalc.render.figures` (matplotlib, the ``[plot]`` extra)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Mapping

POINTS = Path(__file__).resolve().parents[1] / "data" / "energy_points.json"


def load_points() -> list[dict]:
    return json.loads(POINTS.read_text(encoding="utf-8"))


def measured_vs_predicted(coefficients: Mapping[str, Any], points: list[dict], law: str | None = None) -> Any:
    from flopcalc.render.figures import pyplot

    plt = pyplot()
    from flopcalc.energy_laws.predict import law_errors

    law = law or "opclass"
    cals = list(coefficients["calibrations"])
    fig, axes = plt.subplots(2, len(cals), figsize=(3.6 * len(cals), 7), squeeze=False)
    labels = sorted({p["label"] for p in points})
    colors = {lab: plt.get_cmap("tab20")(i % 20) for i, lab in enumerate(labels)}
    for j, cal in enumerate(cals):
        for i, (target, unit) in enumerate((("energy", "J"), ("latency", "s"))):
            ax = axes[i][j]
            key = "energy_j" if target == "energy" else "latency_s"
            pts = [p for p in points if p["calibration"] == cal and p["law"] == law]
            if not pts:
                ax.set_visible(False)
                continue
            xs = [p[key + "_predicted"] for p in pts]
            ys = [p[key] for p in pts]
            lo, hi = min(xs + ys) / 2, max(xs + ys) * 2
            h = law_errors(coefficients["calibrations"][cal], law)[target]["interval_log_halfwidth"]
            grid = [lo * (hi / lo) ** (k / 50) for k in range(51)]
            ax.fill_between(grid, [g * math.exp(-h) for g in grid], [g * math.exp(h) for g in grid],
                            color="0.88", label="90% interval")
            ax.plot(grid, grid, color="0.4", lw=0.8)
            for lab in sorted({p["label"] for p in pts}):
                mine = [p for p in pts if p["label"] == lab]
                ax.scatter([p[key + "_predicted"] for p in mine], [p[key] for p in mine], s=14,
                           color=colors[lab], label=lab.split("/")[-1])
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlim(lo, hi)
            ax.set_ylim(lo, hi)
            ax.set_xlabel(f"predicted {target} per item ({unit})")
            ax.set_ylabel(f"measured ({unit})")
            ax.set_title(f"{cal}\n{target}", fontsize=9)
            if i == 0:
                ax.legend(fontsize=6, loc="upper left")
    fig.suptitle(f"flopcalc energy law '{law}': leave-one-model-out predictions vs measurements")
    fig.tight_layout()
    return fig
