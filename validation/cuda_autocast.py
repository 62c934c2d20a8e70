"""CUDA's autocast policy on fake CPU tensors, so that a training step traced on a CPU-only machine casts as a GPU's.

Why: a training step's activation memory depends on the dtype of every tensor it saves for the backward, and under
``torch.autocast("cuda", dtype=torch.bfloat16)`` (what ``accelerate``'s ``mixed_precision="bf16"`` wraps the model's
forward in) that dtype follows CUDA's per-op policy: matmuls and convolutions in bf16 (their fp32 weights cast once
and cached), ``layer_norm``, ``group_norm``, ``rms_norm``, ``softmax``, ``exp``, ``pow``, upsampling and the losses in
fp32. A CPU-only build of torch cannot make fake *cuda* tensors differentiable (autograd asks for a CUDA device
guard: "PyTorch is not linked with support for cuda devices"), and CPU autocast follows CPU's lists, which differ
(no ``layer_norm``/``group_norm``/``softmax``/``upsample`` in fp32, but ``reflection_pad`` or ``fft`` in fp32).

What: for every aten op whose ``AutocastCUDA`` kernel torch registers, this installs on the ``AutocastCPU`` key a
kernel applying CUDA's rule to CPU tensors; for every op with an ``AutocastCPU`` kernel and no CUDA one, a kernel that
casts nothing (CUDA does not autocast it). CUDA's rules come from the installed torch's own header
(``torch/include/ATen/autocast_mode.h``: ``AT_FORALL_LOWER_PRECISION_FP``, ``AT_FORALL_FP32``,
``AT_FORALL_FP32_SET_OPT_DTYPE``, ``AT_FORALL_PROMOTE``, ``AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE``), the lists the
CUDA kernels are generated from (``aten/src/ATen/autocast_mode.cpp``), plus the three ops that file registers for
CUDA by hand (``cudnn_convolution``, ``cudnn_convolution_transpose``: lower precision; ``binary_cross_entropy``:
refused, as on CUDA). Ops on both lists with the same rule (``linear``, ``mm``, ``bmm``, ``matmul``, ``conv2d``,
``scaled_dot_product_attention``, …: lower precision) keep the C++ CPU kernel, whose weight cache
(``cached_cast``: the bf16 copy of an fp32 leaf that requires grad, kept until the autocast region exits) is CUDA's.

The cast rule of each kind, as ``autocast_mode.h`` states it for an eligible tensor (floating point, not float64):
``lower_precision_fp`` casts to the autocast dtype; ``fp32`` to float32; ``fp32_set_opt_dtype`` passes
``dtype=torch.float32`` when the first argument is eligible and no dtype was given; ``fp32_append_dtype`` (``norm``)
computes in float32; ``promote`` casts every eligible tensor to the widest dtype among them.

Install with :func:`install` (idempotent; process-wide: the measuring scripts run in their own processes). This module
never imports ``flopcalc``.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

import torch
from torch.utils._pytree import tree_flatten, tree_map

__all__ = ["install", "policy", "HEADER"]

HEADER = Path(torch.__file__).resolve().parent / "include" / "ATen" / "autocast_mode.h"
_MACROS = {
    "AT_FORALL_LOWER_PRECISION_FP": "lower_precision_fp",
    "AT_FORALL_FP32": "fp32",
    "AT_FORALL_FP32_SET_OPT_DTYPE": "fp32_set_opt_dtype",
    "AT_FORALL_PROMOTE": "promote",
}
#: Registered by hand for CUDA in aten/src/ATen/autocast_mode.cpp (not generated from the header's lists).
_BY_HAND = {"aten::cudnn_convolution": "lower_precision_fp", "aten::cudnn_convolution_transpose": "lower_precision_fp",
            "aten::binary_cross_entropy": "banned"}
_LIBRARY: list[Any] = []  # keeps the torch.library registration alive


@lru_cache(maxsize=1)
def policy() -> dict[str, str]:
    """``{"aten::op.overload": rule}`` for every op CUDA autocasts, read from the installed torch's header."""
    text = HEADER.read_text(encoding="utf-8")
    out: dict[str, str] = {}
    for macro, rule in _MACROS.items():
        m = re.search(r"#define %s\(_\)(.*?)(?:\n\s*\n|\n#)" % macro, text, re.S)
        if m is None:
            raise RuntimeError(f"{HEADER}: no {macro}; this torch's autocast lists moved")
        for name, overload in re.findall(r"_\((\w+)(?:,\s*(\w+))?\)", m.group(1)):
            out[f"aten::{name}" + (f".{overload}" if overload else "")] = rule
    m = re.search(r"#define AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE\(_\)(.*?)(?:\n\s*\n|\n#)", text, re.S)
    if m is None:
        raise RuntimeError(f"{HEADER}: no AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE")
    for name, rule in re.findall(r'"([\w.]+)",.*?(fp32_append_dtype|fp32|lower_precision_fp)\)', m.group(1), re.S):
        out[f"aten::{name}"] = rule
    out.update(_BY_HAND)
    registered = {n for n in torch._C._dispatch_get_all_op_names()
                  if torch._C._dispatch_has_kernel_for_dispatch_key(n, "AutocastCUDA")}
    if set(out) != registered:
        raise RuntimeError(f"CUDA autocast ops read from {HEADER.name} differ from the registered kernels: "
                           f"{sorted(set(out) ^ registered)}")
    return out


