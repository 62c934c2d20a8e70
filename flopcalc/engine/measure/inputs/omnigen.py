"""Input builder for ``OmniGenTransformer2DModel`` (imported by ``flopcalc.engine.measure.harness``; see
validation/README.md).

``OmniGenPipeline`` calls the transformer with the processor's tensors: ``input_ids`` (the padded instruction),
a ``(B, L, L)`` attention mask, ``position_ids`` ``(B, L)``, and, with input images, a Python list of their VAE
latents and a dict of where their patch tokens go in ``input_ids``. One help is needed on meta:
``OmniGenSuScaledRotaryEmbedding.forward`` compares ``max(position_ids) + 1`` with
``original_max_position_embeddings`` (a data-dependent branch) and wraps its matmul in
``torch.autocast(device_type=...)``, which rejects ``"meta"``. The builder gives ``position_ids`` as a CPU tensor
(``arange(L)``, as ``OmniGenCollator.create_position`` builds it for an unpadded row) and makes ``model.rope`` run
its own forward on CPU (a CPU stand-in for the ``hidden_states`` it only reads the device of), its cos/sin moved
to meta. The matmul ``inv_freq @ position_ids`` then runs on CPU inside the counter, under ``rope``: counted as the
real call counts it.
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from flopcalc.engine.measure.harness import TensorSpec, _cfg, _exact_div, input_builder
from flopcalc.engine.measure.inputs.qwen_image import _PythonConstant
from flopcalc.engine.measure.inputs.z_image import _TensorListSpec

#: ``OmniGenPipeline``: ``vae_scale_factor`` 8 (the AutoencoderKL's).
VAE_SCALE_FACTOR = 8

ROPE_NOTE = (
    "position_ids is a CPU tensor arange(L) (OmniGenCollator.create_position for an unpadded row) and model.rope's "
    "forward runs on CPU (OmniGenSuScaledRotaryEmbedding compares max(position_ids) + 1 with "
    "original_max_position_embeddings and opens torch.autocast on the input's device, which meta refuses): its "
    "inv_freq @ position_ids matmul is counted under rope, its cos/sin moved to meta."
)


def _cpu_rope_forward(self: nn.Module, hidden_states: torch.Tensor, position_ids: torch.Tensor):
    """``OmniGenSuScaledRotaryEmbedding.forward`` on CPU (its ``hidden_states`` only give the device)."""
    cos, sin = type(self).forward(self, torch.zeros((), device="cpu"), position_ids.to("cpu"))
    return cos.to(hidden_states.device), sin.to(hidden_states.device)


def patch_rope(model: nn.Module) -> None:
    """Make ``model.rope`` run on CPU (idempotent); the module itself stays in place (its path is ``rope``).

    Its forward replaces the ``inv_freq`` buffer (``self.inv_freq = ...``, transformer_omnigen.py:163), which would
    free the buffer the model was built with; a plain reference keeps it alive, so that no activation is ever created
    at the address of a weight's storage (``validation/measure_activations.py`` excludes weights by that address:
    without it, whether an activation landed there, and went uncounted, changed from run to run)."""
    if not getattr(model.rope, "_runs_on_cpu", False):
        model.rope.forward = types.MethodType(_cpu_rope_forward, model.rope)
        model.rope._runs_on_cpu = True
        model.rope.__dict__["_built_inv_freq"] = model.rope.inv_freq
        notes = list(getattr(model, "_measure_notes", ()))
        model._measure_notes = (*notes, ROPE_NOTE) if ROPE_NOTE not in notes else tuple(notes)


@input_builder("OmniGenTransformer2DModel", settings=("height", "width", "text_len"),
               optional=("input_images", "input_height", "input_width"))
def _omnigen_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, Any]:
    """One row as ``OmniGenPipeline`` feeds it (pipeline_omnigen.py:446-455, batch 1): hidden_states (1, C, H/8, W/8),
    timestep (1,), input_ids (1, T) int64 with T = ``text_len`` + the input images' patch tokens, the processor's
    (1, L, L) mask (L = T + 1 + image patches), position_ids (1, L) on CPU; with ``input_images`` images of
    ``input_height × input_width`` pixels: input_img_latents, a list of their (1, C, h/8, w/8) latents, and
    input_image_sizes ``{0: [[start, end], ...]}``, each image's span right after ``text_len`` tokens."""
    patch_rope(model)
    f, p = VAE_SCALE_FACTOR, _cfg(model, "patch_size")
    h, w = _exact_div(s["height"], f, "height"), _exact_div(s["width"], f, "width")
    c = _cfg(model, "in_channels")
    images = s.get("input_images", 0)
    latents, spans = [], []
    start = s["text_len"]
    if images:
        ih, iw = _exact_div(s["input_height"], f, "input_height"), _exact_div(s["input_width"], f, "input_width")
        per = (ih // p) * (iw // p)
        for _ in range(images):
            latents.append(torch.zeros((1, c, ih, iw), device="meta"))
            spans.append([start, start + per])
            start += per
    n = (h // p) * (w // p)
    seq = start + 1 + n
    inputs: dict[str, Any] = {
        "hidden_states": TensorSpec((1, c, h, w)),
        "timestep": TensorSpec((1,)),
        "input_ids": TensorSpec((1, start), torch.int64),
        "input_img_latents": _PythonConstant(latents, (images, 1, c), "python list of the input images' latents "
                                             "(a wrapper constant, not a thop input)"),
        "input_image_sizes": _SpanDict({0: spans} if spans else {}),
        "attention_mask": TensorSpec((1, seq, seq)),
        "position_ids": torch.arange(seq, dtype=torch.int64).unsqueeze(0),
    }
    return inputs


class _SpanDict(dict):
    """``input_image_sizes`` as the collator builds it (a wrapper constant); its repr is what the fixture records."""

    shape = ()
    dtype = "python dict {row: [[start, end], ...]} of the input images' token spans (a wrapper constant)"


_omnigen_inputs.method_note = (  # type: ignore[attr-defined]
    "input_img_latents (a python list of meta tensors) and input_image_sizes (a python dict) are wrapper "
    "constants, not thop inputs"
)

__all__ = ["patch_rope", "_TensorListSpec"]
