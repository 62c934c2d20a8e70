"""Exact symbolic FLOP laws: the same pipeline plans and block formulas, evaluated on symbols.

Symbols: ``H``, ``W`` image height and width in pixels, ``S`` denoising steps, ``P`` denoiser
(guidance) passes per step, ``B`` prompts in the batch, ``L`` text tokens (the pipeline's
``max_sequence_length``, where the model has one), ``F`` video frames (video pipelines), ``R`` reference
images (the family option ``reference_images``, where a pipeline's law holds for any count: FLUX.2).

How: the pipeline plan runs on :class:`Tracked` integers, ints that also carry the sympy
expression they stand for, so ``s.height // f`` becomes ``H/8`` and ``steps × passes × images``
becomes ``S·P·B`` without a second, symbolic copy of the pipeline code. The plan's branches
(divisibility, CFG on or off, which encoders run) are taken at the representative numbers, so
a law holds for every setting that takes the same branches: sizes that divide the latent grid
(and every downsampling of it), the same guidance mode. The shapes then go through the same
assemblers with sympy values: every coefficient is the code's own.

Only this module (and the CLI commands that use it) import sympy.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any

import sympy as sp

from flopcalc.engine.cost import CONVENTIONS, Cost
from flopcalc.engine.errors import FlopcalcError, OptionError, UnknownArchitectureError
from flopcalc.engine.pipelines import Counting, Settings, plan
from flopcalc.engine.registry import RunShape, assemble

H, W, S, P, B, L, F = sp.symbols("H W S P B L F", positive=True, integer=True)
R = sp.Symbol("R", positive=True, integer=True)
SYMBOL_TEXT = {
    "H": "image height (pixels)",
    "W": "image width (pixels)",
    "S": "denoising steps",
    "P": "denoiser passes per step (2 under classifier-free guidance)",
    "B": "prompts in the batch",
    "L": "text tokens (max_sequence_length)",
    "F": "video frames (num_frames)",
    "R": "reference images (--reference-images)",
}


class Tracked(int):
    """An int that carries the sympy expression it stands for through integer arithmetic.

    ``+``, ``-``, ``*`` with ints keep tracking; ``//`` divides the expression exactly (the plan
    only floor-divides sizes it has checked divide). Anything else (comparisons, ``%``,
    formatting, float arithmetic) behaves as the plain int.
    """

    expr: Any

    def __new__(cls, value: int, expr: Any) -> Tracked:
        obj = super().__new__(cls, value)
        obj.expr = expr
        return obj

    def _track(self, other: Any, value: Any, expr: Any) -> Any:
        return Tracked(value, expr) if isinstance(other, int) and not isinstance(other, bool) else value

    def __add__(self, other: Any) -> Any:
        return self._track(other, int(self) + other, self.expr + expr_of(other))

    __radd__ = __add__

    def __sub__(self, other: Any) -> Any:
        return self._track(other, int(self) - other, self.expr - expr_of(other))

    def __rsub__(self, other: Any) -> Any:
        return self._track(other, other - int(self), expr_of(other) - self.expr)

    def __mul__(self, other: Any) -> Any:
        return self._track(other, int(self) * other, self.expr * expr_of(other))

    __rmul__ = __mul__

    def __floordiv__(self, other: Any) -> Any:
        return self._track(other, int(self) // other, self.expr / expr_of(other))


def expr_of(value: Any) -> Any:
    """The expression a value stands for: a tracked int's expression, else the value itself."""
    return value.expr if isinstance(value, Tracked) else value


@dataclass(frozen=True)
class SymbolicComponent:
    component: str
    class_name: str
    call: str
    role: str
    runs: Any  # expression
    per_run: Cost  # fields are expressions
    convention: str
    #: the cost tree of one run (node costs are expressions) and the run's shape (RunShape, fields expressions): what
    #: the static site (:mod:`flopcalc.site`) reads to state the energy and memory features as laws
    tree: Any = field(default=None, compare=False, repr=False)
    shape: Any = field(default=None, compare=False, repr=False)

    @property
    def macs_per_run(self) -> Any:
        return sp.expand(self.per_run.macs(self.convention))

    @property
    def flops(self) -> Any:
        return sp.expand(2 * self.runs * self.per_run.macs(self.convention))


