"""The energy and latency laws: design rows, predictions, and their fits (numpy only).

Every law predicts energy per item ``E`` (J) and latency per item ``t`` (s) of one calibration
(GPU × precision × software stack) from the per-item work of :mod:`flopcalc.energy_laws.features`.
With ``L``, ``A``, ``C`` the linear, attention and convolution FLOPs per item, ``P`` the GPU's
dense tensor peak at the precision (FLOP/s), ``W`` its TDP and ``n`` the denoiser calls per item
(steps ÷ items in the batch):

* ``opclass`` (op-class model with per-step overhead), non-negative coefficients:
  ``t = a_L·L/P + a_A·Ã/P + a_C·C/P + o_t·n + w_t·R/B + m_t·M/B`` and
  ``E = W·(e_L·L/P + e_A·Ã/P + e_C·C/P + o_E·n + w_E·R/B + m_E·M/B)``, with ``Ã`` the attention
  FLOPs at the head widths the FlashAttention kernels run (padded to a multiple of 32,
  :func:`flopcalc.energy_laws.features.padded_head_width`), ``R`` the weight bytes read per item
  (each denoiser call reads the denoiser's weights once for the whole batch, every other component
  once per batch), ``M`` the bytes of the elementwise ops outside attention kernels (norms and
  activations: elementwise estimate less the softmax, × bytes per element) and ``B`` the memory
  bandwidth. ``a`` are inverse efficiencies (1 = the datasheet peak), ``e`` fractions of TDP ×
  inverse efficiency, ``o`` seconds per call; the weight term (its coefficient far above 1: a
  per-call cost that grows with the model, not bandwidth alone) earns its place on the small fp16
  UNet workloads (ML.ENERGY v2); the elementwise term (its coefficient ≈ 9–17: the counted norms and
  activations stand in for all the activation traffic of the same width, uncounted adds, modulations
  and rotary embeddings included) is what tells a narrow model (HunyuanDiT, width 1408) from a wide
  one (FLUX.1, 3072) at equal FLOPs: per FLOP, narrow models move more activations.
* ``loglog`` (the seed paper's law, ../shared/seeds 002, eq. 3): ``log y = c₀ + α·log F + β·cfg +
  ρ·log(pixels) + δ_calibration`` with ``F = L + A + C``, fitted on all calibrations at once.
* ``linear``: ``E = k·F`` and ``t = k_t·F`` (the simplest baseline).

Fits minimise the squared relative error (rows scaled by 1/measured); ``loglog`` fits log y.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from flopcalc.energy_laws.nnls import nnls

LAWS = ("opclass", "loglog", "linear")
TARGETS = ("energy", "latency")
OPCLASS_TERMS = ("linear", "attention", "conv", "per_call", "weights", "elementwise")


@dataclass(frozen=True)
class Sample:
    """One record's numbers, as the laws read them."""

    label: str
    calibration: str
    linear: float
    attention: float
    conv: float
    calls: float
    cfg: bool
    pixels: float
    peak: float  # FLOP/s
    tdp: float  # W
    energy: float  # J per item (measured; 0 when predicting)
    latency: float  # s per item
    batch_size: int = 1
    weight_time: float = 0.0  # s: weight bytes read per item ÷ memory bandwidth
    attention_padded: float | None = None  # attention FLOPs at the kernels' padded head widths (None: unpadded)
    elementwise_time: float = 0.0  # s: bytes of the elementwise ops outside attention ÷ memory bandwidth

    @property
    def flops(self) -> float:
        return self.linear + self.attention + self.conv

    @property
    def elementwise_ratio(self) -> float:
        """Time of the elementwise traffic at the bandwidth ÷ time of the FLOPs at the peak."""
        return self.elementwise_time * self.peak / self.flops if self.flops else 0.0

    def measured(self, target: str) -> float:
        return self.energy if target == "energy" else self.latency


def opclass_row(s: Sample, target: str) -> np.ndarray:
    attention = s.attention if s.attention_padded is None else s.attention_padded
    row = np.array([s.linear / s.peak, attention / s.peak, s.conv / s.peak, s.calls, s.weight_time,
                    s.elementwise_time])
    return row * s.tdp if target == "energy" else row


def loglog_row(s: Sample, calibrations: Sequence[str]) -> np.ndarray:
    onehot = [1.0 if s.calibration == c else 0.0 for c in calibrations[1:]]
    return np.array([1.0, math.log(s.flops), 1.0 if s.cfg else 0.0, math.log(s.pixels), *onehot])


def fit_opclass(samples: Sequence[Sample], target: str) -> dict[str, float]:
    x = np.array([opclass_row(s, target) for s in samples])
    y = np.array([s.measured(target) for s in samples])
    coef = nnls(x / y[:, None], np.ones(len(y)))
    return {k: float(v) for k, v in zip(OPCLASS_TERMS, coef)}


def predict_opclass(coef: Mapping[str, float], s: Sample, target: str) -> float:
    return float(opclass_row(s, target) @ np.array([coef[k] for k in OPCLASS_TERMS]))


def fit_linear(samples: Sequence[Sample], target: str) -> dict[str, float]:
    r = np.array([s.flops / s.measured(target) for s in samples])
    return {"k": float(r.sum() / (r @ r))}


def predict_linear(coef: Mapping[str, float], s: Sample, target: str) -> float:
    return coef["k"] * s.flops


