"""Sweeps: a model's FLOP law compiled once to vectorised numpy, evaluated on a grid of
settings (the Cartesian product of the values given for H, W, S, B, L).

Values are exact integers, equal to ``estimate``'s (the law is evaluated in integers, vectorised;
plots use a float64 version). Every size in the grid is checked first: it must be accepted by the
pipeline, and the law must equal the exact estimate there (it does for sizes that divide the latent grid and each
downsampling of it); otherwise the sweep stops with one message naming the sizes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import sympy as sp

from flopcalc.engine.errors import FlopcalcError
from flopcalc.flops.symbolic import SymbolicReport

GRID_KEYS = ("H", "W", "S", "B", "L", "F")


#: The largest value a sweep or plot takes (far beyond any real size, step count or batch).
MAX_VALUE = 10**9


def parse_values(text: str, name: str, *, max_count: int | None = None) -> list[int]:
    """``512,768,1024`` or ``start:stop:step`` (inclusive stop) or a mix: ``256,512:1024:128``.
    More than ``max_count`` values are refused before any list is built."""
    from flopcalc.render.output import check_budget

    parts: list[range] = []
    for part in text.split(","):
        m = re.fullmatch(r"\s*(\d+)\s*(?::\s*(\d+)\s*(?::\s*(\d+)\s*)?)?", part)
        if not m:
            raise FlopcalcError(f"--{name}: cannot read {part!r}; give values like 512,768 or ranges like 256:2048:64")
        start = int(m.group(1))
        stop, step = (start, 1) if m.group(2) is None else (int(m.group(2)), int(m.group(3) or 1))
        if step <= 0 or stop < start:
            raise FlopcalcError(f"--{name}: the range {part!r} is empty")
        if start <= 0:
            raise FlopcalcError(f"--{name}: values must be positive integers, got {part.strip()!r}")
        if stop > MAX_VALUE:
            raise FlopcalcError(f"--{name}: {stop:,} is larger than any real setting (at most {MAX_VALUE:,})")
        parts.append(range(start, stop + 1, step))
    if max_count is not None:
        check_budget(sum(len(r) for r in parts), max_count, f"--{name} {text.strip()}", "--max-points", "values")
    return sorted({v for r in parts for v in r})


@dataclass(frozen=True)
class Sweep:
    """The grid (one integer array per symbol) and the exact FLOPs (integer arrays: int64, or
    Python ints where values outgrow it) of the total and of each component."""

    grid: dict[str, np.ndarray]
    total: np.ndarray
    components: dict[str, np.ndarray]

    def __len__(self) -> int:
        return int(self.total.size)


_INT64_SAFE = 2.0**61  # magnitudes int64 holds with room for the float estimate's error


class _IntegerLaw:
    """An integer-valued law evaluated exactly on integer arrays.

    The law is a polynomial with rational coefficients in the symbols and in a few exact integer
    functions of them (``floor``, ``ceiling``, ``Min``, ``Max``: the chunked video decodes). Each such
    function is evaluated first (recursively, as an integer), then the polynomial times the common
    denominator ``D`` of its coefficients, in integers, and floor-divided by ``D``. Integers are
    int64 when a float64 pass shows every value stays far below 2⁶³ (+, −, × are exact modulo 2⁶⁴,
    so the result is exact when it fits), else Python ints in object arrays (exact, slower).
    """

    def __init__(self, syms: list[Any], expr: Any):
        expr = sp.expand(expr)
        self.helpers: list[tuple[str, list[_IntegerLaw], Any]] = []  # (kind, argument laws, argument scales)
        dummies = []
        for atom in _outermost(expr):
            args = [_IntegerLaw(syms, a) for a in atom.args]
            dummy = sp.Dummy(f"h{len(dummies)}")
            kind = type(atom).__name__
            if kind in ("floor", "ceiling"):
                scale = 1
            else:  # Min / Max: every argument on the common scale
                scale = int(sp.ilcm(1, *[law.den for law in args]))
            self.helpers.append((kind, args, scale))
            expr = expr.subs(atom, dummy / scale)
            dummies.append(dummy)
        expr = sp.expand(expr)
        self.den = int(sp.ilcm(1, *[r.q for r in expr.atoms(sp.Rational)]))
        numerator = sp.expand(self.den * expr)
        self.big = any(abs(int(c)) >= 2**62 for c in numerator.atoms(sp.Integer))
        self.fn = sp.lambdify(syms + dummies, numerator, modules="numpy")

    def scaled(self, args: list[np.ndarray]) -> np.ndarray:
        """``den × law`` at ``args`` (arrays of one dtype: float64, int64 or object)."""
        extra = []
        for kind, laws, scale in self.helpers:
            values = [law.scaled(args) for law in laws]
            if kind == "floor":
                extra.append(values[0] // laws[0].den)
            elif kind == "ceiling":
                extra.append(-((-values[0]) // laws[0].den))
            else:
                pick = np.minimum if kind == "Min" else np.maximum
                out = values[0] * (scale // laws[0].den)
                for law, v in zip(laws[1:], values[1:]):
                    out = pick(out, v * (scale // law.den))
                extra.append(out)
        value = self.fn(*args, *extra)
        return np.broadcast_to(np.asarray(value, dtype=args[0].dtype), args[0].shape)

    def exact(self, args: list[np.ndarray]) -> np.ndarray:
        """The law's exact integer values (int64 or object array) at integer ``args``."""
        with np.errstate(over="ignore", invalid="ignore"):
            magnitude = np.abs(self.scaled([a.astype(np.float64) for a in args]))
        safe = not self._big() and bool(np.all(magnitude < _INT64_SAFE))
        ints = [a.astype(np.int64) if safe else a.astype(object) for a in args]
        return self.scaled(ints) // self.den

    def _big(self) -> bool:
        return self.big or any(law._big() for _, laws, _ in self.helpers for law in laws)


