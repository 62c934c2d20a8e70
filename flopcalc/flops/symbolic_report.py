"""Questions users ask of a FLOP law, and its renderings: structure per component (which term is
attention, which linear layers, which fixed), exact ratios between two settings, the resolution
where attention overtakes the linear layers, component shares as resolution grows; text, LaTeX
and JSON (expressions as strings plus their coefficients)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import sympy as sp

from flopcalc.engine.errors import FlopcalcError
from flopcalc.flops.symbolic import (
    SYMBOL_TEXT,
    H,
    SymbolicComponent,
    SymbolicReport,
    W,
    structure,
)

RATIO_HELP = ("two settings separated by ':', each 'HxW', 'HxW@STEPS', 'steps=N', 'batch=N', 'tokens=N' or "
              "'frames=N' (after 'steps=N:' a bare number means steps too), e.g. 1024x1024:512x512, "
              "steps=50:28 or steps=50:steps=28")
_RATIO_KEYS = {"steps": "S", "batch": "B", "tokens": "L", "frames": "F"}


# --------------------------------------------------------------------------- settings parsing


def parse_point(text: str, key: str | None = None) -> dict[str, int]:
    """One side of ``--ratio`` as symbol values: ``1024x768``, ``1024x768@28``, ``steps=28``, or a
    bare number for the symbol ``key`` (the other side's)."""
    m = re.fullmatch(r"\s*(\d+)x(\d+)(?:@(\d+))?\s*", text)
    if m:
        point = {"H": int(m.group(1)), "W": int(m.group(2))}
        if m.group(3):
            point["S"] = int(m.group(3))
    elif m := re.fullmatch(r"\s*(steps|batch|tokens|frames)=(\d+)\s*", text):
        point = {_RATIO_KEYS[m.group(1)]: int(m.group(2))}
    elif key is not None and (m := re.fullmatch(r"\s*(\d+)\s*", text)):
        point = {key: int(m.group(1))}
    else:
        raise FlopcalcError(f"--ratio: cannot read {text!r} as a setting: {RATIO_HELP}")
    if min(point.values()) <= 0:
        raise FlopcalcError(f"--ratio: {text!r}: settings must be positive")
    return point


def parse_ratio(spec: str) -> tuple[dict[str, int], dict[str, int]]:
    """``--ratio A:B`` as the symbol values of its two sides (unchecked against a law)."""
    if spec.count(":") != 1:
        raise FlopcalcError(f"--ratio takes {RATIO_HELP}")
    left, right = spec.split(":")
    a = parse_point(left)
    return a, parse_point(right, key=next(iter(a)) if len(a) == 1 else None)


def ratio(report: SymbolicReport, spec: str) -> tuple[dict, dict, sp.Rational]:
    """Exact ratio of the total FLOPs at two settings (symbols not given at their representative values)."""
    a, b = parse_ratio(spec)
    unknown = sorted((set(a) | set(b)) - set(report.symbols))
    if unknown:
        raise FlopcalcError(f"--ratio {spec}: the law of {report.model} does not depend on {', '.join(unknown)}")
    base = report.representative()
    a, b = {**base, **a}, {**base, **b}
    return a, b, sp.Rational(report.at(**a), report.at(**b))


# --------------------------------------------------------------------------- crossover


@dataclass(frozen=True)
class Crossover:
    component: str
    side: float | None  # square image side in pixels where attention MACs equal linear-layer MACs
    law: Any  # attention − linear, in the side length x


def crossover(report: SymbolicReport) -> list[Crossover]:
    """For each component with attention: the square side (pixels) past which the attention
    matmuls cost more than the linear layers (other symbols at their representative values)."""
    x = sp.Symbol("x", positive=True)
    values = {sp.Symbol(k, positive=True, integer=True): v for k, v in report.representative().items()
              if k not in ("H", "W")}
    out = []
    for c in report.components:
        attn = sp.expand(c.per_run.attention).subs(values).subs({H: x, W: x})
        lin = sp.expand(c.per_run.linear + c.per_run.conv).subs(values).subs({H: x, W: x})
        if attn == 0:
            continue
        # roundings of a length (Z-Image pads its tokens to a multiple of 32) dropped: the unrounded law's crossover
        diff = sp.expand((attn - lin).replace(lambda e: isinstance(e, (sp.floor, sp.ceiling)), lambda e: e.args[0]))
        roots = [float(r) for r in sp.Poly(diff, x).real_roots() if r > 0] if diff.free_symbols else []
        out.append(Crossover(c.component, max(roots) if roots else None, diff))
    return out


# --------------------------------------------------------------------------- shares


def shares(report: SymbolicReport, sides: list[int]) -> list[tuple[int, dict[str, float]]]:
    """Share of the total per component at square sides ``sides`` (other symbols as represented)."""
    base = report.representative()
    rows = []
    for side in sides:
        point = {sp.Symbol(k, positive=True, integer=True): v for k, v in {**base, "H": side, "W": side}.items()}
        values = {f"{c.component}{'.' + c.call if c.call != 'forward' else ''}": float(c.flops.subs(point))
                  for c in report.components}
        total = sum(values.values()) or 1.0
        rows.append((side, {k: v / total for k, v in values.items()}))
    return rows


# --------------------------------------------------------------------------- rendering


#: The image area H·W as one factor, where a law depends on the area only: written so that it
#: reads (and parses back) as the product, never as a new symbol: ``(H*W)**2``, ``\left(H \cdot W\right)^{2}``.
AREA_TEXT = sp.Symbol("(H*W)", positive=True)
AREA_LATEX = sp.Symbol(r"\left(H \cdot W\right)", positive=True)


def _hw_grouped(expr: Any, area: Any) -> Any:
    """Show products of H and W as powers of the area ``(H·W)`` where the law depends on the area only."""
    grouped = sp.expand(expr).subs(H * W, area)
    return grouped if W not in grouped.free_symbols and H not in grouped.free_symbols else expr


def _fmt(expr: Any, latex: bool) -> str:
    r"""Text (``sympy.sstr``) or LaTeX with explicit ``\cdot`` products, so that ``L (H·W)`` can
    not be read as a function ``L`` applied to ``H·W``."""
    if latex:
        return sp.latex(_hw_grouped(expr, AREA_LATEX), mul_symbol="dot")
    return sp.sstr(_hw_grouped(expr, AREA_TEXT))


def parse_sides(text: str) -> list[int]:
    """``--shares``: square sides in pixels, ``256,512,1024``."""
    from flopcalc.flops.sweep import parse_values

    return parse_values(text, "shares", max_count=1000)


def render_text(report: SymbolicReport, latex: bool = False) -> str:
    lines = [f"{report.model} · {report.pipeline} · {report.convention} convention (FLOPs = 2 × MACs)", ""]
    lines.append("symbols: " + "; ".join(f"{k} = {SYMBOL_TEXT[k]}" for k in report.symbols))
    rep = report.representative()
    lines.append("the law holds for settings that take the same branches as: "
                 + ", ".join(f"{k}={v}" for k, v in rep.items()) + " (sizes that divide the latent grid)")
    lines.append("")
    for c in report.components:
        name = c.component + (f".{c.call}" if c.call != "forward" else "")
        lines.append(f"{name} ({c.class_name}): runs = {_fmt(c.runs, latex)}; MACs per run =")
        for term in structure(c):
            lines.append(f"    {term.kind:<15} {_fmt(term.expr, latex)}")
    lines.append("")
    lines.append(f"total FLOPs = {_fmt(sp.factor_terms(report.flops), latex)}")
    for note in report.notes:
        lines.append(f"note: {note}")
    return "\n".join(lines) + "\n"


def _terms(expr: Any) -> list[dict[str, str]]:
    """``[{monomial, coefficient}]`` of an expanded expression (coefficients exact, as strings)."""
    expr = sp.expand(expr)
    if not expr.free_symbols:
        return [{"monomial": "1", "coefficient": str(expr)}]
    # sympy picks the generators: the symbols, and whole terms such as floor((F - 1)/16) where a
    # chunked video decode makes the law piecewise
    poly = sp.Poly(expr)
    return [{"monomial": str(sp.Mul(*[g**e for g, e in zip(poly.gens, exps)])), "coefficient": str(coef)}
            for exps, coef in poly.terms()]


def _expr_dict(expr: Any) -> dict[str, Any]:
    """The expression as text, LaTeX, exact terms, and ``srepr`` (``sympy.sympify(srepr)`` rebuilds
    it exactly; plain ``sympify(expr)`` would read ``S`` as sympy's singleton registry)."""
    expr = sp.expand(expr)
    return {"expr": str(expr), "latex": sp.latex(expr), "terms": _terms(expr), "srepr": sp.srepr(expr)}


def report_dict(report: SymbolicReport) -> dict[str, Any]:
    return {
        "model": report.model,
        "pipeline": report.pipeline,
        "convention": report.convention,
        "unit": "FLOPs (= 2 × MACs) for the total and components' flops; MACs per run for the terms",
        "symbols": {k: SYMBOL_TEXT[k] for k in report.symbols},
        "representative": report.representative(),
        "total_flops": _expr_dict(report.flops),
        "components": [_component_dict(c) for c in report.components],
        "notes": list(report.notes),
    }


def _component_dict(c: SymbolicComponent) -> dict[str, Any]:
    return {
        "component": c.component,
        "class_name": c.class_name,
        "call": c.call,
        "runs": str(c.runs),
        "macs_per_run": _expr_dict(c.macs_per_run),
        "by_kind": {t.kind: _expr_dict(t.expr) for t in structure(c)},
        "flops": _expr_dict(c.flops),
    }
