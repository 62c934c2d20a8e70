"""Measuring a UNet as ``load_ip_adapter`` leaves it and an IP-Adapter pipeline calls it.

An input builder that takes the optional setting ``ip_adapter`` (the image embedding's width, the image
encoder's ``projection_dim``: 1024 for ViT-H-14, 1280 for ViT-bigG-14) calls :func:`attach`. It builds, on the
model's device (meta), what ``UNet2DConditionLoadersMixin._load_ip_adapter_weights`` (diffusers
``loaders/unet.py:696-722``) builds for one plain IP-Adapter (``ip-adapter_sd15``, ``ip-adapter_sdxl``: an
``image_proj`` with ``proj.weight``):

* ``_convert_ip_adapter_attn_to_diffusers`` (:598-690): every ``attn1`` keeps its processor class, every other
  processor becomes ``IPAdapterAttnProcessor2_0(hidden_size, cross_attention_dim=config.cross_attention_dim,
  scale=1.0, num_tokens=[4])`` with ``hidden_size`` the block's ``block_out_channels`` entry;
* ``_convert_ip_adapter_image_proj_to_diffusers`` (:403-414): ``ImageProjection(cross_attention_dim,
  image_embed_dim, num_image_text_embeds=4)``, inside ``MultiIPAdapterImageProjection`` as
  ``encoder_hid_proj``, with ``config.encoder_hid_dim_type = "ip_image_proj"``;

and passes ``added_cond_kwargs={"image_embeds": ...}`` as a ``(rows, width)`` tensor, which
``MultiIPAdapterImageProjection.forward`` (embeddings.py:2355-2361) turns into ``[embeds.unsqueeze(1)]``: the
very list ``prepare_ip_adapter_image_embeds`` makes (``pipeline_stable_diffusion.py:538-581``: per adapter a
``(rows, 1, width)`` tensor, one image per row), so the counted call is the pipeline's (a tensor keeps the
fixture's inputs plain shapes).
"""

from __future__ import annotations

from typing import Any, Mapping

import torch.nn as nn

#: Image tokens of a plain IP-Adapter's ``ImageProjection`` (loaders/unet.py:405, 655).
TOKENS = 4
#: An IP-Adapter Plus's queries: h94's plus adapters are loaded with ``num_tokens=16`` (tencent-ailab/IP-Adapter
#: demos); the loader reads them from ``latents.shape[1]`` (loaders/unet.py:522).
PLUS_QUERIES = 16


def attach(model: nn.Module, embed_dim: int, specs: Mapping[str, Any], plus: int | None = None,
           tokens: int | None = None) -> dict[str, Any]:
    """Install one IP-Adapter of image-embedding width ``embed_dim`` on the UNet ``model`` as the loader does,
    and return ``specs`` with ``added_cond_kwargs.image_embeds`` of shape ``(1, embed_dim)``. ``plus``: an
    IP-Adapter Plus whose Resampler is ``plus`` wide (``plus // 64`` heads, 16 queries: tencent-ailab's
    ``IPAdapterPlus`` / ``IPAdapterPlusXL``, the loader's ``IPAdapterPlusImageProjection`` at :519-538) on
    ``tokens`` hidden states of width ``embed_dim``; its embeds are ``(1, tokens, embed_dim)``."""
    import torch
    from diffusers.models.attention_processor import IPAdapterAttnProcessor2_0
    from diffusers.models.embeddings import (
        ImageProjection,
        IPAdapterPlusImageProjection,
        MultiIPAdapterImageProjection,
    )

    from flopcalc.engine.measure.tensors import TensorSpec

    config = model.config
    device = next(model.parameters()).device
    queries = TOKENS if plus is None else PLUS_QUERIES
    procs = {}
    with torch.device(device):
        for name, proc in model.attn_processors.items():
            if name.endswith("attn1.processor") or "motion_modules" in name:
                procs[name] = proc.__class__()
                continue
            if name.startswith("mid_block"):
                hidden = config.block_out_channels[-1]
            elif name.startswith("up_blocks"):
                hidden = list(reversed(config.block_out_channels))[int(name[len("up_blocks.")])]
            else:
                hidden = config.block_out_channels[int(name[len("down_blocks.")])]
            procs[name] = IPAdapterAttnProcessor2_0(hidden_size=hidden, cross_attention_dim=config.cross_attention_dim,
                                                    scale=1.0, num_tokens=[queries])
        model.encoder_hid_proj = None
        model.set_attn_processor(procs)
        layer = ImageProjection(cross_attention_dim=config.cross_attention_dim, image_embed_dim=embed_dim,
                                num_image_text_embeds=TOKENS) if plus is None else IPAdapterPlusImageProjection(
            embed_dims=embed_dim, output_dims=config.cross_attention_dim, hidden_dims=plus, heads=plus // 64,
            num_queries=PLUS_QUERIES)
        model.encoder_hid_proj = MultiIPAdapterImageProjection([layer])
    model.config.encoder_hid_dim_type = "ip_image_proj"
    if plus is None:
        model._measure_notes = [
            f"IP-Adapter as load_ip_adapter builds it: IPAdapterAttnProcessor2_0 (num_tokens [{TOKENS}]) in every "
            f"cross-attention, encoder_hid_proj = MultiIPAdapterImageProjection([ImageProjection({embed_dim} → "
            f"{TOKENS} × {config.cross_attention_dim})]); added_cond_kwargs image_embeds (1, {embed_dim}), taken as "
            f"[(1, 1, {embed_dim})]"]
        return {**specs, "added_cond_kwargs.image_embeds": TensorSpec((1, embed_dim))}
    model._measure_notes = [
        f"IP-Adapter Plus as load_ip_adapter builds it: IPAdapterAttnProcessor2_0 (num_tokens [{PLUS_QUERIES}]) in "
        f"every cross-attention, encoder_hid_proj = MultiIPAdapterImageProjection([IPAdapterPlusImageProjection("
        f"embed_dims={embed_dim}, output_dims={config.cross_attention_dim}, hidden_dims={plus}, heads={plus // 64}, "
        f"num_queries={PLUS_QUERIES})]); added_cond_kwargs image_embeds (1, {tokens}, {embed_dim}), taken as "
        f"[(1, 1, {tokens}, {embed_dim})]"]
    return {**specs, "added_cond_kwargs.image_embeds": TensorSpec((1, tokens, embed_dim))}
