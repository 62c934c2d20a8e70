r"""The energy and latency laws: a physical backbone with fitted efficiencies (numpy only).

Every law predicts, for one calibration (GPU × precision × software stack), the latency per item ``t`` (s) and
the energy per item ``E`` (J) from the per-item work of :mod:`flopcalc.energy_laws.features`.

**opclass** (the default), time as a sum of op-class times at the GPU's dense peaks and bandwidth:

.. math:: t = \sum_{c \in \{L, A, C\}} a_c \frac{W_c}{P_c} + o\,n + w\,\frac{R}{B} + m\,\frac{M}{B}
            + r\,\frac{1}{k}\sum_c \frac{W_c}{P_c}

(plus ``ℓ·K``, ``K`` the leaf modules run per item: a per-kernel launch cost) with :math:`W_c` the linear, attention (at the head widths FlashAttention runs, ``Ã``, or as counted, ``A``) and
convolution FLOPs per item, :math:`P_c` the dense peak of the dtype each runs in
(:func:`flopcalc.energy_laws.backbone.peaks`), ``n`` denoiser calls per item, ``R`` and ``M`` the weight bytes
read and the bytes of the elementwise ops outside attention kernels per item, ``B`` the memory bandwidth, ``k``
the items per batch. The compute coefficients are inverse efficiencies, :math:`a_c = 1/\eta_c \ge 1`
(:math:`\eta_c \in (0, 1]`): no term lets a FLOP run faster than the peak, so every prediction keeps
``t ≥ Σ W_c / P_c``. ``o`` (seconds per denoiser call), ``ℓ`` (seconds per module run), ``w``, ``m`` and ``r``
(the small-batch inefficiency,
amortised over the batch) are ≥ 0, and each may be left out: which of them a calibration keeps is chosen by
cross-validation (:mod:`flopcalc.energy_laws.fit`).

Power is a mix of the time's parts, never above TDP nor below idle:

.. math:: \bar P = P_\text{idle} + (P_\text{TDP} - P_\text{idle}) \sum_g \psi_g \frac{t_g}{t},
          \qquad \psi_g \in [0, 1], \qquad E = \bar P\, t

over three groups ``g``: compute (the ``a_c`` terms), launch (the per-call and small-batch terms: the GPU waiting
on the host) and memory (weights and elementwise traffic).

**loglog** (the seed paper's law, ../shared/seeds 002, eq. 3: ``log y = c₀ + α·log F + β·cfg + ρ·log(pixels) +
δ_calibration``) and **linear** (``y = k·F``) stay as baselines; their predictions are held to the same bounds by
:func:`flopcalc.energy_laws.backbone.clamp`.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from flopcalc.energy_laws.nnls import nnls

LAWS = ("opclass", "loglog", "linear")
TARGETS = ("energy", "latency")
COMPUTE = ("linear", "attention", "conv")
#: Terms a calibration may keep beside the compute terms, in design-column order.
OPTIONAL_TERMS = ("per_call", "launches", "weights", "elementwise", "small_batch")
OPCLASS_TERMS = COMPUTE + OPTIONAL_TERMS
POWER_GROUPS = ("compute", "launch", "memory")
GROUP_OF = {"linear": "compute", "attention": "compute", "conv": "compute", "per_call": "launch",
            "launches": "launch", "small_batch": "launch", "weights": "memory", "elementwise": "memory"}


@dataclass(frozen=True)
class Sample:
    """One record's numbers, as the laws read them: work per item, the GPU, and (fitting) what was measured."""

    label: str  # the model (records of one model are held out together)
    calibration: str
    linear: float  # FLOPs per item
    attention: float
    attention_padded: float  # attention FLOPs at FlashAttention's padded head widths
    conv: float
    calls: float  # denoiser calls per item
    launches: float  # leaf modules run per item (kernel launches)
    weight_bytes: float  # weight bytes read per item
    elementwise_bytes: float  # bytes of the elementwise ops outside attention kernels per item
    items: int  # per batch
    cfg: bool
    pixels: float
    peak_linear: float  # FLOP/s at the dtype each op class runs in
    peak_attention: float
    peak_conv: float
    bandwidth: float  # bytes/s
    tdp: float  # W
    idle: float  # W
    energy: float = 0.0  # J per item (measured; 0 when predicting)
    latency: float = 0.0  # s per item
    peak_16bit: float = 0.0  # FLOP/s of the GPU's dense bf16 (or fp16) tensor peak, whatever the run's precision

    @property
    def flops(self) -> float:
        return self.linear + self.attention + self.conv

    def compute_time(self, padded: bool = True) -> dict[str, float]:
        """Each op class's FLOPs at its dense peak (s): the backbone's bound, term by term."""
        return {"linear": self.linear / self.peak_linear,
                "attention": (self.attention_padded if padded else self.attention) / self.peak_attention,
                "conv": self.conv / self.peak_conv}

    @property
    def min_latency(self) -> float:
        return sum(self.compute_time(padded=False).values())

    @property
    def power(self) -> float:
        return self.energy / self.latency

    @property
    def elementwise_ratio(self) -> float:
        """Time of the elementwise traffic at the bandwidth ÷ time of the FLOPs at the peak."""
        return (self.elementwise_bytes / self.bandwidth) / self.min_latency if self.flops else 0.0

    def measured(self, target: str) -> float:
        return self.energy if target == "energy" else self.latency


