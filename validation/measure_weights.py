"""The bytes a real module's weights take once loaded in a dtype, from the module built on the meta device.

``loaded_bytes(model, dtype)`` walks ``named_parameters()`` (shared parameters once) and every buffer
(``named_buffers()``), and applies the loading rules of the library the class comes from:

* diffusers (``models/model_loading_utils.py:238``): every floating tensor of the state dict is cast to
  ``torch_dtype``, except when a dotted part of its name is in the class's ``_keep_in_fp32_modules``
  (then float32), whatever the dtype;
* transformers (``modeling_utils.py:3842-3847``): ``_keep_in_fp32_modules`` are float32 when loading
  float16, ``_keep_in_fp32_modules_strict`` when loading float16 or bfloat16;
* non-persistent buffers are not in the state dict: they keep the dtype the module creates them in
  (what the meta build shows), as do integer buffers.

This module never imports ``flopcalc``.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def keep_in_fp32(model: nn.Module, dtype: str) -> set[str]:
    import diffusers

    if isinstance(model, diffusers.ModelMixin):
        return set(type(model)._keep_in_fp32_modules or ())
    keep: set[str] = set()
    if dtype == "fp16":
        keep |= set(getattr(model, "_keep_in_fp32_modules", None) or ())
    if dtype in ("fp16", "bf16"):
        keep |= set(getattr(model, "_keep_in_fp32_modules_strict", None) or ())
    return keep


def loaded_bytes(model: nn.Module, dtype: str) -> dict[str, Any]:
    """``{"param_bytes", "buffer_bytes", "bytes", "params", "buffers": [[name, numel, dtype], ...]}``."""
    keep = keep_in_fp32(model, dtype)
    size = torch.tensor([], dtype=DTYPES[dtype]).element_size()

    def loaded(name: str, t: torch.Tensor) -> int:
        if not t.is_floating_point():
            return t.numel() * t.element_size()
        return t.numel() * (4 if any(part in keep for part in name.split(".")) else size)

    params = dict(model.named_parameters())
    param_bytes = sum(loaded(n, p) for n, p in params.items())
    buffers, buffer_bytes = [], 0
    for module_name, module in model.named_modules():
        for short, b in module._buffers.items():
            if b is None:
                continue
            name = f"{module_name}.{short}" if module_name else short
            persistent = short not in module._non_persistent_buffers_set
            nbytes = loaded(name, b) if persistent else b.numel() * b.element_size()
            buffers.append([name, b.numel(), str(b.dtype).removeprefix("torch."), persistent])
            buffer_bytes += nbytes
    return {"params": sum(p.numel() for p in params.values()), "param_bytes": param_bytes,
            "buffer_bytes": buffer_bytes, "bytes": param_bytes + buffer_bytes, "buffers": buffers}


def group_offload_blocks(model: nn.Module, dtype: str) -> list[int]:
    """Parameter bytes of each group diffusers' block-level group offloading makes with one block per group: the
    entries of the model's top-level ``ModuleList``/``Sequential`` children, in order
    (``diffusers/hooks/group_offloading.py`` ``_apply_group_offloading_block_level``, lines 738-767)."""
    keep = keep_in_fp32(model, dtype)
    size = torch.tensor([], dtype=DTYPES[dtype]).element_size()
    out = []
    for name, child in model.named_children():
        if not isinstance(child, (nn.ModuleList, nn.Sequential)):
            continue
        for i, block in enumerate(child):
            out.append(sum(p.numel() * (4 if any(part in keep for part in f"{name}.{i}.{short}".split(".")) else size)
                           for short, p in block.named_parameters()))
    return out


def offloaded_modules(model: nn.Module, dtype: str) -> dict[str, Any]:
    """What ``enable_sequential_cpu_offload()`` moves to the GPU at once, from the real module: accelerate hooks
    every module with direct tensors and loads only those for its forward (``accelerate/hooks.py``
    ``attach_align_device_hook``, ``AlignDevicesHook.pre_forward``), so while a module runs, its own direct
    parameters and those of the modules enclosing it are resident. ``largest``: the single module with the most
    bytes of direct parameters ``(path, numel, bytes)``; ``most``: the most direct parameters of a single module;
    ``stack``: the largest sum along one path from the root to a leaf (the enclosing modules' direct parameters
    included), in elements."""
    keep = keep_in_fp32(model, dtype)
    size = torch.tensor([], dtype=DTYPES[dtype]).element_size()
    best, most = ("", 0, 0), 0
    for name, module in model.named_modules():
        numel = sum(p.numel() for p in module.parameters(recurse=False))
        most = max(most, numel)
        nbytes = sum(p.numel() * (4 if any(part in keep for part in f"{name}.{short}".split(".")) else size)
                     for short, p in module.named_parameters(recurse=False))
        if nbytes > best[2]:
            best = (name, numel, nbytes)

    def stack(module: nn.Module) -> int:
        return (sum(p.numel() for p in module.parameters(recurse=False))
                + max((stack(c) for c in module.children()), default=0))

    return {"largest": best, "most": most, "stack": stack(model)}


def converted_linears(model: nn.Module, library: str) -> dict[str, Any]:
    """The ``nn.Linear`` modules of ``model`` and those a weight quantizer replaces when the model loads with a
    default config (no modules named to skip), ``library`` ``"bitsandbytes"`` (LLM.int8 and 4-bit alike),
    ``"quanto"`` or ``"torchao"``:

    * bitsandbytes in diffusers (``quantizers/bitsandbytes/bnb_quantizer.py:262-288``, ``utils.py:58-63``):
      every ``isinstance(m, nn.Linear)`` except those whose own name, or a key followed by ``.`` inside the
      dotted path, or the whole path, is in the class's ``_keep_in_fp32_modules``;
    * torchao in diffusers (``quantizers/torchao/torchao_quantizer.py:351-359, 447``): as bitsandbytes;
    * quanto in diffusers (``quantizers/quanto/quanto_quantizer.py:164-169``, ``utils.py:24-30``): every
      ``isinstance(m, nn.Linear)`` whose own name is not in ``_keep_in_fp32_modules``;
    * transformers (``quantizers/quantizer_bnb_4bit.py:121``, ``quantizer_quanto.py:87``,
      ``quantizers/base.py:39-65``): the paths ``should_convert_module`` against ``get_keys_to_not_convert(model)``
      (tied weights, the module of the last parameter, the output embeddings) and the model's
      ``_keep_in_fp32_modules``; of those, bitsandbytes converts ``type(m) is nn.Linear``
      (``integrations/bitsandbytes.py:189``), quanto ``isinstance(m, nn.Linear)`` (``integrations/quanto.py:91``),
      torchao too (``quantizers/quantizer_torchao.py:109-116``).

    ``{"linear": [[path, in, out], ...], "converted": [[path, in, out], ...]}``."""
    import diffusers

    linear = [[n, m.in_features, m.out_features] for n, m in model.named_modules() if isinstance(m, nn.Linear)]
    if isinstance(model, diffusers.ModelMixin):
        keys = list(type(model)._keep_in_fp32_modules or ())

        def converted(path: str, module: nn.Module) -> bool:
            name = path.split(".")[-1]
            if library == "quanto":
                return name not in keys
            return name not in keys and not any(k + "." in path or k == path for k in keys)
    else:
        from transformers.quantizers.base import get_keys_to_not_convert
        from transformers.quantizers.quantizers_utils import should_convert_module

        keys = list(set(get_keys_to_not_convert(model)) | set(model._keep_in_fp32_modules or ()))

        def converted(path: str, module: nn.Module) -> bool:
            exact = type(module) is nn.Linear or library in ("quanto", "torchao")
            return exact and should_convert_module(path, keys)
    modules = dict(model.named_modules())
    return {"linear": linear, "converted": [row for row in linear if converted(row[0], modules[row[0]])]}
