"""Input builders for FLUX.2 (imported by ``measure.py``; see validation/README.md):
``Flux2Transformer2DModel``, ``AutoencoderKLFlux2`` and the text path of ``Mistral3ForConditionalGeneration``.

Nothing needs help on meta: the rotary tables (``Flux2PosEmbed``) are computed from the position ids
as they are (their values never change a count: the meta ids are zeros of the pipeline's shapes; with
reference images those shapes come from the pipeline's own ``_prepare_image_ids``). The VAE takes ``AutoencoderKL``'s inputs (the latent ``(1, latent_channels, H/8, W/8)``
for decode, the image for encode): the pipelines' batch-norm (de)normalisation and 2×2 (un)patchify
around it are elementwise reshapes outside the module.

The text encoders get the SDPA text-encoder inputs of ``inputs_text_encoders.py``: token ids
``(1, seq_len)`` and no mask (a padding mask never changes the dense work; building it reads data on
meta). ``use_cache`` keeps its default (True), which transformers 5 needs on meta (the pipelines pass
``use_cache=False``: no cache is read either way on one forward). ``output_hidden_states=True`` only
collects outputs that are computed anyway: left out.
"""

from __future__ import annotations

from collections.abc import Mapping

from torch import nn

from flopcalc.engine.measure.inputs.text_encoders import _sdpa_text_inputs
from flopcalc.engine.measure.harness import TensorSpec, _autoencoder_kl_inputs, _cfg, _exact_div, input_builder

#: ``Flux2Pipeline`` / ``Flux2KleinPipeline``: ``vae_scale_factor`` 8, latents patchified 2×2.
VAE_SCALE_FACTOR = 8
PACKING = 2


def _reference_ids_shape(s: Mapping[str, int], in_channels: int) -> tuple[int, ...] | None:
    """The shape of the reference images' position ids as ``Flux2Pipeline.prepare_image_latents`` builds
    them (pipeline_flux2.py:654-687): ``reference_images`` latents of the reference size
    (``reference_height`` × ``reference_width``, default the generated size), patchified to
    ``(1, in_channels, side/16, side/16)``, their ids from the pipeline's own ``_prepare_image_ids`` (run on
    the CPU: one ``(T = 10 + 10·i, h, w, 0)`` row per token, reference after reference). None: no references."""
    import torch
    from diffusers import Flux2Pipeline

    refs = s.get("reference_images")
    if not refs:
        return None
    height, width = s.get("reference_height", s["height"]), s.get("reference_width", s["width"])
    grid = (_exact_div(height, VAE_SCALE_FACTOR * PACKING, "reference_height"),
            _exact_div(width, VAE_SCALE_FACTOR * PACKING, "reference_width"))
    latents = [torch.zeros(1, in_channels, *grid) for _ in range(refs)]
    return tuple(Flux2Pipeline._prepare_image_ids(latents).shape)


#: The optional setting ``kv_cache``: 1 is ``Flux2KleinKVPipeline``'s first step (``kv_cache_mode="extract"``), 2 a
#: later one (``"cached"``).
KV_MODES = {1: "extract", 2: "cached"}


@input_builder("Flux2Transformer2DModel", settings=("height", "width", "text_len"),
               optional=("reference_images", "reference_height", "reference_width", "kv_cache"))
