"""What the page needs beyond the FLOP law, stated as laws of the same symbols: the energy laws' features per
component (:func:`flopcalc.energy_laws.features.work_of`), the memory model's pieces
(:func:`flopcalc.gpu_memory.estimate.memory`) and the FLOPs of a training sample
(:func:`flopcalc.training.estimate.train`).

Each is read from a :class:`flopcalc.flops.symbolic.SymbolicReport` (the plans and block formulas run on tracked
integers, so every law is the code's own) by the same rules the numeric path applies to a
:class:`flopcalc.flops.report.Report`; the rules are imported from their modules, not restated, except the padded
head width sum (:func:`padded_attention`), whose numeric version reads floats. The export
(:mod:`flopcalc.site.export`) checks every law against the numeric path at several settings before writing it.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Mapping, Sequence

import sympy as sp

from flopcalc.energy_laws.features import leaves, padded_head_width
from flopcalc.engine.cost import Node
from flopcalc.engine.errors import FlopcalcError
from flopcalc.flops.symbolic import SymbolicComponent, SymbolicReport, B, P

#: The features of one component, in the order :func:`flopcalc.energy_laws.features.work_of` computes them (before
#: the division by the items of the batch).
FEATURES = ("linear", "attention", "conv", "elementwise", "calls", "weight_reads", "scores", "attention_padded",
            "launches")


class NoLawError(FlopcalcError):
    """A feature cannot be stated as a law of the symbols (the page then shows the CLI command)."""


def padded_attention(node: Node) -> Any:
    """Attention MACs of ``node``'s subtree with every call's head width padded, as
    :func:`flopcalc.energy_laws.features.padded_attention` sums them, in exact arithmetic on a symbolic tree: each
    module's head width ``attention / (2·scores)`` must be a number (it is: the head dimension of the config)."""
    c = node.cost
    own = sp.sympify(c.attention)
    if c.attention != 0 and c.scores != 0:
        width = sp.cancel(own / (2 * sp.sympify(c.scores)))
        if not width.is_number:
            raise NoLawError(f"{node.name}: head width {width} depends on the settings")
        own = own * sp.Rational(padded_head_width(float(width))) / width
    return (own + sum((padded_attention(child) for child in node.children), sp.Integer(0))) * node.count


def forward_batch(report: SymbolicReport, role: str) -> Any:
    """:func:`flopcalc.gpu_memory.estimate.forward_batch` with the batch ``B`` and the passes ``P`` as symbols."""
    from flopcalc.gpu_memory.estimate import forward_batch as numeric

    s = report.settings
    like = SimpleNamespace(settings=SimpleNamespace(batch_size=B, num_images_per_prompt=s.num_images_per_prompt),
                           passes=P, batched_passes=report.batched_passes)
    return numeric(like, role)


def items(report: SymbolicReport) -> Any:
    """Images or videos one generation makes: prompts × per prompt."""
    return B * report.settings.num_images_per_prompt


@dataclass(frozen=True)
class Row:
    """One row of the numeric report: consecutive runs of one component call (a call made in pieces is one row)."""

    runs: tuple[SymbolicComponent, ...]

    @property
    def first(self) -> SymbolicComponent:
        return self.runs[0]

    @property
    def pieces(self) -> bool:
        return len(self.runs) > 1

    def report_runs(self) -> Any:
        """The row's runs: the greatest common count of its pieces (``flopcalc.flops.estimate._merge_pieces``)."""
        out = sp.Integer(0)
        for r in self.runs:
            out = sp.gcd(out, r.runs)
        return out

    def total(self, field: str) -> Any:
        return sum((r.runs * sp.sympify(getattr(r.per_run, field)) for r in self.runs), sp.Integer(0))


def rows(report: SymbolicReport) -> list[Row]:
    """The report's rows (:func:`flopcalc.flops.estimate._same_call_groups`)."""
    from flopcalc.flops.estimate import _same_call_groups

    return [Row(tuple(g)) for g in _same_call_groups(report.components)]


