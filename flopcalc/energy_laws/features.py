"""The work of one generation, per item, split by op class: what the energy laws consume.

Read from a :class:`flopcalc.api.Report` (the exact counts of ``flopcalc.estimate`` at the
settings given), never re-derived. Op classes follow :class:`flopcalc.cost.Cost`:

* ``linear``: dense layers (``Cost.linear``),
* ``attention``: the QKᵀ and A·V matmuls (``Cost.attention``),
* ``conv``: convolutions, ``Cost.conv`` plus ``Cost.functional`` (functional / subclassed convs and
  matmuls; in the models counted it is almost all the causal 3-D convolutions of video VAEs),
* ``elementwise``: flopcalc's estimate of elementwise ops (norms, activations, softmax; no convention
  counts them; ops, not doubled),

each as FLOPs (2 × MACs) per item (image or video), plus the denoiser calls per item (steps ÷
items in the batch: the per-step overhead that dominates small workloads) and the parameters read
per item (the denoiser's once per call, every other component's once per batch: weight traffic).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from flopcalc.api import Report

OP_CLASSES = ("linear", "attention", "conv")


@dataclass(frozen=True)
class ComponentWork:
    """One component's work per item."""

    component: str
    role: str
    linear: float
    attention: float
    conv: float
    elementwise: float
    calls: float  # denoiser calls per item: one per step for the whole batch, so steps ÷ items
    weight_reads: float = 0.0  # parameters read per item (× bytes per parameter = weight traffic)

    @property
    def flops(self) -> float:
        return self.linear + self.attention + self.conv


@dataclass(frozen=True)
class Work:
    """Per-item work of one generation: components, and the settings the laws read."""

    components: tuple[ComponentWork, ...]
    items: int  # images or videos per batch
    steps: int
    cfg: bool  # more than one denoiser pass per step
    pixels: int  # output pixels per item (H·W·frames); 0 when the report has no image size

    def total(self, field: str) -> float:
        return sum(getattr(c, field) for c in self.components)

    @property
    def flops(self) -> float:
        return sum(c.flops for c in self.components)

    @property
    def calls(self) -> float:
        return self.total("calls")


def work_of(report: "Report") -> Work:
    """Per-item op-class FLOPs of every component of ``report`` (exact counts of the estimate)."""
    s = report.settings
    items = s.batch_size * s.num_images_per_prompt
    passes = max(report.passes, 1)
    merged: dict[str, list] = {}
    for c in report.components:
        t = c.per_run
        calls = c.runs / (passes * items) if c.role == "denoiser" else 0.0  # per batch
        fields = (2 * c.runs * t.linear, 2 * c.runs * t.attention, 2 * c.runs * (t.conv + t.functional),
                  c.runs * t.elementwise, calls, c.params * (calls if c.role == "denoiser" else 1))
        row = merged.setdefault(c.component, [c.role, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
        for i, v in enumerate(fields, start=1):
            row[i] += v
    comps = tuple(ComponentWork(name, role, lin / items, att / items, conv / items, el / items, calls / items,
                                reads / items)
                  for name, (role, lin, att, conv, el, calls, reads) in merged.items())
    pixels = (s.height or 0) * (s.width or 0) * (s.num_frames or 1)  # 0: a bare text encoder has no image
    return Work(comps, items, int(s.steps or 0), passes > 1, int(pixels))
