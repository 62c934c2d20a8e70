"""The exact sequence of storage allocations and frees of a real module's call, recorded on the meta device at the
dtype a pipeline loads it in, for the caching-allocator replay (``flopcalc/gpu_memory/caching_allocator.py``).

The component is built from its config on meta (``measure.build_model``) and cast as
``from_pretrained(torch_dtype=dtype)`` leaves it: every floating parameter and buffer in ``dtype``, except the
modules a diffusers class keeps in float32 (``_keep_in_fp32_modules``, any dotted part of the name). Its weights are
the storages ``pipe.to("cuda")`` allocates first, in the order ``nn.Module._apply`` visits them (children first,
then the module's own parameters, then its buffers; a tied tensor once). The call's inputs are the batch-1 inputs of
the activation fixtures (``measure.build_inputs``), floating ones cast to ``dtype`` as the pipeline passes them.

A ``TorchDispatchMode`` (as ``measure_activations.LiveElements``) sees every aten op's outputs: each new storage
(any dtype, its ``nbytes`` at the real dtype) is an allocation when it first appears; it is freed when the last
tensor viewing it is collected (a ``weakref.finalize`` per tensor, counted per storage). Parameters and buffers are
not recorded inside the call (they are the weights). Attention runs as ``measure_activations`` runs it
(``attention="fused"``: ``aten._scaled_dot_product_efficient_attention``, no score matrix). Under
``torch.no_grad()`` (inference).

This module never imports ``flopcalc``.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from measure import TensorSpec, _locate, _wrap, build_inputs, build_model
from measure_training import _fused_attention

__all__ = ["AllocationLog", "prepare", "record_call", "record_events", "weight_storages"]

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


class AllocationLog(TorchDispatchMode):
    """``events``: ``(key, nbytes)`` in order, ``nbytes > 0`` a new storage, ``0`` its free (``caching_allocator.replay``'s
    format); storages in ``exclude`` (the weights) are not recorded."""

    def __init__(self, exclude: set[int]) -> None:
        super().__init__()
        self.exclude = exclude
        self.refs: dict[int, int] = {}
        self.events: list[tuple[int, int]] = []
        self._serial: dict[int, int] = {}  # storage address → a key unique over the whole log
        self._next = 0
        self._elements: dict[int, int] = {}  # floating storages' elements, as measure_activations.LiveElements counts
        self.live_elements = 0
        self.peak_elements = 0

    def track(self, t: torch.Tensor) -> None:
        storage = t.untyped_storage()
        key = storage._cdata
        if key in self.exclude:
            return
        if key not in self.refs:
            self.refs[key] = 0
            self._next += 1
            self._serial[key] = self._next
            self.events.append((self._next, max(1, storage.nbytes())))
            if t.is_floating_point():
                self._elements[key] = storage.nbytes() // t.element_size()
                self.live_elements += self._elements[key]
                self.peak_elements = max(self.peak_elements, self.live_elements)
        self.refs[key] += 1
        weakref.finalize(t, self._release, key)

    def _release(self, key: int) -> None:
        self.refs[key] -= 1
        if not self.refs[key]:
            del self.refs[key]
            self.events.append((self._serial.pop(key), 0))
            self.live_elements -= self._elements.pop(key, 0)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                self.track(t)
        return out


def _apply_order(module: torch.nn.Module) -> Iterator[torch.Tensor]:
    """The tensors ``module._apply`` (hence ``module.to("cuda")``) visits, in its order (torch/nn/modules/module.py,
    ``_apply``: ``for module in self.children()`` first, then ``self._parameters``, then ``self._buffers``)."""
    for child in module.children():
        yield from _apply_order(child)
    yield from (p for p in module._parameters.values() if p is not None)
    yield from (b for b in module._buffers.values() if b is not None)


def cast(model: torch.nn.Module, dtype: torch.dtype) -> torch.nn.Module:
    """The model as ``from_pretrained(torch_dtype=dtype)`` loads it: floating tensors in ``dtype``, the modules of a
    diffusers class's ``_keep_in_fp32_modules`` in float32."""
    model.to(dtype)
    keep = tuple(getattr(model, "_keep_in_fp32_modules", None) or ())
    if keep and dtype != torch.float32:
        for name, module in model.named_modules():
            if any(part in keep for part in name.split(".")):
                module.to(torch.float32)
    return model


def weight_storages(model: torch.nn.Module, as_dtype: torch.dtype | None = None) -> tuple[list[int], set[int]]:
    """The bytes of each weight storage in ``_apply`` order (a shared storage once) and their keys; with ``as_dtype``,
    the bytes its floating storages would take in that dtype (the weights as loaded in it, float32-kept modules
    aside: their storages are float32 already)."""
    sizes, seen = [], set()
    for t in _apply_order(model):
        storage = t.untyped_storage()
        key = storage._cdata
        if key not in seen:
            seen.add(key)
            nbytes = storage.nbytes()
            if as_dtype is not None and t.is_floating_point():
                nbytes = nbytes // t.element_size() * torch.empty((), dtype=as_dtype).element_size()
            sizes.append(max(1, nbytes))
    return sizes, seen


def prepare(config_dir: str | Path, dtype: str = "bf16") -> tuple[torch.nn.Module, list[int], set[int], list[int]]:
    """The component on meta as loaded in ``dtype``, its weight storages' bytes in ``_apply`` order, their keys, and
    their bytes as loaded in float32."""
    model = cast(build_model(_locate(Path(config_dir))), DTYPES[dtype])
    weights, keys = weight_storages(model)
    return model, weights, keys, weight_storages(model, torch.float32)[0]


def record_events(model: torch.nn.Module, keys: set[int], settings: Mapping[str, int], *, call: str = "forward",
                  dtype: str = "bf16", attention: str = "fused") -> tuple[list[tuple[int, int]], int, dict[str, int]]:
    """The ``(key, nbytes)`` events of one batch-1 call of ``model`` (:func:`prepare`), the peak of live floating
    elements (``measure_activations.LiveElements``' count, the activation fits' unit), and the settings it read."""
    if attention not in ("math", "fused"):
        raise ValueError(f"attention must be math or fused, not {attention!r}")
    specs, used = build_inputs(model, settings, call)
    specs = {k: TensorSpec(v.shape, DTYPES[dtype]) if isinstance(v, TensorSpec) and v.dtype.is_floating_point else v
             for k, v in specs.items()}
    with _fused_attention(attention == "fused"), torch.no_grad():
        log = AllocationLog(keys)
        with log:
            tensors = {k: v.make() if isinstance(v, TensorSpec) else v for k, v in specs.items()}
            wrapper, positional = _wrap(model, call, tensors)
            del tensors
            out = wrapper(*positional)
            del out, positional
    return log.events, log.peak_elements, used


def record_call(config_dir: str | Path, settings: Mapping[str, int], *, call: str = "forward",
                dtype: str = "bf16", attention: str = "fused") -> dict[str, Any]:
    """``{"weights": [bytes...], "events": [(key, nbytes)...], "settings": used}`` of one batch-1 call."""
    model, weights, keys, _ = prepare(config_dir, dtype)
    events, _, used = record_events(model, keys, settings, call=call, dtype=dtype, attention=attention)
    return {"weights": weights, "events": events, "settings": used}
