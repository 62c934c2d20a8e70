"""Measuring a denoiser as a perturbed-attention-guidance (PAG) pipeline runs it: the PAG processors
installed on the real model by diffusers' own ``PAGMixin`` code, and the batch of the PAG pipelines.

An input builder that takes the optional setting ``pag`` (the batch rows: 3 = uncond, cond, perturbed
under classifier-free guidance; 2 = cond, perturbed without) calls :func:`perturb`: it gives the
model the processors its PAG pipeline's ``__init__`` passes to ``set_pag_applied_layers`` (with the
pipeline's default ``pag_applied_layers``, or ``layers``), lets ``PAGMixin._set_pag_attn_processor``
(diffusers ``pipelines/pag/pag_utils.py``) install them as the denoising loop does, and stacks every
batched input ``rows`` times, as ``_prepare_perturbed_attention_guidance`` and the loop's
``torch.cat([latents] * rows)`` do.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping, Sequence

import torch.nn as nn

#: Denoiser class → (its PAG pipeline's default ``pag_applied_layers``, the processors' class names
#: (with CFG, without) it passes to ``set_pag_applied_layers``), from the pipelines' ``__init__``.
PAG_DEFAULTS: dict[str, tuple[tuple[str, ...], tuple[str, str]]] = {
    # pipeline_pag_sd.py:215 (and every SD / SDXL / Kolors / ControlNet PAG pipeline): "mid"
    "UNet2DConditionModel": (("mid",), ("PAGCFGIdentitySelfAttnProcessor2_0", "PAGIdentitySelfAttnProcessor2_0")),
    # pipeline_pag_sd_animatediff.py:143 (a regular expression: the mid block's attn1 layers, spatial and motion)
    "UNetMotionModel": (("mid_block.*attn1",),
                        ("PAGCFGIdentitySelfAttnProcessor2_0", "PAGIdentitySelfAttnProcessor2_0")),
    # pipeline_pag_sd_3.py:188, 217
    "SD3Transformer2DModel": (("blocks.1",), ("PAGCFGJointAttnProcessor2_0", "PAGJointAttnProcessor2_0")),
    # pipeline_pag_pixart_sigma.py:176, 187
    "PixArtTransformer2DModel": (("blocks.1",),
                                 ("PAGCFGIdentitySelfAttnProcessor2_0", "PAGIdentitySelfAttnProcessor2_0")),
    # pipeline_pag_hunyuandit.py:212, 253
    "HunyuanDiT2DModel": (("blocks.1",), ("PAGCFGHunyuanAttnProcessor2_0", "PAGHunyuanAttnProcessor2_0")),
    # pipeline_pag_sana.py:168, 183
    "SanaTransformer2DModel": (("transformer_blocks.0",),
                               ("PAGCFGSanaLinearAttnProcessor2_0", "PAGIdentitySanaLinearAttnProcessor2_0")),
}


def perturb(model: nn.Module, rows: int, specs: Mapping[str, Any], *, unbatched: Sequence[str] = (),
            layers: Sequence[str] | None = None) -> dict[str, Any]:
    """Install ``model``'s PAG processors (``layers``: its pipeline's default when None) and return
    ``specs`` with every batched input (all but ``unbatched`` and ``None``s) stacked ``rows`` times."""
    import diffusers.models.attention_processor as processors
    from diffusers.pipelines.pag.pag_utils import PAGMixin

    if rows not in (2, 3):
        raise ValueError(f"pag is the PAG batch: 3 rows (with CFG) or 2 (without), got {rows}")
    cls = type(model).__name__
    default_layers, (with_cfg, without_cfg) = PAG_DEFAULTS[cls]
    attr = "unet" if cls in ("UNet2DConditionModel", "UNetMotionModel") else "transformer"

    class _Pipeline(PAGMixin):  # the two PAGMixin methods read only the denoiser attribute
        pass

    pipe = _Pipeline()
    setattr(pipe, attr, model)
    pipe.set_pag_applied_layers(list(layers or default_layers),
                                pag_attn_processors=(getattr(processors, with_cfg)(), getattr(processors, without_cfg)()))
    pipe._set_pag_attn_processor(pipe.pag_applied_layers, do_classifier_free_guidance=rows == 3)
    model._measure_notes = [
        f"perturbed-attention guidance as the PAG pipelines run it: PAGMixin installed "
        f"{with_cfg if rows == 3 else without_cfg} on the self-attention layers matching "
        f"{list(pipe.pag_applied_layers)}, every batched input stacked {rows} times "
        f"({'uncond, cond, perturbed' if rows == 3 else 'cond, perturbed'}); the count is the whole {rows}-row call"]
    return {name: spec if spec is None or name in unbatched else replace(spec, shape=(spec.shape[0] * rows,
                                                                                     *spec.shape[1:]))
            for name, spec in specs.items()}
