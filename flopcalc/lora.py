r"""LoRA training: peft adapters on a frozen denoiser, forward and backward counted layer by layer.

diffusers' training scripts freeze the model and add adapters with
``model.add_adapter(LoraConfig(r=rank, init_lora_weights="gaussian", target_modules=[...]))``. peft then
wraps each ``nn.Linear`` whose module name equals a target or ends with ``"." + target``
(``peft/tuners/tuners_utils.py`` ``check_target_module_exists``) in a ``LoraLayer`` whose forward is
``base(x) + lora_B(lora_A(dropout(x))) * scaling`` (``peft/tuners/lora/layer.py`` ``Linear.forward``;
dropout 0 is ``nn.Identity``; ``lora_A``: in → r, ``lora_B``: r → out, both without bias). For a layer
of ``t`` tokens:

* forward: the adapter adds :math:`t\,r\,(d_\text{in} + d_\text{out})` MACs;
* backward: the adapters' weight gradients :math:`t\,r\,(d_\text{in} + d_\text{out})`, ``lora_B``'s input
  gradient :math:`t\,r\,d_\text{out}` (its input depends on ``lora_A``), and ``lora_A``'s input gradient
  :math:`t\,d_\text{in}\,r` only when ``x`` requires grad;
* a frozen layer computes no weight gradient, and an input gradient (its forward MACs again) only when
  its input requires grad, i.e. depends on some adapter;
* attention's two ``bmm`` (``QKᵀ``, ``A·V``, each half the forward attention MACs): autograd computes the
  gradient of an operand only if it requires grad (``output_mask``): dQ if Q does, dK if K does, dA if Q
  or K does, dV if V does.

Which tensors require grad is a dataflow question the module tree does not answer: each family declares,
beside its :func:`~flopcalc.backprop.gradient_graph`, a :class:`LoraFlow`: the forward in order, as
layers reading named tensors (:class:`Layer`), joins (residual adds, concatenations: :class:`Join`),
attentions (:class:`Attend`) and module lists run item by item (:class:`Blocks`); layers reading only
conditioning (timestep, pooled text, AdaLN modulation) are ``frozen``: they never see a gradient and are
never targets. The flow must account for every layer of the tree (checked on each use).

Gradient checkpointing: the recomputed forward of a wrapped module includes its adapters. Validated
against ``FlopCounterMode`` counting forward + backward of the real module with peft adapters on the
meta device (``validation/fixtures/training``, modes ``lora`` / ``lora_checkpointing``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Union

from flopcalc.cost import Node
from flopcalc.errors import FlopcalcError

if TYPE_CHECKING:
    from flopcalc.backprop import GradientGraph

#: The largest rank ``lora:RANK`` accepts (larger adapters are no longer low-rank for any model here).
MAX_RANK = 4096
_NAME = re.compile(r"[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)*\Z")


@dataclass(frozen=True)
class Layer:
    """A dense layer at ``path`` (relative to the enclosing block) reading the tensors ``reads`` and
    writing ``to``."""

    path: str
    reads: tuple[str, ...]
    to: str


@dataclass(frozen=True)
class Join:
    """``to`` = a function of ``reads`` without MACs (a residual add, a concatenation, a gating product)."""

    reads: tuple[str, ...]
    to: str


@dataclass(frozen=True)
class Attend:
    """The attention of the module at ``path``: queries, keys and values concatenated from ``q``, ``k``,
    ``v``; output ``to``."""

    path: str
    q: tuple[str, ...]
    k: tuple[str, ...]
    v: tuple[str, ...]
    to: str


@dataclass(frozen=True)
class Blocks:
    """The ``ModuleList`` at ``path``: ``steps`` run for each of its items in order (paths relative to the item)."""

    path: str
    steps: tuple[Step, ...]


Step = Union[Layer, Join, Attend, Blocks]


@dataclass(frozen=True)
class LoraFlow:
    """How tensors flow through one family's forward, for deciding which ones require grad.

    ``steps``: the forward in order. ``frozen``: path patterns (``*`` one part, ``**`` any) of layers that
    read only conditioning. ``default_targets``: the ``target_modules`` of diffusers' example training
    script for the family, ``targets_source`` where (script and line). ``source``: the forward mirrored.
    """

    steps: tuple[Step, ...]
    frozen: tuple[str, ...]
    default_targets: tuple[str, ...]
    targets_source: str
    source: str
    lists: tuple[str, ...] = ()  # block lists the steps name with indices (beyond their Blocks)


@dataclass(frozen=True)
class LoraBackward:
    """MACs (batch 1) of a LoRA training step's adapter forward and of its backward, by what is computed."""

    adapter_forward: int
    adapter_weight_grad: int
    adapter_input_grad: int
    base_input_grad: int
    attention_grad: int
    no_input_grad: int  # forward MACs of frozen layers whose input needs no gradient (their input gradient skipped)
    trainable_params: int
    layers: int
    #: modules (paths with real list indices, and their ancestors) where some tensor requires grad: only these
    #: save tensors for the backward, so only these are recomputed under gradient checkpointing
    active: frozenset[str] = frozenset()


