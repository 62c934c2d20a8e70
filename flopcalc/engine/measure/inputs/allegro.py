"""Input builders for Allegro: ``AllegroTransformer3DModel`` and ``AutoencoderKLAllegro`` (its T5 text encoder uses the
shared builder).

Shapes as ``AllegroPipeline`` (diffusers ``pipelines/allegro/pipeline_allegro.py``) feeds them at batch 1:
``num_frames`` video frames become ``ceil(F / 4)`` latent frames for an even ``F`` and ``ceil((F − 1)/4) + 1`` for an
odd one (``prepare_latents``, :586-589), ``H × W`` pixels an ``H/8 × W/8`` latent. The transformer gets the prompt's
T5 states as ``(1, 1, L, C)`` (the pipeline unsqueezes them) with their mask, one timestep and the rotary tables the
pipeline prepares (:614-646; elementwise, no counted work). The VAE decodes only tiled: ``vae.enable_tiling()`` is
called first, as the pipeline's example does (untiled ``_decode`` raises NotImplementedError).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch
from torch import nn

from flopcalc.engine.measure.harness import TensorSpec, _cfg, _exact_div as _div, _ids, input_builder

SPATIAL, TEMPORAL = 8, 4


def latent_frames(num_frames: int) -> int:
    """``AllegroPipeline.prepare_latents`` (:586-589)."""
    if num_frames % 2 == 0:
        return math.ceil(num_frames / TEMPORAL)
    return math.ceil((num_frames - 1) / TEMPORAL) + 1


def _rotary(model: nn.Module, frames: int, h: int, w: int) -> tuple:
    """``AllegroPipeline._prepare_rotary_positional_embeddings`` (:614-646) on CPU, its tensors moved to meta."""
    from diffusers.models.embeddings import get_3d_rotary_pos_embed_allegro

    p = _cfg(model, "patch_size")
    freqs_t, freqs_h, freqs_w, grid_t, grid_h, grid_w = get_3d_rotary_pos_embed_allegro(
        embed_dim=_cfg(model, "attention_head_dim"), crops_coords=((0, 0), (h // p, w // p)),
        grid_size=(h // p, w // p), temporal_size=frames,
        interpolation_scale=(_cfg(model, "interpolation_scale_t"), _cfg(model, "interpolation_scale_h"),
                             _cfg(model, "interpolation_scale_w")), device="cpu")
    grid_t, grid_h, grid_w = (g.to(dtype=torch.long) for g in (grid_t, grid_h, grid_w))
    pos = torch.cartesian_prod(grid_t, grid_h, grid_w).reshape(-1, 3).transpose(0, 1).reshape(3, 1, -1).contiguous()

    def meta(x):
        return tuple(meta(y) for y in x) if isinstance(x, (tuple, list)) else x.to("meta")

    return meta((freqs_t, freqs_h, freqs_w)), meta(tuple(pos))


@input_builder("AllegroTransformer3DModel", settings=("height", "width", "num_frames", "text_len"))
def _allegro_transformer_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict:
    """hidden_states (1, C, T, H/8, W/8), encoder_hidden_states (1, 1, text_len, caption_channels) with
    encoder_attention_mask (1, text_len), timestep (1,), and the pipeline's rotary tables (see :func:`_rotary`)."""
    h, w = _div(s["height"], SPATIAL, "height"), _div(s["width"], SPATIAL, "width")
    frames = latent_frames(s["num_frames"])
    rotary, real = _rotary(model, frames, h, w), model.forward

    def forward(*args, **kwargs):
        return real(*args, image_rotary_emb=rotary, **kwargs)

    model.forward = forward
    model._measure_notes = ["image_rotary_emb: AllegroPipeline._prepare_rotary_positional_embeddings computed on CPU, "
                            "moved to meta and passed by a wrapper of model.forward (a nested tuple is no tensor "
                            "input; the tables are applied elementwise, no counted work)."]
    return {
        "hidden_states": TensorSpec((1, _cfg(model, "in_channels"), frames, h, w)),
        "encoder_hidden_states": TensorSpec((1, 1, s["text_len"], _cfg(model, "caption_channels"))),
        "encoder_attention_mask": _ids(1, s["text_len"]),
        "timestep": TensorSpec((1,)),
    }


@input_builder("AutoencoderKLAllegro", settings=("height", "width", "num_frames"), calls=("decode",))
def _allegro_vae_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """decode: z (1, latent_channels, T, H/8, W/8), after ``vae.enable_tiling()``."""
    model.enable_tiling()
    model._measure_notes = ["vae.enable_tiling() was called before measuring (AutoencoderKLAllegro decodes only "
                            "tiled): tiled_decode ran."]
    f = 2 ** (len(_cfg(model, "block_out_channels")) - 1)
    return {"z": TensorSpec((1, _cfg(model, "latent_channels"), latent_frames(s["num_frames"]),
                             _div(s["height"], f, "height"), _div(s["width"], f, "width")))}