# --------------------------------------------------------------------------- the op-class law


@dataclass(frozen=True)
class Terms:
    """Which optional terms a fit keeps, and whether attention is counted at padded head widths."""

    optional: tuple[str, ...] = OPTIONAL_TERMS
    padded: bool = True

    @property
    def name(self) -> str:
        return " + ".join(("L", "Ã" if self.padded else "A", "C", *self.optional))

    def to_dict(self) -> dict[str, Any]:
        return {"optional": list(self.optional), "padded_attention": self.padded}


#: Every term set cross-validation chooses from.
TERM_SETS = tuple(Terms(tuple(t for t, on in zip(OPTIONAL_TERMS, mask) if on), padded)
                  for padded in (True, False) for mask in itertools.product((True, False), repeat=len(OPTIONAL_TERMS)))


def columns(s: Sample, terms: Terms) -> dict[str, float]:
    """The time design of ``s``: seconds per unit coefficient of each term (compute at the peak, per call, bytes at
    the bandwidth, compute amortised over the batch); terms not kept are 0."""
    compute = s.compute_time(terms.padded)
    cols = dict(compute)
    cols.update(per_call=s.calls, launches=s.launches, weights=s.weight_bytes / s.bandwidth,
                elementwise=s.elementwise_bytes / s.bandwidth, small_batch=sum(compute.values()) / s.items)
    for t in OPTIONAL_TERMS:
        if t not in terms.optional:
            cols[t] = 0.0
    return cols