def _outermost(expr: Any) -> list[Any]:
    """The floor / ceiling / Min / Max terms of ``expr`` that no other such term contains."""
    kinds = (sp.floor, sp.ceiling, sp.Min, sp.Max)
    found = [a for a in expr.atoms(sp.Function) if isinstance(a, kinds)]
    unknown = [a for a in expr.atoms(sp.Function) if not isinstance(a, kinds)]
    if unknown:
        raise FlopcalcError(f"cannot evaluate {unknown[0]} exactly in integers")
    return [a for a in found if not any(a != b and b.has(a) for b in found)]


def compile_law(report: SymbolicReport, *, exact: bool = True) -> tuple[list[str], Any, dict[str, Any]]:
    """Functions of the symbols that occur: (symbol names, total(...), {component: f(...)}); exact
    integers on object arrays (``exact``) or float64 (fast, for plots)."""
    names = list(report.symbols)
    syms = [sp.Symbol(n, positive=True, integer=True) for n in names]

    def compile_one(expr: Any) -> Any:
        if exact:
            law = _IntegerLaw(syms, expr)
            return lambda *args: law.exact(list(args))
        fn = sp.lambdify(syms, expr, modules="numpy")
        return lambda *args: np.broadcast_to(np.asarray(fn(*args), dtype=np.float64), args[0].shape)

    parts = {component_label(c): compile_one(c.flops) for c in report.components}
    return names, compile_one(report.flops), parts


def component_label(c: Any) -> str:
    """``vae.decode``, ``transformer``: a component and, when not ``forward``, its call."""
    return c.component + (f".{c.call}" if c.call != "forward" else "")


def grid_size(report: SymbolicReport, values: dict[str, Sequence[int]]) -> int:
    """Points in the grid of ``values`` (symbols the law does not have are refused)."""
    unused = [k for k in values if k not in report.symbols]
    if unused:
        raise FlopcalcError(f"the law of {report.model} does not depend on {', '.join(unused)} "
                            f"(its symbols: {', '.join(report.symbols) or 'none'})")
    return int(np.prod([len(v) for v in values.values()], dtype=object)) if values else 1


