"""The independent check: single-GPU latencies published by others (data/public_latency.csv, each row citing its
source and the quoted cell) against the shipped law's prediction at the published settings. These rows feed no
fit; they test the law away from its data: other GPUs (most of them uncalibrated, reached by the transfer), other
software versions, other harnesses.

A row's ``scope`` says what was timed: ``pipeline`` (the whole call) or ``denoising loop`` (converted from
iterations per second: the denoiser's calls alone), compared with the prediction's denoiser share. A row with a
``context`` (compiled, distilled, offload, quantised) ran something the eager law does not describe; it is listed
apart and left out of the summary.
"""

from __future__ import annotations

import ast
import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import yaml

HERE = Path(__file__).resolve().parent
DATA = HERE / "data" / "public_latency.csv"
MODELS = HERE / "public_latency_models.yaml"


@dataclass(frozen=True)
class Outcome:
    row: Mapping[str, str]
    card: str
    published: float
    predicted: float | None = None
    interval: tuple[float, float] = (0.0, 0.0)
    gpu: str = ""
    stack: str = ""
    floor: float = 0.0  # the physical minimum of what was timed (every FLOP at the dense peak)
    reason: str = ""  # why it was not predicted

    @property
    def error(self) -> float:
        return self.predicted / self.published - 1

    @property
    def inside(self) -> bool:
        return self.interval[0] <= self.published <= self.interval[1]


def outcomes(doc: Mapping[str, Any]) -> list[Outcome]:
    from flopcalc.energy_laws.predict import predict
    from flopcalc.engine.errors import FlopcalcError
    from flopcalc.flops.estimate import estimate

    models = yaml.safe_load(MODELS.read_text(encoding="utf-8"))
    out = []
    with DATA.open(newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            entry = models[row["model"]]
            published = float(row["seconds_per_item"])
            if "left_out" in entry:
                out.append(Outcome(row, "—", published, reason=entry["left_out"]))
                continue
            settings = {**entry["settings"], **ast.literal_eval(row["settings"])}
            try:
                r = predict(estimate(entry["source"], **settings), gpu=row["gpu"], precision=row["precision"],
                            coefficients=doc)
            except FlopcalcError as exc:
                out.append(Outcome(row, entry["source"], published, reason=str(exc).split(";")[0]))
                continue
            share = 1.0
            if row["scope"] == "denoising loop":
                share = sum(c.latency_s for c in r.components if c.role == "denoiser") / r.latency_s
            floor = r.bounds.min_latency_s * share
            out.append(Outcome(row, entry["source"], published, r.latency_s * share,
                               (r.latency_s_interval[0] * share, r.latency_s_interval[1] * share), r.gpu, r.stack,
                               floor))
    return out


def _summary(rows: list[Outcome]) -> dict[str, Any]:
    errs = np.array([abs(o.error) for o in rows]) * 100
    return {"rows": len(rows), "gpus": len({o.gpu for o in rows}), "models": len({o.card for o in rows}),
            "median_pct": float(np.median(errs)) if rows else 0.0,
            "inside_pct": 100 * sum(o.inside for o in rows) / len(rows) if rows else 0.0}


def section(doc: Mapping[str, Any]) -> list[str]:
    """RESULTS.md's section: the summary, the error by GPU, then every row."""
    all_rows = outcomes(doc)
    eager = [o for o in all_rows if o.predicted is not None and not o.row["context"]]
    below = [o for o in all_rows if o.predicted is not None and o.published < o.floor]
    s = _summary(eager)
    lines = [f"Eager rows predicted: {s['rows']} on {s['gpus']} GPU models and {s['models']} cards; median |error| "
             f"{s['median_pct']:.1f}%, {s['inside_pct']:.0f}% inside the printed 90% interval; predictions below "
             f"the physical floor: none (by construction); published times below it: {len(below)}.", ""]
    for scope in ("pipeline", "denoising loop"):
        part = _summary([o for o in eager if o.row["scope"] == scope])
        lines.append(f"* {scope}: {part['rows']} rows, {part['gpus']} GPUs, median |error| {part['median_pct']:.1f}%, "
                     f"{part['inside_pct']:.0f}% inside")
    lines += ["", "| GPU | rows | median abs error % | inside the interval |", "|---|---|---|---|"]
    for gpu in sorted({o.gpu for o in eager}):
        part = _summary([o for o in eager if o.gpu == gpu])
        lines.append(f"| {gpu} | {part['rows']} | {part['median_pct']:.1f} | {part['inside_pct']:.0f}% |")
    lines += ["", "| model | GPU | precision | what was timed | stack | settings | published s | predicted s [90%] | "
              "error | in the interval |", "|---|---|---|---|---|---|---|---|---|---|"]
    for o in all_rows:
        r = o.row
        what = r["scope"] + (f" ({r['context']}: not the eager law)" if r["context"] else "")
        cells = (o.card, o.gpu or r["gpu"], r["precision"], what, r["stack"], r["note"], f"{o.published:g}")
        head = "| " + " | ".join(c.replace("|", "/") for c in cells) + " |"
        if o.predicted is None:
            lines.append(f"{head} not predicted: {o.reason} | | |")
        else:
            lines.append(f"{head} {o.predicted:.3g} [{o.interval[0]:.3g}, {o.interval[1]:.3g}] ({o.stack}) | "
                         f"{100 * o.error:+.0f}% | {'yes' if o.inside else 'no'} |")
    return lines
