"""Allegro: ``AllegroTransformer3DModel`` (diffusers ``models/transformers/transformer_allegro.py``) and its VAE
``AutoencoderKLAllegro`` (``models/autoencoders/autoencoder_kl_allegro.py``); block formulas in ``formulas/allegro.py``.

The transformer sees the ``z × T × h × w`` latent and ``L`` T5 tokens: ``pos_embed`` (``PatchEmbed``: a
``p``-strided ``nn.Conv2d`` on every frame, no positional table) into ``N = T·(h/p)(w/p)`` tokens, adaLN-single
(``adaln_single``: one timestep MLP and ``D → 6D``), the caption projection (``PixArtAlphaTextProjection``),
``num_layers`` blocks, ``norm_out`` (LayerNorm, no affine) with the ``scale_shift_table`` modulation and ``proj_out``
(D → p²·out_channels).

The VAE decodes only tiled (``_decode`` raises unless ``use_tiling``; the pipeline's example calls
``vae.enable_tiling()``): ``post_quant_conv`` on the latent, then the decoder once per 6 × 40 × 40 latent tile
(:func:`decode_tiles`).
"""

from __future__ import annotations

from typing import Any

from flopcalc.engine.config import (
    FLAG, LAYERS, NAMES, SIZE, SIZES, TEXT, Config, FLAGS, Real, count_int, declare_keys, positive_int,
    positive_int_list, check_block_types,
)
from flopcalc.engine.cost import Node, module_list
from flopcalc.engine.errors import ConfigError
from flopcalc.engine.registry import RunShape, register
from flopcalc.formulas import ops
from flopcalc.formulas.allegro import (
    OVERLAP_H, OVERLAP_T, OVERLAP_W, TILE_FRAMES, allegro_decoder, allegro_transformer_block, per_frame,
)
from flopcalc.formulas.conditioning import mlp_embedder

#: ``AllegroTransformer3DModel.__init__`` keyword defaults (transformer_allegro.py:236-258).
DEFAULTS = {
    "patch_size": 2, "patch_size_t": 1, "num_attention_heads": 24, "attention_head_dim": 96, "in_channels": 4,
    "out_channels": 4, "num_layers": 32, "dropout": 0.0, "cross_attention_dim": 2304, "attention_bias": True,
    "sample_height": 90, "sample_width": 160, "sample_frames": 22, "activation_fn": "gelu-approximate",
    "norm_elementwise_affine": False, "norm_eps": 1e-6, "caption_channels": 4096, "interpolation_scale_h": 2.0,
    "interpolation_scale_w": 2.0, "interpolation_scale_t": 2.2,
}

declare_keys("AllegroTransformer3DModel", {
    "patch_size": SIZE, "patch_size_t": SIZE, "num_attention_heads": SIZE, "attention_head_dim": SIZE,
    "in_channels": SIZE, "out_channels": SIZE, "num_layers": LAYERS, "dropout": Real(0.0, 1.0, closed=True),
    "cross_attention_dim": SIZE, "attention_bias": FLAG, "sample_height": SIZE, "sample_width": SIZE,
    "sample_frames": SIZE, "activation_fn": TEXT, "norm_elementwise_affine": FLAG, "caption_channels": SIZE,
})


@register("AllegroTransformer3DModel", role="denoiser", defaults=DEFAULTS,
          source="diffusers/models/transformers/transformer_allegro.py")
def allegro_transformer(config: Config, shape: RunShape) -> Node:
    heads, head_dim = positive_int(config, "num_attention_heads"), positive_int(config, "attention_head_dim")
    dim = heads * head_dim
    if config["activation_fn"] != "gelu-approximate":
        raise ConfigError(f"{config.component}/config.json: activation_fn {config['activation_fn']!r}: flopcalc models "
                          "Allegro's 'gelu-approximate' feed-forward")
    if positive_int(config, "patch_size_t") != 1:
        raise ConfigError(f"{config.component}/config.json: patch_size_t {config['patch_size_t']}: Allegro's patch "
                          "embedding and proj_out are per frame (p_t 1); another value fails in forward")
    if positive_int(config, "cross_attention_dim") != dim:
        raise ConfigError(f"{config.component}/config.json: cross_attention_dim {config['cross_attention_dim']} is not "
                          f"the model width {dim}: attn2 reads the caption projected to that width (the real call "
                          "fails)")
    p = positive_int(config, "patch_size")
    frames = 1 if shape.latent_frames is None else shape.latent_frames
    gh, gw = ops.exact_div(shape.latent_height, p), ops.exact_div(shape.latent_width, p)
    n, t = frames * gh * gw, shape.text_len
    if isinstance(n, int) and n == 1:
        raise ConfigError(f"{config.component}: one latent token ({frames} frame, {gh}×{gw} patches) cannot run: "
                          "AllegroTransformerBlock squeezes dim 1 (transformer_allegro.py:132), so attn1 fails")
    block = allegro_transformer_block(dim=dim, heads=heads, head_dim=head_dim, tokens=n, text_tokens=t,
                                      cross_attention_dim=dim, bias=bool(config["attention_bias"]),
                                      norm_affine=bool(config["norm_elementwise_affine"]))
    out = positive_int(config, "out_channels")
    return Node("transformer", children=(
        Node("pos_embed", children=(Node("proj", ops.conv2d(positive_int(config, "in_channels"), dim, p,
                                                            frames * gh, gw)),)),
        Node("adaln_single", children=(
            Node("emb", children=(mlp_embedder("timestep_embedder", 256, dim),)),
            Node("linear", ops.activation(dim) + ops.linear(1, dim, 6 * dim)),
        )),
        mlp_embedder("caption_projection", positive_int(config, "caption_channels"), dim, tokens=t),
        module_list("transformer_blocks", [block] * count_int(config, "num_layers")),
        Node("norm_out", ops.layer_norm(n, dim, affine=False)),
        Node("scale_shift_table", ops.parameters(2 * dim)),
        Node("proj_out", ops.linear(n, dim, p * p * out)),
    ), formula="allegro_transformer")