def run_sweep(report: SymbolicReport, values: dict[str, Sequence[int]], *, verify: Any = None,
              exact: bool = True, max_points: int | None = None, progress: Any = None) -> Sweep:
    """Evaluate the law over the product of ``values`` (symbols not given keep their
    representative value). ``verify(height=, width=, num_frames=, max_sequence_length=)`` → exact
    FLOPs checks each distinct value of the symbols in :data:`BRANCHING`;
    ``max_points`` refuses a larger grid before any work; ``progress`` (a callable taking the
    number of sizes checked) is told as the check goes."""
    from flopcalc.render.output import check_budget

    rep = report.representative()
    size = grid_size(report, values)
    if max_points is not None:
        check_budget(size, max_points, f"the sweep grid of {report.model}", "--max-points")
    axes = {k: np.asarray(values.get(k, [rep[k]]), dtype=np.int64) for k in report.symbols}
    if verify is not None:
        _verify_sizes(report, values, rep, verify, progress)
    mesh = np.meshgrid(*axes.values(), indexing="ij")
    grid = {k: m.ravel() for k, m in zip(axes, mesh)}
    return evaluate(report, grid, exact=exact)


def evaluate(report: SymbolicReport, points: dict[str, np.ndarray], *, exact: bool = True) -> Sweep:
    """The law at aligned points (one array per symbol, equal lengths; symbols not given keep
    their representative value)."""
    rep = report.representative()
    n = len(next(iter(points.values()))) if points else 1
    grid = {k: np.asarray(points[k], dtype=np.int64) if k in points else np.full(n, rep[k], dtype=np.int64)
            for k in report.symbols}
    names, _total_fn, part_fns = compile_law(report, exact=exact)
    args = [grid[k] if exact else grid[k].astype(np.float64) for k in names]
    parts = {k: f(*args) for k, f in part_fns.items()}
    return Sweep(grid, sum(parts.values()), parts)  # the total is the sum of the components


#: The symbols whose values can change the plan's branches (latent grid divisibility, temporal
#: chunking, text-length cuts); each value a sweep takes of them is checked against the exact estimate.
BRANCHING = {"H": "height", "W": "width", "F": "num_frames", "L": "max_sequence_length"}


def _verify_sizes(report: SymbolicReport, values: dict[str, Sequence[int]], rep: dict[str, int], verify: Any,
                  progress: Any) -> None:
    bad = []
    for key, setting in BRANCHING.items():
        for v in values.get(key, []):
            point = {**rep, key: v}
            try:
                exact = verify(**{BRANCHING[k]: point[k] for k in BRANCHING if k in point})
            except FlopcalcError as exc:
                raise FlopcalcError(f"{key}={v}: {exc}") from None
            if exact != report.at(**point):
                bad.append(f"{key}={v}")
            if progress is not None:
                progress(1)
    if bad:
        raise FlopcalcError(
            "the law is exact only for settings that take the same branches as the first value (sizes that divide "
            "every downsampling of the latent grid, the same temporal chunking); not at " + ", ".join(bad)
            + ": sweep those separately, or use `flopcalc estimate` for them"
        )


def sizes_to_verify(values: dict[str, Sequence[int]]) -> int:
    return sum(len(values.get(k, [])) for k in BRANCHING)


def rows(sweep: Sweep) -> list[dict[str, int]]:
    """One dict per point: the settings and the exact FLOPs (ints)."""
    keys = list(sweep.grid)
    cols = [sweep.grid[k].tolist() for k in keys] + [sweep.total.tolist()] + [v.tolist() for v in sweep.components.values()]
    names = keys + ["flops"] + [f"flops_{k}" for k in sweep.components]
    return [dict(zip(names, (int(v) for v in row))) for row in zip(*cols)]


def write_columns(sweep: Sweep, out: Any, sep: str = ",", progress: Any = None, chunk: int = 20_000) -> None:
    """The sweep as delimited text: one header line, then the settings and the exact FLOPs as
    integers, written in chunks (``progress(n)`` is told after each)."""
    names = list(sweep.grid) + ["flops"] + [f"flops_{k}" for k in sweep.components]
    cols = [*sweep.grid.values(), sweep.total, *sweep.components.values()]
    out.write(sep.join(names) + "\n")
    for start in range(0, len(sweep), chunk):
        part = [c[start:start + chunk].tolist() for c in cols]
        out.write("".join(sep.join(map(str, row)) + "\n" for row in zip(*part)))
        if progress is not None:
            progress(len(part[0]))