def parse_trainable(trainable: str) -> int | None:
    """``"denoiser"`` → None; ``"lora:RANK"`` → RANK; anything else a :class:`FlopcalcError`."""
    if trainable == "denoiser":
        return None
    kind, sep, rank = trainable.partition(":")
    if kind != "lora" or not sep:
        raise FlopcalcError(f"--trainable {trainable!r}: choose denoiser or lora:RANK (e.g. lora:16)")
    if not (rank.isascii() and rank.isdigit()) or not 1 <= int(rank) <= MAX_RANK:
        raise FlopcalcError(f"--trainable {trainable!r}: RANK must be an integer from 1 to {MAX_RANK}")
    return int(rank)


def check_target_names(targets: tuple[str, ...], flow: LoraFlow) -> tuple[str, ...]:
    """Target names as peft matches them: dotted module names, without a block-list index (an index would
    adapt some items of a block list and not others, which the flow does not model)."""
    if not targets:
        raise FlopcalcError("--lora-targets: name at least one layer, e.g. attn.to_q,attn.to_v")
    lists = {b.rsplit(".", 1)[-1] for b in (*_block_lists(flow.steps), *flow.lists)}
    for t in targets:
        if not isinstance(t, str) or not _NAME.match(t):
            raise FlopcalcError(f"--lora-targets {t!r}: expected a module name such as attn.to_q or ff.net.2")
        parts = t.split(".")
        if any(p.isdigit() and (i == 0 or parts[i - 1] in lists) for i, p in enumerate(parts)):
            raise FlopcalcError(f"--lora-targets {t!r}: a name with a block index is not supported; name the layer "
                                "as in every block (e.g. attn.to_q)")
    return tuple(dict.fromkeys(targets))


def _block_lists(steps: tuple[Step, ...]) -> Iterator[str]:
    for step in steps:
        if isinstance(step, Blocks):
            yield step.path
            yield from _block_lists(step.steps)


def _matches(parts: tuple[str, ...], pattern: tuple[str, ...]) -> bool:
    from flopcalc.backprop import _matches as match

    return match(parts, pattern)


def _is_target(path: str, targets: tuple[str, ...]) -> bool:
    """peft's rule: the module name equals a target or ends with ``"." + target``."""
    return any(path == t or path.endswith("." + t) for t in targets)


def _dense(node: Node) -> Any:
    c = node.cost
    return c.linear + c.conv + c.functional


def _layer_paths(node: Node, path: str) -> Iterator[tuple[str, Node]]:
    """(concrete path, node) of every module with MACs of its own, a list entry's first index standing
    for its span (target names carry no index, so every item of a span matches alike)."""
    for child in node.children:
        name = str(child.span[0]) if child.span is not None else child.name
        sub = f"{path}.{name}" if path else name
        if _dense(child) or child.cost.attention:
            yield sub, child
        yield from _layer_paths(child, sub)


def adapters(tree: Node, flow: LoraFlow, targets: tuple[str, ...]) -> frozenset[str]:
    """The layers (paths with a span's first index) ``targets`` adapt; a :class:`FlopcalcError` for a
    target that matches no layer, or one that is not a LoRA-able layer of the flow."""
    layers = dict(_layer_paths(tree, ""))
    trainable = set(_flow_layers(tree, flow))
    modules = {p for p, _ in _all_paths(tree, "")}
    names = ", ".join(sorted(_flow_names(flow.steps)))
    chosen: set[str] = set()
    for t in targets:
        hits = [p for p in layers if _is_target(p, (t,))]
        if not hits:
            near = "only modules with no weights of their own" if any(_is_target(p, (t,)) for p in modules) else "nothing"
            raise FlopcalcError(f"--lora-targets {t!r} matches {near} in {tree.name}; LoRA-able layers: {names}")
        bad = [p for p in hits if p not in trainable or layers[p].cost.linear_layers != 1 or layers[p].cost.conv]
        if bad:
            raise FlopcalcError(f"--lora-targets {t!r}: LoRA on {bad[0]} is not modelled (not a single linear layer "
                                f"of the main stream); LoRA-able layers: {names}")
        chosen.update(hits)
    return frozenset(chosen)


