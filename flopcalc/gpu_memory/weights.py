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
:func:`flopcalc.engine.loading.loading_rules`; a class that declares none has none (the weights test checks every bundled
component against the real module's ``named_parameters()`` and ``named_buffers()``).
The largest single module (its own parameters, the unit ``enable_sequential_cpu_offload()`` moves to the GPU)
comes from ``Cost.largest_module`` of the same trees.
Quantized storage (bitsandbytes, optimum-quanto, torchao, GGUF): the ``nn.Linear`` weights the quantizer converts in
their format's storage, everything else as loaded in bf16 (:mod:`flopcalc.gpu_memory.quantized`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping

from flopcalc.engine.cost import Node
from flopcalc.engine.loading import DTYPE_BYTES, Buffer, rules_of

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
    linear_params: int  # elements of the nn.Linear weights (biases excluded)
    quantized_params: int = 0  # elements of the nn.Linear weights stored quantized
    quantized_layers: int = 0
    largest_module_params: int = 0  # the largest single module's own parameters (sequential offload)
    largest_module_bytes: int = 0
    #: parameter bytes of each entry of the top-level ``ModuleList``/``Sequential`` children, in order (the groups diffusers
    #: block-level group offloading and a block swap move; the rest of the component is one "unmatched" group)
    block_bytes: tuple[int, ...] = ()
    #: False for a component ``from_pretrained`` loads that the pipeline does not run at these settings (byT5
    #: without quoted text, the combined Stable Cascade decoder's text encoder): resident without offload only
    runs: bool = True
    #: LoRA adapters peft adds (:mod:`flopcalc.gpu_memory.adapters`): adapted layers, parameters, bytes
    lora_layers: int = 0
    lora_params: int = 0
    lora_bytes: int = 0

    @property
    def bytes(self) -> int:
        return self.param_bytes + self.buffer_bytes + self.lora_bytes

    @property
    def unmatched_bytes(self) -> int:
        """What block-level group offloading onloads for the whole forward: everything outside the blocks (the
        top-level modules that are no ``ModuleList``, the top-level parameters, the buffers)."""
        return self.bytes - sum(self.block_bytes)

    def to_dict(self) -> dict[str, Any]:
        return {"component": self.component, "class_name": self.class_name, "dtype": self.dtype,
                "params": self.params, "params_kept_fp32": self.params_fp32, "param_bytes": self.param_bytes,
                "buffers": [{"name": b.name, "numel": b.numel, "dtype": b.dtype} for b in self.buffers],
                "buffer_bytes": self.buffer_bytes, "bytes": self.bytes, "linear_params": self.linear_params,
                "quantized_params": self.quantized_params,
                "quantized_layers": self.quantized_layers, "largest_module_params": self.largest_module_params,
                "largest_module_bytes": self.largest_module_bytes, "block_bytes": list(self.block_bytes),
                "runs": self.runs,
                "lora": {"layers": self.lora_layers, "params": self.lora_params, "bytes": self.lora_bytes}}


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


def _largest_module(tree: Node, keep: tuple[str, ...], width: int) -> tuple[int, int]:
    """``(parameters, bytes)`` of the largest single module of the tree (``Cost.largest_module`` of each node's own
    cost; modules under a ``keep`` name are float32, the rest ``width`` bytes per parameter)."""
    best = (0, 0)

    def visit(node: Node, kept: bool) -> None:
        nonlocal best
        kept = kept or node.name in keep
        size = node.cost.largest_module
        if size * (4 if kept else width) > best[1]:
            best = (size, size * (4 if kept else width))
        for child in node.children:
            visit(child, kept)

    visit(tree, False)
    return best


def _block_bytes(tree: Node, keep: tuple[str, ...], width: int) -> tuple[int, ...]:
    """Bytes of each block of the tree's top-level ``ModuleList`` children (a node whose children are its entries:
    an index, or a span of identical ones),
    as ``_apply_group_offloading_block_level`` groups them (diffusers ``hooks/group_offloading.py:738-767``:
    ``named_children()`` of the model that are ``ModuleList``/``Sequential``, one group per block)."""
    out: list[int] = []
    for child in tree.children:
        if not child.children or not all(g.span is not None or g.name.isdigit() for g in child.children):
            continue
        kept = child.name in keep
        for entry in child.children:
            params = entry.per_item.params
            fp32 = params if kept or entry.name in keep else _fp32_params(entry, keep) // entry.count
            out += [(params - fp32) * width + fp32 * 4] * entry.count
    return tuple(out)


def component_weights(config_values: Mapping[str, Any], *, component: str, dtype: str,
                      transformers_version: str | None = None, shape: Mapping[str, Any] | None = None,
                      lora: tuple[int, tuple[str, ...] | None] | None = None) -> ComponentWeights:
    """The weights of one component (every module it holds, all calls) loaded in ``dtype``: a floating dtype of
    :data:`DTYPE_BYTES` or a quantized format of :data:`flopcalc.gpu_memory.quantized.FORMATS` (any of its names).
    ``transformers_version`` decides when a transformers class keeps its ``_keep_in_fp32_modules`` in float32
    (:mod:`flopcalc.gpu_memory.transformers_versions`; default the pinned release). ``shape``: run-shape fields
    that add modules (an IP-Adapter's, ``ip_image_embed_dim``); ``lora``: ``(rank, targets)`` of LoRA adapters
    (:func:`flopcalc.gpu_memory.adapters.lora_adapters`; targets None: the class's defaults)."""
    from flopcalc.engine.config import Config, class_name_of
    from flopcalc.engine.registry import lookup, registered
    from flopcalc.gpu_memory.layer_shapes import recording_shapes
    from flopcalc.gpu_memory.quantized import FORMATS, REST_DTYPE, canonical, converted_linears, quantized_bytes, \
        refuse_unknown
    from flopcalc.gpu_memory.transformers_versions import PINNED, TRANSFORMERS_NON_STRICT, keeps_fp32

    name_of_format = None if dtype in DTYPE_BYTES else canonical(dtype)
    if dtype not in DTYPE_BYTES and name_of_format is None:
        raise refuse_unknown(dtype, tuple(DTYPE_BYTES))
    fmt = None if name_of_format is None else FORMATS[name_of_format]
    loaded = REST_DTYPE if fmt is not None else dtype
    name = class_name_of(config_values)
    archs = [a for a in registered() if a.class_name == name] or [lookup(name, component=component)]
    arch = archs[0]
    rules = rules_of(arch.class_name)
    # a ModelMixin follows diffusers' rules; ChatGLMModel (diffusers/pipelines/kolors) and the transformers classes
    # are PreTrainedModels
    diffusers_class = arch.source.startswith("diffusers/models/")
    if rules.keep_in_fp32_dtypes == TRANSFORMERS_NON_STRICT and not diffusers_class:
        kept_now = keeps_fp32(transformers_version or PINNED, loaded, None if fmt is None else fmt.library)
    else:
        kept_now = loaded in rules.keep_in_fp32_dtypes
    keep = rules.keep_in_fp32 if kept_now else ()
    nominal = {a.call: replace(a.nominal, **shape) if shape else a.nominal for a in archs}
    trees = [a.assemble(Config(component, config_values, a.defaults), nominal[a.call]) for a in archs]
    params = sum(t.total.params for t in trees)
    fp32 = sum(_fp32_params(t, keep) for t in trees) if keep else 0
    config = Config(component, config_values, arch.defaults)
    buffers = rules.buffers(config) if rules.buffers is not None else ()
    buffer_bytes = sum(b.nbytes(loaded, any(part in keep for part in b.name.split("."))) for b in buffers)
    param_bytes = (params - fp32) * DTYPE_BYTES[loaded] + fp32 * 4
    linear = sum(t.total.linear_weights for t in trees)
    adapters = None
    if lora is not None:
        from flopcalc.gpu_memory.adapters import lora_adapters

        adapters = lora_adapters(trees[0], arch.class_name, *lora)
        # peft casts adapters to a floating base dtype only (quanto/torchao weights report bf16; bnb/GGUF: uint8)
        width = DTYPE_BYTES[loaded] if fmt is None or fmt.library in ("quanto", "torchao") else 4
        adapters = (adapters.layers, adapters.params, adapters.params * width)
    if fmt is None:
        largest = max((_largest_module(t, keep, DTYPE_BYTES[loaded]) for t in trees), key=lambda p: p[1])
        blocks = tuple(b for t in trees for b in _block_bytes(t, keep, DTYPE_BYTES[loaded]))
        return ComponentWeights(component, arch.class_name, dtype, params, fp32, param_bytes, tuple(buffers),
                                buffer_bytes, linear, largest_module_params=largest[0],
                                largest_module_bytes=largest[1], block_bytes=blocks, **_lora_fields(adapters))
    fmt = fmt.bind(arch.class_name, diffusers_class)
    library = "bitsandbytes" if fmt.library == "torchao" else fmt.library  # diffusers' torchao skips as bnb does
    skip = (*rules.keep_in_fp32, *rules.not_quantized,
            *(rules.not_bnb_quantized if fmt.library == "bitsandbytes" else ()))
    quanto_rule = library == "quanto" and diffusers_class
    with recording_shapes():
        shaped = [a.assemble(Config(component, config_values, a.defaults), nominal[a.call]) for a in archs]
    converted = [lin for t in shaped for lin in converted_linears(t, skip, keep, own_name_only=quanto_rule)]
    q = quantized_bytes(fmt, converted, param_bytes)
    return ComponentWeights(component, arch.class_name, fmt.name, params, fp32, q["bytes"], tuple(buffers),
                            buffer_bytes, linear, q["quantized_params"], q["quantized_layers"],
                            **_lora_fields(adapters))


def _lora_fields(adapters: tuple[int, int, int] | None) -> dict[str, int]:
    if adapters is None:
        return {}
    return {"lora_layers": adapters[0], "lora_params": adapters[1], "lora_bytes": adapters[2]}
