"""Calibration: measured records → coefficients of every law, with leave-one-model-out errors.

Used by ``validation/energy/fit_energy.py`` (the shipped coefficients) and ``flopcalc energy-fit``
(a user's own measurements). The output is a plain dict written as YAML; the same records give
the same bytes (no randomness, sorted keys, fixed iteration order).
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any, Sequence

import numpy as np

from flopcalc.energy_laws.features import OP_CLASSES, Work, work_of
from flopcalc.energy_laws.laws import (LAWS, PER_CALIBRATION, TARGETS, Sample, error_summary, fit_law,
                                  leave_one_model_out, predict_law)
from flopcalc.energy_laws.records import MeasurementError, Record, estimate_record

MIN_MODELS = 3  # a calibration needs this many models: leave-one-model-out then fits on ≥ 2
BYTES_PER_PARAMETER = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1}  # and per activation element


def sample_of(work: Work, gpu_key: str, precision: str, calibration: str, label: str = "",
              energy: float = 0.0, latency: float = 0.0) -> Sample:
    from flopcalc.hardware.gpus import gpu

    g = gpu(gpu_key)
    peak = g.peak_flops.get(precision) or g.peak_flops["bf16"]
    per_byte = BYTES_PER_PARAMETER[precision] / g.memory_bandwidth
    return Sample(label, calibration, work.total("linear"), work.total("attention"), work.total("conv"), work.calls,
                  work.cfg, float(work.pixels), peak, g.tdp_w, energy, latency, work.items,
                  work.total("weight_reads") * per_byte, work.total("attention_padded"),
                  work.total("unfused_elementwise") * per_byte)


def samples_of(records: Sequence[Record]) -> tuple[list[Sample], dict[int, Work]]:
    """One :class:`Sample` per record (``estimate`` at exactly the record's settings)."""
    cache: dict[tuple, Work] = {}
    out, works = [], {}
    for i, r in enumerate(records):
        key = (r.model, r.batch_size, tuple(sorted(r.settings.items())))
        if key not in cache:
            cache[key] = work_of(estimate_record(r))
        works[i] = cache[key]
        out.append(sample_of(cache[key], r.gpu, r.precision, r.calibration, r.label, r.energy_j, r.latency_s))
    return out, works


def _range(values: Sequence[float]) -> list[float]:
    return [float(min(values)), float(max(values))]


def _fitted_range(samples: Sequence[Sample]) -> dict[str, list[float]]:
    shares = {op: [getattr(s, op) / s.flops for s in samples] for op in OP_CLASSES}
    return {"flops_per_item": _range([s.flops for s in samples]), "batch_size": _range([s.batch_size for s in samples]),
            "calls_per_item": _range([s.calls for s in samples]),
            **{f"{op}_share": _range(v) for op, v in shares.items()},
            "elementwise_vs_flop_time": _range([s.elementwise_ratio for s in samples])}


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
    single = {(r.label, r.gpu, r.precision, r.stack, r.batch_size): r for r in records if r.num_gpus == 1}
    best: dict[tuple, int] = {}
    for i, r in enumerate(records):
        key = (r.label, r.gpu, r.precision, r.stack, r.batch_size, r.num_gpus)
        if r.num_gpus > 1 and (key not in best or r.energy_j < records[best[key]].energy_j):
            best[key] = i
    pairs: dict[str, list] = defaultdict(list)
    for i in best.values():
        r = records[i]
        one = single.get((r.label, r.gpu, r.precision, r.stack, r.batch_size))
        if one is not None:
            pairs[r.gpu].append((r.label, r.num_gpus, flops[i], r.energy_j / one.energy_j,
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


def _gpu_ratio(records: Sequence[Record], src: str, dst: str, target: str) -> float:
    """log of the datasheet ratio a law scales by from GPU ``src`` to ``dst``: dense peak for
    latency, peak per watt of TDP for energy (src over dst)."""
    from flopcalc.hardware.gpus import gpu

    prec = next(r.precision for r in records if r.gpu == src)
    a, b = gpu(src), gpu(dst)
    pa, pb = a.peak_flops[prec], b.peak_flops.get(prec, b.peak_flops["bf16"])
    return math.log(pa / pb) if target == "latency" else math.log((pa / a.tdp_w) / (pb / b.tdp_w))


def _transfer(samples: Sequence[Sample], coefs: dict, records: Sequence[Record], law_of: dict) -> dict[str, Any]:
    """Datasheet scaling, calibrated and measured. Between GPUs of one precision and stack, the
    measured ratio of the same model and batch follows the datasheet ratio to a power:
    t_dst/t_src = (P_src/P_dst)^β_t and E_dst/E_src = ((P/W)_src/(P/W)_dst)^β_E (β = 1 is plain
    datasheet scaling). β is fitted through the origin in log space on every matched pair; its
    error holds one GPU pair out: the source calibration's law at its own GPU, scaled with the β of
    the other pairs, against the destination's measurements."""
    meta = {r.calibration: r for r in records}
    by_key = {(s.label, s.batch_size, s.calibration): s for s in samples}
    pairs: dict[tuple[str, str], list[tuple[Sample, Sample]]] = {}
    for src in sorted(law_of):
        for dst in sorted(law_of):
            if src != dst and (meta[src].precision, meta[src].stack) == (meta[dst].precision, meta[dst].stack):
                matched = [(s, by_key[(s.label, s.batch_size, dst)]) for s in samples
                           if s.calibration == src and (s.label, s.batch_size, dst) in by_key]
                if matched:
                    pairs[(src, dst)] = matched
    if not pairs:
        return {}

    def beta(keys: Sequence[tuple[str, str]], target: str) -> float:
        xy = xx = 0.0
        for k in keys:
            x = _gpu_ratio(records, meta[k[0]].gpu, meta[k[1]].gpu, target)
            for a, b in pairs[k]:
                xy += x * math.log(b.measured(target) / a.measured(target))
                xx += x * x
        return xy / xx

    out: dict[str, Any] = {"exponent": {t: beta(list(pairs), t) for t in TARGETS}, "pairs": {}}
    held: dict[str, list] = {t: [] for t in TARGETS}
    plain: dict[str, list] = {t: [] for t in TARGETS}
    for src, dst in pairs:
        others = [k for k in pairs if set(k) != {src, dst}]
        errs = {}
        for t in TARGETS:
            b = beta(others, t) if others else 1.0
            x = _gpu_ratio(records, meta[src].gpu, meta[dst].gpu, t)
            law = law_of[src]
            own = {src: coefs[law][src]} if PER_CALIBRATION[law] else coefs[law]
            at_src = [(s.label, d.measured(t), predict_law(law, own, s, t)) for s, d in pairs[(src, dst)]]
            rows = [(lab, m, p * math.exp(b * x)) for lab, m, p in at_src]
            held[t] += rows
            plain[t] += [(lab, m, p * math.exp(x)) for lab, m, p in at_src]
            errs[t] = error_summary(rows)
            errs[t]["exponent_used"] = b
        out["pairs"][f"{src} -> {dst}"] = errs
    out["errors"] = {t: error_summary(held[t]) for t in TARGETS}
    out["plain_datasheet_errors"] = {t: error_summary(plain[t]) for t in TARGETS}
    return out


def calibrate(records: Sequence[Record], *, default_law: str | None = None) -> tuple[dict[str, Any], list[dict]]:
    """Coefficients, fitted ranges and leave-one-model-out errors of every law; plus the held-out
    prediction of every record (for the measured-vs-predicted plot)."""
    single = [r for r in records if r.num_gpus == 1]
    by_cal: dict[str, set] = defaultdict(set)
    for r in single:
        by_cal[r.calibration].add(r.label)
    kept = sorted(c for c, labels in by_cal.items() if len(labels) >= MIN_MODELS)
    if not kept:
        have = ", ".join(f"{c}: {len(v)}" for c, v in sorted(by_cal.items())) or "no single-GPU records"
        raise MeasurementError(f"too thin to fit: each calibration (GPU × precision × stack) needs single-GPU "
                               f"records of at least {MIN_MODELS} different models for leave-one-model-out "
                               f"validation ({have})")
    recs = [r for r in single if r.calibration in kept]
    samples, _ = samples_of(recs)
    coefs = {law: fit_law(law, samples) for law in LAWS}
    held = {law: leave_one_model_out(law, samples) for law in LAWS}
    errors: dict[str, Any] = {}
    for cal in kept:
        errors[cal] = {law: {t: error_summary((s.label, s.measured(t), p[t]) for s, p in held[law]
                                              if s.calibration == cal)
                             for t in TARGETS} for law in LAWS}
    if default_law is None:
        score = {law: float(np.median([errors[c][law]["energy"]["median_pct"] for c in kept])) for law in LAWS}
        default_law = min(LAWS, key=lambda law: (score[law], LAWS.index(law)))
    meta = {r.calibration: r for r in recs}
    calibrations = {}
    for cal in kept:
        own = [s for s in samples if s.calibration == cal]
        cal_score = {law: errors[cal][law]["energy"]["median_pct"] + errors[cal][law]["latency"]["median_pct"]
                     for law in LAWS}
        calibrations[cal] = {
            "default_law": min(LAWS, key=lambda law: (cal_score[law], LAWS.index(law))),
            "gpu": meta[cal].gpu, "precision": meta[cal].precision, "stack": meta[cal].stack,
            "models": sorted(by_cal[cal]), "records": len(own), "fitted_range": _fitted_range(own),
            "laws": {law: {"coefficients": coefs[law][cal], "errors": errors[cal][law]}
                     for law in LAWS if PER_CALIBRATION[law]} | {
                "loglog": {"errors": errors[cal]["loglog"]}},
        }
    doc = {
        "default_law": default_law,
        "calibrations": calibrations,
        "loglog": coefs["loglog"],
        "multi_gpu": _multi_gpu(records, [s.flops for s in samples_of(records)[0]]),
        "datasheet_transfer": _transfer(samples, coefs, recs, {c: v["default_law"] for c, v in calibrations.items()}),
        "left_out_calibrations": {c: sorted(v) for c, v in sorted(by_cal.items()) if c not in kept},
    }
    points = [{"label": s.label, "calibration": s.calibration, "law": law, "batch_size": s.batch_size,
               "energy_j": s.energy, "latency_s": s.latency,
               "energy_j_predicted": p["energy"], "latency_s_predicted": p["latency"]}
              for law in LAWS for s, p in held[law]]
    return doc, points
