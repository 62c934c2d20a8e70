"""The work of one generation, per item, split by op class: what the energy laws consume.

Read from a :class:`flopcalc.flops.estimate.Report` (the exact counts of ``flopcalc.estimate`` at the
settings given), never re-derived. Op classes follow :class:`flopcalc.engine.cost.Cost`:

* ``linear``: dense layers (``Cost.linear``),
* ``attention``: the QKᵀ and A·V matmuls (``Cost.attention``),
* ``conv``: convolutions, ``Cost.conv`` plus ``Cost.functional`` (functional / subclassed convs and
  matmuls; in the models counted it is almost all the causal 3-D convolutions of video VAEs),
* ``elementwise``: flopcalc's estimate of elementwise ops (norms, activations, softmax; no convention
  counts them; ops, not doubled),

each as FLOPs (2 × MACs) per item (image or video), plus the denoiser calls per item (steps ÷
items in the batch: the per-step overhead that dominates small workloads) and the parameters read
per item (the denoiser's once per call, every other component's once per batch: weight traffic).

Two views of the same counts that the op-class law reads (``Cost.scores``, the attention matrices'
size that :func:`flopcalc.formulas.ops.attention` computes, is what makes them possible):

* ``attention_padded``: the attention FLOPs with each call's head width (``attention / (2·scores)``
  of the module that calls it) rounded up to the width a FlashAttention kernel is compiled for:
  FlashAttention-2, which PyTorch's SDPA flash backend vendors, instantiates its forward kernels for
  head widths 32, 64, …, 256 (``run_mha_fwd_hdim32`` … ``hdim256``, PyTorch's
  ``aten/src/ATen/native/transformers/cuda/flash_attn/flash_fwd_launch_template.h``) and zero-pads a
  narrower head to the next one, so head width 88 (HunyuanDiT) runs as 96 and 40 (SD1.5's first
  level) as 64; wider heads (VAE mid-block attention) are not padded;
* ``unfused_elementwise``: the elementwise estimate without the softmax (``elementwise −
  SOFTMAX_OPS·scores``), which the attention kernel computes in registers: norms and activations, each
  a separate memory-bound kernel, standing in for all the activation traffic that scales with the
  same tokens × width (residual adds, modulations, rotary embeddings, casts are not counted).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from flopcalc.formulas.ops import SOFTMAX_OPS

if TYPE_CHECKING:
    from flopcalc.flops.report import Report
    from flopcalc.engine.cost import Node

OP_CLASSES = ("linear", "attention", "conv")
#: FlashAttention-2's head widths: multiples of 32 up to 256 (see the module docstring).
HEAD_WIDTH_TILE = 32
MAX_TILED_HEAD_WIDTH = 256


def padded_head_width(width: float) -> float:
    """The head width a FlashAttention-2 kernel runs ``width`` at (unchanged above 256)."""
    if width > MAX_TILED_HEAD_WIDTH:
        return width
    return HEAD_WIDTH_TILE * math.ceil(width / HEAD_WIDTH_TILE - 1e-9)


def padded_attention(node: "Node") -> float:
    """Attention MACs of ``node``'s subtree with every call's head width padded
    (:func:`padded_head_width`); a module's own attention without scores (linear attention) is kept."""
    c = node.cost
    own = float(c.attention)
    if c.attention and c.scores:
        width = c.attention / (2 * c.scores)
        own *= padded_head_width(width) / width
    return (own + sum(padded_attention(child) for child in node.children)) * node.count


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
    launches: float = 0.0  # leaf modules run per item (each forward of the real module runs each once: kernels)
    scores: float = 0.0  # attention scores per item (softmax elements)
    attention_padded: float = 0.0  # attention FLOPs at the kernels' padded head widths

    @property
    def flops(self) -> float:
        return self.linear + self.attention + self.conv

    @property
    def unfused_elementwise(self) -> float:
        """Elementwise ops outside the attention kernels (the estimate less the softmax)."""
        return self.elementwise - SOFTMAX_OPS * self.scores


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


def leaves(node: "Node") -> int:
    """Leaf modules one run of ``node`` runs (a grouped block counted for each of its items)."""
    return node.count * (sum(leaves(c) for c in node.children) if node.children else 1)


def work_of(report: "Report") -> Work:
    """Per-item op-class FLOPs of every component of ``report`` (exact counts of the estimate)."""
    from flopcalc.gpu_memory.estimate import forward_batch

    s = report.settings
    items = s.batch_size * s.num_images_per_prompt
    passes = max(report.passes, 1)
    merged: dict[str, list] = {}
    for c in report.components:
        t = c.per_run
        # forwards of the real module per batch: a step's passes are one forward where __call__ concatenates them;
        # a denoiser row of pieces (perturbed-attention guidance) is one batched call per run
        forwards = c.runs / (1 if c.tree.formula == "pieces" else forward_batch(report, c.role))
        calls = forwards if c.role == "denoiser" else 0.0
        fields = (2 * c.runs * t.linear, 2 * c.runs * t.attention, 2 * c.runs * (t.conv + t.functional),
                  c.runs * t.elementwise, calls, c.params * (calls if c.role == "denoiser" else 1),
                  c.runs * t.scores, 2 * c.runs * padded_attention(c.tree), leaves(c.tree) * forwards)
        row = merged.setdefault(c.component, [c.role] + [0.0] * len(fields))
        for i, v in enumerate(fields, start=1):
            row[i] += v
    comps = tuple(ComponentWork(name, role, *(v / items for v in values[:6]), scores=values[6] / items,
                                attention_padded=values[7] / items, launches=values[8] / items)
                  for name, (role, *values) in merged.items())
    pixels = (s.height or 0) * (s.width or 0) * (s.num_frames or 1)  # 0: a bare text encoder has no image
    return Work(comps, items, int(s.steps or 0), passes > 1, int(pixels))
