"""A law (a sympy expression in the symbols of :mod:`flopcalc.flops.symbolic`) as plain data the page evaluates
exactly, and the same evaluation in Python (the export checks every law it writes against the numeric path).

The form mirrors :class:`flopcalc.flops.sweep._IntegerLaw`, the sweep's exact evaluator: the law is a polynomial with
rational coefficients in the symbols and in a few exact integer functions of them (``floor``, ``ceiling``, ``Min``,
``Max``: chunked video decodes, padded token counts). Each such function (a *helper*) is a law of its own, evaluated
first; the polynomial is stored times the common denominator ``d`` of its coefficients, so that every coefficient is
an integer, and the value is ``numerator / d``::

    {"d": "4", "v": ["H", "W"], "h": [helper, ...], "t": [["171", [2, 2, 0]], ...]}

``v`` names the symbols the exponents refer to, then one exponent per helper; ``t`` lists the terms (coefficient as
a decimal string: the page reads it as a JavaScript BigInt). A quotient of two polynomials
(a feature per denoiser forward: ``S·B / (B·P)``) holds the law of its denominator under ``"q"``. A helper is ``{"k": "floor"|"ceiling"|"Min"|"Max",
"a": [law, ...], "s": scale}``: ``floor``/``ceiling`` of its one argument, ``Min``/``Max`` of its arguments on the
common scale ``s`` (the helper's value is ``s`` × the minimum, and the polynomial divides it by ``s`` again).
"""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache
from typing import Any, Mapping

import sympy as sp

from flopcalc.flops.symbolic import SYMBOL_TEXT

#: Every symbol a law may hold, in the order the page lists them.
SYMBOLS = tuple(SYMBOL_TEXT)
_SYMS = {name: sp.Symbol(name, positive=True, integer=True) for name in SYMBOLS}


def compile_law(expr: Any) -> dict[str, Any]:
    """``expr`` as the plain data of the module docstring (the same steps as ``_IntegerLaw.__init__``); a quotient
    of polynomials (denoiser calls per batch: ``S·B / (B·P)``) as the law of its numerator with the law of its
    denominator under ``"q"``."""
    expr = sp.expand(sp.sympify(expr))
    if any(p.exp < 0 for p in expr.atoms(sp.Pow) if p.exp.is_number):
        numerator, denominator = sp.fraction(sp.cancel(sp.together(expr)))
        if denominator.free_symbols:
            return {**compile_law(numerator), "q": compile_law(denominator)}
    helpers, dummies = [], []
    while atoms := _outermost(expr):  # a term inside another may also stand alone: replaced in a later round
        replace = {}
        for atom in atoms:
            args = [_compiled(a) for a in atom.args]
            kind = type(atom).__name__
            scale = 1 if kind in ("floor", "ceiling") else int(sp.ilcm(1, 1, *[int(a["d"]) for a in args]))
            dummy = sp.Dummy(f"h{len(dummies)}")
            replace[atom] = dummy / scale
            helpers.append({"k": kind, "a": args, "s": scale})
            dummies.append(dummy)
        expr = expr.xreplace(replace)  # the outermost terms contain no other: one pass replaces them all
    expr = sp.expand(expr)
    den = int(sp.ilcm(1, 1, *[r.q for r in expr.atoms(sp.Rational)]))
    numerator = sp.expand(den * expr)
    names = [n for n in SYMBOLS if _SYMS[n] in numerator.free_symbols]
    gens = [_SYMS[n] for n in names] + dummies
    if numerator == 0:
        terms: list = []
    elif not gens:
        terms = [[str(int(numerator)), []]]
    else:
        terms = [[str(int(c)), list(e)] for e, c in sp.Poly(numerator, *gens).terms()]
    return {"d": str(den), "v": names, "h": helpers, "t": terms}


_HELPERS = (sp.floor, sp.ceiling, sp.Min, sp.Max)


def _outermost(expr: Any) -> list[Any]:
    """The floor / ceiling / Min / Max terms of ``expr`` that no other such term contains, in a fixed order;
    ``flopcalc.flops.sweep._outermost`` without its ``atoms(Function)``, which misses ``Min`` and ``Max``."""
    found = sorted(expr.atoms(*_HELPERS), key=sp.default_sort_key)
    unknown = [a for a in expr.atoms(sp.Function) if not isinstance(a, _HELPERS)]
    if unknown:
        raise ValueError(f"cannot state {unknown[0]} exactly in integers")
    return [a for a in found if not any(a != b and b.has(a) for b in found)]


@lru_cache(maxsize=4096)
def _compiled(expr: Any) -> dict[str, Any]:
    """A helper's argument, compiled once (the same chunk counts recur in every feature of a video VAE)."""
    return compile_law(expr)


def _scaled(law: Mapping[str, Any], values: Mapping[str, int]) -> int:
    """``d × law`` at integer ``values`` (exact; mirrors ``_IntegerLaw.scaled``)."""
    gens = [values[n] for n in law["v"]]
    for helper in law["h"]:
        parts = [(_scaled(a, values), int(a["d"])) for a in helper["a"]]
        kind = helper["k"]
        if kind == "floor":
            gens.append(parts[0][0] // parts[0][1])
        elif kind == "ceiling":
            gens.append(-((-parts[0][0]) // parts[0][1]))
        else:
            scale = helper["s"]
            pick = min if kind == "Min" else max
            gens.append(pick(v * (scale // d) for v, d in parts))
    total = 0
    for coef, exps in law["t"]:
        term = int(coef)
        for g, e in zip(gens, exps):
            term *= g ** e
        total += term
    return total


def evaluate(law: Mapping[str, Any], values: Mapping[str, int]) -> Fraction:
    """The law's exact value at integer ``values`` (one per symbol it holds)."""
    value = Fraction(_scaled(law, values), int(law["d"]))
    return value / evaluate(law["q"], values) if "q" in law else value