@dataclass(frozen=True)
class SymbolicReport:
    model: str
    pipeline: str
    convention: str
    settings: Settings  # the representative settings the branches were taken at
    passes: int  # denoiser passes per step at those settings (the value of P)
    components: tuple[SymbolicComponent, ...]
    symbols: tuple[str, ...]  # those that occur
    notes: tuple[str, ...]
    #: whether a step's guidance passes run as one forward of the concatenated batch (the plan's ``batched_passes``)
    batched_passes: bool = True

    @property
    def flops(self) -> Any:
        return sp.expand(sum((c.flops for c in self.components), sp.Integer(0)))

    def at(self, **values: int) -> int:
        """The total FLOPs at the given symbol values (``H=1024, W=1024, S=28, P=1, B=1, L=512``)."""
        return int(self.flops.subs({sp.Symbol(k, positive=True, integer=True): v for k, v in values.items()}))

    def representative(self) -> dict[str, int]:
        """The symbol values of the settings the plan's branches were taken at."""
        s = self.settings
        known = {"H": s.height, "W": s.width, "S": s.steps, "B": s.batch_size, "L": s.max_sequence_length,
                 "F": s.num_frames, "R": dict(s.extra).get("reference_images")}
        out = {k: v for k, v in known.items() if k in self.symbols and v is not None}
        if "P" in self.symbols:
            out["P"] = self.passes
        return out


def symbolic_estimate(
    model: str,
    *,
    convention: str = "torch",
    revision: str | None = None,
    **settings: Any,
) -> SymbolicReport:
    """The FLOP law of one generation with ``model``: total and per component, as sympy
    expressions in H, W, S, P, B, L. ``settings`` (as for :func:`flopcalc.estimate`) pick the
    branch the law is stated for (guidance on or off, image-to-image, …)."""
    from flopcalc.engine.sources import resolve

    if convention not in CONVENTIONS:
        raise FlopcalcError(f"unknown convention {convention!r}; choose one of: {', '.join(CONVENTIONS)}")
    source = resolve(model, revision=revision)
    notes = []
    if settings.pop("resolution_binning", True):  # the size the pipeline generates, as estimate resolves it
        binned = plan(source.model_index, source.components, Settings.make(**settings)).settings
        asked = plan(source.model_index, source.components, Settings.make(**settings, resolution_binning=False))
        if (binned.height, binned.width) != (asked.settings.height, asked.settings.width):
            notes.append(f"resolution binning: {asked.settings.height}×{asked.settings.width} is generated at "
                         f"{binned.height}×{binned.width}, as {asked.pipeline} does: the law is evaluated there; it "
                         "holds for sizes run as given (--no-resolution-binning)")
            settings.update(height=binned.height, width=binned.width)
    settings["resolution_binning"] = False
    numeric = plan(source.model_index, source.components, Settings.make(**settings))
    symbolic_plan = plan(source.model_index, source.components, _tracked(numeric.settings))
    _refuse_unexpressible(source.name, symbolic_plan.runs)
    comps = []
    for run in symbolic_plan.runs:
        shape = RunShape(**{f.name: expr_of(getattr(run.shape, f.name)) for f in fields(RunShape)})
        tree = assemble(source.components[run.component], shape, component=run.component, call=run.call,
                        class_name=run.built_class)
        comps.append(SymbolicComponent(run.component, run.class_name, run.call, run.role,
                                       sp.sympify(expr_of(run.runs)), tree.total, convention, tree, shape))
    report = SymbolicReport(source.name, numeric.pipeline, convention, numeric.settings, int(numeric.passes),
                            tuple(comps), (), tuple(notes) + numeric.notes, numeric.batched_passes)
    used = {s.name for s in report.flops.free_symbols}
    return replace(report, symbols=tuple(k for k in SYMBOL_TEXT if k in used))


