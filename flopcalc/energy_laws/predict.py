"""Energy, latency and CO2e of one generation on a named GPU, from the exact counts of a report.

``predict(report, gpu=…)`` picks the calibration (:func:`choose`): the software stack asked for (``stack``) or, by
default, the first stack of the coefficients' order that runs the report's denoiser, the same on every GPU (two
parts of one family then differ by their specs alone); on that stack, the GPU's own calibration (at the precision
asked, else its other precision moved to the dtypes asked) or, on a GPU without one, the calibrated GPU of the
stack closest in 16-bit peak per watt, moved to this GPU by the fitted transfer
(:func:`flopcalc.energy_laws.fit.transferred`). The op-class law
(:mod:`flopcalc.energy_laws.laws`) gives latency and mean power; energy is their product.

The 90% interval is ×e^−h … ×e^h with h the calibration's nested leave-one-model-out half-width
(:mod:`flopcalc.energy_laws.fit`), plus the leave-one-GPU-out half-width when the prediction is transferred to
another GPU or precision, plus the distance in log space by which the work lies outside the fitted range (an
extrapolation: nothing measured says how the error grows there, so the interval grows with the distance itself),
plus the multi-GPU fit's half-width on several GPUs. Every point and interval end is then held within the
physics of :mod:`flopcalc.energy_laws.backbone` (latency ≥ every FLOP at the dense peak; mean power between
idle and TDP), said aloud where it had to be.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from flopcalc.energy_laws import backbone
from flopcalc.energy_laws.features import Work, work_of
from flopcalc.energy_laws.laws import (
    LAWS, OPCLASS_TERMS, POWER_GROUPS, TARGETS, OpClassFit, Sample, predict_linear, predict_loglog,
)
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
    """An energy prediction cannot be made as asked (law, precision, stack, coefficients file)."""


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
    stack: str
    stack_description: str
    energy_j: float
    energy_j_interval: tuple[float, float]
    latency_s: float
    latency_s_interval: tuple[float, float]
    co2e_g: float
    co2e_g_interval: tuple[float, float]
    grid_g_per_kwh: float
    flops_per_item: float
    bounds: backbone.Bounds
    components: tuple[ComponentEnergy, ...]
    warnings: tuple[str, ...]
    errors: Mapping[str, Any]
    items: int = 1
    coefficients: str = ""
    grid_source: str = GRID_SOURCE
    #: whether the run fits the GPU's memory (from ``flopcalc memory``); None: not known
    fits: bool | None = None
    #: ``flopcalc memory``'s answer in words (fits, does not fit, or which activations are not estimated)
    memory_verdict: str = ""
    #: seconds per item the offload mode adds, moving weights over the host link
    offload_s: float = 0.0
    gpu_alias: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)
    #: the count's own notes (what was not counted, what the plan assumed), carried with the prediction it feeds
    count_notes: tuple[str, ...] = ()

    @property
    def energy_wh(self) -> float:
        return self.energy_j / 3600

    @property
    def power_w(self) -> float:
        return self.energy_j / self.latency_s

    @property
    def gpu_hours(self) -> float:
        """GPU-hours for ``items`` items (latency per item × GPUs)."""
        return self.items * self.latency_s * self.num_gpus / 3600

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "gpu": {"key": self.gpu, "name": self.gpu_name, "count": self.num_gpus, "resolved": self.gpu_alias},
            "precision": self.precision,
            "items_per_batch": self.batch_size,
            "prediction": {
                "energy_j": self.energy_j, "energy_j_interval": list(self.energy_j_interval),
                "energy_wh": self.energy_wh,
                "latency_s": self.latency_s, "latency_s_interval": list(self.latency_s_interval),
                "power_w": self.power_w,
                "co2e_g": self.co2e_g, "co2e_g_interval": list(self.co2e_g_interval),
                "interval": "90%: nested leave-one-model-out, widened for a transfer, an extrapolation, several GPUs",
                "per": "item (image or video) at the given batch size",
                "items": self.items, "gpu_hours": self.gpu_hours,
                "law": self.law, "calibration": self.calibration, "stack": self.stack,
                "stack_description": self.stack_description, "coefficients": self.coefficients,
                "bounds": self.bounds.to_dict(), "fits": self.fits, "memory_verdict": self.memory_verdict,
                "offload_s": self.offload_s,
                "grid_g_per_kwh": self.grid_g_per_kwh, "grid_source": self.grid_source,
                "warnings": list(self.warnings),
            },
            "flops_per_item": self.flops_per_item,
            "count_notes": list(self.count_notes),
            "components": [{"component": c.component, "role": c.role, "energy_j": c.energy_j, "latency_s": c.latency_s}
                           for c in self.components],
            "validation": dict(self.errors),
        }


# --------------------------------------------------------------------------- the coefficients


@lru_cache(maxsize=8)
def load_coefficients(path: str | None = None) -> Mapping[str, Any]:
    """The coefficients document (shipped, or one written by ``flopcalc energy-fit``), checked: every number it
    gives is finite, every coefficient non-negative, every interval half-width ≥ 0."""
    from flopcalc.energy_laws.records import read_yaml

    p = Path(path) if path else SHIPPED
    doc = read_yaml(p, "coefficients", EnergyError)
    if not isinstance(doc, dict) or not isinstance(doc.get("calibrations"), dict) or not doc["calibrations"]:
        raise EnergyError(f"{p} has no calibrations; pass a file written by `flopcalc energy-fit`")
    try:
        check(doc)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise EnergyError(f"{p} is malformed ({type(exc).__name__}: {exc}); rewrite it with `flopcalc energy-fit`"
                          ) from None
    return doc


def _finite(value: Any, what: str, low: float = 0.0, high: float = math.inf) -> float:
    v = float(value)
    if not (math.isfinite(v) and low <= v <= high):
        raise ValueError(f"{what} must be a finite number in [{low}, {high}], got {value!r}")
    return v


def check(doc: Mapping) -> None:
    """Every key and number :func:`predict` reads is there, finite and in its range."""
    from flopcalc.hardware.gpus import gpu as lookup

    from flopcalc.energy_laws.fit import DENOISER_KINDS

    for name, entry in doc["stacks"].items():
        str(name), str(entry["description"])
        if not entry["denoisers"] or set(entry["denoisers"]) - set(DENOISER_KINDS):
            raise ValueError(f"stack {name}: denoisers must be among {', '.join(DENOISER_KINDS)}")
    for key, cal in doc["calibrations"].items():
        lookup(cal["gpu"])
        backbone.peaks(lookup(cal["gpu"]), cal["precision"])
        if cal["stack"] not in doc["stacks"]:
            raise ValueError(f"{key}: stack {cal['stack']!r} is not among the stacks")
        len(cal["models"])
        for lo, hi in cal["fitted_range"].values():
            if _finite(lo, "a fitted range") > _finite(hi, "a fitted range"):
                raise ValueError(f"{key}: a fitted range is inverted")
        fit = OpClassFit.from_dict(cal["opclass"])
        for k in OPCLASS_TERMS:
            _finite(fit.time[k], f"{key} time coefficient {k}", 1.0 if k in ("linear", "attention", "conv") else 0.0,
                    1e6)
        for g in POWER_GROUPS:
            _finite(fit.power[g], f"{key} power fraction {g}", 0.0, 1.0)
        for kind in ("plain", "nested"):
            for t in TARGETS:
                _finite(cal["opclass"]["errors"][kind][t]["interval_log_halfwidth"], f"{key} {kind} {t} half-width",
                        0.0, 10.0)
        for t in TARGETS:
            _finite(cal["linear"]["coefficients"][t]["k"], f"{key} linear {t}", 0.0, 1.0)
            for law in ("linear", "loglog"):
                _finite(cal[law]["errors"][t]["interval_log_halfwidth"], f"{key} {law} {t} half-width", 0.0, 10.0)
    for t in TARGETS:
        ll = doc["loglog"][t]
        for k in ("intercept", "log_flops", "cfg", "log_pixels"):
            _finite(ll[k], f"loglog {k}", -1e3, 1e3)
        for v in ll["calibration"].values():
            _finite(v, "loglog calibration offset", -1e3, 1e3)
        for mg in doc.get("multi_gpu", {}).values():
            for v in mg[t]["factor"].values():
                _finite(v, "a multi-GPU factor", 0.0, 1e3)
            _finite(mg[t]["per_log2_gpus_per_log_flops"], "the multi-GPU slope", -10.0, 10.0)
            _finite(mg[t]["errors"]["interval_log_halfwidth"], "a multi-GPU half-width", 0.0, 10.0)
        if doc["transfer"].get("errors"):
            _finite(doc["transfer"]["errors"][t]["interval_log_halfwidth"], "the transfer half-width", 0.0, 10.0)
    _finite(doc["transfer"]["gamma"], "the transfer exponent", 0.0, 2.0)


# --------------------------------------------------------------------------- which calibration


@dataclass(frozen=True)
class Choice:
    calibration: str
    stack: str
    transferred: bool  # to another GPU or another precision than measured
    notes: tuple[str, ...]


def denoiser_kind(report: "Report") -> str:
    """"unet" where the main denoiser is a UNet (what xDiT does not run), else "transformer"."""
    denoisers = [c for c in report.components if c.role == "denoiser"]
    main = max(denoisers, key=lambda c: c.macs, default=None)
    return "unet" if main is not None and "UNet" in main.class_name else "transformer"


def choose(doc: Mapping, gpu_key: str, precision: str, kind: str = "transformer", stack: str | None = None) -> Choice:
    """The calibration a prediction of a ``kind`` denoiser on ``gpu_key`` at ``precision`` uses (see the module
    docstring)."""
    from flopcalc.hardware.gpus import gpu as lookup

    cals = doc["calibrations"]
    runs = {s: v for s, v in doc["stacks"].items() if kind in v["denoisers"]}
    if stack is not None and stack not in doc["stacks"]:
        raise EnergyError(f"--stack {stack!r}: the coefficients measure {', '.join(doc['stacks'])}")
    if stack is not None and stack not in runs:
        raise EnergyError(f"--stack {stack}: it runs {', '.join(doc['stacks'][stack]['denoisers'])} denoisers, not a "
                          f"{kind}")
    if not runs:
        raise EnergyError(f"no stack of these coefficients runs a {kind} denoiser")
    on_gpu = [k for k in cals if cals[k]["gpu"] == gpu_key]
    chosen = stack or next(iter(runs))  # the same default on every GPU: siblings differ only by their specs
    mine = sorted((k for k in on_gpu if cals[k]["stack"] == chosen),
                  key=lambda k: (cals[k]["precision"] != precision, -len(cals[k]["models"]), k))
    if mine:
        key = mine[0]
        measured = cals[key]["precision"]
        if measured == precision:
            return Choice(key, chosen, False, ())
        same_peak = {measured, precision} <= {"bf16", "fp16"}
        note = (f"measured at {measured}, which has the same tensor peak as {precision}" if same_peak else
                f"no {precision} measurement: the {measured} efficiencies moved to the dtypes {precision} runs in by "
                "the fitted transfer (a faster dtype keeps the measured fraction of its peak)")
        return Choice(key, chosen, not same_peak, (note,))
    here = lookup(gpu_key)
    candidates = [k for k in cals if cals[k]["stack"] == chosen]

    def distance(k: str) -> tuple:  # in 16-bit peak per watt, whatever the precision asked (one choice per GPU)
        return (abs(math.log(_peak_per_watt(lookup(cals[k]["gpu"])) / _peak_per_watt(here))),
                cals[k]["precision"] != precision, -len(cals[k]["models"]), k)

    key = min(candidates, key=distance)
    return Choice(key, chosen, True, (f"{here.key} has no {chosen} calibration: the {key} law moved to it by the "
                                      "fitted transfer (closest calibrated GPU in dense peak per watt)",))


def _peak_per_watt(g: Any) -> float:
    return g.peak_flops.get("bf16", g.peak_flops.get("fp16", 0.0)) / g.tdp_w


# --------------------------------------------------------------------------- the prediction


def _out_of_range(sample: Sample, rng: Mapping[str, list]) -> tuple[list[str], float]:
    """What lies outside the fitted range, and by how far in log space (the largest)."""
    checks = {"flops_per_item": sample.flops, "batch_size": sample.items, "calls_per_item": sample.calls,
              **{f"{op}_share": getattr(sample, op) / sample.flops for op in ("linear", "attention", "conv")},
              "elementwise_vs_flop_time": sample.elementwise_ratio}
    out, distance = [], 0.0
    for key, value in checks.items():
        lo, hi = rng[key]
        if value < lo * (1 - 1e-9) or value > hi * (1 + 1e-9):
            out.append(f"{key.replace('_', ' ')} {value:.3g} outside the fitted range [{lo:.3g}, {hi:.3g}]")
            if value > 0 and lo > 0:
                distance = max(distance, abs(math.log(value / (lo if value < lo else hi))))
    return out, distance


def predict(report: "Report", *, gpu: str, precision: str | None = None, law: str | None = None, num_gpus: int = 1,
            grid_intensity: float | None = None, coefficients: str | Mapping | None = None, items: int = 1,
            stack: str | None = None, tf32: bool = False, fits: bool | None = None, offload_s: float = 0.0,
            memory_verdict: str = "",
            layout_notes: tuple[str, ...] = ()) -> EnergyResult:
    """Energy, latency and CO2e per item of ``report``'s generation on ``num_gpus`` × ``gpu``
    (``coefficients``: a file written by ``flopcalc energy-fit``, or its parsed mapping; default shipped).
    ``fits`` and ``offload_s`` (seconds per item of weights moved over the host link) come from
    :func:`flopcalc.gpu_memory.estimate.memory` (:func:`energy` fills them)."""
    from flopcalc.energy_laws.fit import sample_of, transferred
    from flopcalc.hardware.gpus import resolve

    g, alias = resolve(gpu)
    precision = precision or default_precision(g)
    if items < 1:
        raise EnergyError("items must be positive")
    check_count("num_gpus", num_gpus, "--num-gpus")
    if grid_intensity is not None and not (math.isfinite(grid_intensity) and grid_intensity >= 0):
        raise EnergyError(f"grid intensity must be a finite number of gCO2e/kWh ≥ 0, got {grid_intensity}")
    peaks = backbone.peaks(g, precision, tf32)
    doc = coefficients if isinstance(coefficients, Mapping) else load_coefficients(coefficients)
    if law is not None and law not in LAWS:
        raise EnergyError(f"unknown law {law!r}; choose one of {', '.join(LAWS)}")
    law = law or "opclass"
    choice = choose(doc, g.key, precision, denoiser_kind(report), stack)
    cal = doc["calibrations"][choice.calibration]
    work = work_of(report)
    if work.flops <= 0:
        raise EnergyError(f"{report.model}: no counted work to predict from")
    if law == "loglog" and work.pixels <= 0:
        raise EnergyError(f"{report.model}: the loglog law needs an output size (it has a resolution term); "
                          f"use --law opclass or linear for a component without one")
    sample = sample_of(work, g.key, precision, choice.calibration, tf32=tf32)
    ref = sample_of(work, cal["gpu"], cal["precision"], choice.calibration)
    warnings = list(choice.notes)
    if alias.startswith("alias"):
        warnings.insert(0, alias)
    errs = law_errors(cal, law)
    h = {t: float(errs[t]["interval_log_halfwidth"]) for t in TARGETS}
    errors = {"calibration_models": len(cal["models"]), **{t: dict(errs[t]) for t in TARGETS}}
    out, distance = _out_of_range(ref, cal["fitted_range"])
    warnings += [f"extrapolating: {w}" for w in out]
    if distance:
        h = {t: h[t] + distance for t in h}
    fit = OpClassFit.from_dict(cal["opclass"])
    if choice.transferred:
        fit = transferred(fit, ref, sample, float(doc["transfer"]["gamma"]))
        tr = doc["transfer"].get("errors") or {}
        if tr:
            h = {t: h[t] + float(tr[t]["interval_log_halfwidth"]) for t in h}
            warnings.append(f"transferred: leave-one-GPU-out error median {tr['latency']['median_pct']:.0f}% (latency), "
                            f"{tr['energy']['median_pct']:.0f}% (energy); interval widened by it")
    if law == "opclass":
        latency = fit.latency(sample)
        energy = fit.mean_power(sample) * latency
    elif choice.transferred:
        raise EnergyError(f"the {law} law is a baseline fitted per calibration; it does not move to {g.key} at "
                          f"{precision}: use --law opclass")
    else:
        coef = doc["loglog"] if law == "loglog" else cal["linear"]["coefficients"]
        pred = predict_loglog if law == "loglog" else predict_linear
        latency, energy = (pred(coef[t], sample, t) for t in ("latency", "energy"))
    comps = _split(work, sample, fit, latency, energy)
    if num_gpus > 1:
        factors, extra, notes = _multi_gpu(doc, g.key, cal["gpu"], num_gpus, work.flops)
        latency, energy = latency * factors["latency"], energy * factors["energy"]
        comps = tuple(ComponentEnergy(c.component, c.role, c.energy_j * factors["energy"],
                                      c.latency_s * factors["latency"]) for c in comps)
        h = {t: h[t] + extra[t] for t in h}
        warnings += notes
    warnings += layout_notes
    if offload_s:
        latency += offload_s
        energy += offload_s * g.idle_w * num_gpus
        warnings.append(f"offload: {offload_s:.3g} s per item moving weights over the host link at its spec bandwidth "
                        f"(GPU at idle power meanwhile)")
    if fits is False:
        warnings.append(f"does not fit in {g.name}'s memory at these settings (`flopcalc memory`): predicted as if it "
                        "did; `flopcalc memory --fit` lists the offload modes and quantizations under which it fits")
    b = backbone.bounds({"linear": work.total("linear"), "attention": work.total("attention"),
                         "conv": work.total("conv")}, g, peaks, num_gpus)
    (lat_lo, lat, lat_hi), (en_lo, en, en_hi), clamped = backbone.clamp(
        (latency * math.exp(-h["latency"]), latency, latency * math.exp(h["latency"])),
        (energy * math.exp(-h["energy"]), energy, energy * math.exp(h["energy"])), b)
    warnings += clamped
    grid = DEFAULT_GRID_G_PER_KWH if grid_intensity is None else float(grid_intensity)
    co2 = lambda j: j / 3.6e6 * grid  # noqa: E731  (J → kWh → g)
    result = EnergyResult(
        model=report.model, gpu=g.key, gpu_name=g.name, precision=precision, num_gpus=num_gpus,
        batch_size=work.items, law=law, calibration=choice.calibration, stack=choice.stack,
        stack_description=doc["stacks"][choice.stack]["description"], energy_j=en, energy_j_interval=(en_lo, en_hi), latency_s=lat,
        latency_s_interval=(lat_lo, lat_hi), co2e_g=co2(en), co2e_g_interval=(co2(en_lo), co2(en_hi)),
        grid_g_per_kwh=grid, flops_per_item=work.flops, bounds=b, components=comps, warnings=tuple(warnings),
        errors=errors, items=items,
        coefficients=(str(coefficients) if isinstance(coefficients, str) else "given" if coefficients else "shipped"),
        grid_source=GRID_SOURCE if grid_intensity is None else "given", fits=fits, offload_s=offload_s,
        memory_verdict=memory_verdict,
        gpu_alias=alias, count_notes=tuple(report.notes))
    _check_finite(result)
    return result


def law_errors(cal: Mapping[str, Any], law: str = "opclass") -> Mapping[str, Mapping[str, Any]]:
    """The held-out errors a calibration's ``law`` reports, per target: for the op-class law the nested
    leave-one-model-out ones (its optional terms chosen inside each fold, never on the held-out model)."""
    return cal["opclass"]["errors"]["nested"] if law == "opclass" else cal[law]["errors"]


def _check_finite(r: EnergyResult) -> None:
    values = (r.energy_j, *r.energy_j_interval, r.latency_s, *r.latency_s_interval, r.co2e_g, *r.co2e_g_interval)
    if not all(math.isfinite(v) and v >= 0 for v in values):
        raise EnergyError("these coefficients give a prediction that is not a finite number; check the coefficients "
                          "file (rewrite it with `flopcalc energy-fit`)")


def _split(work: Work, sample: Sample, fit: OpClassFit, latency: float, energy: float) -> tuple[ComponentEnergy, ...]:
    """Each component's share of latency and energy: its own work through the same law, scaled to the totals."""
    parts = []
    for c in work.components:
        own = replace(sample, linear=c.linear, attention=c.attention, attention_padded=c.attention_padded,
                      conv=c.conv, calls=c.calls,
                      weight_bytes=sample.weight_bytes * (c.weight_reads / work.total("weight_reads"))
                      if work.total("weight_reads") else 0.0,
                      elementwise_bytes=sample.elementwise_bytes * (c.unfused_elementwise
                                                                    / work.total("unfused_elementwise"))
                      if work.total("unfused_elementwise") else 0.0)
        t = fit.latency(own) if own.flops or own.calls else 0.0
        parts.append((c, t, fit.mean_power(own) * t if t else 0.0))
    tsum, esum = sum(p[1] for p in parts) or 1.0, sum(p[2] for p in parts) or 1.0
    return tuple(ComponentEnergy(c.component, c.role, e * energy / esum, t * latency / tsum) for c, t, e in parts)


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
    extra = {t: float(mg[t]["errors"]["interval_log_halfwidth"]) for t in ("energy", "latency")}
    measured = [int(n) for n in mg["num_gpus"]]
    if num_gpus > max(measured):
        beyond = math.log2(num_gpus / max(measured))
        extra = {t: extra[t] + beyond for t in extra}
        notes.append(f"extrapolating: {num_gpus} GPUs beyond the measured {measured}; interval widened by "
                     f"{beyond:.2f} in log space")
    notes.append(f"{num_gpus}-GPU sequence-parallel overhead: ×{f['energy']:.2f} energy per item (leave-one-model-out "
                 f"median error {mg['energy']['errors']['median_pct']:.0f}%)")
    return ({"energy": f["energy"], "latency": f["latency"] / num_gpus}, extra, notes)


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


