"""Non-negative least squares, min ‖A·x − b‖₂ subject to x ≥ 0 (Lawson & Hanson 1974, ch. 23).

A few lines of numpy so that the core dependencies stay numpy, sympy, pyyaml, huggingface_hub;
the problems solved here have at most a handful of columns.
"""

from __future__ import annotations

import numpy as np


def nnls(a: np.ndarray, b: np.ndarray, *, max_iter: int | None = None) -> np.ndarray:
    """The x ≥ 0 minimising ‖a·x − b‖₂ (active-set method; deterministic for given inputs)."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    m, n = a.shape
    x = np.zeros(n)
    passive = np.zeros(n, dtype=bool)
    tol = 10 * np.finfo(float).eps * np.linalg.norm(a, 1) * max(m, n)
    for _ in range(max_iter or 3 * n + 10):
        w = a.T @ (b - a @ x)
        if passive.all() or w[~passive].max(initial=-np.inf) <= tol:
            break
        j = int(np.argmax(np.where(passive, -np.inf, w)))
        passive[j] = True
        while True:
            z = np.zeros(n)
            z[passive] = np.linalg.lstsq(a[:, passive], b, rcond=None)[0]
            if (z[passive] > 0).all():
                x = z
                break
            neg = passive & (z <= 0)
            alpha = np.min(x[neg] / (x[neg] - z[neg]))
            x = x + alpha * (z - x)
            passive &= x > tol
            x[~passive] = 0.0
    return x