#: ``AutoencoderKLAllegro.__init__`` keyword defaults (autoencoder_kl_allegro.py:725-751).
VAE_DEFAULTS = {
    "in_channels": 3, "out_channels": 3, "down_block_types": ["AllegroDownBlock3D"] * 4,
    "up_block_types": ["AllegroUpBlock3D"] * 4, "block_out_channels": [128, 256, 512, 512],
    "temporal_downsample_blocks": [True, True, False, False], "temporal_upsample_blocks": [False, True, True, False],
    "latent_channels": 4, "layers_per_block": 2, "act_fn": "silu", "norm_num_groups": 32,
    "temporal_compression_ratio": 4, "sample_size": 320, "scaling_factor": 0.13, "force_upcast": True,
}

declare_keys("AutoencoderKLAllegro", {
    "in_channels": SIZE, "out_channels": SIZE, "down_block_types": NAMES, "up_block_types": NAMES,
    "block_out_channels": SIZES, "temporal_downsample_blocks": FLAGS, "temporal_upsample_blocks": FLAGS,
    "latent_channels": SIZE, "layers_per_block": LAYERS, "act_fn": TEXT, "norm_num_groups": SIZE,
    "temporal_compression_ratio": Real(0.0, 64.0), "sample_size": SIZE,
})


def spatial_factor(values) -> int:
    """``spatial_compression_ratio`` (:785) and the pipeline's ``vae_scale_factor_spatial``:
    ``2 ** (len(block_out_channels) − 1)``."""
    return 2 ** (len(values.get("block_out_channels", VAE_DEFAULTS["block_out_channels"])) - 1)