def fit_loglog(samples: Sequence[Sample], target: str) -> dict:
    cals = sorted({s.calibration for s in samples})
    x = np.array([loglog_row(s, cals) for s in samples])
    y = np.log([s.measured(target) for s in samples])
    coef = np.linalg.lstsq(x, y, rcond=None)[0]
    return {"intercept": float(coef[0]), "log_flops": float(coef[1]), "cfg": float(coef[2]),
            "log_pixels": float(coef[3]),
            "calibration": {c: (0.0 if i == 0 else float(coef[3 + i])) for i, c in enumerate(cals)}}


def predict_loglog(coef: Mapping, s: Sample, target: str) -> float:
    delta = coef["calibration"].get(s.calibration)
    if delta is None:
        raise KeyError(s.calibration)
    return math.exp(coef["intercept"] + coef["log_flops"] * math.log(s.flops) + coef["cfg"] * (1.0 if s.cfg else 0.0)
                    + coef["log_pixels"] * math.log(s.pixels) + delta)


FIT = {"opclass": fit_opclass, "linear": fit_linear, "loglog": fit_loglog}
PREDICT = {"opclass": predict_opclass, "linear": predict_linear, "loglog": predict_loglog}
PER_CALIBRATION = {"opclass": True, "linear": True, "loglog": False}


def fit_law(law: str, samples: Sequence[Sample]) -> dict:
    """Coefficients of ``law`` for both targets; per calibration unless the law is global."""
    if PER_CALIBRATION[law]:
        out: dict = {}
        for cal in sorted({s.calibration for s in samples}):
            own = [s for s in samples if s.calibration == cal]
            out[cal] = {t: FIT[law](own, t) for t in TARGETS}
        return out
    return {t: FIT[law](samples, t) for t in TARGETS}


def predict_law(law: str, coefs: Mapping, s: Sample, target: str) -> float:
    c = coefs[s.calibration][target] if PER_CALIBRATION[law] else coefs[target]
    return PREDICT[law](c, s, target)


def leave_one_model_out(law: str, samples: Sequence[Sample]) -> list[tuple[Sample, dict[str, float]]]:
    """Each model (label) held out of every fit in turn, all its batch sizes and GPUs at once;
    returns (sample, {target: prediction}) for every sample whose calibration keeps ≥ 2 other models."""
    out = []
    for label in sorted({s.label for s in samples}):
        train = [s for s in samples if s.label != label]
        test = [s for s in samples if s.label == label]
        keep = {cal for cal in {s.calibration for s in test}
                if len({t.label for t in train if t.calibration == cal}) >= 2}
        if not keep:
            continue
        coefs = fit_law(law, [s for s in train if s.calibration in keep or not PER_CALIBRATION[law]])
        for s in test:
            if s.calibration in keep:
                out.append((s, {t: predict_law(law, coefs, s, t) for t in TARGETS}))
    return out


#: Coverage of the printed intervals.
INTERVAL_COVERAGE = 0.9


def conformal_halfwidth(scores: Sequence[float], coverage: float = INTERVAL_COVERAGE) -> tuple[float, str]:
    """Split-conformal half-width from one score per held-out model (its largest |log(measured /
    predicted)|): the ⌈(n+1)·coverage⌉-th smallest of the n scores, which covers a new model with
    probability ≥ coverage if models are exchangeable. When that index exceeds n (n ≤ 9 at 90%) no
    finite quantile is earned: the largest score (the worst held-out model) is used instead.
    Returns (half-width, how it was chosen)."""
    ordered = sorted(scores)
    n = len(ordered)
    k = _conformal_rank(n, coverage)
    if k <= n:
        worst = " (the worst)" if k == n else ""
        return float(ordered[k - 1]), f"split-conformal over {n} held-out models: score {k} of {n}, ascending{worst}"
    need = next(m for m in range(1, 10_000) if _conformal_rank(m, coverage) <= m)
    return float(ordered[-1]), (f"worst of {n} held-out models (a {coverage:.0%} split-conformal quantile needs "
                                f"{need}; covers a new model only as often as the models are alike)")


def _conformal_rank(n: int, coverage: float) -> int:
    """⌈(n + 1)·coverage⌉ (a rounding guard keeps 10 × 0.9 at 9)."""
    return math.ceil((n + 1) * coverage - 1e-9)


def error_summary(rows: Iterable[tuple[str, float, float]]) -> dict[str, Any]:
    """From (model, measured, predicted) held-out rows: median / p90 / max absolute % error, the p90
    of |log(measured/predicted)| over records, and the interval half-width in log space
    (:func:`conformal_halfwidth` of each model's largest |log ratio|: records of one model are
    correlated, so the model, not the record, is the unit of exchange)."""
    rows = list(rows)
    if not rows:
        return {}
    models = [m for m, _, _ in rows]
    meas, pred = np.array([(a, b) for _, a, b in rows], dtype=float).T
    ape = np.abs(pred / meas - 1) * 100
    logr = np.abs(np.log(meas / pred))
    worst: dict[str, float] = {}
    for m, v in zip(models, logr):
        worst[m] = max(worst.get(m, 0.0), float(v))
    half, method = conformal_halfwidth([worst[m] for m in sorted(worst)])
    return {"n": int(meas.size), "models": len(worst), "median_pct": float(np.median(ape)),
            "p90_pct": float(np.percentile(ape, 90)), "max_pct": float(ape.max()),
            "log_ratio_p90": float(np.percentile(logr, 90)),
            "interval_log_halfwidth": half, "interval_method": method,
            "bias_pct": float((np.exp(np.median(np.log(pred / meas))) - 1) * 100)}