def component_features(report: SymbolicReport, params: Mapping[str, int]) -> dict[str, dict[str, Any]]:
    """Per component (in report order): its role and each of :data:`FEATURES` as an expression (the sums
    :func:`flopcalc.energy_laws.features.work_of` makes, before it divides by the items). ``params``: each
    component's parameters (from the numeric report; they do not depend on the settings)."""
    out: dict[str, dict[str, Any]] = {}
    for row in rows(report):
        c = row.first
        forwards = row.report_runs() / (1 if row.pieces else forward_batch(report, c.role))
        calls = forwards if c.role == "denoiser" else sp.Integer(0)
        launches = (sum((r.runs * leaves(r.tree) for r in row.runs), sp.Integer(0)) if row.pieces
                    else leaves(c.tree) * forwards)
        values = {
            "linear": 2 * row.total("linear"), "attention": 2 * row.total("attention"),
            "conv": 2 * (row.total("conv") + row.total("functional")), "elementwise": row.total("elementwise"),
            "calls": calls, "weight_reads": params[c.component] * (calls if c.role == "denoiser" else 1),
            "scores": row.total("scores"),
            "attention_padded": 2 * sum((r.runs * padded_attention(r.tree) for r in row.runs), sp.Integer(0)),
            "launches": launches,
        }
        entry = out.setdefault(c.component, {"role": c.role, **{k: sp.Integer(0) for k in FEATURES}})
        for k, v in values.items():
            entry[k] = entry[k] + v
    return out


def shape_of(c: SymbolicComponent) -> dict[str, Any]:
    """The row's shape as the report keeps it (sizes only: how a call runs is left out)."""
    from flopcalc.flops.estimate import _HOW_IT_RUNS

    return {k: v for k, v in vars(c.shape).items() if v is not None and k not in _HOW_IT_RUNS}


def memory_rows(report: SymbolicReport) -> list[dict[str, Any]]:
    """Per report row: its component and role, the forwards it makes (``runs // forward batch``, at least 1: what
    sequential offload moves weights for) as the two laws ``runs`` and ``batch``, and, for a call with an
    activation fit (a role in ``memory``'s ``MEASURED_ROLES``), its latent positions ``n``
    (:func:`flopcalc.gpu_memory.activations.positions`)."""
    from flopcalc.gpu_memory.activations import per_frame, positions
    from flopcalc.gpu_memory.estimate import MEASURED_ROLES

    out = []
    for row in rows(report):
        c = row.first
        batch = forward_batch(report, c.role)
        entry = {"component": c.component, "call": c.call, "class_name": c.class_name, "role": c.role,
                 "runs": row.report_runs(), "batch": batch}
        if c.role in MEASURED_ROLES:
            entry["n"] = positions(shape_of(c), per_frame=per_frame(c.class_name, c.call))
        out.append(entry)
    return out


def training_sample(report: SymbolicReport, frozen_roles: Sequence[str]) -> Any:
    """FLOPs of one training sample (full fine-tuning of the one denoiser, frozen encoders run online, no
    gradient checkpointing), as :func:`flopcalc.training.estimate.train` sums them: the denoiser's forward and
    backward (:func:`flopcalc.training.backward.backward` on the symbolic tree) and one forward of each frozen
    encoder."""
    from flopcalc.training.backward import backward, graph_of

    denoisers = [c for c in report.components if c.role == "denoiser"]
    if len(denoisers) != 1:
        raise NoLawError("training counts one denoiser")
    total = sp.Integer(0)
    for c in report.components:
        if c.role == "denoiser":
            back = backward(c.tree, graph_of(c.class_name))
            total += c.per_run.macs("torch") + back.macs
        elif c.role in frozen_roles:
            total += c.per_run.macs("torch")
    return sp.expand(2 * total)
