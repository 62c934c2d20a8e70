"""The peak of live activation memory while a real module runs forward, measured on the meta device.

A ``TorchDispatchMode`` sees every aten op's outputs; each floating output's storage is counted from the op
that creates it until the last tensor using that storage is freed (views share their base's storage,
in-place ops create none). Parameters and buffers are not counted (they are the weights); the inputs are.
The result is the largest sum of live floating elements during the call (inference: ``torch.no_grad()``):
elements, so that bytes follow from the activation dtype. ``attention="math"`` lets
``F.scaled_dot_product_attention`` decompose (the score matrix exists); ``"fused"`` routes it to
``aten._scaled_dot_product_efficient_attention`` (no score matrix), as a GPU's fused kernel runs.

This module never imports ``flopcalc``.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from measure import TensorSpec, _locate, _wrap, build_inputs, build_model
from measure_training import _fused_attention

__all__ = ["LiveElements", "peak_elements"]


class LiveElements(TorchDispatchMode):
    """Tracks the floating elements held by live storages created inside the mode; ``peak`` is their maximum."""

    def __init__(self, exclude: set[int]) -> None:
        super().__init__()
        self.exclude = exclude  # storages of parameters and buffers
        self.refs: dict[int, int] = {}
        self.size: dict[int, int] = {}
        self.live = 0
        self.peak = 0

    def track(self, t: torch.Tensor) -> None:
        if not t.is_floating_point():
            return
        key = t.untyped_storage()._cdata
        if key in self.exclude:
            return
        if key not in self.refs:
            self.refs[key] = 0
            self.size[key] = t.untyped_storage().nbytes() // t.element_size()
            self.live += self.size[key]
            self.peak = max(self.peak, self.live)
        self.refs[key] += 1
        weakref.finalize(t, self._release, key)

    def _release(self, key: int) -> None:
        self.refs[key] -= 1
        if not self.refs[key]:
            del self.refs[key]
            self.live -= self.size.pop(key)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                self.track(t)
        return out


def peak_elements(config_dir: str | Path, settings: Mapping[str, int], *, call: str = "forward",
                  attention: str = "math") -> dict[str, Any]:
    """``{"peak_elements", "input_elements", "settings"}`` of one batch-1 call of the component in ``config_dir``."""
    if attention not in ("math", "fused"):
        raise ValueError(f"attention must be math or fused, not {attention!r}")
    model = build_model(_locate(Path(config_dir)))
    specs, used = build_inputs(model, settings, call)
    weights = {t.untyped_storage()._cdata for t in (*model.parameters(), *model.buffers())}
    with _fused_attention(attention == "fused"), torch.no_grad():
        mode = LiveElements(weights)
        with mode:
            tensors = {k: v.make() if isinstance(v, TensorSpec) else v for k, v in specs.items()}
            wrapper, positional = _wrap(model, call, tensors)
            inputs = mode.live
            out = wrapper(*positional)
            del out
    return {"peak_elements": mode.peak, "input_elements": inputs, "settings": used}
