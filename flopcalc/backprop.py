r"""The backward pass of a component, derived op class by op class from its forward cost tree.

For every module of the forward tree (at batch 1, MACs as ``FlopCounterMode`` counts them):

* a dense layer or convolution with trained weights ``y = x W``: the weight gradient
  :math:`\partial L/\partial W = x^\top\,\partial L/\partial y` (``aten.mm`` / ``convolution_backward``)
  costs exactly its forward MACs; the input gradient :math:`\partial L/\partial x = \partial L/\partial y\,W^\top`
  costs its forward MACs again, **unless** ``x`` is a model input (latents, text embeddings, the
  sinusoidal timestep projection): autograd computes no gradient for a tensor that needs none;
* attention's two batched matmuls ``QKᵀ`` and ``A·V``: each operand of each needs a gradient,
  so 2 × their forward MACs (on meta, SDPA's math path; a fused kernel, which recomputes the
  scores, is counted 2.5 × by torch: :data:`FUSED_ATTENTION_BACKWARD`);
* under gradient checkpointing, the modules diffusers wraps in ``torch.utils.checkpoint`` run
  their forward a second time during the backward: + their forward MACs, less the last layer that
  saves tensors (torch's non-reentrant checkpoint stops early, see :class:`Checkpointed`).

Which layers see a model input, and which modules checkpointing wraps, are properties of the real
module's ``forward``: each family declares them beside its assembler with :func:`gradient_graph`,
citing the diffusers source. Nothing here multiplies a total by a constant: the backward is summed
module by module, and the validation (``validation/fixtures/training``) checks it against
``FlopCounterMode`` counting forward + backward on the real module.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

from flopcalc.cost import Node
from flopcalc.errors import FlopcalcError

if TYPE_CHECKING:
    from flopcalc.lora import LoraFlow

#: torch's FLOP registry counts the backward of the fused SDPA kernels
#: (``aten._scaled_dot_product_efficient_attention_backward`` / ``_flash_attention_backward``)
#: as 2.5 × their forward: the kernel recomputes the score matrix (torch/utils/flop_counter.py,
#: ``sdpa_backward_flop_count``). The meta device's math path counts 2 ×.
FUSED_ATTENTION_BACKWARD = Fraction(5, 2)
MATH_ATTENTION_BACKWARD = 2


@dataclass(frozen=True)
class GradientGraph:
    """What autograd does in one family's forward, beyond the op classes.

    ``input_layers``: module path patterns (dotted; ``*`` = any one part, ``**`` = any number of parts)
    of the layers whose input is a model input and so needs no gradient. ``checkpointed``: the modules
    ``enable_gradient_checkpointing()`` wraps. ``source``: where the real module does this.
    ``refuses``: for a tree and the checkpointing switch, why this graph does not describe that model
    (a config of the class whose autograd it was not validated on), or None. ``lora``: the dataflow a
    LoRA run's backward depends on (:class:`flopcalc.lora.LoraFlow`), None where LoRA is not modelled.
    """

    class_name: str
    input_layers: tuple[str, ...]
    checkpointed: tuple[Checkpointed, ...]
    source: str
    refuses: Callable[[Node, bool], str | None] | None = None
    lora: LoraFlow | None = None


@dataclass(frozen=True)
class Checkpointed:
    """Modules wrapped in ``torch.utils.checkpoint`` (a path pattern; its last part may be ``N:``, the
    list entries from index N on) and what of each is not recomputed.

    diffusers' checkpoint is non-reentrant, and torch stops the recompute as soon as the last tensor
    saved for the backward has been saved again (``torch/utils/checkpoint.py``, early stop). A layer
    saves its input before it runs, so the wrapped module's last layer that saves tensors (and all after
    it) is not run again. ``not_recomputed`` lists candidate paths relative to the wrapped module; the
    first one the module has is that layer (e.g. a ResNet block: ``conv_shortcut`` when it has one,
    else ``conv2``). Tails without FLOPs (a gating multiply) need no entry.
    """

    pattern: str
    not_recomputed: tuple[str, ...] = ()


_GRAPHS: dict[str, GradientGraph] = {}


def gradient_graph(class_name: str, *, input_layers: tuple[str, ...],
                   checkpointed: tuple[str | Checkpointed, ...], source: str,
                   refuses: Callable[[Node, bool], str | None] | None = None,
                   lora: LoraFlow | None = None) -> GradientGraph:
    """Declare the gradient graph of ``class_name`` (called once, in the family's architecture module);
    a plain string in ``checkpointed`` is a wrapped module recomputed in full."""
    if class_name in _GRAPHS:
        raise RuntimeError(f"gradient graph of {class_name} declared twice")
    wrapped = tuple(c if isinstance(c, Checkpointed) else Checkpointed(c) for c in checkpointed)
    graph = GradientGraph(class_name, tuple(input_layers), wrapped, source, refuses, lora)
    _GRAPHS[class_name] = graph
    return graph


def graph_of(class_name: str) -> GradientGraph:
    """The declared graph of ``class_name``; a :class:`FlopcalcError` naming the supported ones."""
    from flopcalc.registry import registered

    registered()  # imports every architecture module, which declares its graph
    try:
        return _GRAPHS[class_name]
    except KeyError:
        raise FlopcalcError(
            f"training FLOPs are not validated for {class_name}; supported denoisers: "
            f"{', '.join(sorted(_GRAPHS))}"
        ) from None


def lora_supported() -> list[str]:
    """The denoisers whose LoRA dataflow is declared (``gradient_graph(..., lora=...)``)."""
    from flopcalc.registry import registered

    registered()
    return sorted(name for name, graph in _GRAPHS.items() if graph.lora is not None)


@dataclass(frozen=True)
class Backward:
    """MACs of one backward pass (batch 1), by what is computed."""

    weight_grad: int
    input_grad: int
    attention_grad: int
    recompute: int
    no_input_grad: int  # forward MACs of the layers fed by model inputs (their input gradient is skipped)
    #: the attention backward through a fused SDPA kernel instead (torch counts 2.5 × its forward for every attention
    #: whose query, key or value requires grad; under LoRA the math path computes only the gradients required)
    fused_attention_grad: int
    unused: int = 0  # backward MACs skipped for layers the output does not depend on (no gradient at all)

    @property
    def macs(self) -> int:
        return self.weight_grad + self.input_grad + self.attention_grad + self.recompute

    def fused_attention_macs(self) -> int:
        """The same backward with attention through a fused SDPA kernel."""
        return self.macs - self.attention_grad + self.fused_attention_grad


def _matches(parts: tuple[str, ...], pattern: tuple[str, ...]) -> bool:
    """``pattern`` parts: a name, ``*`` (any one part) or ``**`` (any number of parts, also none)."""
    if not pattern:
        return not parts
    if pattern[0] == "**":
        return any(_matches(parts[i:], pattern[1:]) for i in range(len(parts) + 1))
    return bool(parts) and pattern[0] in ("*", parts[0]) and _matches(parts[1:], pattern[1:])


def _items_matched(parts: tuple[str, ...], node: Node, pattern: tuple[str, ...]) -> int:
    """How many of ``node``'s ``count`` items the pattern selects (a last part ``N:`` selects list
    indices from N on, also inside a grouped span such as ``0-1``)."""
    last = pattern[-1] if pattern else ""
    if not (last.endswith(":") and last[:-1].isdigit()):
        return node.count if _matches(parts, pattern) else 0
    if not parts or not _matches(parts[:-1], pattern[:-1]):
        return 0
    first, _, end = parts[-1].partition("-")
    if not first.isdigit():
        return 0
    lo, hi = int(first), int(end or first)
    return max(0, hi - max(lo, int(last[:-1])) + 1)


def _recomputed(item: Node, spec: Checkpointed) -> int:
    """MACs run again for one wrapped module: its forward less the first ``not_recomputed`` layer it has."""
    macs = item.per_item.macs("torch")
    for path in spec.not_recomputed:
        tail = item.find(path)
        if tail is not None:
            return macs - tail.per_item.macs("torch")
    return macs


def refusal(tree: Node, graph: GradientGraph, checkpointing: bool) -> None:
    """A :class:`FlopcalcError` where ``graph`` does not describe ``tree`` (its ``refuses``)."""
    why = graph.refuses(tree, checkpointing) if graph.refuses is not None else None
    if why:
        raise FlopcalcError(f"training FLOPs are not validated for this {graph.class_name}: {why}")


def recompute(tree: Node, graph: GradientGraph) -> int:
    """MACs gradient checkpointing runs again in the backward: the forward of each wrapped module (the
    first pattern that matches a module wraps it) less its not-recomputed tail."""
    wrapped = [(tuple(c.pattern.split(".")), c) for c in graph.checkpointed]
    total = 0

    def visit(node: Node, parts: tuple[str, ...], k: int) -> None:
        nonlocal total
        for pattern, spec in wrapped:
            items = _items_matched(parts, node, pattern)
            if items:
                total += k * items * _recomputed(node, spec)
                return
        for child in node.children:
            visit(child, parts + (child.name,), k * node.count)

    visit(tree, (), 1)
    return total


def backward(tree: Node, graph: GradientGraph, *, checkpointing: bool = False) -> Backward:
    """The backward MACs of ``tree`` (a forward cost tree, root = the component) when every
    parameter is trained."""
    refusal(tree, graph, checkpointing)
    inputs = [tuple(p.split(".")) for p in graph.input_layers]
    acc = {"weight": 0, "input": 0, "attention": 0, "recompute": recompute(tree, graph) if checkpointing else 0,
           "skipped": 0}

    def visit(node: Node, parts: tuple[str, ...], k: int, fed_by_input: bool) -> None:
        k *= node.count
        if not fed_by_input and any(_matches(parts, p) for p in inputs):
            fed_by_input = True
        c = node.cost
        dense = c.linear + c.conv + c.functional
        acc["weight"] += k * dense
        acc["attention"] += k * MATH_ATTENTION_BACKWARD * c.attention
        if fed_by_input:
            acc["skipped"] += k * dense
        else:
            acc["input"] += k * dense
        for child in node.children:
            visit(child, parts + (child.name,), k, fed_by_input)

    visit(tree, (), 1, False)
    unused = _unused(tree, graph, inputs, acc)
    # every parameter trained: every attention computes dQ, dK, dV (2 × forward), the fused kernel 2.5 × forward
    fused = int(acc["attention"] * FUSED_ATTENTION_BACKWARD / MATH_ATTENTION_BACKWARD)
    return Backward(acc["weight"], acc["input"], acc["attention"], acc["recompute"], acc["skipped"], fused, unused)


def _unused(tree: Node, graph: GradientGraph, inputs: list[tuple[str, ...]], acc: dict[str, int]) -> int:
    """Take out of ``acc`` the backward of the layers and attentions the output does not depend on (the declared
    flow's dead branches, :func:`flopcalc.lora.unused_layers`: Qwen-Image's last text stream): autograd computes
    neither their weight nor their input gradient. Returns the backward MACs so skipped. A flow built from the
    tree (a UNet's, whose every block feeds the output) has none, and may not describe every config it trains."""
    if graph.lora is None or callable(graph.lora.steps):
        return 0
    from flopcalc.lora import Attend, unused_layers

    skipped = 0
    for path, step in unused_layers(tree, graph.lora):
        node = tree.find(path)
        assert node is not None
        c = node.cost  # its own work, as visit() counts it (an attention's projections are its children)
        if isinstance(step, Attend):
            acc["attention"] -= MATH_ATTENTION_BACKWARD * c.attention
            skipped += MATH_ATTENTION_BACKWARD * c.attention
            continue
        parts = tuple(path.split("."))
        dense = c.linear + c.conv + c.functional
        fed_by_input = any(_matches(parts[:n], p) for p in inputs for n in range(1, len(parts) + 1))
        acc["weight"] -= dense
        skipped += dense
        if fed_by_input:
            acc["skipped"] -= dense
        else:
            acc["input"] -= dense
            skipped += dense
    return skipped