def _flow_names(steps: tuple[Step, ...]) -> set[str]:
    """The paths of the flow's layers relative to their block (``attn.to_q``, ``proj_out``)."""
    out: set[str] = set()
    for step in steps:
        if isinstance(step, Blocks):
            out |= _flow_names(step.steps)
        elif isinstance(step, Layer):
            out.add(step.path)
    return out


def _all_paths(node: Node, path: str) -> Iterator[tuple[str, Node]]:
    for child in node.children:
        name = str(child.span[0]) if child.span is not None else child.name
        sub = f"{path}.{name}" if path else name
        yield sub, child
        yield from _all_paths(child, sub)


def _items(node: Node) -> Iterator[tuple[int, Node]]:
    """(index, entry) of a ``ModuleList`` node, spans expanded."""
    for child in node.children:
        if child.span is not None:
            for i in range(child.span[0], child.span[1] + 1):
                yield i, child
        else:
            yield int(child.name), child


def _walk_flow(tree: Node, steps: tuple[Step, ...], prefix: str) -> Iterator[tuple[str, Step]]:
    """(block prefix, step) of every :class:`Layer` and :class:`Attend` in forward order, list items expanded."""
    for step in steps:
        if isinstance(step, Blocks):
            path = f"{prefix}.{step.path}" if prefix else step.path
            node = tree.find(path)
            if node is None:
                raise RuntimeError(f"LoRA flow: {path} is not in the tree")
            for i, _ in _items(node):
                yield from _walk_flow(tree, step.steps, f"{path}.{i}")
        else:
            yield prefix, step


def _flow_layers(tree: Node, flow: LoraFlow) -> Iterator[str]:
    for prefix, step in _walk_flow(tree, flow.steps, ""):
        if isinstance(step, Layer):
            yield _first_index(tree, f"{prefix}.{step.path}" if prefix else step.path)


def _first_index(tree: Node, path: str) -> str:
    """``path`` with each list index replaced by the first index of the span holding it."""
    out, node = [], tree
    for part in path.split("."):
        nxt = None
        for child in node.children:
            if child.name == part:
                nxt, label = child, part
                break
            if child.span is not None and part.isdigit() and child.span[0] <= int(part) <= child.span[1]:
                nxt, label = child, str(child.span[0])
                break
        if nxt is None:
            raise RuntimeError(f"LoRA flow: {path} is not in the tree")
        out.append(label)
        node = nxt
    return ".".join(out)


def adapter_node(layer: Node, rank: int) -> Node:
    """``layer`` (one ``nn.Linear``) with peft's ``lora_A.default`` (in → r) and ``lora_B.default``
    (r → out), both without bias, as children."""
    from flopcalc.formulas import ops

    c = layer.cost
    d_out = c.linear_rows
    d_in = c.linear_weights // d_out
    tokens = c.linear // c.linear_weights
    lora_a = Node("lora_A", children=(Node("default", ops.linear(tokens, d_in, rank, bias=False)),))
    lora_b = Node("lora_B", children=(Node("default", ops.linear(tokens, rank, d_out, bias=False)),))
    return replace(layer, children=(*layer.children, lora_a, lora_b))


def adapted_tree(tree: Node, chosen: frozenset[str], rank: int) -> Node:
    """``tree`` with adapters on the ``chosen`` layers (every item of a span alike)."""

    def rebuild(node: Node, path: str) -> Node:
        if path in chosen:
            return adapter_node(node, rank)
        if not node.children:
            return node
        kids = []
        for child in node.children:
            name = str(child.span[0]) if child.span is not None else child.name
            kids.append(rebuild(child, f"{path}.{name}" if path else name))
        return replace(node, children=tuple(kids))

    return rebuild(tree, "")


