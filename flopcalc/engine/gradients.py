"""The vocabulary of autograd that each family declares beside its assemblers, and that the training
predictor (:mod:`flopcalc.training`) reads: which layers see a model input and need no input gradient, which
modules gradient checkpointing wraps (:func:`gradient_graph`), and how tensors flow through the forward for a
LoRA run (:class:`LoraFlow` of :class:`Layer`, :class:`Join`, :class:`Attend`, :class:`Blocks`).

Declarations only: the backward is derived from them in :mod:`flopcalc.training.backward` and
:mod:`flopcalc.training.lora`. Path patterns are dotted module paths; ``*`` matches one part and ``**`` any
number of parts (:func:`path_matches`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Union

from flopcalc.engine.cost import Node

@dataclass(frozen=True)
class GradientGraph:
    """What autograd does in one family's forward, beyond the op classes.

    ``input_layers``: module path patterns (dotted; ``*`` = any one part, ``**`` = any number of parts)
    of the layers whose input is a model input and so needs no gradient. ``checkpointed``: the modules
    ``enable_gradient_checkpointing()`` wraps. ``source``: where the real module does this.
    ``refuses``: for a tree and the checkpointing switch, why this graph does not describe that model
    (a config of the class whose autograd it was not validated on), or None. ``lora``: the dataflow a
    LoRA run's backward depends on (:class:`LoraFlow`), None where LoRA is not modelled.
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


def declared_graphs() -> dict[str, GradientGraph]:
    """The graphs declared by the architecture modules imported so far, by class name."""
    return dict(_GRAPHS)


@dataclass(frozen=True)
class Layer:
    """A dense layer at ``path`` (relative to the enclosing block) reading the tensors ``reads`` and
    writing ``to``; ``optional``: some items of the block list lack it (it is skipped there)."""

    path: str
    reads: tuple[str, ...]
    to: str
    optional: bool = False


@dataclass(frozen=True)
class Join:
    """``to`` = a function of ``reads`` without MACs (a residual add, a concatenation); ``gated``: the read that is
    first multiplied by a conditioning gate (a multiply that saves the gate when that read requires grad)."""

    reads: tuple[str, ...]
    to: str
    gated: str | None = None


@dataclass(frozen=True)
class Attend:
    """The attention of the module at ``path``: queries, keys and values concatenated from ``q``, ``k``,
    ``v``; output ``to``. ``sizes``: for a module that runs more than one attention (Wan I2V's ``attn2``: over the
    image tokens, then over the text), the layers (relative to ``path``) projecting this one's queries and keys;
    each of its two bmm costs queries × keys × the query layer's width. None: the module's whole attention."""

    path: str
    q: tuple[str, ...]
    k: tuple[str, ...]
    v: tuple[str, ...]
    to: str
    sizes: tuple[str, str] | None = None


@dataclass(frozen=True)
class Blocks:
    """The ``ModuleList`` at ``path``: ``steps`` run for each of its items in order (paths relative to the item)."""

    path: str
    steps: tuple[Step, ...]


Step = Union[Layer, Join, Attend, Blocks]


@dataclass(frozen=True)
class LoraFlow:
    """How tensors flow through one family's forward, for deciding which ones require grad.

    ``steps``: the forward in order, or a function of the tree giving it (where the block structure follows
    the config, as in a UNet); the model's output is the tensor ``out``. ``frozen``: path patterns (``*`` one part, ``**`` any) of layers that
    read only conditioning. ``default_targets``: the ``target_modules`` of diffusers' example training
    script for the family (empty where there is none: the user names them), ``targets_source`` where. ``source``: the forward mirrored.
    """

    steps: tuple[Step, ...] | Callable[[Node], tuple[Step, ...]]
    frozen: tuple[str, ...]
    default_targets: tuple[str, ...]
    targets_source: str
    source: str
    lists: tuple[str, ...] = ()  # block lists the steps name with indices (beyond their Blocks)

    def steps_for(self, tree: Node) -> tuple[Step, ...]:
        return self.steps(tree) if callable(self.steps) else self.steps


def path_matches(parts: tuple[str, ...], pattern: tuple[str, ...]) -> bool:
    """``pattern`` parts: a name, ``*`` (any one part) or ``**`` (any number of parts, also none)."""
    if not pattern:
        return not parts
    if pattern[0] == "**":
        return any(path_matches(parts[i:], pattern[1:]) for i in range(len(parts) + 1))
    return bool(parts) and pattern[0] in ("*", parts[0]) and path_matches(parts[1:], pattern[1:])


def items_matched(parts: tuple[str, ...], node: Node, pattern: tuple[str, ...]) -> int:
    """How many of ``node``'s ``count`` items the pattern selects (a last part ``N:`` selects list
    indices from N on, also inside a grouped span such as ``0-1``)."""
    last = pattern[-1] if pattern else ""
    if not (last.endswith(":") and last[:-1].isdigit()):
        return node.count if path_matches(parts, pattern) else 0
    if not parts or not path_matches(parts[:-1], pattern[:-1]):
        return 0
    first, _, end = parts[-1].partition("-")
    if not first.isdigit():
        return 0
    lo, hi = int(first), int(end or first)
    return max(0, hi - max(lo, int(last[:-1])) + 1)