def _cpu_kernels() -> set[str]:
    return {n for n in torch._C._dispatch_get_all_op_names()
            if torch._C._dispatch_has_kernel_for_dispatch_key(n, "AutocastCPU")}


#: CPU's C++ kernels kept: ops CPU autocasts to the lower precision as CUDA does (same cached_cast), so the weight
#: cache's behaviour is the real one. Read from aten/src/ATen/autocast_mode.cpp's CPU registrations
#: (KERNEL_CPU(..., lower_precision_fp)), which the runtime cannot list by rule.
_CPU_LOWER = {
    "aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::bmm", "aten::mm", "aten::linalg_vecdot", "aten::baddbmm",
    "aten::addmm", "aten::addbmm", "aten::linear", "aten::_convolution.deprecated", "aten::matmul",
    "aten::conv_tbc", "aten::conv_transpose1d", "aten::conv_transpose2d.input", "aten::conv_transpose3d.input",
    "aten::prelu", "aten::scaled_dot_product_attention",
}


def _eligible(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and t.is_floating_point() and t.dtype != torch.float64


def _cast(args: Any, kwargs: Any, dtype: torch.dtype) -> tuple[Any, Any]:
    fn = lambda t: t.to(dtype) if _eligible(t) and t.dtype != dtype else t  # noqa: E731
    return tree_map(fn, args), tree_map(fn, kwargs)


def _kernel(op: Any, rule: str) -> Callable[..., Any]:
    key = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastCPU)

    def kernel(*args: Any, **kwargs: Any) -> Any:
        with torch._C._ExcludeDispatchKeyGuard(key):
            if rule == "lower_precision_fp":
                args, kwargs = _cast(args, kwargs, torch.get_autocast_dtype("cpu"))
            elif rule in ("fp32", "fp32_append_dtype"):
                args, kwargs = _cast(args, kwargs, torch.float32)
            elif rule == "fp32_set_opt_dtype":
                if args and _eligible(args[0]) and kwargs.get("dtype") is None:
                    kwargs = {**kwargs, "dtype": torch.float32}
            elif rule == "promote":
                dtypes = [t.dtype for t in tree_flatten((args, kwargs))[0] if _eligible(t)]
                if dtypes:
                    widest = dtypes[0]
                    for d in dtypes[1:]:
                        widest = torch.promote_types(widest, d)
                    args, kwargs = _cast(args, kwargs, widest)
            elif rule == "banned":
                raise RuntimeError(f"{op} is unsafe to autocast (CUDA refuses it): use the *_with_logits form")
            return op(*args, **kwargs)

    return kernel


def _overload(name: str) -> Any:
    base, _, overload = name.removeprefix("aten::").partition(".")
    packet = getattr(torch.ops.aten, base)
    return getattr(packet, overload or "default")


def install() -> dict[str, int]:
    """Make ``torch.autocast("cpu")`` cast CPU tensors as CUDA's autocast casts CUDA tensors. Returns how many ops
    got CUDA's rule and how many CPU-only rules were neutralised."""
    if _LIBRARY:
        return _LIBRARY[1]
    import warnings

    rules = policy()
    lib = torch.library.Library("aten", "IMPL")
    cpu = _cpu_kernels()
    counts = {"cuda_rule": 0, "cpu_rule_removed": 0}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Overriding a previously registered kernel"
        for name, rule in rules.items():
            if name in _CPU_LOWER and rule == "lower_precision_fp":
                continue
            lib.impl(name.removeprefix("aten::"), _kernel(_overload(name), rule), "AutocastCPU")
            counts["cuda_rule"] += 1
        for name in sorted(cpu - set(rules)):
            lib.impl(name.removeprefix("aten::"), _kernel(_overload(name), "none"), "AutocastCPU")
            counts["cpu_rule_removed"] += 1
    _LIBRARY.extend([lib, counts])
    return counts