def _flux2_transformer_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """As ``Flux2Pipeline`` calls it at batch 1 (text-to-image): hidden_states (1, (H/16)(W/16),
    in_channels), encoder_hidden_states (1, text_len, joint_attention_dim), timestep (1,), img_ids
    (1, (H/16)(W/16), 4), txt_ids (1, text_len, 4), and guidance (1,) when the model embeds it
    (``Flux2Pipeline`` always passes it; ``Flux2KleinPipeline`` passes None to its unguided models).

    With ``reference_images`` R (the ``image=`` references, each ``reference_height`` × ``reference_width``
    pixels, default the generated size) the reference latents' tokens and ids follow the generated ones
    (``torch.cat([latents, image_latents], dim=1)``, ``torch.cat([latent_ids, image_latent_ids], dim=1)``,
    pipeline_flux2.py:970-972): hidden_states and img_ids get ``R · (h/16)(w/16)`` more rows.

    With ``kv_cache`` (:data:`KV_MODES`; references required) as ``Flux2KleinKVPipeline`` calls it: its KV
    attention processors installed (``_set_kv_attn_processors``), then 1 (step 0): the references' rows first
    (``torch.cat([image_latents, latents], dim=1)``), ``kv_cache_mode="extract"`` and ``num_ref_tokens``; 2 (a
    later step): the latent's rows only, ``kv_cache_mode="cached"`` and a ``Flux2KVCache`` holding every layer's
    reference keys and values ``(1, R·(h/16)(w/16), heads, head_dim)`` (meta tensors)."""
    in_channels = _cfg(model, "in_channels")
    tokens = (_exact_div(s["height"], VAE_SCALE_FACTOR * PACKING, "height")
              * _exact_div(s["width"], VAE_SCALE_FACTOR * PACKING, "width"))
    reference_ids = _reference_ids_shape(s, in_channels)
    kv = s.get("kv_cache")
    if kv:
        return _kv_inputs(model, s, tokens, reference_ids, kv)
    if reference_ids is not None:
        tokens += reference_ids[1]
    text_len = s["text_len"]
    inputs = {
        "hidden_states": TensorSpec((1, tokens, in_channels)),
        "encoder_hidden_states": TensorSpec((1, text_len, _cfg(model, "joint_attention_dim"))),
        "timestep": TensorSpec((1,)),
        "img_ids": TensorSpec((1, tokens, 4)),
        "txt_ids": TensorSpec((1, text_len, 4)),
    }
    if _cfg(model, "guidance_embeds"):
        inputs["guidance"] = TensorSpec((1,))
    return inputs


#: ``vae_tiling`` 1: ``enable_tiling()`` (``AutoencoderMixin.enable_tiling``, vae.py:899, takes no tile sizes): tiles
#: of the config's ``sample_size`` overlapping by a quarter (autoencoder_kl_flux2.py:145-152), as ``AutoencoderKL``.
input_builder("AutoencoderKLFlux2", settings=("height", "width"), calls=("decode", "encode"),
              optional=("vae_tiling",))(_autoencoder_kl_inputs)
input_builder("Mistral3ForConditionalGeneration", settings=("seq_len",))(_sdpa_text_inputs)


def _kv_inputs(model: nn.Module, s: Mapping[str, int], tokens: int, reference_ids, kv: int) -> dict:
    """``Flux2KleinKVPipeline``'s transformer calls (pipeline_flux2_klein_kv.py, the denoising loop)."""
    import torch
    from diffusers.models.transformers.transformer_flux2 import (
        Flux2KVAttnProcessor, Flux2KVCache, Flux2KVParallelSelfAttnProcessor,
    )

    if kv not in KV_MODES or reference_ids is None:
        raise ValueError(f"kv_cache must be one of {sorted(KV_MODES)} with reference_images set, got {kv}")
    for block in model.transformer_blocks:  # Flux2KleinKVPipeline._set_kv_attn_processors
        block.attn.set_processor(Flux2KVAttnProcessor())
    for block in model.single_transformer_blocks:
        block.attn.set_processor(Flux2KVParallelSelfAttnProcessor())
    refs, text_len = reference_ids[1], s["text_len"]
    rows = tokens + refs if KV_MODES[kv] == "extract" else tokens
    inputs = {
        "hidden_states": TensorSpec((1, rows, _cfg(model, "in_channels"))),
        "encoder_hidden_states": TensorSpec((1, text_len, _cfg(model, "joint_attention_dim"))),
        "timestep": TensorSpec((1,)),
        "img_ids": TensorSpec((1, rows, 4)),
        "txt_ids": TensorSpec((1, text_len, 4)),
        "kv_cache_mode": KV_MODES[kv],
    }
    if KV_MODES[kv] == "extract":
        inputs["num_ref_tokens"] = refs
    else:
        heads, head_dim = _cfg(model, "num_attention_heads"), _cfg(model, "attention_head_dim")

        class _Cache(Flux2KVCache):  # named in the measurement's inputs by what it holds
            def __repr__(self) -> str:
                return f"Flux2KVCache of {refs} reference tokens per layer"

        cache = _Cache(len(model.transformer_blocks), len(model.single_transformer_blocks))
        cache.num_ref_tokens = refs
        for layer in cache.double_block_caches + cache.single_block_caches:
            layer.store(torch.zeros(1, refs, heads, head_dim, device="meta"),
                        torch.zeros(1, refs, heads, head_dim, device="meta"))
        inputs["kv_cache"] = cache
    if _cfg(model, "guidance_embeds"):
        inputs["guidance"] = TensorSpec((1,))
    return inputs
