"""Measure the GPU memory of one training step of a real diffusers module, with no GPU and no weights.

The component is built from its ``config.json`` on meta (``measure.build_model``) and moved to fake CPU tensors
(``FakeTensorMode``, ``to_empty``): every tensor has its real shape, dtype and storage size and none has data. Set up
as a training script sets it up:

* ``trainable="full"``: every parameter trained, in the master dtype (``master="fp32"``: float32 parameters under
  ``torch.autocast(dtype=torch.bfloat16)``, as ``accelerate``'s ``mixed_precision="bf16"`` runs the forward;
  ``"bf16"``: the model cast to bf16, no autocast, pure bf16 training);
* ``trainable="lora"``: the model cast to bf16 and frozen, peft adapters added as diffusers' scripts add them
  (``add_adapter(LoraConfig(r, lora_alpha=r, init_lora_weights="gaussian", target_modules))``), the adapters in
  float32 under autocast (``master="fp32"``, ``cast_training_params``) or bf16 without it (``"bf16"``);
* ``checkpointing``: the model's own ``enable_gradient_checkpointing()`` (``torch.utils.checkpoint``,
  ``use_reentrant=False``);
* ``attention="fused"``: ``F.scaled_dot_product_attention`` through ``aten._scaled_dot_product_efficient_attention``
  (its inputs cast to the autocast dtype first, as SDPA's autocast rule does), which saves q, k, v, the output and
  the log-sum-exp; ``"math"``: SDPA's math decomposition (the score matrix is saved);
* autocast follows CUDA's per-op policy (:mod:`cuda_autocast`), not CPU's.

Inputs are the batch-1 tensors of the inference harness (``measure.build_inputs``), floating ones in bf16 (the
frozen text encoders' and VAE's outputs a script feeds). Then ``out = model(**inputs)``, ``sum(t.float().sum() for t
in outputs).backward()`` (accelerate returns fp32 outputs; the loss is a scalar). :class:`StepMemory` follows every
storage the step creates (parameters and buffers excluded: they are the weights) and records, in bytes: what is
live at the end of the forward (the activations saved for the backward, autocast's cached bf16 copies of the trained
weights counted apart), the peak of live non-gradient memory over the step (saved activations and the backward's
temporaries) and the peak with the parameter gradients (allocated by the backward, ``zero_grad(set_to_none=True)``
having freed them). ``reference=True`` runs torch's own ``MemTracker`` (``torch.distributed._tools.mem_tracker``)
instead, which categorises the same storages (slow: use it on small configs to check :class:`StepMemory`).

The optimizer states are measured by running one ``optimizer.step()`` of torch's ``AdamW`` (foreach, as on CUDA),
``SGD(momentum=0.9)`` and transformers' ``Adafactor`` on the same fake parameters, with the grads in place.
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

import cuda_autocast
from measure import _locate, _relative_dir, _wrap, build_inputs, build_model, resolve_class_name, versions
from measure_training import _tensors

__all__ = ["StepMemory", "measure_training_memory", "optimizer_states", "TRAINABLE", "MASTER", "ATTENTION"]

TRAINABLE = ("full", "lora")
MASTER = ("fp32", "bf16")
ATTENTION = ("fused", "math")
_SDPA = torch.nn.functional.scaled_dot_product_attention


def _sdpa_fused(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    """SDPA through the memory-efficient fused kernel (measure_training._efficient_sdpa), its inputs first cast as
    SDPA's autocast rule casts them (lower precision), since the kernel itself is on no autocast list."""
    from measure_training import _efficient_sdpa

    if torch.is_autocast_enabled("cpu"):
        dtype = torch.get_autocast_dtype("cpu")
        query, key, value = (t.to(dtype) if t.is_floating_point() else t for t in (query, key, value))
        if attn_mask is not None and attn_mask.is_floating_point():
            attn_mask = attn_mask.to(dtype)
    return _efficient_sdpa(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)