def _tiles(size: Any, kernel: int, stride: int) -> Any:
    """``math.floor((size − kernel) / stride) + 1`` (:967-969), no fewer than 0 (a range of none)."""
    if isinstance(size, int):
        return max(0, (size - kernel) // stride + 1)
    return ops.exact_div(size - kernel, stride) + 1


def latent_tile(config: Config) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """``(kernel, stride)`` of ``tiled_decode`` in latent units (:955-956): the 24-frame ``sample_size²`` tile every
    16 frames and ``sample_size − 120`` × ``sample_size − 80`` pixels, over the compression ratios."""
    rs, rt = spatial_factor(config.values), int(config["temporal_compression_ratio"])
    size = positive_int(config, "sample_size")
    kernel = (TILE_FRAMES // rt, size // rs, size // rs)
    stride = ((TILE_FRAMES - OVERLAP_T) // rt, (size - OVERLAP_H) // rs, (size - OVERLAP_W) // rs)
    if min(stride) <= 0 or min(kernel) <= 0:
        raise ConfigError(f"{config.component}/config.json: sample_size {size} leaves no tile stride after the "
                          f"{OVERLAP_H}×{OVERLAP_W}-pixel overlaps (the tiled decode cannot advance)")
    return kernel, stride


def decode_tiles(config: Config, frames: Any, height: Any, width: Any) -> Any:
    """Decoder calls of ``tiled_decode`` on a ``frames × height × width`` latent."""
    kernel, stride = latent_tile(config)
    return (_tiles(frames, kernel[0], stride[0]) * _tiles(height, kernel[1], stride[1])
            * _tiles(width, kernel[2], stride[2]))


@register("AutoencoderKLAllegro", role="vae_decoder", call="decode", defaults=VAE_DEFAULTS,
          source="diffusers/models/autoencoders/autoencoder_kl_allegro.py", scale_factor=spatial_factor)
def allegro_vae_decode(config: Config, shape: RunShape) -> Node:
    """``vae.decode(z)`` with tiling on (``tiled_decode``, :952-1038): ``post_quant_conv`` (1×1, per frame) on the whole
    latent, then ``decoder`` on each tile of the latent tile's shape (the module doc of ``formulas/allegro.py``).
    The encoder's parameters count with the model (no encoder work)."""
    channels = positive_int_list(config, "block_out_channels")
    for key, kind in (("up_block_types", "AllegroUpBlock3D"), ("down_block_types", "AllegroDownBlock3D")):
        check_block_types(config, key, kind, len(channels))
    ups = [bool(u) for u in config["temporal_upsample_blocks"]]
    downs = [bool(d) for d in config["temporal_downsample_blocks"]]
    if len(ups) != len(channels) or len(downs) != len(channels):
        raise ConfigError(f"{config.component}/config.json: temporal_upsample_blocks / temporal_downsample_blocks need "
                          f"one entry per block ({len(channels)})")
    rt = config["temporal_compression_ratio"]
    if 2 ** sum(ups) != rt:
        raise ConfigError(f"{config.component}/config.json: temporal_upsample_blocks {ups} double the frames "
                          f"{sum(ups)} time(s), not by temporal_compression_ratio {rt}: tiled_decode writes each "
                          f"decoded tile into a {TILE_FRAMES}-frame buffer (the real call fails)")
    z, frames = positive_int(config, "latent_channels"), 1 if shape.latent_frames is None else shape.latent_frames
    kernel, _ = latent_tile(config)
    layers = count_int(config, "layers_per_block")
    decoder = allegro_decoder(latent_channels=z, out_channels=positive_int(config, "out_channels"),
                              block_out_channels=channels, layers_per_block=layers, temporal_upsample=ups,
                              frames=kernel[0], height=kernel[1], width=kernel[2])
    tiles = decode_tiles(config, frames, shape.latent_height, shape.latent_width)
    return Node("vae", children=(
        Node("post_quant_conv", ops.conv2d(z, z, 1, frames * shape.latent_height, shape.latent_width)),
        per_frame(decoder, tiles),
        Node("quant_conv", ops.conv2d(2 * z, 2 * z, 1, 0, 0)),
        _encoder_params(config, channels, downs, layers),
    ), formula="allegro_vae_decode")


def _encoder_params(config: Config, channels: list[int], downs: list[bool], layers: int) -> Node:
    """The encoder's parameters (``AllegroEncoder3D``, :414-538), which a decode does not run: its tree at zero work
    (the decoder's blocks' formulas on an empty map)."""
    from flopcalc.formulas.allegro import _conv3d, temporal_conv
    from flopcalc.formulas.resnet_block import resnet_block, spatial_self_attention

    c_in = positive_int(config, "in_channels")
    z = positive_int(config, "latent_channels")
    top = channels[-1]
    downs_nodes, prev = [], channels[0]
    for i, c in enumerate(channels):
        parts = [module_list("resnets", [resnet_block(prev if j == 0 else c, c, 0, 0) for j in range(layers)]),
                 module_list("temp_convs", [temporal_conv(c, 0, 0)[0] for _ in range(layers)])]
        if downs[i]:
            parts.append(Node("temp_convs_down", children=tuple(
                Node(n, children=(Node("0", ops.group_norm(c, 0)), Node(k, ops.conv(c, c, vol, 0))))
                for n, k, vol in (("conv1", "2", 18), ("conv2", "3", 27), ("conv3", "3", 27), ("conv4", "2", 27)))))
        if i < len(channels) - 1:
            parts.append(module_list("downsamplers", [Node("conv", ops.conv2d(c, c, 3, 0, 0))]))
        downs_nodes.append(Node("down_block", children=tuple(parts)))
        prev = c
    temp = temporal_conv(top, 0, 0)[0]
    mid = Node("mid_block", children=(
        module_list("resnets", [resnet_block(top, top, 0, 0)] * 2), module_list("temp_convs", [temp, temp]),
        module_list("attentions", [spatial_self_attention(top, 0, 0, head_dim=top)])))
    return Node("encoder", children=(
        Node("conv_in", ops.conv2d(c_in, channels[0], 3, 0, 0)),
        Node("temp_conv_in", _conv3d(channels[0], channels[0], (3, 1, 1), 0)),
        module_list("down_blocks", downs_nodes), mid,
        Node("conv_norm_out", ops.group_norm(top, 0)),
        Node("temp_conv_out", _conv3d(top, top, (3, 1, 1), 0)),
        Node("conv_out", ops.conv2d(top, 2 * z, 3, 0, 0)),
    ))
