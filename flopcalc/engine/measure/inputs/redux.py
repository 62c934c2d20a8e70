"""Input builders for FLUX.1 Redux's prior (``FluxPriorReduxPipeline``): the SigLIP vision tower
``SiglipVisionModel`` (transformers ``models/siglip/modeling_siglip.py``) and ``ReduxImageEncoder``
(diffusers ``pipelines/flux/modeling_flux.py``). Nothing needs help on meta."""

from __future__ import annotations

from collections.abc import Mapping

from torch import nn

from flopcalc.engine.measure.harness import TensorSpec, _cfg, _f32, input_builder


@input_builder("SiglipVisionModel", settings=("seq_len",))
def _siglip_vision_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """pixel_values (1, num_channels, image_size, image_size): ``encode_image`` runs the feature extractor,
    which resizes every image to the config's size (positions are not interpolated); ``seq_len`` must be
    the tokens that makes, ``(image_size // patch_size)²``."""
    size, patch = model.config.image_size, model.config.patch_size
    if s["seq_len"] != (size // patch) ** 2:
        raise ValueError(f"SiglipVisionModel makes {(size // patch) ** 2} tokens of its {size}x{size} images, "
                         f"not seq_len {s['seq_len']}")
    return {"pixel_values": _f32(1, model.config.num_channels, size, size)}


@input_builder("ReduxImageEncoder", settings=("seq_len",))
def _redux_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """x (1, seq_len, redux_dim): the image encoder's ``last_hidden_state`` of ``seq_len`` tokens."""
    return {"x": _f32(1, s["seq_len"], _cfg(model, "redux_dim"))}
