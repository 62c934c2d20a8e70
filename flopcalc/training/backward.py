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
module's ``forward``: each family declares them beside its assembler with :func:`flopcalc.engine.gradients.gradient_graph`,
citing the diffusers source. Nothing here multiplies a total by a constant: the backward is summed
module by module, and the validation (``validation/fixtures/training``) checks it against
``FlopCounterMode`` counting forward + backward on the real module.
"""

from __future__ import annotations

from dataclasses import dataclass

from flopcalc.engine.cost import Node
from flopcalc.engine.errors import FlopcalcError, few
from flopcalc.engine.gradients import Checkpointed, GradientGraph, declared_graphs, items_matched, path_matches
from flopcalc.training.factors import FUSED_ATTENTION_BACKWARD, MATH_ATTENTION_BACKWARD
from flopcalc.engine.registry import registered

def graph_of(class_name: str) -> GradientGraph:
    """The declared graph of ``class_name``; a :class:`FlopcalcError` naming the supported ones."""
    registered()  # imports every architecture module, which declares its graph
    graphs = declared_graphs()
    try:
        return graphs[class_name]
    except KeyError:
        raise FlopcalcError(f"training FLOPs are not validated for {class_name}; validated denoisers: "
                            f"{few(sorted(graphs))} (docs/training.md lists them)") from None


def lora_supported() -> list[str]:
    """The denoisers whose LoRA dataflow is declared (``gradient_graph(..., lora=...)``)."""
    registered()
    return sorted(name for name, graph in declared_graphs().items() if graph.lora is not None)


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
            items = items_matched(parts, node, pattern)
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
        if not fed_by_input and any(path_matches(parts, p) for p in inputs):
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
    fused = acc["attention"] * FUSED_ATTENTION_BACKWARD // MATH_ATTENTION_BACKWARD  # floor: an int, or a law
    return Backward(acc["weight"], acc["input"], acc["attention"], acc["recompute"], acc["skipped"], fused, unused)


def _unused(tree: Node, graph: GradientGraph, inputs: list[tuple[str, ...]], acc: dict[str, int]) -> int:
    """Take out of ``acc`` the backward of the layers and attentions the output does not depend on (the declared
    flow's dead branches, :func:`flopcalc.training.lora.unused_layers`: Qwen-Image's last text stream): autograd computes
    neither their weight nor their input gradient. Returns the backward MACs so skipped. A flow built from the
    tree (a UNet's, whose every block feeds the output) has none, and may not describe every config it trains."""
    if graph.lora is None or callable(graph.lora.steps):
        return 0
    from flopcalc.training.lora import unused_layers
    from flopcalc.engine.gradients import Attend

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
        fed_by_input = any(path_matches(parts[:n], p) for p in inputs for n in range(1, len(parts) + 1))
        acc["weight"] -= dense
        skipped += dense
        if fed_by_input:
            acc["skipped"] -= dense
        else:
            acc["input"] -= dense
            skipped += dense
    return skipped
