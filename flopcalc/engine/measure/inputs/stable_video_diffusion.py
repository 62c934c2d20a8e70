"""Input builders for Stable Video Diffusion (``StableVideoDiffusionPipeline``): the
``UNetSpatioTemporalConditionModel`` and the ``AutoencoderKLTemporalDecoder``. The CLIP image encoder is
built by the CLIP vision builder. Imported by ``flopcalc.engine.measure.harness``."""

from __future__ import annotations

import functools
from collections.abc import Mapping

from torch import nn

from flopcalc.engine.measure.harness import TensorSpec, _cfg, _exact_div, _f32, input_builder

#: ``vae_scale_factor = 2 ** (len(vae.config.block_out_channels) - 1)`` for the SVD VAE (8).
FACTOR = 8
ALPHA_NOTE = ("AlphaBlender.mix_factor is created with torch.Tensor([alpha]), which ignores the meta default "
              "device: the model is moved to meta (model.to('meta')) so that torch.where sees one device")


def _alpha_blenders_to_meta(model: nn.Module) -> None:
    """``AlphaBlender`` (resnet.py) builds ``mix_factor`` with the legacy ``torch.Tensor([alpha])``, on the
    CPU even under ``torch.device("meta")``; ``get_alpha``'s ``torch.where`` then mixes devices. Moving the
    model to meta changes no count."""
    model.to("meta")
    model._measure_notes = [*getattr(model, "_measure_notes", []), ALPHA_NOTE]


@input_builder("UNetSpatioTemporalConditionModel", settings=("height", "width", "num_frames"))
def _unet_spatio_temporal_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """sample (1, num_frames, in_channels, H/8, W/8) (the noisy latents with the image latents
    concatenated on channels), timestep (1,), encoder_hidden_states (1, 1, cross_attention_dim) (the CLIP
    image embedding) and added_time_ids (1, 3) (fps, motion bucket, noise augmentation), as
    ``StableVideoDiffusionPipeline`` calls the UNet."""
    _alpha_blenders_to_meta(model)
    cross = _cfg(model, "cross_attention_dim")
    return {
        "sample": _f32(1, s["num_frames"], _cfg(model, "in_channels"), _exact_div(s["height"], FACTOR, "height"),
                       _exact_div(s["width"], FACTOR, "width")),
        "timestep": _f32(1),
        "encoder_hidden_states": _f32(1, 1, cross if isinstance(cross, int) else cross[0]),
        "added_time_ids": _f32(1, 3),
    }


@input_builder("AutoencoderKLTemporalDecoder", settings=("height", "width"), calls=("decode", "encode"),
               optional=("num_frames",))
def _autoencoder_kl_temporal_decoder_inputs(model: nn.Module, call: str,
                                            s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """decode: z (num_frames, latent_channels, H/8, W/8), one ``decode_latents`` chunk, with the
    ``num_frames`` keyword the pipeline passes bound on the instance (``functools.partial``: the harness
    passes tensors only); encode: x (1, in_channels, H, W), the conditioning image (``_encode_vae_image``)."""
    if call == "encode":
        return {"x": _f32(1, _cfg(model, "in_channels"), s["height"], s["width"])}
    _alpha_blenders_to_meta(model)
    frames = s.get("num_frames", 1)
    model.decode = functools.partial(model.decode, num_frames=frames)
    factor = 2 ** (len(_cfg(model, "block_out_channels")) - 1)
    return {"z": _f32(frames, _cfg(model, "latent_channels"), _exact_div(s["height"], factor, "height"),
                      _exact_div(s["width"], factor, "width"))}


_autoencoder_kl_temporal_decoder_inputs.method_note = (  # type: ignore[attr-defined]
    "AutoencoderKLTemporalDecoder.decode is bound with num_frames (functools.partial on the instance), as "
    "decode_latents calls it per chunk of frames"
)