def _sdpa_math(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    """SDPA's math path (``_scaled_dot_product_attention_math``), its inputs cast as SDPA's autocast rule casts them."""
    if torch.is_autocast_enabled("cpu"):
        dtype = torch.get_autocast_dtype("cpu")
        query, key, value = (t.to(dtype) if t.is_floating_point() else t for t in (query, key, value))
        if attn_mask is not None and attn_mask.is_floating_point():
            attn_mask = attn_mask.to(dtype)
    return torch.ops.aten._scaled_dot_product_attention_math(
        query, key, value, attn_mask, dropout_p, is_causal, None, scale=scale, enable_gqa=enable_gqa)[0]


@contextlib.contextmanager
def _attention(kind: str):
    torch.nn.functional.scaled_dot_product_attention = _sdpa_fused if kind == "fused" else _sdpa_math
    try:
        yield
    finally:
        torch.nn.functional.scaled_dot_product_attention = _SDPA


#: The CUDA caching allocator rounds every allocation up to a multiple of 512 bytes
#: (c10/cuda/CUDACachingAllocator.cpp ``kMinBlockSize``; torch/distributed/_tools/mem_tracker.py
#: ``_PYTORCH_MIN_ALLOCATE``): what ``torch.cuda.memory_allocated()`` counts.
MIN_ALLOCATE = 512


def allocated(nbytes: int) -> int:
    """Bytes the CUDA caching allocator hands out for a storage of ``nbytes``."""
    return -(-nbytes // MIN_ALLOCATE) * MIN_ALLOCATE


class StepMemory(TorchDispatchMode):
    """Live bytes of the storages created inside the mode, by kind: ``act`` (activations and temporaries), ``cast``
    (an autocast copy of a parameter: ``_to_copy`` of a parameter's storage), ``grad`` (a storage that became a
    parameter's ``.grad``: :meth:`mark_grad`). Storages of ``exclude`` (parameters, buffers) are never counted."""

    KINDS = ("act", "cast", "grad")

    def __init__(self, exclude: set[int]) -> None:
        super().__init__()
        self.exclude = exclude
        self.refs: dict[int, int] = {}
        self.size: dict[int, int] = {}
        self.kind: dict[int, str] = {}
        self.live = dict.fromkeys(self.KINDS, 0)
        self.peak_total = 0
        self.at_peak_total = dict(self.live)
        self.peak_nongrad = 0
        self.at_peak_nongrad = dict(self.live)
        self.marks: dict[str, dict[str, int]] = {}
        self.phase_peaks: dict[str, tuple[int, int]] = {}

    def _update_peaks(self) -> None:
        total = sum(self.live.values())
        if total > self.peak_total:
            self.peak_total, self.at_peak_total = total, dict(self.live)
        nongrad = self.live["act"] + self.live["cast"]
        if nongrad > self.peak_nongrad:
            self.peak_nongrad, self.at_peak_nongrad = nongrad, dict(self.live)

    def track(self, t: torch.Tensor, kind: str) -> None:
        st = t.untyped_storage()
        key = st._cdata
        if key in self.exclude:
            return
        if key not in self.refs:
            self.refs[key] = 0
            self.size[key] = allocated(st.nbytes())
            self.kind[key] = kind
            self.live[kind] += self.size[key]
            self._update_peaks()
        self.refs[key] += 1
        weakref.finalize(t, self._release, key)

    def _release(self, key: int) -> None:
        self.refs[key] -= 1
        if not self.refs[key]:
            del self.refs[key]
            self.live[self.kind.pop(key)] -= self.size.pop(key)

    def mark_grad(self, grad: torch.Tensor) -> None:
        """``grad`` is now a parameter's gradient: count its storage as ``grad`` from here on."""
        key = grad.untyped_storage()._cdata
        if key in self.refs and self.kind[key] != "grad":
            self.live[self.kind[key]] -= self.size[key]
            self.kind[key] = "grad"
            self.live["grad"] += self.size[key]
            self._update_peaks()

    def mark(self, name: str) -> None:
        """Record what is live now and the peaks so far under ``name``, and start the next phase's peaks afresh."""
        self.marks[name] = {**self.live, "peak_total": self.peak_total, "peak_nongrad": self.peak_nongrad,
                            "grad_at_peak_nongrad": self.at_peak_nongrad["grad"]}
        self.phase_peaks[name] = (self.peak_total, self.peak_nongrad)
        self.peak_total = self.peak_nongrad = 0
        self._update_peaks()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        kind = "act"
        if func is torch.ops.aten._to_copy.default and isinstance(args[0], torch.Tensor) \
                and args[0].untyped_storage()._cdata in self.exclude:
            kind = "cast"
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                self.track(t, kind)
        return out


def _add_lora(model: torch.nn.Module, rank: int, targets: list[str]) -> None:
    from measure_training import _add_lora as add

    add(model, rank, targets)


def _prepare(model: torch.nn.Module, trainable: str, master: str, checkpointing: bool,
             lora: Mapping[str, Any] | None) -> torch.nn.Module:
    """``model`` (built on meta, in train() mode) with its trainable parameters as a training script sets them, dtypes
    set on meta (``Module.to`` cannot swap fake parameters). Then move it with ``to_empty`` inside the fake mode."""
    if trainable == "full":
        model.requires_grad_(True)
        if master == "bf16":
            model.to(torch.bfloat16)
    else:
        model.to(torch.bfloat16)
        model.requires_grad_(False)
        _add_lora(model, int(lora["rank"]), list(lora["targets"]))
        for p in model.parameters():
            if p.requires_grad:
                p.data = p.data.to(torch.float32 if master == "fp32" else torch.bfloat16)
    if checkpointing:
        model.enable_gradient_checkpointing()
    return model


def _inputs(model: torch.nn.Module, settings: Mapping[str, int], device: str) -> tuple[dict[str, Any], dict[str, int]]:
    """The harness's inputs on ``device``, floating tensors in bf16. A spec whose ``make()`` is not a tensor (a Python
    constant such as Qwen-Image's ``img_shapes`` list, flopcalc/engine/measure/inputs/qwen_image.py) is passed as it
    is made: turned into a tensor it would break the model's own unpacking (``frame, height, width = fhw``)."""
    specs, used = build_inputs(model, settings)
    out = {}
    for k, v in specs.items():
        if v is None:
            out[k] = None
            continue
        made = v.make()
        if not isinstance(made, torch.Tensor):
            out[k] = made
            continue
        dtype = torch.bfloat16 if v.dtype.is_floating_point else v.dtype
        out[k] = torch.zeros(v.shape, dtype=dtype, device=device)
    return out, used


def optimizer_states(model: torch.nn.Module) -> dict[str, int]:
    """Bytes of the state one ``step()`` of each optimizer creates for the trainable parameters after the step's
    backward: torch ``AdamW(foreach=True)``, ``SGD(momentum=0.9)``, transformers ``Adafactor``
    (``scale_parameter=False, relative_step=False, lr=1e-4``: the factored second moment, no first moment). A
    parameter the backward left without a gradient (a layer the loss does not depend on: Qwen-Image's last text
    stream) gets no state, as each of them skips ``p.grad is None`` (AdamW is torch/optim/adam.py's ``Adam``:
    ``_init_group`` line 151; sgd.py ``_init_group`` line 88; transformers/optimization.py ``Adafactor.step``
    line 1217)."""
    from transformers.optimization import Adafactor

    params = [p for p in model.parameters() if p.requires_grad]
    makers = {
        "adamw": lambda: torch.optim.AdamW(params, lr=1e-4, foreach=True),
        "sgd": lambda: torch.optim.SGD(params, lr=1e-4, momentum=0.9, foreach=True),
        "adafactor": lambda: Adafactor(params, lr=1e-4, scale_parameter=False, relative_step=False),
    }
    out = {}
    for name, make in makers.items():
        opt = make()
        opt.step()
        seen: set[int] = set()
        total = 0
        for state in opt.state.values():
            for v in state.values():
                if isinstance(v, torch.Tensor) and v.dim():  # the 0-dim ``step`` stays on the host off CUDA graphs
                    key = v.untyped_storage()._cdata
                    if key not in seen:
                        seen.add(key)
                        total += v.untyped_storage().nbytes()
        out[name] = total
        del opt
    return out


def measure_training_memory(config_dir: str | Path, settings: Mapping[str, int], *, trainable: str = "full",
                            checkpointing: bool = False, master: str = "fp32", attention: str = "fused",
                            lora: Mapping[str, Any] | None = None, class_name: str | None = None,
                            optimizers: bool = False, reference: bool = False) -> dict[str, Any]:
    """Bytes of one training step of the component in ``config_dir`` at batch 1 (see the module doc)."""
    return measure_sizes(config_dir, [settings], trainable=trainable, checkpointing=checkpointing, master=master,
                         attention=attention, lora=lora, class_name=class_name, optimizers=optimizers,
                         reference=reference)[0]


def measure_sizes(config_dir: str | Path, sizes: list[Mapping[str, int]], *, trainable: str = "full",
                  checkpointing: bool = False, master: str = "fp32", attention: str = "fused",
                  lora: Mapping[str, Any] | None = None, class_name: str | None = None, optimizers: bool = False,
                  reference: bool = False) -> list[dict[str, Any]]:
    """:func:`measure_training_memory` at each of ``sizes`` on one model (built once); the optimizer states at the
    first size only."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    if trainable not in TRAINABLE or master not in MASTER or attention not in ATTENTION:
        raise ValueError(f"trainable {trainable!r}, master {master!r}, attention {attention!r}: choose from "
                         f"{TRAINABLE}, {MASTER}, {ATTENTION}")
    if (trainable == "lora") != (lora is not None):
        raise ValueError("a lora spec (rank, targets) goes with trainable='lora' only")
    cuda_autocast.install()
    config_dir = _locate(Path(config_dir))
    named = class_name or resolve_class_name(config_dir)
    # on meta, outside the fake mode: to_empty then swaps every tensor for a fake CPU one
    model = _prepare(build_model(config_dir, named).train(), trainable, master, checkpointing, lora)
    # without autocast nothing depends on the device's policy: the meta device (3x faster) holds the same storages
    device = "cpu" if master == "fp32" or reference or optimizers else "meta"
    out = []
    with FakeTensorMode(allow_non_fake_inputs=True) if device == "cpu" else contextlib.nullcontext():
        if device == "cpu":
            model.to_empty(device="cpu")
        params = list(model.parameters())
        trained = [p for p in params if p.requires_grad]
        weights = {t.untyped_storage()._cdata for t in (*params, *model.buffers())}
        for i, settings in enumerate(sizes):
            for p in trained:
                p.grad = None
            inputs, used = _inputs(model, settings, device)
            wrapper, positional = _wrap(model, "forward", inputs)
            record: dict[str, Any] = {
                "param_bytes": sum(p.untyped_storage().nbytes() for p in params),
                "trainable_params": sum(p.numel() for p in trained),
                "trainable_param_bytes": sum(p.untyped_storage().nbytes() for p in trained),
                "buffer_bytes": sum(b.untyped_storage().nbytes() for b in model.buffers()),
            }
            autocast = torch.autocast("cpu", dtype=torch.bfloat16) if master == "fp32" else contextlib.nullcontext()
            if reference:
                record.update(_reference(model, wrapper, positional, autocast, attention))
            else:
                record.update(_step(model, named, wrapper, positional, autocast, attention, weights, trained))
            if optimizers and i == 0:
                record["optimizer_bytes"] = optimizer_states(model)
            out.append(_fixture(model, named, config_dir, used, trainable, checkpointing, master, attention, lora,
                                device, reference, record))
            del inputs, wrapper, positional
    return out


def _step(model: torch.nn.Module, named: str, wrapper: Any, positional: tuple, autocast: Any, attention: str,
          weights: set[int], trained: list[torch.Tensor]) -> dict[str, Any]:
    """One forward + backward under :class:`StepMemory`: the fixture's byte counts."""
    mode = StepMemory(weights)
    hooks = [p.register_post_accumulate_grad_hook(lambda p: mode.mark_grad(p.grad)) for p in trained]
    with _attention(attention), mode:
        with autocast:
            outputs = _tensors(wrapper(*positional))
        mode.mark("forward_end")
        if not outputs:
            raise AssertionError(f"{named}: no output carries a gradient")
        loss = sum(t.float().sum() for t in outputs)
        del outputs
        loss.backward()
        del loss
        mode.mark("backward_end")
    for h in hooks:
        h.remove()
    end, back = mode.marks["forward_end"], mode.marks["backward_end"]
    return {
        "saved_bytes": end["act"] + end["cast"],
        "saved_cast_bytes": end["cast"],
        "forward_peak_bytes": end["peak_nongrad"],
        "backward_peak_bytes": back["peak_nongrad"],
        "activation_peak_bytes": max(end["peak_nongrad"], back["peak_nongrad"]),
        "step_peak_bytes": max(end["peak_total"], back["peak_total"]),
        "backward_step_peak_bytes": back["peak_total"],
        "backward_peak_grad_bytes": back["grad_at_peak_nongrad"],
        "grad_bytes": sum(p.grad.untyped_storage().nbytes() for p in trained if p.grad is not None),
        "grad_allocated_bytes": back["grad"],
        "backward_end_other_bytes": back["act"] + back["cast"],
    }


def _fixture(model: torch.nn.Module, named: str, config_dir: Path, used: Mapping[str, int], trainable: str,
             checkpointing: bool, master: str, attention: str, lora: Mapping[str, Any] | None, device: str,
             reference: bool, record: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "class_name": named,
        "built_class": type(model).__name__,
        "component": config_dir.resolve().name,
        "config_dir": _relative_dir(config_dir),
        "settings": dict(used),
        "trainable": trainable,
        "checkpointing": checkpointing,
        "master": master,
        "attention": attention,
        **({"lora": {"rank": int(lora["rank"]), "targets": list(lora["targets"])}} if lora else {}),
        "device": "meta" if device == "meta" else "fake cpu (FakeTensorMode)",
        "autocast": "bf16, CUDA's policy (validation/cuda_autocast.py)" if master == "fp32" else None,
        "tracker": "MemTracker" if reference else "StepMemory",
        **record,
        "versions": versions(),
    }


def _reference(model: torch.nn.Module, wrapper: Any, positional: tuple, autocast: Any, attention: str) -> dict[str, Any]:
    """The same step under torch's ``MemTracker``: its peak snapshot, by category, in bytes."""
    from torch.distributed._tools.mem_tracker import MemTracker

    mt = MemTracker()
    mt.track_external(model)
    with _attention(attention), mt:
        with autocast:
            outputs = _tensors(wrapper(*positional))
        after_forward = mt.get_tracker_snapshot()
        sum(t.float().sum() for t in outputs).backward()
    peak = next(iter(mt.get_tracker_snapshot("peak").values()))
    fwd = next(iter(after_forward.values()))
    name = lambda k: getattr(k, "value", k)  # noqa: E731
    return {"memtracker_peak": {name(k): int(v) for k, v in peak.items()},
            "memtracker_after_forward": {name(k): int(v) for k, v in fwd.items()}}
