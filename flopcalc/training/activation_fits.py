"""Activation memory of a training step: the measured laws of each trainable card's denoiser, an estimate.

Method: ``validation/measure_training_memory.py`` runs forward + backward of the real module at batch 1 on fake
tensors (no GPU, no weights) for every mode (full fine-tuning or LoRA rank 16 on the family's targets; gradient
checkpointing off and on; fp32 master weights under CUDA's bf16 autocast policy, or pure bf16; fused or math
attention) at two or three sizes, and records in bytes:

* ``saved``: what is live when the forward returns, the activations held for the backward (with fp32 master weights,
  autocast's bf16 copies of the trained weights that the backward needs among them);
* ``forward_peak``: the largest live memory during the forward: ``saved`` and the last layers' temporaries, or, under
  checkpointing with fp32 master weights, autocast's cache of every weight's bf16 copy, which lives until the
  forward's autocast region exits (``torch.autocast`` caches the cast of each fp32 leaf that requires grad);
* ``backward_peak``: the largest live non-gradient memory during the backward: what is still saved plus the backward's
  temporaries (the gradient of each activation; under checkpointing the recomputed block and its attention's
  backward);
* ``step_peak``: the largest live memory with the parameter gradients, as they are allocated during the backward
  (a check of how :mod:`flopcalc.training.memory` combines the parts).

``validation/fit_training_memory.py`` fits each as ``c0 + c1·n`` (fused attention) or ``c0 + c1·n + c2·n²`` (math:
the score matrices) in the denoiser's latent positions ``n`` and writes ``flopcalc/data/training_memory_fit.json``
with each fit's leave-one-size-out error (three sizes) or none (two: the line through both). A law applies to the
configs measured (:func:`flopcalc.gpu_memory.activations.fit_key` of the denoiser, with the inputs it is fed), at the
text length and frame count measured (a note otherwise), and for LoRA to the targets measured; at batch B it is B ×
the batch-1 law less (B − 1) × the batch-independent part ``c0`` (weights' casts do not grow with the batch).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

_DATA = Path(__file__).resolve().parents[1] / "data" / "training_memory_fit.json"
QUANTITIES = ("saved", "forward_peak", "backward_peak", "step_peak")


def mode_key(trainable: str, checkpointing: bool, master: str, attention: str) -> str:
    """``full|lora:ckpt|nockpt:fp32|bf16:fused|math``, a fit's mode."""
    return f"{trainable}:{'ckpt' if checkpointing else 'nockpt'}:{master}:{attention}"


@lru_cache(maxsize=1)
def _fits() -> dict[str, Any]:
    if not _DATA.exists():
        return {}
    with _DATA.open(encoding="utf-8") as fh:
        return json.load(fh)


@dataclass(frozen=True)
class ActivationLaw:
    """The measured laws of one config in one mode, evaluated at ``n`` latent positions (batch 1, bytes)."""

    mode: str
    n: int
    n_range: tuple[int, int]
    coef: Mapping[str, tuple[float, ...]]
    loo_max_rel_error: float | None  # the largest leave-one-size-out error of the saved and peak laws
    measured_on: str
    settings: Mapping[str, Any]
    lora: Mapping[str, Any] | None

    def bytes(self, quantity: str, batch: int = 1) -> int:
        c = self.coef[quantity]
        one = sum(ci * self.n ** i for i, ci in enumerate(c))
        return max(0, round(batch * one - (batch - 1) * c[0]))

    @property
    def extrapolated(self) -> bool:
        return not self.n_range[0] <= self.n <= self.n_range[1]

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "n": self.n, "fitted_n_range": list(self.n_range), "extrapolated": self.extrapolated,
                "loo_max_rel_error": self.loo_max_rel_error, "measured_on": self.measured_on,
                "fitted_settings": dict(self.settings), "lora": None if self.lora is None else dict(self.lora)}


def law(key: str, mode: str, n: int) -> ActivationLaw | None:
    """The laws of the config whose fit key is ``key`` (``gpu_memory.activations.fit_key(class, "train", config,
    fed=...)``) in ``mode`` (:func:`mode_key`), or None where it was not measured."""
    entry = _fits().get(key)
    if entry is None or mode not in entry["modes"]:
        return None
    m = entry["modes"][mode]
    coef = {q: tuple(m[q]["coef"]) for q in QUANTITIES}
    errors = [m[q]["loo_max_rel_error"] for q in QUANTITIES[:3] if m[q].get("loo_max_rel_error") is not None]
    return ActivationLaw(mode, n, tuple(m["n_range"]), coef, max(errors) if errors else None, entry["measured_on"],
                         entry["settings"], entry.get("lora"))


def measured_modes(key: str) -> tuple[str, ...]:
    """The modes measured for the config ``key``."""
    entry = _fits().get(key)
    return tuple(entry["modes"]) if entry else ()
