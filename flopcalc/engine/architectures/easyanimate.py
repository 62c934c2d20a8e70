"""EasyAnimate: ``EasyAnimateTransformer3DModel`` (diffusers ``models/transformers/transformer_easyanimate.py``) and its
VAE ``AutoencoderKLMagvit`` (``models/autoencoders/autoencoder_kl_magvit.py``; block formulas in ``formulas/magvit.py``).

The transformer (:377-552) sees the ``z × T × h × w`` latent (with the pipeline's extra channels concatenated:
``inpaint_latents`` / ``control_latents``, all of ``in_channels``) and ``L`` Qwen2-VL tokens: ``time_proj`` /
``time_embedding`` (inner → ``time_embed_dim`` → ``time_embed_dim``), ``proj`` (a ``p``-strided ``nn.Conv2d`` on
every frame: ``N = T·(h/p)(w/p)`` tokens), ``text_proj`` (an RMSNorm and a linear with ``add_norm_text_encoder``),
``num_layers`` blocks (the first ``mmdit_layers`` with separate text projections and feed-forward, the rest one set of
weights over text and video together), ``norm_final`` (LayerNorm), ``norm_out`` (``AdaLayerNorm``) and ``proj_out``.

Block (``EasyAnimateTransformerBlock``, :176-302): ``norm1``/``norm2`` (``EasyAnimateLayerNormZero``: SiLU and a
``time_embed_dim → 6d`` linear on the timestep embedding, an ``FP32LayerNorm`` on the video and, again, the text
tokens), ``attn1`` (joint attention over ``L + N`` tokens, per-head LayerNorms of q and k: an MMDiT block projects
the text with ``add_{q,k,v}_proj`` and back with ``to_add_out``; otherwise the text and video tokens share
``to_q/k/v`` and only the video tokens go through ``to_out``), ``ff`` on the video (and, without ``txt_ff``, the
text) tokens, ``txt_ff`` (MMDiT), ``norm3`` (``after_norm``) on both feed-forward outputs.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from flopcalc.engine.config import (
    FLAG, LAYERS, NAMES, NULL, SIZE, SIZES, TEXT, Config, count_int, declare_keys, positive_int, positive_int_list,
)
from flopcalc.engine.cost import Node, module_list
from flopcalc.engine.errors import ConfigError
from flopcalc.engine.image_tiling import TileSizes
from flopcalc.engine.registry import RunShape, register
from flopcalc.formulas import ops
from flopcalc.formulas.conditioning import mlp_embedder
from flopcalc.formulas.magvit import magvit_decoder, magvit_encoder
from flopcalc.formulas.tiling import CallSplit, spatial_split
from flopcalc.formulas.transformer_parts import attention_module, feed_forward, qk_norm_cost

#: ``EasyAnimateTransformer3DModel.__init__`` keyword defaults (transformer_easyanimate.py:423-449).
DEFAULTS = {
    "num_attention_heads": 48, "attention_head_dim": 64, "in_channels": None, "out_channels": None, "patch_size": None,
    "sample_width": 90, "sample_height": 60, "activation_fn": "gelu-approximate", "timestep_activation_fn": "silu",
    "freq_shift": 0, "num_layers": 48, "mmdit_layers": 48, "dropout": 0.0, "time_embed_dim": 512,
    "add_norm_text_encoder": False, "text_embed_dim": 3584, "text_embed_dim_t5": None, "norm_eps": 1e-5,
    "norm_elementwise_affine": True, "flip_sin_to_cos": True, "time_position_encoding_type": "3d_rope",
    "after_norm": False, "resize_inpaint_mask_directly": True, "enable_text_attention_mask": True,
    "add_noise_in_inpaint_model": True,
}
SOURCE = "diffusers/models/transformers/transformer_easyanimate.py"

declare_keys("EasyAnimateTransformer3DModel", {
    "num_attention_heads": SIZE, "attention_head_dim": SIZE, "in_channels": SIZE | NULL, "out_channels": SIZE | NULL,
    "patch_size": SIZE | NULL, "activation_fn": TEXT, "num_layers": LAYERS, "mmdit_layers": LAYERS,
    "time_embed_dim": SIZE, "add_norm_text_encoder": FLAG, "text_embed_dim": SIZE, "text_embed_dim_t5": SIZE | NULL,
    "norm_elementwise_affine": FLAG, "after_norm": FLAG,
})


def _layer_norm_zero(name: str, *, dim: int, cond: int, video: Any, text: Any, affine: bool) -> Node:
    """``EasyAnimateLayerNormZero`` (:33-64): SiLU, ``linear`` (cond → 6d) on the timestep embedding, ``norm``
    (``FP32LayerNorm``, thop counts 0) on the video and the text tokens."""
    return Node(name, ops.activation(cond), (
        Node("linear", ops.linear(1, cond, 6 * dim)),
        Node("norm", ops.layer_norm(video + text, dim, affine=affine, thop_rule=False)),
    ))


def easyanimate_block(*, dim: int, heads: int, head_dim: int, cond: int, video: Any, text: Any, mmdit: bool,
                      affine: bool, after_norm: bool) -> Node:
    """One ``EasyAnimateTransformerBlock`` (module doc)."""
    inner = heads * head_dim
    if mmdit:
        attn = attention_module("attn1", tokens=video, dim=dim, heads=heads, head_dim=head_dim, qk_norm="layer_norm",
                                context_tokens=text, context_dim=dim)
    else:  # text and video concatenated through to_q/k/v and the q/k norms; to_out on the video tokens only
        joint = video + text
        attn = Node("attn1", qk_norm_cost("layer_norm", joint * heads, head_dim) + ops.attention(joint, joint, heads,
                                                                                                 head_dim), (
            *(Node(p, ops.linear(joint, dim, inner)) for p in ("to_q", "to_k", "to_v")),
            Node("to_out", children=(Node("0", ops.linear(video, inner, dim)),)),
        ), formula="attention")
    children = [
        _layer_norm_zero("norm1", dim=dim, cond=cond, video=video, text=text, affine=affine),
        attn,
        _layer_norm_zero("norm2", dim=dim, cond=cond, video=video, text=text, affine=affine),
        feed_forward("ff", video if mmdit else video + text, dim),
    ]
    if mmdit:
        children.append(feed_forward("txt_ff", text, dim))
    if after_norm:
        children.append(Node("norm3", ops.layer_norm(video + text, dim, affine=affine, thop_rule=False)))
    return Node("block", children=tuple(children), formula="easyanimate_block")


@register("EasyAnimateTransformer3DModel", role="denoiser", defaults=DEFAULTS, source=SOURCE,
          nominal=RunShape(latent_height=8, latent_width=8, latent_frames=1, text_len=8))
def easyanimate_transformer(config: Config, shape: RunShape) -> Node:
    heads, head_dim = positive_int(config, "num_attention_heads"), positive_int(config, "attention_head_dim")
    dim = heads * head_dim
    for key in ("in_channels", "out_channels", "patch_size"):
        if config[key] is None:
            raise ConfigError(f"{config.component}/config.json: {key} is null (the class default), which "
                              "EasyAnimateTransformer3DModel cannot build with; set it")
    if config["activation_fn"] != "gelu-approximate":
        raise ConfigError(f"{config.component}/config.json: activation_fn {config['activation_fn']!r}: flopcalc models "
                          "the 'gelu-approximate' feed-forward EasyAnimate uses")
    p = positive_int(config, "patch_size")
    frames = 1 if shape.latent_frames is None else shape.latent_frames
    gh, gw = ops.exact_div(shape.latent_height, p), ops.exact_div(shape.latent_width, p)
    n, t = frames * gh * gw, shape.text_len
    cond = positive_int(config, "time_embed_dim")
    layers, mmdit = count_int(config, "num_layers"), count_int(config, "mmdit_layers")
    affine = bool(config["norm_elementwise_affine"])
    common = dict(dim=dim, heads=heads, head_dim=head_dim, cond=cond, video=n, text=t, affine=affine,
                  after_norm=bool(config["after_norm"]))
    blocks = [easyanimate_block(mmdit=i < mmdit, **common) for i in range(layers)]
    text_dim = positive_int(config, "text_embed_dim")
    if config["add_norm_text_encoder"]:
        text_proj = Node("text_proj", children=(Node("0", ops.rms_norm(t, text_dim)),
                                                Node("1", ops.linear(t, text_dim, dim))))
    else:
        text_proj = Node("text_proj", ops.linear(t, text_dim, dim))
    children = [
        mlp_embedder("time_embedding", dim, cond),
        Node("proj", ops.conv2d(positive_int(config, "in_channels"), dim, p, frames * gh, gw)),
        text_proj,
    ]
    if config["text_embed_dim_t5"] is not None:  # built, never fed by the diffusers pipelines (parameters only)
        t5 = positive_int(config, "text_embed_dim_t5")
        if config["add_norm_text_encoder"]:  # RMSNorm(text_embed_dim), as __init__ builds it, then the linear
            children.append(Node("text_proj_t5", children=(Node("0", ops.rms_norm(0, text_dim)),
                                                           Node("1", ops.linear(0, t5, dim)))))
        else:
            children.append(Node("text_proj_t5", ops.linear(0, t5, dim)))
    children += [
        module_list("transformer_blocks", blocks),
        Node("norm_final", ops.layer_norm(n, dim, affine=affine)),
        Node("norm_out", ops.activation(cond), (Node("linear", ops.linear(1, cond, 2 * dim)),
                                                 Node("norm", ops.layer_norm(n, dim, affine=affine)))),
        Node("proj_out", ops.linear(n, dim, p * p * positive_int(config, "out_channels"))),
    ]
    return Node("transformer", children=tuple(children), formula="easyanimate_transformer")


#: ``AutoencoderKLMagvit.__init__`` keyword defaults (autoencoder_kl_magvit.py:677-697).
VAE_DEFAULTS = {
    "in_channels": 3, "latent_channels": 16, "out_channels": 3, "block_out_channels": [128, 256, 512, 512],
    "down_block_types": ["SpatialDownBlock3D", "SpatialTemporalDownBlock3D", "SpatialTemporalDownBlock3D",
                         "SpatialTemporalDownBlock3D"],
    "up_block_types": ["SpatialUpBlock3D", "SpatialTemporalUpBlock3D", "SpatialTemporalUpBlock3D",
                       "SpatialTemporalUpBlock3D"],
    "layers_per_block": 2, "act_fn": "silu", "norm_num_groups": 32, "scaling_factor": 0.7125,
    "spatial_group_norm": True,
}
VAE_SOURCE = "diffusers/models/autoencoders/autoencoder_kl_magvit.py"
DOWN_TYPES, UP_TYPES = ("SpatialDownBlock3D", "SpatialTemporalDownBlock3D"), ("SpatialUpBlock3D",
                                                                               "SpatialTemporalUpBlock3D")

declare_keys("AutoencoderKLMagvit", {
    "in_channels": SIZE, "latent_channels": SIZE, "out_channels": SIZE, "block_out_channels": SIZES,
    "down_block_types": NAMES, "up_block_types": NAMES, "layers_per_block": LAYERS, "act_fn": TEXT,
    "norm_num_groups": SIZE,
})


def vae_factors(values) -> tuple[int, int]:
    """``(spatial_compression_ratio, temporal_compression_ratio)`` (:738-739): ``2 ** (n − 1)``, ``2 ** (n − 2)`` for
    ``n`` blocks; the pipelines read them."""
    n = len(values.get("block_out_channels", VAE_DEFAULTS["block_out_channels"]))
    return 2 ** (n - 1), 2 ** (n - 2)


def _structure(config: Config) -> tuple[list[int], list[bool], list[bool], int]:
    widths = positive_int_list(config, "block_out_channels")
    downs, ups = list(config["down_block_types"]), list(config["up_block_types"])
    if len(widths) < 2 or len(downs) != len(widths) or len(ups) != len(widths):
        raise ConfigError(f"{config.component}/config.json: AutoencoderKLMagvit needs at least 2 blocks and one "
                          f"down/up block type per entry of block_out_channels ({len(widths)})")
    bad = [t for t in downs if t not in DOWN_TYPES] + [t for t in ups if t not in UP_TYPES]
    if bad:
        raise ConfigError(f"{config.component}/config.json: unknown block type(s) {bad} (expected {DOWN_TYPES} / "
                          f"{UP_TYPES})")
    # the pipelines read temporal_compression_ratio = 2 ** (n − 2): the blocks must halve / double the frames so
    t_down = sum(d == DOWN_TYPES[1] for d in downs[:-1])
    t_up = sum(u == UP_TYPES[1] for u in ups[:-1])
    if 2 ** t_down != 2 ** (len(widths) - 2) or 2 ** t_up != 2 ** (len(widths) - 2):
        raise ConfigError(f"{config.component}/config.json: the block types change the frames by 2^{t_down} (down) / "
                          f"2^{t_up} (up), not by the temporal_compression_ratio 2^{len(widths) - 2} the class and the "
                          "pipelines assume")
    return widths, [d == DOWN_TYPES[1] for d in downs], [u == UP_TYPES[1] for u in ups], \
        count_int(config, "layers_per_block")


#: ``AutoencoderKLMagvit.__init__``'s tiles (autoencoder_kl_magvit.py:752-760), which ``enable_tiling()`` without
#: arguments keeps (:796-805): 512-pixel tiles every 448 pixels.
TILE_SAMPLE, TILE_STRIDE = 512, 448


#: ``enable_tiling(tile_sample_min_height=, ..., tile_sample_stride_width=)`` (autoencoder_kl_magvit.py:772-805,
#: 985-1044): the tile side ``memory --gpu`` may propose (:mod:`flopcalc.gpu_memory.vae_tiles`).
VIDEO_TILING = TileSizes(default_tile=lambda values: TILE_SAMPLE, stride=Fraction(TILE_STRIDE, TILE_SAMPLE),
                         takes_sizes=True, compression=lambda values: vae_factors(values)[0],
                         source=f"{VAE_SOURCE}:752-760, 772-805, 985-1044")


def decode_split(values, latent_height: int, latent_width: int, tiling: bool) -> CallSplit:
    """How ``vae.decode`` runs: with ``use_tiling`` and a latent side above ``512 / f`` (``_decode``, :865-871),
    ``tiled_decode`` (:985-1044) on latent tiles of ``512 / f`` every ``448 / f``, each tile decoded as the untiled
    call decodes the whole latent (``post_quant_conv``, then the decoder on the first latent frame and on each next
    one with its causal cache); else one call. ``f`` is the spatial compression (:func:`vae_factors`)."""
    f = vae_factors(values)[0]
    return spatial_split(latent_height, latent_width, TILE_SAMPLE // f, TILE_STRIDE // f, tiling)


def encode_split(values, height: int, width: int, tiling: bool) -> CallSplit:
    """How ``vae.encode`` runs: with ``use_tiling`` and a side above 512 pixels (``_encode``, :823-824, which compares
    the width with ``tile_sample_min_height`` and the height with ``tile_sample_min_width``: equal at the defaults),
    ``tiled_encode`` (:933-983) on 512-pixel tiles every 448, each encoded as the untiled call (the first frame, then
    chunks of 4, ``quant_conv``); else one call."""
    return spatial_split(height, width, TILE_SAMPLE, TILE_STRIDE, tiling)


@register("AutoencoderKLMagvit", role="vae_decoder", call="decode", defaults=VAE_DEFAULTS, source=VAE_SOURCE,
          scale_factor=lambda v: vae_factors(v)[0], nominal=RunShape(latent_height=2, latent_width=2, latent_frames=1))
def magvit_decode(config: Config, shape: RunShape) -> Node:
    """``vae.decode(z)`` (module doc of ``formulas/magvit.py``): ``post_quant_conv`` and the decoder; the encoder's
    parameters are the ``encode`` call's (a component's parameters are the sum over its calls)."""
    widths, _, ups, layers = _structure(config)
    z = positive_int(config, "latent_channels")
    frames = 1 if shape.latent_frames is None else shape.latent_frames
    h, w = shape.latent_height, shape.latent_width
    return Node("vae", children=(
        Node("post_quant_conv", ops.conv(z, z, 1, frames * h * w)),
        magvit_decoder(latent=z, out=positive_int(config, "out_channels"), widths=list(reversed(widths)),
                       layers=layers, temporal=ups, frames=frames, height=h, width=w),
    ), formula="magvit_decode")


@register("AutoencoderKLMagvit", role="vae_encoder", call="encode", defaults=VAE_DEFAULTS, source=VAE_SOURCE,
          scale_factor=lambda v: vae_factors(v)[0], nominal=RunShape(height=16, width=16, frames=1))
def magvit_encode(config: Config, shape: RunShape) -> Node:
    """``vae.encode(x)``: the encoder on the first frame and chunks of 4, ``quant_conv`` on the moments."""
    widths, downs, _, layers = _structure(config)
    z = positive_int(config, "latent_channels")
    frames = 1 if shape.frames is None else shape.frames
    if not isinstance(frames, int):
        raise ConfigError("AutoencoderKLMagvit encodes in chunks of 4 frames: no symbolic law in the frames")
    encoder, latent_frames = magvit_encoder(in_channels=positive_int(config, "in_channels"), latent=z, widths=widths,
                                            layers=layers, temporal=downs, frames=frames, height=shape.height,
                                            width=shape.width)
    f = vae_factors(config.values)[0]
    return Node("vae", children=(
        encoder,
        Node("quant_conv", ops.conv(2 * z, 2 * z, 1, latent_frames * ops.exact_div(shape.height, f)
                                    * ops.exact_div(shape.width, f))),
    ), formula="magvit_encode")
