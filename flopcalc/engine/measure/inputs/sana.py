"""Input builders for the SANA family: ``SanaTransformer2DModel`` and ``AutoencoderDC``.

Both run on meta as built, with no help: SANA's self-attention (``SanaLinearAttnProcessor2_0``) and
the DC-AE's ``SanaMultiscaleLinearAttention`` are plain ``torch.matmul`` calls (``aten.bmm``), its
cross-attention (``SanaAttnProcessor2_0``) is SDPA, which decomposes into bmm on meta.
"""

from __future__ import annotations

from collections.abc import Mapping

from torch import nn

from flopcalc.engine.measure.harness import TensorSpec, _cfg, _exact_div, _f32, _ids, enable_sized_tiling, input_builder


def dc_ae_spatial_factor(model: nn.Module) -> int:
    """``2 ** (len(encoder_block_out_channels) - 1)``: ``AutoencoderDC.spatial_compression_ratio``
    and ``SanaPipeline.vae_scale_factor`` (32 for the SANA DC-AE)."""
    return 2 ** (len(_cfg(model, "encoder_block_out_channels")) - 1)


#: The latent factor SanaPipeline uses for the transformer (that of its DC-AE f32 VAE).
SANA_LATENT_FACTOR = 32


@input_builder("SanaTransformer2DModel", settings=("height", "width", "text_len"), optional=("pag",))
def _sana_transformer_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """As ``SanaPipeline.__call__`` feeds it (pipeline_sana.py, denoising loop): hidden_states
    (1, in_channels, H/32, W/32), encoder_hidden_states (1, text_len, caption_channels), the
    prompt's encoder_attention_mask (1, text_len) int64, timestep (1,); ``guidance`` (1,) only for
    ``guidance_embeds`` models (SANA-Sprint's pipeline passes it; SanaPipeline never does)."""
    f = SANA_LATENT_FACTOR
    inputs = {
        "hidden_states": _f32(1, _cfg(model, "in_channels"), _exact_div(s["height"], f, "height"),
                              _exact_div(s["width"], f, "width")),
        "encoder_hidden_states": _f32(1, s["text_len"], _cfg(model, "caption_channels")),
        "encoder_attention_mask": _ids(1, s["text_len"]),
        "timestep": _f32(1),
    }
    if _cfg(model, "guidance_embeds"):
        inputs["guidance"] = _f32(1)
    if s.get("pag"):  # perturbed-attention guidance (SanaPAGPipeline): its processors and batch
        from flopcalc.engine.measure.perturbed import perturb

        return perturb(model, s["pag"], inputs)
    return inputs


@input_builder("AutoencoderDC", settings=("height", "width"), calls=("decode", "encode"),
               optional=("vae_tiling", "vae_tile"))
def _autoencoder_dc_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """decode: z (1, latent_channels, H/f, W/f), f = 2**(len(encoder_block_out_channels)-1) (32 for
    SANA); encode: x (1, in_channels, H, W). ``vae_tiling`` 1 (optional) calls ``enable_tiling()`` first
    (defaults: tiles of 512 px every 448 px, autoencoder_dc.py:496-501), ``vae_tile`` another tile size
    (:func:`~flopcalc.engine.measure.harness.enable_sized_tiling`)."""
    enable_sized_tiling(model, s)
    if call == "encode":
        return {"x": _f32(1, _cfg(model, "in_channels"), s["height"], s["width"])}
    f = dc_ae_spatial_factor(model)
    return {"z": _f32(1, _cfg(model, "latent_channels"), _exact_div(s["height"], f, "height"),
                      _exact_div(s["width"], f, "width"))}


@input_builder("SanaControlNetModel", settings=("height", "width", "text_len"))
def _sana_controlnet_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """As ``SanaControlNetPipeline`` calls it (pipeline_sana_controlnet.py, denoising loop): the transformer's
    inputs (hidden_states (1, in_channels, H/32, W/32), encoder_hidden_states, encoder_attention_mask,
    timestep) and controlnet_cond, the control image's DC-AE latent of the same shape."""
    f = SANA_LATENT_FACTOR
    latent = _f32(1, _cfg(model, "in_channels"), _exact_div(s["height"], f, "height"), _exact_div(s["width"], f, "width"))
    return {
        "hidden_states": latent,
        "encoder_hidden_states": _f32(1, s["text_len"], _cfg(model, "caption_channels")),
        "encoder_attention_mask": _ids(1, s["text_len"]),
        "timestep": _f32(1),
        "controlnet_cond": latent,
    }