def lora_backward(tree: Node, flow: LoraFlow, chosen: frozenset[str], rank: int) -> LoraBackward:
    """Run ``flow`` over ``tree`` (the frozen model's forward tree, batch 1) with adapters on ``chosen``:
    which tensors require grad, and so what the backward computes, layer by layer."""
    grad: dict[str, bool] = {}
    acc = {"fwd": 0, "wgrad": 0, "agrad": 0, "igrad": 0, "att": 0, "skip": 0, "params": 0, "layers": 0}
    seen: dict[str, int] = {}
    active: set[str] = set()

    def activate(path: str) -> None:
        parts = path.split(".")
        active.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))

    for prefix, step in _walk_flow(tree, flow.steps, ""):
        if isinstance(step, Join):
            grad[step.to] = any(grad.get(r, False) for r in step.reads)
            continue
        path = f"{prefix}.{step.path}" if prefix else step.path
        node = tree.find(path)
        if node is None:
            raise RuntimeError(f"LoRA flow: {path} is not in the tree")
        key = _first_index(tree, path)
        seen[key] = seen.get(key, 0) + 1
        if isinstance(step, Attend):
            q, k, v = (any(grad.get(r, False) for r in rs) for rs in (step.q, step.k, step.v))
            one_bmm = node.cost.attention // 2
            acc["att"] += one_bmm * (q + k + (q or k) + v)
            grad[step.to] = q or k or v
            if grad[step.to]:
                activate(path)
            continue
        needs = any(grad.get(r, False) for r in step.reads)
        macs = _dense(node)
        if needs:
            acc["igrad"] += macs
        else:
            acc["skip"] += macs
        adapted = key in chosen
        if adapted:
            c = node.cost
            d_out, d_in = c.linear_rows, c.linear_weights // c.linear_rows
            tokens = c.linear // c.linear_weights
            a, b = tokens * d_in * rank, tokens * rank * d_out
            acc["fwd"] += a + b
            acc["wgrad"] += a + b
            acc["agrad"] += b + (a if needs else 0)
            acc["params"] += rank * (d_in + d_out)
            acc["layers"] += 1
        grad[step.to] = needs or adapted
        if grad[step.to]:
            activate(path)
    _check_coverage(tree, flow, seen)
    return LoraBackward(acc["fwd"], acc["wgrad"], acc["agrad"], acc["igrad"], acc["att"], acc["skip"], acc["params"],
                        acc["layers"], frozenset(active))


def lora_recompute(adapted: Node, graph: GradientGraph, active: frozenset[str]) -> int:
    """MACs gradient checkpointing runs again in a LoRA backward: the forward of each wrapped module,
    adapters included, less its not-recomputed tail (:func:`flopcalc.backprop.recompute`), for the wrapped
    modules where some tensor requires grad (``active``); a wrapped module before the first adapter saves
    nothing and is never recomputed. An adapted tail layer is refused (its early stop is not measured)."""
    from flopcalc.backprop import _items_matched, _recomputed

    wrapped = [(tuple(c.pattern.split(".")), c) for c in graph.checkpointed]
    total = 0

    def item(node: Node, parts: tuple[str, ...], k: int) -> None:
        nonlocal total
        for pattern, spec in wrapped:
            if _items_matched(parts, node, pattern):
                if ".".join(parts) in active:
                    tail = next((t for t in map(node.find, spec.not_recomputed) if t is not None), None)
                    if tail is not None and tail.find("lora_A") is not None:
                        raise FlopcalcError(f"LoRA on {'.'.join(parts)}'s last layer under gradient checkpointing "
                                            "is not modelled (torch's early stop of the recompute changes)")
                    total += k * _recomputed(node, spec)
                return
        for child in node.children:
            if child.span is None:
                item(child, parts + (child.name,), k * child.count)
            else:
                for i in range(child.span[0], child.span[1] + 1):
                    item(Node(str(i), child.cost, child.children, formula=child.formula), parts + (str(i),), k)

    item(adapted, (), 1)
    return total


def _check_coverage(tree: Node, flow: LoraFlow, seen: dict[str, int]) -> None:
    """Every module with MACs of its own is in the flow once per item, or frozen (conditioning only)."""
    frozen = [tuple(p.split(".")) for p in flow.frozen]
    for path, node in _layer_paths(tree, ""):
        parts = tuple(path.split("."))
        if any(_matches(parts, p) for p in frozen):
            if path in seen:
                raise RuntimeError(f"LoRA flow of {tree.name}: {path} is both frozen and in the flow")
            continue
        if path not in seen:
            raise RuntimeError(f"LoRA flow of {tree.name}: {path} has MACs but is not in the flow")