def refuse_binned_sizes(model: str, sizes: Any, *, revision: str | None = None, **settings: Any) -> None:
    """An :class:`OptionError` when the pipeline of ``model`` generates one of the ``(height, width)`` ``sizes`` at
    another size (resolution binning, as ``estimate`` resolves it): a law in H and W, which ``sweep`` and ``plot``
    evaluate, does not follow the bins. Nothing is checked with ``resolution_binning=False``."""
    from flopcalc.engine.sources import resolve

    if not settings.pop("resolution_binning", True):
        return
    source = resolve(model, revision=revision)
    for height, width in sizes:
        given = {**settings, "height": height, "width": width}
        binned = plan(source.model_index, source.components, Settings.make(**given)).settings
        asked = plan(source.model_index, source.components, Settings.make(**given, resolution_binning=False)).settings
        if (binned.height, binned.width) != (asked.height, asked.width):
            raise OptionError(f"{source.name} generates {asked.height}×{asked.width} at {binned.height}×{binned.width} "
                              "(resolution binning), which no law in H and W follows: add --no-resolution-binning "
                              "to use the sizes as given, or run estimate at each size")


def _refuse_unexpressible(model: str, runs: Any) -> None:
    """One refusal naming every row a law cannot express: a component call with no formula (``estimate
    --measure`` can count it, as one number at one setting, which is not a law)."""
    from flopcalc.engine.registry import has_formula

    rows = list(dict.fromkeys(f"{r.component}{'.' + r.call if r.call != 'forward' else ''} ({r.class_name})"
                              for r in runs if not has_formula(r.class_name, r.call)))
    if rows:
        raise UnknownArchitectureError(
            f"{model}: a symbolic law cannot express {', '.join(rows)}: flopcalc has no formula for "
            f"{'it' if len(rows) == 1 else 'them'}; `flopcalc estimate --measure` counts such a component at one "
            "setting (a measured number, not a law), so symbolic, sweep, plot and report refuse the model")


#: How a symbolic plan counts: in tracked integers, guidance passes as ``P``.
SYMBOLIC = Counting(symbolic=True, passes=lambda n: Tracked(n, P))


def _tracked(s: Settings) -> Settings:
    """The settings on tracked integers, counted symbolically (:data:`SYMBOLIC`): each setting a law
    can depend on tracked as its symbol; settings the plan left unset (a bare text encoder has no size
    or steps, a bare VAE no steps) stay unset."""
    symbols = {"height": H, "width": W, "steps": S, "batch_size": B, "max_sequence_length": L, "num_frames": F}
    values: dict[str, Any] = {key: Tracked(getattr(s, key), sym) for key, sym in symbols.items()
                              if getattr(s, key) is not None}
    extra = tuple((k, Tracked(v, R) if k == "reference_images" else v) for k, v in s.extra)  # checked already
    return replace(s, counting=SYMBOLIC, extra=extra, **values)


# --------------------------------------------------------------------------- structure


@dataclass(frozen=True)
class Term:
    """One group of a component's law: ``coefficient × monomial`` collected by kind."""

    kind: str  # attention | linear layers | convolutions | other matmuls | fixed
    expr: Any


def structure(component: SymbolicComponent) -> list[Term]:
    """A component's per-run MACs split by where they come from: attention (QKᵀ, A·V), linear
    layers, convolutions, functional work (matmuls and convs thop's exact-type hooks miss); each an
    expression in H, W, L (and F)."""
    c = component.per_run
    parts = [("attention", c.attention), ("linear layers", c.linear), ("convolutions", c.conv),
             ("functional", c.functional)]  # matmuls/convs thop's hooks miss (e.g. causal Conv3d subclasses)
    if component.convention == "thop":
        parts = [("linear layers", c.linear), ("convolutions", c.conv), ("thop norm rules", c.thop_extra)]
    return [Term(kind, sp.expand(expr)) for kind, expr in parts if sp.expand(expr) != 0]


__all__ = ["symbolic_estimate", "SymbolicReport", "SymbolicComponent", "Tracked", "structure", "H", "W", "S", "P",
           "B", "L", "F", "R"]
