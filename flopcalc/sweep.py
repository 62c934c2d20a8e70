"""Sweeps: a model's FLOP law compiled once to vectorised numpy, evaluated on a grid of
settings (the Cartesian product of the values given for H, W, S, B, L).

Values are float64 (relative error below 1e-15; ``estimate`` and ``symbolic`` give exact
integers). Every size in the grid is checked first: it must be accepted by the pipeline, and the
law must equal the exact estimate there (it does for sizes that divide the latent grid and each
downsampling of it); otherwise the sweep stops with one message naming the sizes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import sympy as sp

from flopcalc.errors import FlopcalcError
from flopcalc.symbolic import SymbolicReport

GRID_KEYS = ("H", "W", "S", "B", "L", "F")


def parse_values(text: str, name: str) -> list[int]:
    """``512,768,1024`` or ``start:stop:step`` (inclusive stop) or a mix: ``256,512:1024:128``."""
    out: list[int] = []
    for part in text.split(","):
        m = re.fullmatch(r"\s*(\d+)\s*(?::\s*(\d+)\s*(?::\s*(\d+)\s*)?)?", part)
        if not m:
            raise FlopcalcError(f"--{name}: cannot read {part!r}; give values like 512,768 or ranges like 256:2048:64")
        start = int(m.group(1))
        if m.group(2) is None:
            out.append(start)
            continue
        stop, step = int(m.group(2)), int(m.group(3) or 1)
        if step <= 0 or stop < start:
            raise FlopcalcError(f"--{name}: the range {part!r} is empty")
        out.extend(range(start, stop + 1, step))
    if not out or min(out) <= 0:
        raise FlopcalcError(f"--{name}: values must be positive integers")
    return sorted(set(out))


@dataclass(frozen=True)
class Sweep:
    """The grid (one array per symbol) and the FLOPs of the total and of each component."""

    grid: dict[str, np.ndarray]
    total: np.ndarray
    components: dict[str, np.ndarray]

    def __len__(self) -> int:
        return int(self.total.size)


def compile_law(report: SymbolicReport) -> tuple[list[str], Any, dict[str, Any]]:
    """numpy functions of the symbols that occur: (symbol names, total(...), {component: f(...)})."""
    names = list(report.symbols)
    syms = [sp.Symbol(n, positive=True, integer=True) for n in names]
    total = sp.lambdify(syms, report.flops, modules="numpy")
    parts = {f"{c.component}{'.' + c.call if c.call != 'forward' else ''}": sp.lambdify(syms, c.flops, modules="numpy")
             for c in report.components}
    return names, total, parts


def run_sweep(report: SymbolicReport, values: dict[str, Sequence[int]], *, verify: Any = None) -> Sweep:
    """Evaluate the law over the product of ``values`` (symbols not given keep their
    representative value). ``verify(H=, W=)`` → exact FLOPs checks each distinct size."""
    rep = report.representative()
    axes = {k: np.asarray(values.get(k, [rep[k]]), dtype=np.float64) for k in report.symbols}
    unused = [k for k in values if k not in report.symbols]
    if unused:
        raise FlopcalcError(f"this model's law does not depend on {', '.join(unused)}")
    if verify is not None:
        _verify_sizes(report, values, rep, verify)
    mesh = np.meshgrid(*axes.values(), indexing="ij")
    grid = {k: m.ravel() for k, m in zip(axes, mesh)}
    names, total_fn, part_fns = compile_law(report)
    args = [grid[n] for n in names]
    total = np.broadcast_to(np.asarray(total_fn(*args), dtype=np.float64), grid[names[0]].shape)
    parts = {k: np.broadcast_to(np.asarray(f(*args), dtype=np.float64), total.shape) for k, f in part_fns.items()}
    return Sweep(grid, total, parts)


def _verify_sizes(report: SymbolicReport, values: dict[str, Sequence[int]], rep: dict[str, int], verify: Any) -> None:
    bad = []
    for key in ("H", "W"):
        for v in values.get(key, []):
            point = {**rep, key: v}
            try:
                exact = verify(height=point.get("H"), width=point.get("W"))
            except FlopcalcError as exc:
                raise FlopcalcError(f"{key}={v}: {exc}") from None
            if exact != report.at(**point):
                bad.append(f"{key}={v}")
    if bad:
        raise FlopcalcError(
            "the law is exact only for sizes that divide every downsampling of the latent grid; not at "
            + ", ".join(bad) + ": use multiples of a larger power of two, or `flopcalc estimate` for those sizes"
        )


def rows(sweep: Sweep) -> list[dict[str, float]]:
    keys = list(sweep.grid)
    out = []
    for i in range(len(sweep)):
        row = {k: int(sweep.grid[k][i]) for k in keys}
        row["flops"] = float(sweep.total[i])
        row.update({f"flops_{k}": float(v[i]) for k, v in sweep.components.items()})
        out.append(row)
    return out


def product_size(values: dict[str, Sequence[int]]) -> int:
    return int(np.prod([len(v) for v in values.values()])) if values else 1




def write_columns(sweep: Sweep, out: Any, sep: str = ",") -> None:
    """The sweep as delimited text: the grid as integers, FLOPs in exponent notation (fast:
    one ``numpy.savetxt`` call)."""
    names = list(sweep.grid) + ["flops"] + [f"flops_{k}" for k in sweep.components]
    data = np.column_stack([*sweep.grid.values(), sweep.total, *sweep.components.values()])
    fmt = ["%d"] * len(sweep.grid) + ["%.6e"] * (1 + len(sweep.components))
    np.savetxt(out, data, fmt=fmt, delimiter=sep, header=sep.join(names), comments="")