@dataclass(frozen=True)
class OpClassFit:
    """The fitted op-class law of one calibration: time coefficients (compute ≥ 1, others ≥ 0) and power fractions
    per group (in [0, 1])."""

    terms: Terms
    time: Mapping[str, float]
    power: Mapping[str, float]

    def time_parts(self, s: Sample) -> dict[str, float]:
        cols = columns(s, self.terms)
        return {k: self.time[k] * cols[k] for k in OPCLASS_TERMS}

    def latency(self, s: Sample) -> float:
        return sum(self.time_parts(s).values())

    def mean_power(self, s: Sample, parts: Mapping[str, float] | None = None) -> float:
        parts = self.time_parts(s) if parts is None else parts
        total = sum(parts.values())
        share = {g: sum(v for k, v in parts.items() if GROUP_OF[k] == g) / total for g in POWER_GROUPS}
        return s.idle + (s.tdp - s.idle) * sum(self.power[g] * share[g] for g in POWER_GROUPS)

    def predict(self, s: Sample, target: str) -> float:
        t = self.latency(s)
        return t if target == "latency" else self.mean_power(s) * t

    def to_dict(self) -> dict[str, Any]:
        return {"terms": self.terms.to_dict(), "time": dict(self.time), "power": dict(self.power)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> OpClassFit:
        terms = Terms(tuple(d["terms"]["optional"]), bool(d["terms"]["padded_attention"]))
        return cls(terms, {k: float(d["time"][k]) for k in OPCLASS_TERMS},
                   {g: float(d["power"][g]) for g in POWER_GROUPS})


@lru_cache(maxsize=65536)
def _design_row(s: Sample, padded: bool) -> np.ndarray:
    """Every term's column of ``s`` (the optional ones kept or not), in :data:`OPCLASS_TERMS` order."""
    cols = columns(s, Terms(OPTIONAL_TERMS, padded))
    return np.array([cols[k] for k in OPCLASS_TERMS])


def _design(samples: Sequence[Sample], terms: Terms) -> np.ndarray:
    x = np.array([_design_row(s, terms.padded) for s in samples])
    for i, k in enumerate(OPCLASS_TERMS):
        if k not in COMPUTE and k not in terms.optional:
            x[:, i] = 0.0
    return x


_COMPUTE_IDX = [OPCLASS_TERMS.index(k) for k in COMPUTE]
_GROUP_IDX = {g: [i for i, k in enumerate(OPCLASS_TERMS) if GROUP_OF[k] == g] for g in POWER_GROUPS}


def fit_time(samples: Sequence[Sample], terms: Terms) -> dict[str, float]:
    """Time coefficients minimising the squared relative error, compute ones ≥ 1 and the others ≥ 0 (non-negative
    least squares on the time left after every FLOP at its peak)."""
    return dict(zip(OPCLASS_TERMS, _fit_time(_design(samples, terms), np.array([s.latency for s in samples]), terms)))


def _fit_time(x: np.ndarray, y: np.ndarray, terms: Terms) -> list[float]:
    base = x[:, _COMPUTE_IDX].sum(axis=1)
    keep = [i for i, k in enumerate(OPCLASS_TERMS) if k in COMPUTE or k in terms.optional]
    extra = nnls(x[:, keep] / y[:, None], (y - base) / y)
    coef = [0.0] * len(OPCLASS_TERMS)
    for i, v in zip(keep, extra):
        coef[i] = float(v) + (1.0 if OPCLASS_TERMS[i] in COMPUTE else 0.0)
    return coef


def fit_power(samples: Sequence[Sample], terms: Terms, time: Mapping[str, float]) -> dict[str, float]:
    """Power fractions ψ ∈ [0, 1] per group minimising the squared relative error of the mean power, the time split
    into groups as the fitted time law splits it."""
    return _fit_power(_design(samples, terms), np.array([[s.power, s.idle, s.tdp] for s in samples]),
                      np.array([time[k] for k in OPCLASS_TERMS]))


def _fit_power(x: np.ndarray, pw: np.ndarray, coef: np.ndarray) -> dict[str, float]:
    parts = x * coef
    share = np.stack([parts[:, idx].sum(axis=1) for idx in _GROUP_IDX.values()], axis=1) / parts.sum(axis=1)[:, None]
    power, idle, tdp = pw.T
    a = share * ((tdp - idle) / power)[:, None]
    b = (power - idle) / power
    return dict(zip(POWER_GROUPS, box_least_squares(a, b)))


def box_least_squares(x: np.ndarray, y: np.ndarray, lo: float = 0.0, hi: float = 1.0) -> list[float]:
    """min ‖x·v − y‖ with every v in [lo, hi]: the unconstrained optimum where it lies in the box, else every
    assignment of each variable to its lower bound, its upper bound or free is tried (3^k small systems on the
    normal equations; k is 3 here) and the best feasible one kept."""
    k = x.shape[1]
    g, r, yy = x.T @ x, x.T @ y, float(y @ y)

    def solve(idx: list[int], rhs: np.ndarray) -> np.ndarray | None:
        try:
            return np.linalg.solve(g[np.ix_(idx, idx)], rhs)
        except np.linalg.LinAlgError:
            return None

    free = solve(list(range(k)), r)
    if free is not None and np.all(free >= lo) and np.all(free <= hi):
        return [float(v) for v in free]
    best, best_err = np.full(k, lo), math.inf
    for states in itertools.product((0, 1, 2), repeat=k):
        v = np.array([lo if s == 0 else hi if s == 1 else 0.0 for s in states])
        idx = [i for i, s in enumerate(states) if s == 2]
        if idx:
            sol = solve(idx, r[idx] - g[np.ix_(idx, [i for i in range(k) if i not in idx])]
                        @ v[[i for i in range(k) if i not in idx]])
            if sol is None or np.any(sol < lo - 1e-12) or np.any(sol > hi + 1e-12):
                continue
            v[idx] = sol
        err = float(v @ g @ v - 2 * v @ r + yy)
        if err < best_err - 1e-15:
            best, best_err = v, err
    return [float(min(max(v, lo), hi)) for v in best]


def fit_opclass(samples: Sequence[Sample], terms: Terms) -> OpClassFit:
    x = _design(samples, terms)
    coef = _fit_time(x, np.array([s.latency for s in samples]), terms)
    power = _fit_power(x, np.array([[s.power, s.idle, s.tdp] for s in samples]), np.array(coef))
    return OpClassFit(terms, dict(zip(OPCLASS_TERMS, coef)), power)


# --------------------------------------------------------------------------- the baseline laws


def loglog_row(s: Sample, calibrations: Sequence[str]) -> np.ndarray:
    onehot = [1.0 if s.calibration == c else 0.0 for c in calibrations[1:]]
    return np.array([1.0, math.log(s.flops), 1.0 if s.cfg else 0.0, math.log(s.pixels), *onehot])


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


def fit_linear(samples: Sequence[Sample], target: str) -> dict[str, float]:
    r = np.array([s.flops / s.measured(target) for s in samples])
    return {"k": float(r.sum() / (r @ r))}


def predict_linear(coef: Mapping[str, float], s: Sample, target: str) -> float:
    return coef["k"] * s.flops


# --------------------------------------------------------------------------- errors and intervals

#: Coverage of the printed intervals.
INTERVAL_COVERAGE = 0.9


def conformal_halfwidth(scores: Sequence[float], coverage: float = INTERVAL_COVERAGE) -> tuple[float, str]:
    """Split-conformal half-width from one score per held-out model (its largest |log(measured /
    predicted)|): the ⌈(n+1)·coverage⌉-th smallest of the n scores, which covers a new model with
    probability ≥ coverage if models are exchangeable. When that index exceeds n (n ≤ 8 at 90%) no
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
