"""Calibration: measured records → the laws of every calibration, with honest errors.

Used by ``validation/energy/fit_energy.py`` (the shipped coefficients) and ``flopcalc energy-fit`` (a user's own
measurements). The output is a plain dict written as YAML; the same records give the same bytes.

**Validation, leave one model out.** A model's records (all its batch sizes, on every GPU) leave every fit at once.
Two figures per calibration:

* *plain*: the law with the terms chosen on all the models, refitted without the held-out one (what a fixed law
  does on a new model; optimistic, because the terms were chosen with that model in);
* *nested*: inside every held-out-model fold, the terms are chosen again by leave-one-model-out on the remaining
  models alone (:data:`flopcalc.energy_laws.laws.TERM_SETS`, the one with the least latency and energy error), fitted on
  them, and the held-out model predicted: the held-out model plays no part in any choice. The printed 90%
  intervals come from these (:func:`flopcalc.energy_laws.laws.error_summary`).

**Transfer to a GPU without calibration.** A compute term's inverse efficiency moves between GPUs of one stack as
``a_c(g) = a_c(ref) · (π_g / π_ref)^γ`` (π = dense 16-bit peak ÷ TDP), never below 1: γ = 0 keeps the fraction of
the peak, γ = 1 keeps the FLOPs per watt (a GPU held at its power limit); a change of dtype (fp8, fp32) moves an op
class the same way by its dtype's peak ratio, capped so that a faster dtype keeps the measured fraction. γ is fitted on the calibrated GPU pairs of one
stack (latency of the same models); the other terms carry over (seconds per call; bandwidth terms at the new GPU's
bandwidth; power fractions between the new GPU's idle and TDP). Its error leaves one GPU out: γ from the other
pairs, each calibration of the held-out GPU predicted from its stack's other GPU.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import replace
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from flopcalc.energy_laws.backbone import peaks
from flopcalc.energy_laws.features import OP_CLASSES, Work, work_of
from flopcalc.energy_laws.laws import (
    COMPUTE, TARGETS, TERM_SETS, OpClassFit, Sample, Terms, error_summary, fit_linear, fit_loglog, fit_opclass,
    predict_linear, predict_loglog,
)
from flopcalc.energy_laws.records import MeasurementError, Record, estimate_record

MIN_MODELS = 3  # a calibration needs this many models: leave-one-model-out then fits on ≥ 2
BYTES_PER_PARAMETER = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1}  # and per activation element
#: The transfer exponent where no GPU pair of a stack is measured: a GPU held at its power limit (see above).
GAMMA_WITHOUT_PAIRS = 1.0


def sample_of(work: Work, gpu_key: str, precision: str, calibration: str, label: str = "", energy: float = 0.0,
              latency: float = 0.0, tf32: bool = False) -> Sample:
    from flopcalc.hardware.gpus import gpu

    g = gpu(gpu_key)
    p = peaks(g, precision, tf32)
    per = BYTES_PER_PARAMETER[precision]
    return Sample(label, calibration, work.total("linear"), work.total("attention"), work.total("attention_padded"),
                  work.total("conv"), work.calls, work.total("launches"), work.total("weight_reads") * per,
                  work.total("unfused_elementwise") * per, work.items, work.cfg, float(work.pixels),
                  p.linear, p.attention, p.conv, g.memory_bandwidth, g.tdp_w, g.idle_w, energy, latency,
                  g.peak_flops.get("bf16", g.peak_flops.get("fp16", p.linear)))


def samples_of(records: Sequence[Record]) -> tuple[list[Sample], dict[int, Work]]:
    """One :class:`Sample` per record (``estimate`` at exactly the record's settings)."""
    cache: dict[tuple, Work] = {}
    out, works = [], {}
    for i, r in enumerate(records):
        key = (r.model, r.batch_size, tuple(sorted(r.settings.items())))
        if key not in cache:
            cache[key] = work_of(estimate_record(r))
        works[i] = cache[key]
        out.append(sample_of(cache[key], r.gpu, r.precision, r.calibration, r.model_id, r.energy_j, r.latency_s))
    return out, works


# --------------------------------------------------------------------------- choosing terms


def choose_terms(samples: Sequence[Sample]) -> Terms:
    """The term set of :data:`TERM_SETS` with the least leave-one-model-out error on ``samples``, latency and energy
    alike (ties: the earlier, which keeps more terms)."""
    labels = sorted({s.label for s in samples})
    if len(labels) < 2:
        return TERM_SETS[0]
    best, best_score = TERM_SETS[0], math.inf
    for terms in TERM_SETS:
        held = _held_out(samples, lambda train: fit_opclass(train, terms), _opclass_predict)
        score = _held_score(held)
        if score < best_score - 1e-12:
            best, best_score = terms, score
    return best


def _held_score(held: Sequence[tuple[Sample, Mapping[str, float]]], targets: Sequence[str] = TARGETS) -> float:
    """Mean over models of each model's mean |log(predicted / measured)| over ``targets``: every model counts once."""
    per: dict[str, list[float]] = defaultdict(list)
    for s, p in held:
        per[s.label] += [abs(math.log(p[t] / s.measured(t))) for t in targets]
    return float(np.mean([np.mean(v) for v in per.values()]))


# --------------------------------------------------------------------------- validation


def _held_out(samples: Sequence[Sample], fit_fold: Callable[[list[Sample]], Any],
              predict: Callable[[Any, Sample, str], float]) -> list[tuple[Sample, dict[str, float]]]:
    """Each model left out of ``fit_fold`` in turn; its records predicted by the fold's fit."""
    out = []
    for label in sorted({s.label for s in samples}):
        train = [s for s in samples if s.label != label]
        fitted = fit_fold(train)
        out += [(s, {t: predict(fitted, s, t) for t in TARGETS}) for s in samples if s.label == label]
    return out


def _errors(held: Sequence[tuple[Sample, dict[str, float]]]) -> dict[str, Any]:
    return {t: error_summary((s.label, s.measured(t), p[t]) for s, p in held) for t in TARGETS}


def _opclass_predict(fit: OpClassFit, s: Sample, target: str) -> float:
    return fit.predict(s, target)


def validate_opclass(own: Sequence[Sample], terms: Terms) -> dict[str, Any]:
    """Plain (``terms`` fixed) and nested (terms chosen inside each fold) leave-one-model-out of one calibration."""
    plain = _held_out(own, lambda train: fit_opclass(train, terms), _opclass_predict)
    nested = _held_out(own, lambda train: fit_opclass(train, choose_terms(train)), _opclass_predict)
    return {"plain": _errors(plain), "nested": _errors(nested), "held_out": nested}


# --------------------------------------------------------------------------- transfer


def _pi(s: Sample) -> float:
    """Dense 16-bit tensor peak per TDP watt of the sample's GPU (whatever the run's precision)."""
    return (s.peak_16bit or s.peak_linear) / s.tdp


def transferred(fit: OpClassFit, ref: Sample, target: Sample, gamma: float) -> OpClassFit:
    """``fit`` (of the reference GPU and precision) moved to ``target``'s: each compute term's inverse efficiency
    scaled by (π_target / π_ref)^γ across GPUs (π: the 16-bit tensor peak per TDP watt) and, for an op class whose
    dtype changes (fp8 linear layers, fp32 matmuls on the CUDA cores), by (r_target / r_ref)^γ capped at 1, r its
    dtype's peak over the 16-bit one: a slower dtype is easier to keep busy under the same power limit, a faster
    one keeps the measured fraction of its peak (it never makes an op slower). Never below 1 (the dense peak);
    every other coefficient as it is."""
    across = (_pi(target) / _pi(ref)) ** gamma
    time = dict(fit.time)
    for op in COMPUTE:
        r_target = getattr(target, f"peak_{op}") / (target.peak_16bit or target.peak_linear)
        r_ref = getattr(ref, f"peak_{op}") / (ref.peak_16bit or ref.peak_linear)
        time[op] = max(1.0, fit.time[op] * across * min(1.0, (r_target / r_ref) ** gamma))
    return replace(fit, time=time)


def _pairs(fits: dict[str, tuple[OpClassFit, list[Sample]]], stack_of: dict[str, str], gpu_of: dict[str, str],
           ) -> list[tuple[str, str]]:
    return [(a, b) for a in fits for b in fits if a != b and stack_of[a] == stack_of[b] and gpu_of[a] != gpu_of[b]]


def fit_gamma(pairs: Sequence[tuple[str, str]], fits: dict[str, tuple[OpClassFit, list[Sample]]]) -> float:
    """γ minimising the mean over models of |log(predicted / measured)| latency when each pair's source fit is
    moved to its destination's GPU (a golden-section search on [0, 2])."""
    if not pairs:
        return GAMMA_WITHOUT_PAIRS

    def score(gamma: float) -> float:
        held = []
        for src, dst in pairs:
            fit, src_samples = fits[src]
            ref = src_samples[0]
            held += [(s, {"latency": transferred(fit, ref, s, gamma).latency(s)}) for s in fits[dst][1]]
        return _held_score(held, ("latency",))

    lo, hi = 0.0, 2.0
    g = (math.sqrt(5) - 1) / 2
    a, b = hi - g * (hi - lo), lo + g * (hi - lo)
    fa, fb = score(a), score(b)
    for _ in range(60):
        if fa <= fb:
            hi, b, fb = b, a, fa
            a = hi - g * (hi - lo)
            fa = score(a)
        else:
            lo, a, fa = a, b, fb
            b = lo + g * (hi - lo)
            fb = score(b)
    return float((lo + hi) / 2)


def _transfer(fits: dict[str, tuple[OpClassFit, list[Sample]]], stack_of: dict[str, str], gpu_of: dict[str, str]
              ) -> dict[str, Any]:
    """γ on every pair, and its leave-one-GPU-out errors (each calibrated GPU predicted from its stack's others)."""
    pairs = _pairs(fits, stack_of, gpu_of)
    out: dict[str, Any] = {"gamma": fit_gamma(pairs, fits), "pairs_fitted": [f"{a} -> {b}" for a, b in pairs],
                           "held_out_gpu": {}}
    pooled: list[tuple[Sample, dict[str, float]]] = []
    for gpu in sorted(set(gpu_of.values())):
        others = [(a, b) for a, b in pairs if gpu not in (gpu_of[a], gpu_of[b])]
        gamma = fit_gamma(others, fits)
        for dst in sorted(k for k in fits if gpu_of[k] == gpu):
            srcs = sorted(k for k in fits if stack_of[k] == stack_of[dst] and gpu_of[k] != gpu)
            if not srcs:
                continue
            held = []
            for src in srcs:
                fit, src_samples = fits[src]
                ref = src_samples[0]
                held += [(s, {t: transferred(fit, ref, s, gamma).predict(s, t) for t in TARGETS}) for s in fits[dst][1]]
            pooled += held
            out["held_out_gpu"][dst] = {"from": srcs, "gamma": gamma, "errors": _errors(held)}
    out["errors"] = _errors(pooled) if pooled else {}
    return out


# --------------------------------------------------------------------------- multi-GPU

#: Work per item (FLOPs) at which a multi-GPU factor equals its per-N constant: ln F = 35 (≈ 1.6 PFLOP).
MULTI_GPU_LOG_FLOPS_REF = 35.0


def multi_gpu_design(num_gpus: int, flops: float, counts: Sequence[int]) -> list[float]:
    """Row of the multi-GPU overhead law ln f = c_N + d·log2 N·(ln F − 35): one-hot of N, then the
    work term (small workloads split over more GPUs pay more)."""
    return [1.0 if num_gpus == n else 0.0 for n in counts] + [
        math.log2(num_gpus) * (math.log(flops) - MULTI_GPU_LOG_FLOPS_REF)]


def _multi_gpu(records: Sequence[Record], flops: Sequence[float]) -> dict[str, Any]:
    """Overhead of N-GPU sequence-parallel runs per GPU: f = E_N/E_1 (energy per item) and
    f = t_N·N/t_1 (GPU-seconds per item) against the 1-GPU run of the same model and batch, fitted
    as ln f = c_N + d·log2 N·(ln F − 35) with F the FLOPs per item (least squares in log space).
    Of several runs of one model, GPU, N and batch (each split of N into Ulysses × ring degrees the
    benchmark tried) the least-energy one counts: the split a user would pick. Errors leave one
    model out. ``flops[i]`` is the work per item of ``records[i]``."""
    single = {(r.model_id, r.gpu, r.precision, r.stack, r.batch_size): r for r in records if r.num_gpus == 1}
    best: dict[tuple, int] = {}
    for i, r in enumerate(records):
        key = (r.model_id, r.gpu, r.precision, r.stack, r.batch_size, r.num_gpus)
        if r.num_gpus > 1 and (key not in best or r.energy_j < records[best[key]].energy_j):
            best[key] = i
    pairs: dict[str, list] = defaultdict(list)
    for i in best.values():
        r = records[i]
        one = single.get((r.model_id, r.gpu, r.precision, r.stack, r.batch_size))
        if one is not None:
            pairs[r.gpu].append((r.model_id, r.num_gpus, flops[i], r.energy_j / one.energy_j,
                                 r.latency_s * r.num_gpus / one.latency_s))
    out = {}
    for g, rows in sorted(pairs.items()):
        labels = sorted({p[0] for p in rows})
        if len(labels) < MIN_MODELS:
            continue
        counts = sorted({p[1] for p in rows})
        entry: dict[str, Any] = {"models": labels, "n": len(rows), "num_gpus": counts}
        for j, target in ((3, "energy"), (4, "latency")):
            def fit(rs: Sequence[tuple]) -> np.ndarray:
                x = np.array([multi_gpu_design(p[1], p[2], counts) for p in rs])
                return np.linalg.lstsq(x, np.log([p[j] for p in rs]), rcond=None)[0]

            held = []
            for lab in labels:
                c = fit([p for p in rows if p[0] != lab])
                held += [(p[0], p[j], float(np.exp(np.array(multi_gpu_design(p[1], p[2], counts)) @ c)))
                         for p in rows if p[0] == lab]
            c = fit(rows)
            entry[target] = {"factor": {n: float(np.exp(c[k])) for k, n in enumerate(counts)},
                             "per_log2_gpus_per_log_flops": float(c[-1]), "errors": error_summary(held)}
        out[g] = entry
    return out


# --------------------------------------------------------------------------- the calibration document


def _range(values: Sequence[float]) -> list[float]:
    return [float(min(values)), float(max(values))]


def _fitted_range(samples: Sequence[Sample]) -> dict[str, list[float]]:
    shares = {op: [getattr(s, op) / s.flops for s in samples] for op in OP_CLASSES}
    return {"flops_per_item": _range([s.flops for s in samples]), "batch_size": _range([s.items for s in samples]),
            "calls_per_item": _range([s.calls for s in samples]),
            **{f"{op}_share": _range(v) for op, v in shares.items()},
            "elementwise_vs_flop_time": _range([s.elementwise_ratio for s in samples])}


def _baselines(samples: Sequence[Sample], kept: Sequence[str]) -> tuple[dict, dict, dict]:
    """The seed paper's loglog law (global) and the linear law (per calibration): coefficients and plain
    leave-one-model-out errors per calibration, for comparison."""
    loglog = {t: fit_loglog(samples, t) for t in TARGETS}
    linear = {cal: {t: fit_linear([s for s in samples if s.calibration == cal], t) for t in TARGETS} for cal in kept}
    errs: dict[str, dict] = {cal: {} for cal in kept}

    def loglog_fold(train: list[Sample]) -> dict:
        return {t: fit_loglog(train, t) for t in TARGETS}

    held_ll = _held_out(samples, loglog_fold, lambda c, s, t: predict_loglog(c[t], s, t))
    for cal in kept:
        own = [s for s in samples if s.calibration == cal]
        held_lin = _held_out(own, lambda train: {t: fit_linear(train, t) for t in TARGETS},
                             lambda c, s, t: predict_linear(c[t], s, t))
        errs[cal]["linear"] = _errors(held_lin)
        errs[cal]["loglog"] = _errors([(s, p) for s, p in held_ll if s.calibration == cal])
    return loglog, linear, errs


#: The denoiser kinds a stack runs (``stacks[name]["denoisers"]``): a transformer (DiT) or a UNet.
DENOISER_KINDS = ("transformer", "unet")


def calibrate(records: Sequence[Record], *, stacks: Mapping[str, Mapping[str, Any]] | None = None
              ) -> tuple[dict[str, Any], list[dict]]:
    """Coefficients, fitted ranges and errors of every calibration (GPU × precision × stack with single-GPU records
    of ≥ 3 models), the transfer exponent and its leave-one-GPU-out errors, the multi-GPU overhead; plus the
    held-out prediction of every record (for the measured-vs-predicted plot). ``stacks``: what each stack ran
    (``description``) and which denoisers it runs (``denoisers``: of :data:`DENOISER_KINDS`), the most preferred
    first (the default stack of a prediction is the first that runs its denoiser and was measured on its GPU); a
    stack of the records not named there follows, runs every denoiser, those with the most models first."""
    single = [r for r in records if r.num_gpus == 1]
    by_cal: dict[str, set] = defaultdict(set)
    for r in single:
        by_cal[r.calibration].add(r.model_id)
    kept = sorted(c for c, models in by_cal.items() if len(models) >= MIN_MODELS)
    if not kept:
        have = ", ".join(f"{c}: {len(v)}" for c, v in sorted(by_cal.items())) or "no single-GPU records"
        raise MeasurementError(f"too thin to fit: each calibration (GPU × precision × stack) needs single-GPU "
                               f"records of at least {MIN_MODELS} different models for leave-one-model-out "
                               f"validation ({have})")
    recs = [r for r in single if r.calibration in kept]
    samples, _ = samples_of(recs)
    meta = {r.calibration: r for r in recs}
    calibrations: dict[str, Any] = {}
    fits: dict[str, tuple[OpClassFit, list[Sample]]] = {}
    held_points: list[tuple[str, Sample, dict[str, float]]] = []
    loglog, linear, baseline_errors = _baselines(samples, kept)
    for cal in kept:
        own = [s for s in samples if s.calibration == cal]
        terms = choose_terms(own)
        fit = fit_opclass(own, terms)
        checks = validate_opclass(own, terms)
        fits[cal] = (fit, own)
        held_points += [("opclass", s, p) for s, p in checks["held_out"]]
        calibrations[cal] = {
            "gpu": meta[cal].gpu, "precision": meta[cal].precision, "stack": meta[cal].stack,
            "models": sorted(by_cal[cal]), "records": len(own), "fitted_range": _fitted_range(own),
            "opclass": {**fit.to_dict(), "errors": {"plain": checks["plain"], "nested": checks["nested"]}},
            "linear": {"coefficients": linear[cal], "errors": baseline_errors[cal]["linear"]},
            "loglog": {"errors": baseline_errors[cal]["loglog"]},
        }
    doc = {
        "stacks": _stacks(calibrations, stacks or {}),
        "calibrations": calibrations,
        "loglog": loglog,
        "transfer": _transfer(fits, {k: v["stack"] for k, v in calibrations.items()},
                              {k: v["gpu"] for k, v in calibrations.items()}),
        "multi_gpu": _multi_gpu(records, [s.flops for s in samples_of(records)[0]]),
        "left_out_calibrations": {c: sorted(v) for c, v in sorted(by_cal.items()) if c not in kept},
    }
    points = [{"label": s.label, "calibration": s.calibration, "law": law, "batch_size": s.items,
               "energy_j": s.energy, "latency_s": s.latency,
               "energy_j_predicted": p["energy"], "latency_s_predicted": p["latency"]}
              for law, s, p in held_points]
    return doc, points


def _stacks(calibrations: dict[str, Any], named: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    models: dict[str, int] = defaultdict(int)
    for c in calibrations.values():
        models[c["stack"]] += len(c["models"])
    out = {s: {"description": str(v["description"]), "denoisers": list(v["denoisers"])} for s, v in named.items()
           if s in models}
    for s in sorted((s for s in models if s not in out), key=lambda s: (-models[s], s)):
        out[s] = {"description": s, "denoisers": list(DENOISER_KINDS)}
    return out
