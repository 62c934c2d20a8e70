"""Text, JSON and CSV renderings of an :class:`~flopcalc.energy_laws.predict.EnergyResult`."""

from __future__ import annotations

import csv
import io
import json

from flopcalc.energy_laws.predict import EnergyResult


def _iv(lo: float, hi: float, fmt: str) -> str:
    return f"[{lo:{fmt}}, {hi:{fmt}}]"


def render(r: EnergyResult, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(r.to_dict(), indent=2, allow_nan=False) + "\n"
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(("component", "role", "energy_j", "energy_j_lo", "energy_j_hi", "latency_s", "latency_s_lo",
                    "latency_s_hi", "co2e_g", "law", "calibration"))
        for c in r.components:
            w.writerow((c.component, c.role, repr(c.energy_j), "", "", repr(c.latency_s), "", "",
                        repr(c.energy_j / 3.6e6 * r.grid_g_per_kwh), r.law, r.calibration))
        w.writerow(("total", "", repr(r.energy_j), *map(repr, r.energy_j_interval), repr(r.latency_s),
                    *map(repr, r.latency_s_interval), repr(r.co2e_g), r.law, r.calibration))
        return buf.getvalue()
    e = r.errors
    lines = [
        f"{r.model} on {r.num_gpus} × {r.gpu_name} ({r.precision}), {r.batch_size} item(s) per batch: per item",
        f"  energy   {r.energy_j:,.0f} J ({r.energy_wh:,.2f} Wh)   90% interval {_iv(*r.energy_j_interval, ',.0f')} J",
        f"  latency  {r.latency_s:,.2f} s   90% interval {_iv(*r.latency_s_interval, ',.2f')} s",
        f"  CO2e     {r.co2e_g:,.2f} g   {_iv(*r.co2e_g_interval, ',.2f')} g at {r.grid_g_per_kwh:g} gCO2e/kWh "
        f"({r.grid_source}; GPU energy only)",
    ]
    b = r.bounds
    lines.append(f"  power    {r.power_w:,.0f} W average   (physics: latency ≥ {b.min_latency_s:,.3g} s with every FLOP at "
                 f"the dense peak; power between idle {b.min_power_w:g} W and TDP {b.max_power_w:g} W)")
    if r.memory_verdict:
        lines.append(f"  memory   {r.memory_verdict} on the GPU at these settings (flopcalc memory)"
                     + (f"; offload adds {r.offload_s:,.2f} s per item" if r.offload_s else ""))
    if r.items > 1:
        lines.append(f"  {r.items} items: {r.energy_wh * r.items / 1000:,.3f} kWh, {r.gpu_hours:,.3f} GPU-hours")
    lines += ["", "  component         energy J    latency s"]
    lines += [f"  {c.component:<16}{c.energy_j:>10,.1f}{c.latency_s:>13,.3f}" for c in r.components]
    lines += ["",
              f"  law {r.law}, calibration {r.calibration} ({e['calibration_models']} models, coefficients {r.coefficients})",
              f"  stack {r.stack}: {r.stack_description} (--stack chooses another)",
              f"  held-out error ({'nested ' if r.law == 'opclass' else ''}leave-one-model-out): energy median {e['energy']['median_pct']:.1f}% / max {e['energy']['max_pct']:.1f}%, "
              f"latency median {e['latency']['median_pct']:.1f}% / max {e['latency']['max_pct']:.1f}%",
              f"  work counted: {r.flops_per_item / 1e12:,.2f} TFLOPs per item (flopcalc estimate, torch convention)"]
    lines += [f"  note: {n}" for n in r.count_notes]
    lines += [f"  warning: {w}" for w in r.warnings]
    return "\n".join(lines) + "\n"
