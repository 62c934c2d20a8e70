"""Input builder for the SD3 ControlNet, ``SD3ControlNetModel``, as ``StableDiffusion3ControlNetPipeline``
and ``StableDiffusion3ControlNetInpaintingPipeline`` feed it (their denoising loops)."""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

from flopcalc.engine.measure.harness import TensorSpec, _cfg, _exact_div, _f32, _sd3_inputs, input_builder


@input_builder("SD3ControlNetModel", settings=("height", "width", "text_len"), optional=("pos_embed_max_size",))
def _sd3_controlnet_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec | None]:
    """The SD3 transformer's inputs (latent (1, C, H/8, W/8), joint text states, pooled embedding,
    timestep) and ``controlnet_cond`` (1, C + extra_conditioning_channels, H/8, W/8): the control
    image's VAE latent (with the mask for inpainting). A ControlNet without a ``context_embedder``
    gets ``encoder_hidden_states=None`` (the pipeline passes none). One without a ``pos_embed`` (the SD3.5
    Large ControlNets) gets the transformer's grafted on, as the pipeline's ``__init__`` does
    (``_get_pos_embed_from_transformer``): a ``PatchEmbed`` of the same patch size, channels and width with
    the transformer's ``pos_embed_max_size`` (a setting: 192 for SD3.5 Large)."""
    if model.context_embedder is not None:
        inputs: dict[str, TensorSpec | None] = dict(_sd3_inputs(model, call, s))
    else:
        inputs = {"hidden_states": _f32(1, _cfg(model, "in_channels"), _exact_div(s["height"], 8, "height"),
                                        _exact_div(s["width"], 8, "width")),
                  "encoder_hidden_states": None, "pooled_projections": _f32(1, _cfg(model, "pooled_projection_dim")),
                  "timestep": _f32(1)}
    _, channels, h, w = inputs["hidden_states"].shape
    inputs["controlnet_cond"] = _f32(1, channels + _cfg(model, "extra_conditioning_channels"), h, w)
    if model.pos_embed is None:
        from diffusers.models.embeddings import PatchEmbed

        if "pos_embed_max_size" not in s:
            raise ValueError("SD3ControlNetModel without a pos_embed: give the transformer's pos_embed_max_size")
        with torch.device("meta"):
            model.pos_embed = PatchEmbed(height=_cfg(model, "sample_size"), width=_cfg(model, "sample_size"),
                                         patch_size=_cfg(model, "patch_size"), in_channels=_cfg(model, "in_channels"),
                                         embed_dim=model.inner_dim, pos_embed_max_size=s["pos_embed_max_size"])
        model._measure_notes = [
            "the transformer's pos_embed (PatchEmbed, pos_embed_max_size from the settings) was grafted on before "
            "measuring, as StableDiffusion3ControlNetPipeline.__init__ does for a ControlNet without one"]
    return inputs
