"""Energy, latency and CO2e of one generation on a named GPU, from the exact counts of a report.

``predict(report, gpu=…)`` applies a fitted law (:mod:`flopcalc.energy_laws.laws`) of the calibration
that matches the GPU × precision (× software stack: the one with the most models) to the report's
per-item op-class work; the 90% interval is ± the calibration's split-conformal half-width over its
held-out models (:func:`flopcalc.energy_laws.laws.conformal_halfwidth` of each model's largest
leave-one-model-out |log(measured / predicted)|; ``validation/energy/RESULTS.md``), widened by the measured error of
datasheet scaling when the GPU has no calibration and by that of the multi-GPU overhead model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from flopcalc.energy_laws.features import Work, work_of
from flopcalc.energy_laws.laws import LAWS, OPCLASS_TERMS, Sample, opclass_row
from flopcalc.engine.errors import FlopcalcError
from flopcalc.engine.limits import check_count

if TYPE_CHECKING:
    from flopcalc.flops.report import Report

SHIPPED = Path(__file__).resolve().parents[1] / "data" / "energy_coefficients.yaml"
#: World average carbon intensity of electricity generation in 2023 (Ember, Global Electricity
#: Review 2024, https://ember-energy.org/latest-insights/global-electricity-review-2024/).
DEFAULT_GRID_G_PER_KWH = 480.0
GRID_SOURCE = "world average 2023, Ember Global Electricity Review 2024"


class EnergyError(FlopcalcError):
    """An energy prediction cannot be made as asked (law, precision, coefficients file)."""


@dataclass(frozen=True)
class ComponentEnergy:
    component: str
    role: str
    energy_j: float
    latency_s: float


@dataclass(frozen=True)
class EnergyResult:
    """Per item (image or video) at the given batch size, on ``num_gpus`` GPUs."""

    model: str
    gpu: str
    gpu_name: str
    precision: str
    num_gpus: int
    batch_size: int  # items generated together (prompts × images per prompt): the laws' batch
    law: str
    calibration: str
    energy_j: float
    energy_j_interval: tuple[float, float]
    latency_s: float
    latency_s_interval: tuple[float, float]
    co2e_g: float
    co2e_g_interval: tuple[float, float]
    grid_g_per_kwh: float
    flops_per_item: float
    components: tuple[ComponentEnergy, ...]
    warnings: tuple[str, ...]
    errors: Mapping[str, Any]
    items: int = 1
    coefficients: str = ""
    grid_source: str = GRID_SOURCE
    extra: Mapping[str, Any] = field(default_factory=dict)
    #: the count's own notes (what was not counted, what the plan assumed), carried with the prediction it feeds
    count_notes: tuple[str, ...] = ()

    @property
    def energy_wh(self) -> float:
        return self.energy_j / 3600

    @property
    def gpu_hours(self) -> float:
        """GPU-hours for ``items`` items (latency per item × GPUs)."""
        return self.items * self.latency_s * self.num_gpus / 3600

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "gpu": {"key": self.gpu, "name": self.gpu_name, "count": self.num_gpus},
            "precision": self.precision,
            "items_per_batch": self.batch_size,
            "prediction": {
                "energy_j": self.energy_j, "energy_j_interval": list(self.energy_j_interval),
                "energy_wh": self.energy_wh,
                "latency_s": self.latency_s, "latency_s_interval": list(self.latency_s_interval),
                "co2e_g": self.co2e_g, "co2e_g_interval": list(self.co2e_g_interval),
                "interval": "90%, split-conformal over the held-out models' worst errors",
                "per": "item (image or video) at the given batch size",
                "items": self.items, "gpu_hours": self.gpu_hours,
                "law": self.law, "calibration": self.calibration, "coefficients": self.coefficients,
                "grid_g_per_kwh": self.grid_g_per_kwh, "grid_source": self.grid_source,
                "warnings": list(self.warnings),
            },
            "flops_per_item": self.flops_per_item,
            "count_notes": list(self.count_notes),
            "components": [{"component": c.component, "role": c.role, "energy_j": c.energy_j, "latency_s": c.latency_s}
                           for c in self.components],
            "validation": dict(self.errors),
        }


@lru_cache(maxsize=8)
def load_coefficients(path: str | None = None) -> Mapping[str, Any]:
    """The coefficients document (shipped, or one written by ``flopcalc energy-fit``)."""
    from flopcalc.energy_laws.records import read_yaml

    p = Path(path) if path else SHIPPED
    doc = read_yaml(p, "coefficients", EnergyError)
    if not isinstance(doc, dict) or not isinstance(doc.get("calibrations"), dict) or not doc["calibrations"]:
        raise EnergyError(f"{p} has no calibrations; pass a file written by `flopcalc energy-fit`")
    try:
        _check(doc)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise EnergyError(f"{p} is malformed ({type(exc).__name__}: {exc}); rewrite it with `flopcalc energy-fit`") from None
    return doc


def _check(doc: Mapping) -> None:
    """Every key and number :func:`predict` reads is there, finite, and of its type."""
    from flopcalc.hardware.gpus import gpu as lookup

    LAWS.index(doc["default_law"])
    for cal in doc["calibrations"].values():
        lookup(cal["gpu"])
        str(cal["precision"]), str(cal["stack"]), len(cal["models"]), LAWS.index(cal["default_law"])
        for lo, hi in cal["fitted_range"].values():
            float(lo), float(hi)
        for law in LAWS:
            for t in ("energy", "latency"):
                if not math.isfinite(float(cal["laws"][law]["errors"][t]["interval_log_halfwidth"])):
                    raise ValueError(f"{law} {t} error")
                coef = cal["laws"][law]["coefficients"][t] if law != "loglog" else {}
                if law == "opclass":
                    [coef[k] for k in OPCLASS_TERMS]  # a file fitted before a term existed lacks it
                if not all(math.isfinite(float(v)) and float(v) >= 0 for v in coef.values()):
                    raise ValueError(f"{law} {t} coefficients must be finite and non-negative")
    for t in ("energy", "latency"):
        ll = doc["loglog"][t]
        [float(ll[k]) for k in ("intercept", "log_flops", "cfg", "log_pixels")] + [float(v) for v in ll["calibration"].values()]
        for mg in doc.get("multi_gpu", {}).values():
            [float(v) for v in mg[t]["factor"].values()] + [float(mg[t]["per_log2_gpus_per_log_flops"])]
            float(mg[t]["errors"]["interval_log_halfwidth"])
        if doc.get("datasheet_transfer"):
            tr = doc["datasheet_transfer"]
            float(tr["exponent"][t]), float(tr["errors"][t]["interval_log_halfwidth"])


def _choose(doc: Mapping, gpu_key: str, precision: str) -> tuple[str, list[str], bool]:
    """(calibration key, warnings, transferred): the GPU's own calibration at the precision when
    there is one (most models first), else its other 16-bit one, else another GPU's (datasheet
    scaling from those at the same precision (else 16-bit, else any), the ones with the most models, the closest
    dense peak among those)."""
    from flopcalc.hardware.gpus import gpu as lookup

    cals = doc["calibrations"]
    order = sorted(cals, key=lambda k: (-len(cals[k]["models"]), k))
    for k in order:
        if cals[k]["gpu"] == gpu_key and cals[k]["precision"] == precision:
            return k, [], False
    half = ("bf16", "fp16")
    for k in order:
        c = cals[k]
        if c["gpu"] == gpu_key and precision in half and c["precision"] in half:
            return k, [f"no {precision} measurements on this GPU: used its {c['precision']} calibration "
                       f"(same tensor peak; software stack {c['stack']})"], False
    for k in order:
        c = cals[k]
        if c["gpu"] == gpu_key:
            return k, [f"no {precision} measurements on this GPU: its {c['precision']} calibration with the "
                       f"compute terms scaled by the datasheet {precision} peak (unvalidated)"], False
    same = ([k for k in order if cals[k]["precision"] == precision]
            or ([k for k in order if cals[k]["precision"] in half] if precision in half else []) or order)
    most = len(cals[same[0]]["models"])
    peak = lookup(gpu_key).peak_flops[precision]

    def distance(k: str) -> float:
        ref = lookup(cals[k]["gpu"]).peak_flops
        return abs(math.log(ref.get(precision, ref["bf16"]) / peak))

    key = min((k for k in same if len(cals[k]["models"]) == most), key=lambda k: (distance(k), k))
    ref = cals[key]["precision"]
    if ref == precision:
        return key, [], True
    if precision in half and ref in half:
        return key, [f"the reference calibration is {ref}; {precision} has the same tensor peak"], True
    return key, [f"no {precision} measurements on any GPU: the {ref} calibration with the compute terms scaled by "
                 f"the datasheet {precision} peak (unvalidated)"], True


def _scale(doc: Mapping, ref_gpu: str, gpu_key: str, precision: str) -> dict[str, float]:
    """Factor from the reference GPU's prediction to ``gpu_key``'s: the datasheet ratio (dense
    peak; peak per TDP watt for energy) to the fitted exponent (validation/energy/RESULTS.md)."""
    from flopcalc.hardware.gpus import gpu as lookup

    a, b = lookup(ref_gpu), lookup(gpu_key)
    pa, pb = a.peak_flops.get(precision, a.peak_flops["bf16"]), b.peak_flops[precision]
    beta = doc.get("datasheet_transfer", {}).get("exponent", {"energy": 1.0, "latency": 1.0})
    return {"latency": (pa / pb) ** beta["latency"],
            "energy": ((pa / a.tdp_w) / (pb / b.tdp_w)) ** beta["energy"]}


def _out_of_range(work: Work, sample: Sample, rng: Mapping[str, list]) -> list[str]:
    out = []
    checks = {"flops_per_item": sample.flops, "batch_size": sample.batch_size, "calls_per_item": sample.calls,
              **{f"{op}_share": getattr(sample, op) / sample.flops for op in ("linear", "attention", "conv")},
              "elementwise_vs_flop_time": sample.elementwise_ratio}
    for key, value in checks.items():
        lo, hi = rng[key]
        if value < lo * (1 - 1e-9) or value > hi * (1 + 1e-9):
            out.append(f"{key.replace('_', ' ')} {value:.3g} outside the fitted range [{lo:.3g}, {hi:.3g}]")
    return out


def predict(report: "Report", *, gpu: str, precision: str = "bf16", law: str | None = None, num_gpus: int = 1,
            grid_intensity: float | None = None, coefficients: str | Mapping | None = None,
            items: int = 1) -> EnergyResult:
    """Energy, latency and CO2e per item of ``report``'s generation on ``num_gpus`` × ``gpu``
    (``coefficients``: a file written by ``flopcalc energy-fit``, or its parsed mapping; default shipped)."""
    from flopcalc.energy_laws.fit import sample_of
    from flopcalc.energy_laws.laws import predict_law
    from flopcalc.hardware.gpus import gpu as lookup

    g = lookup(gpu)
    if precision not in g.peak_flops:
        raise EnergyError(f"{g.key} has no {precision} tensor peak in the GPU table "
                          f"(it has {', '.join(g.peak_flops)}); pick one of those with --precision")
    if items < 1:
        raise EnergyError("items must be positive")
    check_count("num_gpus", num_gpus, "--num-gpus")
    if grid_intensity is not None and not (math.isfinite(grid_intensity) and grid_intensity >= 0):
        raise EnergyError(f"grid intensity must be a finite number of gCO2e/kWh ≥ 0, got {grid_intensity}")
    doc = coefficients if isinstance(coefficients, Mapping) else load_coefficients(coefficients)
    if law is not None and law not in LAWS:
        raise EnergyError(f"unknown law {law!r}; choose one of {', '.join(LAWS)}")
    cal_key, warnings, transferred = _choose(doc, g.key, precision)
    cal = doc["calibrations"][cal_key]
    law = law or cal.get("default_law", doc["default_law"])
    work = work_of(report)
    if work.flops <= 0:
        raise EnergyError(f"{report.model}: no counted work to predict from")
    if law == "loglog" and work.pixels <= 0:
        raise EnergyError(f"{report.model}: the loglog law needs an output size (it has a resolution term); "
                          f"use --law opclass or linear for a component without one")
    # on a GPU without calibration: predict on the reference GPU, then scale by the datasheet ratio
    ref_gpu = cal["gpu"] if transferred else g.key
    sample = sample_of(work, ref_gpu, precision, cal_key)
    errors = {t: dict(cal["laws"][law]["errors"][t]) for t in ("energy", "latency")}
    widen = {t: errors[t]["interval_log_halfwidth"] for t in errors}
    warnings += [f"extrapolating: {w}" for w in _out_of_range(work, sample, cal["fitted_range"])]
    coefs = {cal_key: cal["laws"][law]["coefficients"]} if law != "loglog" else doc["loglog"]
    totals = {t: predict_law(law, coefs, sample, t) for t in ("energy", "latency")}
    comps = _split(work, sample, law, coefs[cal_key] if law != "loglog" else None, totals)
    if transferred:
        factors, extra, note = _transfer(doc, ref_gpu, g.key, precision, cal_key)
        totals, comps = _scaled(totals, comps, factors)
        widen = {t: widen[t] + extra[t] for t in widen}
        warnings.append(note)
    if num_gpus > 1:
        factors, extra, notes = _multi_gpu(doc, g.key, ref_gpu, num_gpus, work.flops)
        totals, comps = _scaled(totals, comps, factors)
        widen = {t: widen[t] + extra[t] for t in widen}
        warnings += notes
    grid = DEFAULT_GRID_G_PER_KWH if grid_intensity is None else float(grid_intensity)
    interval = {t: (totals[t] * math.exp(-widen[t]), totals[t] * math.exp(widen[t])) for t in totals}
    co2 = lambda j: j / 3.6e6 * grid  # noqa: E731  (J → kWh → g)
    return EnergyResult(
        model=report.model, gpu=g.key, gpu_name=g.name, precision=precision, num_gpus=num_gpus,
        batch_size=work.items, law=law, calibration=cal_key, energy_j=totals["energy"],
        energy_j_interval=interval["energy"], latency_s=totals["latency"], latency_s_interval=interval["latency"],
        co2e_g=co2(totals["energy"]), co2e_g_interval=(co2(interval["energy"][0]), co2(interval["energy"][1])),
        grid_g_per_kwh=grid, flops_per_item=work.flops, components=comps, warnings=tuple(warnings),
        errors={"calibration_models": len(cal["models"]), "energy": errors["energy"], "latency": errors["latency"]},
        items=items, coefficients=(str(coefficients) if isinstance(coefficients, str) else
                                   "given" if coefficients else "shipped"),
        grid_source=GRID_SOURCE if grid_intensity is None else "given", count_notes=tuple(report.notes))


def _scaled(totals: Mapping[str, float], comps, factors: Mapping[str, float]):
    return ({t: totals[t] * factors[t] for t in totals},
            tuple(ComponentEnergy(c.component, c.role, c.energy_j * factors["energy"], c.latency_s * factors["latency"])
                  for c in comps))


def _transfer(doc: Mapping, ref_gpu: str, gpu_key: str, precision: str, cal_key: str):
    """(factors, interval widening, warning) of datasheet scaling from ``ref_gpu`` to ``gpu_key``."""
    tr = doc.get("datasheet_transfer") or {}
    if not tr:
        raise EnergyError(f"{gpu_key} has no calibration in these coefficients and they hold no measured "
                          f"datasheet scaling; pass --gpu one of "
                          f"{', '.join(sorted({c['gpu'] for c in doc['calibrations'].values()}))}")
    e = tr["errors"]
    note = (f"{gpu_key} has no calibration: the {cal_key} prediction scaled by the datasheet ratio (dense "
            f"{precision} peak, and peak per TDP watt for energy) to the fitted power {tr['exponent']['latency']:.2f} "
            f"(latency) and {tr['exponent']['energy']:.2f} (energy); that scaling's error between calibrated GPUs, "
            f"one GPU pair held out: median {e['energy']['median_pct']:.0f}% (energy), "
            f"{e['latency']['median_pct']:.0f}% (latency); interval widened accordingly")
    return _scale(doc, ref_gpu, gpu_key, precision), {t: e[t]["interval_log_halfwidth"] for t in e}, note


def _multi_gpu(doc: Mapping, gpu_key: str, ref_gpu: str, num_gpus: int, flops: float):
    """(factors, interval widening, warnings) of running one item on ``num_gpus`` GPUs: energy per
    item × f_E, latency per item × f_t / N, f never below 1 (splitting adds communication)."""
    from flopcalc.energy_laws.fit import MULTI_GPU_LOG_FLOPS_REF

    fits = doc.get("multi_gpu", {})
    key = gpu_key if gpu_key in fits else ref_gpu if ref_gpu in fits else next(iter(sorted(fits)), None)
    if key is None:
        raise EnergyError("the coefficients have no multi-GPU overhead fit; use --num-gpus 1")
    mg = fits[key]
    notes = [] if key == gpu_key else [f"no multi-GPU runs on {gpu_key}: the {key} overhead fit used"]
    f = {t: max(1.0, _gpu_factor(mg[t]["factor"], num_gpus) * math.exp(
        mg[t]["per_log2_gpus_per_log_flops"] * math.log2(num_gpus) * (math.log(flops) - MULTI_GPU_LOG_FLOPS_REF)))
        for t in ("energy", "latency")}
    if num_gpus not in mg["num_gpus"]:
        notes.append(f"extrapolating: {num_gpus} GPUs outside the measured counts {mg['num_gpus']}")
    notes.append(f"{num_gpus}-GPU sequence-parallel overhead: ×{f['energy']:.2f} energy per item (leave-one-model-out "
                 f"median error {mg['energy']['errors']['median_pct']:.0f}%)")
    return ({"energy": f["energy"], "latency": f["latency"] / num_gpus},
            {t: mg[t]["errors"]["interval_log_halfwidth"] for t in ("energy", "latency")}, notes)


def _gpu_factor(factors: Mapping, n: int) -> float:
    """The measured factor at ``n`` GPUs; between or beyond the measured counts, interpolated
    (or extrapolated from the last two) linearly in log2 N."""
    pts = sorted((int(k), float(v)) for k, v in factors.items())
    pts = [(1, 1.0)] + pts
    x = math.log2(n)
    for (n0, f0), (n1, f1) in zip(pts, pts[1:]):
        if n <= n1 or (n1, f1) == pts[-1]:
            x0, x1 = math.log2(n0), math.log2(n1)
            return f0 + (f1 - f0) * (x - x0) / (x1 - x0)
    return pts[-1][1]


def _split(work: Work, sample: Sample, law: str, coef: Mapping | None, totals: Mapping[str, float]):
    """Per component: the op-class law is a sum over work, so each component gets its own terms;
    the other laws share the total in proportion to the component's FLOPs."""
    import numpy as np

    out = []
    for c in work.components:
        if law == "opclass":
            def share(field: str) -> float:
                whole = work.total(field)
                return getattr(c, field) / whole if whole else 0.0

            part = Sample("", "", c.linear, c.attention, c.conv, c.calls, False, 1.0, sample.peak, sample.tdp, 0, 0,
                          1, sample.weight_time * share("weight_reads"), c.attention_padded,
                          sample.elementwise_time * share("unfused_elementwise"))
            vals = {t: float(opclass_row(part, t) @ np.array([coef[t][k] for k in OPCLASS_TERMS])) for t in totals}
        else:
            share = c.flops / work.flops
            vals = {t: totals[t] * share for t in totals}
        out.append(ComponentEnergy(c.component, c.role, vals["energy"], vals["latency"]))
    return tuple(out)


def energy(model: str, *, gpu: str, precision: str = "bf16", law: str | None = None, num_gpus: int = 1,
           grid_intensity: float | None = None, coefficients: str | None = None, items: int = 1,
           **settings: Any) -> EnergyResult:
    """Predict energy, latency and CO2e per item of one generation of ``model`` on ``gpu``.

    ``settings`` are those of :func:`flopcalc.estimate` (height, width, steps, batch_size, ...).

    >>> import flopcalc
    >>> r = flopcalc.energy("flux-dev", gpu="h100", steps=28)
    >>> r.energy_j, r.energy_j_interval, r.to_dict()["prediction"]["latency_s"]
    """
    from flopcalc.flops.estimate import estimate

    return predict(estimate(model, **settings), gpu=gpu, precision=precision, law=law, num_gpus=num_gpus,
                   grid_intensity=grid_intensity, coefficients=coefficients, items=items)
