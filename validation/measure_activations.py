"""The peak of live activation memory while a real module runs forward, measured on the meta device.

A ``TorchDispatchMode`` sees every aten op's outputs; each floating output's storage is counted from the op
that creates it until the last tensor using that storage is freed (views share their base's storage,
in-place ops create none). Parameters and buffers are not counted (they are the weights); the inputs are.
The result is the largest sum of live floating elements during the call (inference: ``torch.no_grad()``):
elements, so that bytes follow from the activation dtype. Beside it, the peak of each *phase* of the call
(:class:`PhasedLiveElements`): the part of the run spent in one module (its dotted path from the measured model,
cut at a depth) and, apart, in an attention module below it (a class whose name ends in ``Attention``: where a
math-path score matrix lives). The call's peak is the largest phase peak; each phase peak is one layer's law
(linear in the positions, or quadratic where scores are held), which ``validation/fit_activations.py`` fits apart. ``attention="math"`` lets
``F.scaled_dot_product_attention`` decompose (the score matrix exists); ``"fused"`` routes it to
``aten._scaled_dot_product_efficient_attention`` (no score matrix), as a GPU's fused kernel runs.

This module never imports ``flopcalc``.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from measure import TensorSpec, _locate, _wrap, build_inputs, build_model
from measure_training import _fused_attention

__all__ = ["LiveElements", "PhasedLiveElements", "PHASE_DEPTHS", "peak_elements"]

#: Module depths (dotted parts below the measured model) at which phase peaks are recorded; depth 0 splits the run
#: into attention and the rest only.
PHASE_DEPTHS = (0, 1, 2)
#: A phase whose peak stays under this share of the call's peak is not recorded (it never decides the peak).
PHASE_FLOOR = 0.02
#: The most phases kept per depth, of those inside attention and, apart, of the others (the largest; a 40-layer text
#: encoder has 80 at depth 2, the last layers' lead). Apart: where the 24 attention layers of T5 lead at 256 tokens,
#: the feed-forward phase that leads at 64 must still be recorded there, or its law has two sizes to go on.
PHASE_LIMIT = 24


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


class PhasedLiveElements(LiveElements):
    """:class:`LiveElements` that also keeps, per depth d of :data:`PHASE_DEPTHS`, the peak of each phase: the
    deepest module running at depth ≤ d (its path below the measured model, ``<root>`` for the model's own code),
    and apart, ``<that path>|<attention path>``, the time inside an attention module deeper than d (the innermost
    running module whose class name ends in ``Attention``: where a math path holds its scores). The module stack
    comes from global forward hooks (:meth:`hooks`), which create no tensors. Only the :data:`PHASE_LIMIT` largest
    phases of a depth inside attention, and as many outside it, are kept."""

    def __init__(self, exclude: set[int], root: torch.nn.Module) -> None:
        super().__init__(exclude)
        self.names = {}
        for name, module in root.named_modules():
            self.names.setdefault(id(module), name)
        self.stack: list[tuple[int, str, bool]] = []  # (depth, path, is an attention module)
        self.phase_peaks: dict[int, dict[str, int]] = {d: {} for d in PHASE_DEPTHS}

    def phase(self, depth: int) -> str:
        path, attention = "<root>", None
        for d, name, is_attention in self.stack:
            if d <= depth:
                path = name
            elif is_attention:
                attention = name
        return path if attention is None else f"{path}|{attention}"

    def track(self, t: torch.Tensor) -> None:
        before = self.live
        super().track(t)
        if self.live > before:
            for depth, peaks in self.phase_peaks.items():
                key = self.phase(depth)
                peaks[key] = max(peaks.get(key, 0), self.live)

    def _push(self, module, args) -> None:
        name = self.names.get(id(module))
        if name is not None:
            self.stack.append((name.count(".") + 1 if name else 0, name or "<root>",
                               type(module).__name__.endswith("Attention")))

    def _pop(self, module, args, out) -> None:
        if self.names.get(id(module)) is not None:
            self.stack.pop()

    @contextlib.contextmanager
    def hooks(self):
        from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook

        pre = register_module_forward_pre_hook(self._push)
        post = register_module_forward_hook(self._pop, always_call=True)
        try:
            yield self
        finally:
            pre.remove()
            post.remove()

    def phases(self) -> dict[str, dict[str, int]]:
        """``{depth: {phase: peak}}``: at each depth the :data:`PHASE_LIMIT` largest phases inside attention and as
        many outside it that reach :data:`PHASE_FLOOR` of the call's peak."""
        out = {}
        for d, peaks in self.phase_peaks.items():
            kept = []
            for inside in (False, True):
                group = [kv for kv in peaks.items() if ("|" in kv[0]) == inside]
                kept += sorted(group, key=lambda kv: (-kv[1], kv[0]))[:PHASE_LIMIT]
            out[str(d)] = {k: v for k, v in sorted(kept) if v >= PHASE_FLOOR * self.peak}
        return out


def peak_elements(config_dir: str | Path, settings: Mapping[str, int], *, call: str = "forward",
                  attention: str = "math") -> dict[str, Any]:
    """``{"peak_elements", "input_elements", "settings", "phase_peaks"}`` of one batch-1 call of the component in
    ``config_dir`` (``phase_peaks``: :meth:`PhasedLiveElements.phases`)."""
    if attention not in ("math", "fused"):
        raise ValueError(f"attention must be math or fused, not {attention!r}")
    model = build_model(_locate(Path(config_dir)))
    specs, used = build_inputs(model, settings, call)
    weights = {t.untyped_storage()._cdata for t in (*model.parameters(), *model.buffers())}
    with _fused_attention(attention == "fused"), torch.no_grad():
        mode = PhasedLiveElements(weights, model)
        with mode, mode.hooks():
            tensors = {k: v.make() if isinstance(v, TensorSpec) else v for k, v in specs.items()}
            wrapper, positional = _wrap(model, call, tensors)
            inputs = mode.live
            out = wrapper(*positional)
            del out
    return {"peak_elements": mode.peak, "input_elements": inputs, "settings": used, "phase_peaks": mode.phases()}
