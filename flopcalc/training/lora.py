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
beside its :func:`~flopcalc.engine.gradients.gradient_graph`, a :class:`LoraFlow`: the forward in order, as
layers reading named tensors (:class:`Layer`), joins (residual adds, concatenations: :class:`Join`),
attentions (:class:`Attend`) and module lists run item by item (:class:`Blocks`); layers reading only
conditioning (timestep, pooled text, AdaLN modulation) are ``frozen``: they never see a gradient and are
never targets. The flow must account for every layer of the tree (checked on each use).

Gradient checkpointing: the recomputed forward of a wrapped module includes its adapters, and stops at the
last tensor the module saved for the backward (:class:`_Recompute`). Validated
against ``FlopCounterMode`` counting forward + backward of the real module with peft adapters on the
meta device (``validation/fixtures/training``, modes ``lora`` / ``lora_checkpointing``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from flopcalc.engine.cost import Node
from flopcalc.engine.errors import FlopcalcError
from flopcalc.engine.gradients import (
    Attend,
    Blocks,
    Checkpointed,
    Join,
    Layer,
    LoraFlow,
    Step,
    items_matched,
    path_matches,
)
from flopcalc.training.factors import FUSED_ATTENTION_BACKWARD

#: The largest rank ``lora:RANK`` accepts (larger adapters are no longer low-rank for any model here).
MAX_RANK = 4096
_NAME = re.compile(r"[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)*\Z")


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
    recompute: int = 0  # under gradient checkpointing: the forward run again, adapters included
    #: the attention backward through a fused SDPA kernel: 2.5 × the forward of each attention whose query, key or
    #: value requires grad (the kernel computes dQ, dK and dV together; torch's ``sdpa_backward_flop_count``)
    fused_attention_grad: int = 0


def parse_trainable(trainable: str) -> int | None:
    """``"denoiser"`` → None; ``"lora:RANK"`` → RANK; anything else a :class:`FlopcalcError`."""
    if trainable == "denoiser":
        return None
    if not isinstance(trainable, str):
        raise FlopcalcError(f"--trainable {trainable!r}: choose denoiser or lora:RANK (e.g. lora:16)")
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
    lists = _list_names(flow)
    for t in targets:
        if not isinstance(t, str) or not _NAME.match(t):
            raise FlopcalcError(f"--lora-targets {t!r}: expected a module name such as attn.to_q or ff.net.2")
        parts = t.split(".")
        if any(p.isdigit() and (i == 0 or parts[i - 1] in lists) for i, p in enumerate(parts)):
            raise FlopcalcError(f"--lora-targets {t!r}: a name with a block index is not supported; name the layer "
                                "as in every block (e.g. attn.to_q)")
    return tuple(dict.fromkeys(targets))


def _list_names(flow: LoraFlow) -> set[str]:
    """Names of the block lists the flow runs through (``transformer_blocks``, ``resnets``)."""
    static = () if callable(flow.steps) else flow.steps
    return {b.rsplit(".", 1)[-1] for b in (*_block_lists(static), *flow.lists)}


def _block_lists(steps: tuple[Step, ...]) -> Iterator[str]:
    for step in steps:
        if isinstance(step, Blocks):
            yield step.path
            yield from _block_lists(step.steps)


def _is_target(path: str, targets: tuple[str, ...]) -> bool:
    """peft's rule: the module name equals a target or ends with ``"." + target``."""
    return any(path == t or path.endswith("." + t) for t in targets)


def _dense(node: Node) -> Any:
    c = node.cost
    return c.linear + c.conv + c.functional


def _layer_paths(tree: Node) -> Iterator[tuple[str, Node]]:
    """(path, node) of every module with MACs of its own (a list entry's first index for its span)."""
    return ((p, n) for p, n in _all_paths(tree, "") if _dense(n) or n.cost.attention)


def adapters(tree: Node, flow: LoraFlow, targets: tuple[str, ...]) -> frozenset[str]:
    """The layers (paths with a span's first index) ``targets`` adapt; a :class:`FlopcalcError` for a
    target that matches no layer, or one that is not a LoRA-able layer of the flow."""
    layers = dict(_layer_paths(tree))
    trainable = set(_flow_layers(tree, flow))
    modules = {p for p, _ in _all_paths(tree, "")}
    names = ", ".join(sorted(_flow_names(flow.steps_for(tree), _list_names(flow))))
    chosen: set[str] = set()
    for t in targets:
        hits = [p for p in layers if _is_target(p, (t,))]
        if not hits:
            near = "only modules with no weights of their own" if any(_is_target(p, (t,)) for p in modules) else "nothing"
            raise FlopcalcError(f"--lora-targets {t!r} matches {near} in {tree.name}; LoRA-able layers: {names}")
        wrappers = [p for p, n in _all_paths(tree, "") if p not in layers and n.children and _is_target(p, (t,))]
        if hits and wrappers:  # peft raises on a matched module it cannot wrap (FLUX.2's attn.to_out ModuleList)
            raise FlopcalcError(f"--lora-targets {t!r} also names {wrappers[0]}, a module of layers that peft cannot "
                                f"adapt; name its layers (e.g. {t}.0); LoRA-able layers: {names}")
        bad = [p for p in hits if p not in trainable or layers[p].cost.linear_layers != 1 or layers[p].cost.conv
               or not layers[p].cost.linear]
        if bad:
            raise FlopcalcError(f"--lora-targets {t!r}: LoRA on {bad[0]} is not modelled (not a single linear layer "
                                f"of the main stream); LoRA-able layers: {names}")
        chosen.update(hits)
    return frozenset(chosen)


def _flow_names(steps: tuple[Step, ...], lists: set[str]) -> set[str]:
    """The paths of the flow's layers relative to their block (``attn.to_q``, ``proj_out``)."""
    out: set[str] = set()
    for step in steps:
        if isinstance(step, Blocks):
            out |= _flow_names(step.steps, lists)
        elif isinstance(step, Layer):
            parts = step.path.split(".")
            last = max((i for i, p in enumerate(parts) if p.isdigit() and i and parts[i - 1] in lists), default=-1)
            out.add(".".join(parts[last + 1:]))
    return out


def _all_paths(node: Node, path: str) -> Iterator[tuple[str, Node]]:
    """(path, node) of every module under ``node``, a list entry's first index standing for its span (target
    names carry no index, so every item of a span matches alike)."""
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
        elif not (isinstance(step, Layer) and step.optional and tree.find(f"{prefix}.{step.path}" if prefix
                                                                          else step.path) is None):
            yield prefix, step


def _flow_layers(tree: Node, flow: LoraFlow) -> Iterator[str]:
    for prefix, step in _walk_flow(tree, flow.steps_for(tree), ""):
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


def lora_backward(tree: Node, flow: LoraFlow, chosen: frozenset[str], rank: int,
                  checkpointed: tuple[Checkpointed, ...] = ()) -> LoraBackward:
    """Run ``flow`` over ``tree`` (the frozen model's forward tree, batch 1) with adapters on ``chosen``:
    which tensors require grad, and so what the backward computes, layer by layer; with ``checkpointed``
    (gradient checkpointing on), what the recompute runs again (:class:`_Recompute`)."""
    grad: dict[str, bool] = {}
    acc = {"fwd": 0, "wgrad": 0, "agrad": 0, "igrad": 0, "att": 0, "fused": 0, "skip": 0, "params": 0, "layers": 0}
    seen: dict[str, int] = {}
    again = _Recompute(tree, checkpointed)
    steps = list(_walk_flow(tree, flow.steps_for(tree), ""))
    for (prefix, step), live in zip(steps, _live(steps)):
        if isinstance(step, Join):
            grad[step.to] = any(grad.get(r, False) for r in step.reads)
            if step.gated is not None and grad.get(step.gated, False):
                again.save(prefix)
            continue
        path = f"{prefix}.{step.path}" if prefix else step.path
        node = tree.find(path)
        if node is None:
            raise RuntimeError(f"LoRA flow: {path} is not in the tree")
        key = _first_index(tree, path)
        seen[key] = seen.get(key, 0) + 1
        if isinstance(step, Attend):
            q, k, v = (any(grad.get(r, False) for r in rs) for rs in (step.q, step.k, step.v))
            one_bmm = node.cost.attention // 2 if step.sizes is None else _bmm(node, step.sizes)
            acc["att"] += one_bmm * (q + k + (q or k) + v) * live
            acc["fused"] += int(2 * one_bmm * FUSED_ATTENTION_BACKWARD) * (live and (q or k or v))
            grad[step.to] = q or k or v
            again.run(path, one_bmm)  # QKᵀ
            if grad[step.to]:
                again.save(path)  # A·V saves its operands (A or V) before it runs
            again.run(path, one_bmm)
            continue
        needs = any(grad.get(r, False) for r in step.reads)
        macs = _dense(node)
        acc["igrad" if needs and live else "skip"] += macs
        if needs:
            again.save(path)  # a frozen layer saves its weight for the input gradient before it runs
        again.run(path, macs)
        adapted = key in chosen
        if adapted:
            c = node.cost
            d_out, d_in = c.linear_rows, c.linear_weights // c.linear_rows
            tokens = c.linear // c.linear_weights
            a, b = tokens * d_in * rank, tokens * rank * d_out
            acc["fwd"] += a + b
            acc["wgrad"] += (a + b) * live
            acc["agrad"] += (b + (a if needs else 0)) * live
            acc["params"] += rank * (d_in + d_out)
            acc["layers"] += 1
            for part in (a, b):  # lora_A, then lora_B: each saves its input (for its weight's gradient) first
                again.save(path)
                again.run(path, part, adapter=True)
        grad[step.to] = needs or adapted
    _check_coverage(tree, flow, seen)
    return LoraBackward(acc["fwd"], acc["wgrad"], acc["agrad"], acc["igrad"], acc["att"], acc["skip"], acc["params"],
                        acc["layers"], again.total(), acc["fused"])


def unused_layers(tree: Node, flow: LoraFlow) -> Iterator[tuple[str, Step]]:
    """(path, step) of each :class:`Layer` and :class:`Attend` whose output the model's output ``out`` does not
    depend on (:func:`_live`): autograd runs no backward for them, in full fine-tuning as under LoRA."""
    steps = list(_walk_flow(tree, flow.steps_for(tree), ""))
    for (prefix, step), live in zip(steps, _live(steps)):
        if not live and not isinstance(step, Join):
            yield (f"{prefix}.{step.path}" if prefix else step.path), step
def _bmm(node: Node, sizes: tuple[str, str]) -> int:
    """MACs of one of the two bmm of the attention whose queries and keys the layers ``sizes`` project."""
    q, k = (node.find(p) for p in sizes)
    if q is None or k is None:
        raise RuntimeError(f"LoRA flow: {node.name} has no {sizes}")
    return (q.cost.linear // q.cost.linear_weights) * (k.cost.linear // k.cost.linear_weights) * q.cost.linear_rows


def _live(steps: list[tuple[str, Step]]) -> list[bool]:
    """Per step, whether its output reaches the model's output ``out`` (liveness, last step first): autograd runs
    no backward for a branch the loss does not depend on (FLUX's last dual block's text stream when no
    single-stream block follows), whatever requires grad in it."""
    needed, flags = {"out"}, []
    for _, step in reversed(steps):
        live = step.to in needed
        if live and not isinstance(step, Attend):
            needed.discard(step.to)
            needed.update(step.reads)
        elif live:
            needed.discard(step.to)
            needed.update((*step.q, *step.k, *step.v))
        flags.append(live)
    return flags[::-1]


class _Recompute:
    """What gradient checkpointing runs again under LoRA.

    diffusers' checkpoint is non-reentrant: the backward re-runs a wrapped module's forward until every tensor
    its forward saved for the backward is saved again, and stops there (``torch/utils/checkpoint.py``, early
    stop). An op saves its inputs before it runs: a frozen layer whose input requires grad (its weight, for
    the input gradient), each adapter matrix (its input), ``A·V`` of an attention needing a gradient, a
    conditioning gate multiplying a tensor that requires grad (``Join.gated``). So a wrapped module is re-run up
    to its last such save, adapters included; one where nothing requires grad saves nothing and is not re-run.
    Layers reading only conditioning (``frozen``) run at the start of a wrapped block, before any save.
    """

    def __init__(self, tree: Node, checkpointed: tuple[Checkpointed, ...]) -> None:
        self.tree = tree
        self.wrapped = [tuple(c.pattern.split(".")) for c in checkpointed]
        self.items: dict[str, list[int]] = {}  # wrapped module → [adapter MACs, MACs since its last save, saves]

    def _item(self, path: str) -> list[int] | None:
        parts = tuple(path.split("."))
        for n in range(1, len(parts) + 1):
            one = Node(parts[n - 1])
            if any(items_matched(parts[:n], one, p) for p in self.wrapped):
                return self.items.setdefault(".".join(parts[:n]), [0, 0, 0])
        return None

    def run(self, path: str, macs: int, adapter: bool = False) -> None:
        item = self._item(path) if self.wrapped else None
        if item is not None:
            item[0] += macs if adapter else 0
            item[1] += macs

    def save(self, path: str) -> None:
        item = self._item(path) if self.wrapped else None
        if item is not None:
            item[1] = 0
            item[2] += 1

    def total(self) -> int:
        out = 0
        for path, (adapters, tail, saves) in self.items.items():
            if saves:
                node = self.tree.find(path)
                assert node is not None
                out += node.per_item.macs("torch") + adapters - tail
        return out


def _check_coverage(tree: Node, flow: LoraFlow, seen: dict[str, int]) -> None:
    """Every module with MACs of its own is in the flow once per item, or frozen (conditioning only)."""
    frozen = [tuple(p.split(".")) for p in flow.frozen]
    for path, node in _layer_paths(tree):
        parts = tuple(path.split("."))
        if any(path_matches(parts, p) for p in frozen):
            if path in seen:
                raise RuntimeError(f"LoRA flow of {tree.name}: {path} is both frozen and in the flow")
            continue
        if path not in seen:
            raise FlopcalcError(f"LoRA training is not modelled for this {tree.name}: its {path} is not in the "
                                "declared dataflow (a config the LoRA validation did not cover)")