def energy(model: str, *, gpu: str, precision: str | None = None, law: str | None = None, num_gpus: int = 1,
           grid_intensity: float | None = None, coefficients: str | None = None, items: int = 1,
           stack: str | None = None, tf32: bool = False, offload: str = "none", blocks_per_group: int = 1,
           stream: bool = False, block_swap: int = 0, **settings: Any) -> EnergyResult:
    """Predict energy, latency and CO2e per item of one generation of ``model`` on ``gpu``.

    ``settings`` are those of :func:`flopcalc.estimate` (height, width, steps, batch_size, family options ...).
    ``offload`` is diffusers' offload mode (``none``, ``model``: ``enable_model_cpu_offload()``, ``group-block`` /
    ``group-leaf``: ``enable_group_offload`` with ``blocks_per_group`` and ``stream``, ``sequential``) or a
    ``block_swap`` of the denoiser's last blocks, whose weight transfers over the host link add to the latency. Whether it fits the GPU comes from
    :func:`flopcalc.memory` at the same settings.

    >>> import flopcalc
    >>> r = flopcalc.energy("flux-dev", gpu="h100", steps=28)
    >>> r.energy_j, r.energy_j_interval, r.to_dict()["prediction"]["latency_s"]
    """
    from flopcalc.flops.estimate import estimate
    from flopcalc.flops.parallel import layout
    from flopcalc.gpu_memory.estimate import memory
    from flopcalc.hardware.gpus import gpu as lookup

    check_count("num_gpus", num_gpus, "--num-gpus")
    report = estimate(model, **settings)
    g = lookup(gpu)
    precision = precision or default_precision(g)
    notes = layout(report, num_gpus) if num_gpus > 1 else ()
    measure = settings.get("measure", False)
    run = {k: v for k, v in settings.items() if k not in ("measure", "convention")}
    fits, moved, verdict = None, 0.0, ""
    if not measure:
        mem = memory(model, gpu=g.key, offload=offload, dtype=_memory_dtype(precision),
                     blocks_per_group=blocks_per_group, stream=stream, block_swap=block_swap, **run)
        fits, moved, verdict = mem.fits, mem.transfer_bytes_per_item, mem.verdict or ""
    elif offload != "none" or block_swap:
        raise EnergyError("--offload or --block-swap with --measure: the weights of a measured component are not "
                          "known")
    offload_s = moved / g.host_link_bytes_per_s if moved else 0.0
    return predict(report, gpu=gpu, precision=precision, law=law, num_gpus=num_gpus, grid_intensity=grid_intensity,
                   coefficients=coefficients, items=items, stack=stack, tf32=tf32, fits=fits, offload_s=offload_s,
                   memory_verdict=verdict,
                   layout_notes=notes)


def default_precision(g: Any) -> str:
    """bf16 where the GPU has a bf16 tensor peak, else fp16 (a T4 or V100 runs diffusion pipelines in fp16)."""
    return "bf16" if "bf16" in g.peak_flops else "fp16"


def _memory_dtype(precision: str) -> str:
    """The dtype the weights load in for a run at ``precision`` (fp8: linear layers quantised, optimum-quanto)."""
    return {"bf16": "bf16", "fp16": "fp16", "fp32": "fp32", "fp8": "fp8"}[precision]
