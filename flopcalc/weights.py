r"""Bytes of a component's weights as ``from_pretrained(..., torch_dtype=dtype)`` leaves them in memory.

Exact from the configuration: the parameters of every module of the cost tree (the same trees whose
parameter counts equal the real modules'), at the bytes of the dtype loaded, plus the module's buffers:

* parameters: ``dtype`` bytes each, except in the modules a class keeps in float32 (diffusers
  ``_keep_in_fp32_modules``: any dotted part of the parameter name equals a listed name, for every
  dtype, ``models/model_loading_utils.py:238``; transformers: the same names for ``float16`` only,
  ``modeling_utils.py:3842``);
* persistent buffers (in the state dict) are loaded like parameters (floating ones in ``dtype``);
* non-persistent buffers (rotary tables, position ids, fixed sin-cos tables) keep the dtype they
  are created with (``float32``, ``float64`` or ``int64``).

Each family declares its float32 modules and its buffers beside its assembler with
:func:`loading_rules`; a class that declares none has none (the weights test checks every bundled
component against the real module's ``named_parameters()`` and ``named_buffers()``).
Quantized storage (int8, fp8, nf4) is not counted: it needs the split of each component's parameters
into the linear layers a quantizer converts and the rest, which the cost trees do not carry.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from flopcalc.config import Config
from flopcalc.cost import Node
from flopcalc.errors import FlopcalcError

#: Bytes per element of the dtypes weights load in.
DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}
#: Bytes per element of the dtypes a buffer can be created in.
BUFFER_BYTES = {"float32": 4, "float64": 8, "int64": 8}


@dataclass(frozen=True)
class Buffer:
    """One buffer of the real module: ``dtype`` ``"loaded"`` for a persistent floating buffer (loaded in
    the weights' dtype, or float32 in a kept module), else the dtype it is created with."""

    name: str
    numel: int
    dtype: str

    def nbytes(self, weights_dtype: str, keep_fp32: bool = False) -> int:
        if self.dtype == "loaded":
            return self.numel * (4 if keep_fp32 else DTYPE_BYTES[weights_dtype])
        return self.numel * BUFFER_BYTES[self.dtype]


def rotary_buffers(prefix: str, dim: int) -> tuple[Buffer, Buffer]:
    """transformers' rotary embedding: float32 ``inv_freq`` and ``original_inv_freq`` of
    ``len(range(0, dim, 2))`` frequencies each (non-persistent)."""
    n = (dim + 1) // 2
    return Buffer(f"{prefix}.inv_freq", n, "float32"), Buffer(f"{prefix}.original_inv_freq", n, "float32")


@dataclass(frozen=True)
class LoadingRules:
    class_name: str
    keep_in_fp32: tuple[str, ...]
    keep_in_fp32_dtypes: tuple[str, ...]
    buffers: Callable[[Config], tuple[Buffer, ...]] | None
    source: str


_RULES: dict[str, LoadingRules] = {}


def loading_rules(class_name: str, *, keep_in_fp32: tuple[str, ...] = (), keep_in_fp32_dtypes: tuple[str, ...] = (
        "fp32", "bf16", "fp16"), buffers: Callable[[Config], tuple[Buffer, ...]] | None = None,
        source: str) -> LoadingRules:
    """Declare how ``class_name`` loads (called once, in the family's architecture module)."""
    if class_name in _RULES:
        raise RuntimeError(f"loading rules of {class_name} declared twice")
    rules = LoadingRules(class_name, tuple(keep_in_fp32), tuple(keep_in_fp32_dtypes), buffers, source)
    _RULES[class_name] = rules
    return rules


def rules_of(class_name: str) -> LoadingRules:
    from flopcalc.registry import registered

    registered()  # imports every architecture module, which declares its rules
    return _RULES.get(class_name, LoadingRules(class_name, (), (), None, ""))


@dataclass(frozen=True)
class ComponentWeights:
    """One component's weights in memory."""

    component: str
    class_name: str
    dtype: str
    params: int
    params_fp32: int  # parameters kept in float32
    param_bytes: int
    buffers: tuple[Buffer, ...]
    buffer_bytes: int

    @property
    def bytes(self) -> int:
        return self.param_bytes + self.buffer_bytes

    def to_dict(self) -> dict[str, Any]:
        return {"component": self.component, "class_name": self.class_name, "dtype": self.dtype,
                "params": self.params, "params_kept_fp32": self.params_fp32, "param_bytes": self.param_bytes,
                "buffers": [{"name": b.name, "numel": b.numel, "dtype": b.dtype} for b in self.buffers],
                "buffer_bytes": self.buffer_bytes, "bytes": self.bytes}


def _fp32_params(tree: Node, keep: tuple[str, ...]) -> int:
    """Parameters of the tree's modules with a path part in ``keep`` (their subtrees included)."""
    total = 0

    def visit(node: Node, k: int, kept: bool) -> None:
        nonlocal total
        k *= node.count
        kept = kept or node.name in keep
        if kept:
            total += k * node.cost.params
        for child in node.children:
            visit(child, k, kept)

    visit(tree, 1, False)
    return total


def component_weights(config_values: Mapping[str, Any], *, component: str, dtype: str) -> ComponentWeights:
    """The weights of one component (every module it holds, all calls) loaded in ``dtype``."""
    from flopcalc.config import class_name_of
    from flopcalc.registry import lookup, registered

    if dtype not in DTYPE_BYTES:
        raise FlopcalcError(f"--dtype {dtype!r}: choose one of {', '.join(DTYPE_BYTES)} (quantized storage is not "
                            "counted)")
    name = class_name_of(config_values)
    archs = [a for a in registered() if a.class_name == name] or [lookup(name, component=component)]
    arch = archs[0]
    rules = rules_of(arch.class_name)
    keep = rules.keep_in_fp32 if dtype in rules.keep_in_fp32_dtypes else ()
    params = fp32 = 0
    for a in archs:
        tree = a.assemble(Config(component, config_values, a.defaults), a.nominal)
        params += tree.total.params
        fp32 += _fp32_params(tree, keep) if keep else 0
    config = Config(component, config_values, arch.defaults)
    buffers = rules.buffers(config) if rules.buffers is not None else ()
    buffer_bytes = sum(b.nbytes(dtype, any(part in keep for part in b.name.split("."))) for b in buffers)
    param_bytes = (params - fp32) * DTYPE_BYTES[dtype] + fp32 * 4
    return ComponentWeights(component, arch.class_name, dtype, params, fp32, param_bytes, tuple(buffers), buffer_bytes)
