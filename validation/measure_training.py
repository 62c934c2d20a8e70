"""Measure the FLOPs of one training step of a real diffusers/transformers module on the meta device.

The component is built from its ``config.json`` on meta (``measure.build_model``), put in ``train()``
mode with every parameter requiring grad (full fine-tuning), and fed the same batch-1 meta inputs as
the inference fixtures (``measure.build_inputs``; inputs do not require grad: they are data). Inside
one ``FlopCounterMode``, the forward runs, then ``sum(t.float().sum() for t in outputs).backward()``:
the counter's total before the backward is the forward, the rest is the backward. With
``checkpointing=True`` the model's own ``enable_gradient_checkpointing()`` is called first, so the
backward also counts the recomputed forward of the wrapped blocks (diffusers' default
``torch.utils.checkpoint.checkpoint(..., use_reentrant=False)``).

On meta, ``F.scaled_dot_product_attention`` runs its math decomposition, so the attention backward
is the backward of two ``bmm``: 2 × their forward FLOPs. torch's per-module attribution is not
reliable during backward (its module tracker mis-attributes), so only totals and per-op counts are
recorded. This module never imports ``flopcalc``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch.utils.flop_counter import FlopCounterMode

from measure import (
    _custom_mapping,
    _locate,
    _relative_dir,
    _wrap,
    build_inputs,
    build_model,
    resolve_class_name,
    versions,
)

__all__ = ["MODES", "measure_training"]

#: ``full``: all parameters trained; ``checkpointing``: the same with diffusers' gradient checkpointing;
#: ``fused_attention``: the same with ``F.scaled_dot_product_attention`` routed to the fused
#: ``aten._scaled_dot_product_efficient_attention`` kernel (what a GPU runs), whose backward torch's
#: FLOP registry counts as 2.5 × its forward; ``lora`` / ``lora_checkpointing``: every base parameter
#: frozen, peft LoRA adapters of ``lora["rank"]`` on ``lora["targets"]`` added as diffusers' training
#: scripts add them (``model.add_adapter(LoraConfig(r=rank, lora_alpha=rank, init_lora_weights="gaussian",
#: target_modules=targets))``), only the adapters trained; without / with gradient checkpointing;
#: ``lora_fused_attention``: ``lora`` with attention through the fused kernel (its backward runs, and torch counts it
#: at 2.5 × its forward, wherever query, key or value requires grad).
MODES = ("full", "checkpointing", "fused_attention", "lora", "lora_checkpointing", "lora_fused_attention")
FUSED_MODES = ("fused_attention", "lora_fused_attention")


#: ``F.scaled_dot_product_attention`` itself, for the inputs no fused kernel takes.
_SDPA = torch.nn.functional.scaled_dot_product_attention


def _efficient_sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    """``F.scaled_dot_product_attention`` through the memory-efficient fused kernel. A mask is passed as its
    additive bias (a boolean one converted as SDPA converts it), causal attention as the kernel's flag; grouped
    key/value heads (``enable_gqa``) are repeated to the query heads first, as SDPA's fallback does. Inputs that
    are not 4-D (``(batch, tokens, channels)``: HunyuanImage's VAE attention) run SDPA's math path, as on a GPU,
    where every fused kernel requires 4-D query, key and value (``check_tensor_shapes``,
    aten/src/ATen/native/transformers/sdp_utils_cpp.h) and SDPA falls back to the math one."""
    if query.dim() != 4:
        return _SDPA(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale,
                     enable_gqa=enable_gqa)
    if enable_gqa and key.shape[-3] != query.shape[-3]:
        repeat = query.shape[-3] // key.shape[-3]
        key, value = key.repeat_interleave(repeat, dim=-3), value.repeat_interleave(repeat, dim=-3)
    bias = None
    if attn_mask is not None:
        bias = attn_mask
        if attn_mask.dtype == torch.bool:
            bias = torch.zeros_like(attn_mask, dtype=query.dtype).masked_fill(~attn_mask, float("-inf"))
        bias = bias.expand(*query.shape[:-2], query.shape[-2], key.shape[-2])
    return torch.ops.aten._scaled_dot_product_efficient_attention(
        query.contiguous(), key.contiguous(), value.contiguous(), bias, True, dropout_p, is_causal, scale=scale)[0]


@contextlib.contextmanager
def _fused_attention(enabled: bool):
    original = torch.nn.functional.scaled_dot_product_attention
    if enabled:
        torch.nn.functional.scaled_dot_product_attention = _efficient_sdpa
    try:
        yield
    finally:
        torch.nn.functional.scaled_dot_product_attention = original


def _tensors(out: Any) -> list[torch.Tensor]:
    """The floating tensors of a model output (a tensor, a tuple/list, or a diffusers/transformers
    output dataclass) that carry a gradient."""
    if isinstance(out, torch.Tensor):
        return [out] if out.requires_grad else []
    if isinstance(out, Mapping):
        out = list(out.values())
    if isinstance(out, (tuple, list)):
        return [t for item in out for t in _tensors(item)]
    if hasattr(out, "to_tuple"):
        return _tensors(out.to_tuple())
    return []


def _ops(counter: FlopCounterMode) -> dict[str, int]:
    return {str(op): int(n) for op, n in counter.get_flop_counts().get("Global", {}).items() if n}


def _minus(after: Mapping[str, int], before: Mapping[str, int]) -> dict[str, int]:
    out = {op: n - before.get(op, 0) for op, n in after.items()}
    return {op: n for op, n in out.items() if n}


def measure_training(
    config_dir: str | Path,
    settings: Mapping[str, int],
    *,
    mode: str = "full",
    class_name: str | None = None,
    lora: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Forward and backward FLOPs of one training step of the component in ``config_dir`` at batch 1.

    ``settings`` are the pipeline-level settings of the inference harness (``height``, ``width``,
    ``text_len``, ...). Returns the training fixture dict (see ``validation/README.md``).
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
    if mode.startswith("lora") != (lora is not None):
        raise ValueError(f"mode {mode!r}: a lora spec (rank, targets) goes with the lora modes only")
    config_dir = _locate(Path(config_dir))
    named = class_name or resolve_class_name(config_dir)
    model = build_model(config_dir, named).train()
    if lora is None:
        for p in model.parameters():
            p.requires_grad_(True)
    else:
        _add_lora(model, int(lora["rank"]), list(lora["targets"]))
    if mode in ("checkpointing", "lora_checkpointing"):
        model.enable_gradient_checkpointing()
    specs, used = build_inputs(model, settings)
    tensors = {k: None if v is None else v.make() for k, v in specs.items()}
    wrapper, positional = _wrap(model, "forward", tensors)
    counter = FlopCounterMode(display=False, custom_mapping=_custom_mapping())
    with _fused_attention(mode in FUSED_MODES), counter:
        outputs = _tensors(wrapper(*positional))
        forward_total = int(counter.get_total_flops())
        forward_ops = _ops(counter)
        if not outputs:
            raise AssertionError(f"{named}: no output carries a gradient")
        sum(t.float().sum() for t in outputs).backward()
        total = int(counter.get_total_flops())
        total_ops = _ops(counter)
    out = {
        "class_name": named,
        "built_class": type(model).__name__,
        "component": config_dir.resolve().name,
        "config_dir": _relative_dir(config_dir),
        "settings": used,
        "mode": mode,
        "device": "meta",
        "inputs": {k: None if t is None else list(t.shape) for k, t in tensors.items()},
        "method": (
            ("model built from config.json under torch.device('meta'), train() mode, every parameter "
             "requires grad, inputs (batch 1) do not; inside one FlopCounterMode(display=False): "
             if lora is None else
             "model built from config.json under torch.device('meta'), train() mode, model.requires_grad_(False), "
             "then " + ("model.add_adapter(" if hasattr(model, "add_adapter") else "peft.inject_adapter_in_model(")
             + "peft.LoraConfig(r=rank, lora_alpha=rank, init_lora_weights='gaussian', "
             "target_modules=targets)" + ("" if hasattr(model, "add_adapter") else ", model") + ") (only the adapters "
             "require grad), inputs (batch 1) do not; inside one "
             "FlopCounterMode(display=False): ")
            + "outputs = model(**inputs), then sum(t.float().sum() for t in outputs).backward(); "
            "forward = the count before backward(), backward = the rest"
            + ("; model.enable_gradient_checkpointing() (diffusers: torch.utils.checkpoint, "
               "use_reentrant=False) so the backward includes the recomputed blocks"
               if mode in ("checkpointing", "lora_checkpointing") else "")
            + ("; F.scaled_dot_product_attention routed to aten._scaled_dot_product_efficient_attention (the fused "
               "kernel; torch counts its backward as 2.5 x its forward)" if mode in FUSED_MODES else
               ". SDPA runs its math decomposition on meta (attention backward = 2 bmm per forward bmm)"
               if lora is None else
               ". SDPA runs its math decomposition on meta (the backward bmm only for operands that require grad)")
            + "."
        ),
        "trainable_params": int(sum(p.numel() for p in model.parameters() if p.requires_grad)),
        "forward": {"flops": forward_total, "by_op": forward_ops},
        "backward": {"flops": total - forward_total, "by_op": _minus(total_ops, forward_ops)},
        "total_flops": total,
        "versions": versions(),
    }
    if lora is not None:
        import peft

        out["lora"] = {"rank": int(lora["rank"]), "targets": list(lora["targets"]),
                       "layers": sum(1 for _, m in model.named_modules() if isinstance(m, peft.tuners.lora.LoraLayer))}
        out["versions"] = {**out["versions"], "peft": peft.__version__}
    return out


def _add_lora(model: torch.nn.Module, rank: int, targets: list[str]) -> None:
    """Freeze ``model`` and add peft LoRA adapters as diffusers' training scripts do
    (examples/dreambooth/train_dreambooth_lora_flux.py: ``transformer.requires_grad_(False)``, then
    ``transformer.add_adapter(LoraConfig(r=args.rank, lora_alpha=..., init_lora_weights="gaussian",
    target_modules=target_modules))``). lora_alpha only scales the adapter's output: no FLOPs. A class without
    diffusers' ``PeftAdapterMixin`` (PixArtTransformer2DModel) gets the same adapters from
    ``peft.inject_adapter_in_model``, which ``add_adapter`` calls."""
    from peft import LoraConfig, inject_adapter_in_model

    model.requires_grad_(False)
    config = LoraConfig(r=rank, lora_alpha=rank, init_lora_weights="gaussian", target_modules=targets)
    if hasattr(model, "add_adapter"):
        model.add_adapter(config)
    else:
        inject_adapter_in_model(config, model)
    if not any(p.requires_grad for p in model.parameters()):
        raise AssertionError("add_adapter left no parameter requiring grad")
