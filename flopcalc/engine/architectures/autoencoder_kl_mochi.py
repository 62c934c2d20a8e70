"""``AutoencoderKLMochi`` (diffusers ``models/autoencoders/autoencoder_kl_mochi.py``): the decode call as
``MochiPipeline`` makes it (``vae.decode`` on the whole latent, line 713 of pipeline_mochi.py); formulas in
``formulas/mochi_vae.py``.

``decode`` (autoencoder_kl_mochi.py:883) runs ``MochiDecoder3D`` on the latent in one call: tiling
(``enable_tiling``) and framewise decoding (``_enable_framewise_decoding``) are off by default, and the pipeline
turns neither on. ``drop_last_temporal_frames`` then slices the output (no counted work). With ``enable_tiling()``
(``vae_tiling``), ``tiled_decode`` (line 1016) decodes every overlapping latent tile whole, all frames at once:
:func:`decode_split`. Framewise decoding (a private switch) is not counted.

The encoder (``MochiEncoder3D``: Fourier features, causal-attention down blocks) is loaded with the model but not run
by a decode; the tree holds it as parameters only (``encoder``), counted exactly from the config. Its ``encode``
call is not counted by flopcalc (no Mochi pipeline encodes).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import reduce
from typing import Any

from flopcalc.engine.config import FLAGS, LAYER_COUNTS, SIZE, SIZES, TEXT, Config, declare_keys, positive_int
from flopcalc.engine.cost import Cost, Node
from flopcalc.formulas import ops
from flopcalc.engine.errors import ConfigError
from flopcalc.formulas.mochi_vae import mochi_decoder
from flopcalc.formulas.tiling import CallSplit, spatial_split
from flopcalc.engine.registry import RunShape, register

#: ``AutoencoderKLMochi.__init__`` keyword defaults (autoencoder_kl_mochi.py:680-694; latents_mean/std omitted:
#: no counted work reads them).
DEFAULTS = {
    "in_channels": 15,
    "out_channels": 3,
    "encoder_block_out_channels": [64, 128, 256, 384],
    "decoder_block_out_channels": [128, 256, 512, 768],
    "latent_channels": 12,
    "layers_per_block": [3, 3, 4, 6, 3],
    "act_fn": "silu",
    "temporal_expansions": [1, 2, 3],
    "spatial_expansions": [2, 2, 2],
    "add_attention_block": [False, True, True, True, True],
}
SOURCE = "diffusers/models/autoencoders/autoencoder_kl_mochi.py"
#: ``tile_sample_min_height``/``_width`` and ``tile_sample_stride_height``/``_width`` (autoencoder_kl_mochi.py:765-768).
TILE_SAMPLE_MIN, TILE_SAMPLE_STRIDE = 256, 192
#: ``MochiChunkedGroupNorm3D(num_groups=32)`` and the encoder attentions' ``dim_head=32``.
GROUPS = 32

declare_keys("AutoencoderKLMochi", {
    "in_channels": SIZE, "out_channels": SIZE, "encoder_block_out_channels": SIZES,
    "decoder_block_out_channels": SIZES, "latent_channels": SIZE, "layers_per_block": LAYER_COUNTS, "act_fn": TEXT,
    "temporal_expansions": SIZES, "spatial_expansions": SIZES, "add_attention_block": FLAGS,
})


def _get(values: Mapping[str, Any], key: str) -> Any:
    return values.get(key, DEFAULTS[key])


def scale_factor(values: Mapping[str, Any]) -> int:
    """``spatial_compression_ratio``: the product of ``spatial_expansions`` (autoencoder_kl_mochi.py:746)."""
    return reduce(lambda a, b: a * int(b), _get(values, "spatial_expansions"), 1)


def decode_split(values: Mapping[str, Any], latent_h: Any, latent_w: Any, tiling: bool) -> CallSplit:
    """How ``vae.decode`` runs (autoencoder_kl_mochi.py:883-891): with ``enable_tiling()``, when a latent side
    exceeds ``tile_sample_min // spatial_compression_ratio``, ``tiled_decode`` on latent tiles of that size every
    ``tile_sample_stride // ratio`` (lines 1033-1055), each decoded whole; else one call."""
    f = scale_factor(values)
    tile, stride = TILE_SAMPLE_MIN // f, TILE_SAMPLE_STRIDE // f
    return spatial_split(latent_h, latent_w, tile, stride, tiling)


def _structure(config: Config) -> dict[str, list[int]]:
    """The lists, checked against each other as the constructors index them."""
    where = f"{config.component}/config.json"
    dec = [int(c) for c in config["decoder_block_out_channels"]]
    enc = [int(c) for c in config["encoder_block_out_channels"]]
    layers = [int(n) for n in config["layers_per_block"]]
    t_exp = [int(t) for t in config["temporal_expansions"]]
    s_exp = [int(s) for s in config["spatial_expansions"]]
    attention = [bool(a) for a in config["add_attention_block"]]
    for chans in (dec, enc):
        if len(layers) != len(chans) + 1 or len(t_exp) < len(chans) - 1 or len(s_exp) < len(chans) - 1:
            raise ConfigError(f"{where}: layers_per_block needs one entry per block plus one ({len(chans) + 1}) and "
                              f"temporal/spatial_expansions one per up/down block ({len(chans) - 1}); got "
                              f"{len(layers)}, {len(t_exp)}, {len(s_exp)}")
    if len(attention) < len(enc) + 1:
        raise ConfigError(f"{where}: add_attention_block needs {len(enc) + 1} entries, got {len(attention)}")
    if any(c % GROUPS for c in dec + enc):
        raise ConfigError(f"{where}: every block width must divide by {GROUPS} (GroupNorm groups, attention head "
                          f"width); got {dec} and {enc}")
    return {"dec": dec, "enc": enc, "layers": layers, "t": t_exp, "s": s_exp, "attention": attention}


def _encoder_weights(st: Mapping[str, list], in_channels: int, latent_channels: int) -> Cost:
    """The weights of ``MochiEncoder3D`` (autoencoder_kl_mochi.py:437), each module as its op at zero positions (no
    work: a decode does not run it): ``proj_in``, ``block_in``, the down blocks (a strided causal ``conv_in`` of kernel
    t×s×s, then resnets, each followed by a GroupNorm and a four-linear ``Attention`` (q, k, v without bias;
    ``to_out.0`` with) where ``add_attention_block`` says), ``block_out``, ``norm_out`` and ``proj_out`` (no bias).
    A resnet: two GroupNorms and two causal 3×3×3 convs."""
    enc, layers, attention = st["enc"], st["layers"], st["attention"]

    def stage(c: int, n: int, attn: bool) -> Cost:
        resnet = ops.group_norm(c, 0) * 2 + ops.conv(c, c, 27, 0, thop_hooked=False) * 2
        if attn:
            resnet = resnet + ops.group_norm(c, 0) + ops.linear(0, c, c, bias=False) * 3 + ops.linear(0, c, c)
        return resnet * n

    total = ops.linear(0, in_channels, enc[0]) + stage(enc[0], layers[0], attention[0])
    for i in range(len(enc) - 1):
        t, s = st["t"][i], st["s"][i]
        total = (total + ops.conv(enc[i], enc[i + 1], t * s * s, 0, thop_hooked=False)
                 + stage(enc[i + 1], layers[i + 1], attention[i + 1]))
    return (total + stage(enc[-1], layers[-1], attention[-1]) + ops.group_norm(enc[-1], 0)
            + ops.linear(0, enc[-1], 2 * latent_channels, bias=False))


@register("AutoencoderKLMochi", call="decode", role="vae", defaults=DEFAULTS, source=SOURCE, scale_factor=scale_factor)
def autoencoder_kl_mochi_decode(config: Config, shape: RunShape) -> Node:
    """``vae.decode`` of a ``F × h × w`` latent (``shape.latent_frames``; 1 when unset), whole."""
    st = _structure(config)
    z = positive_int(config, "latent_channels")
    frames = 1 if shape.latent_frames is None else shape.latent_frames
    decoder = mochi_decoder(latent_channels=z, out_channels=positive_int(config, "out_channels"),
                            block_out_channels=st["dec"], layers_per_block=st["layers"],
                            temporal_expansions=st["t"], spatial_expansions=st["s"], frames=frames,
                            height=shape.latent_height, width=shape.latent_width)
    encoder = Node("encoder", _encoder_weights(st, positive_int(config, "in_channels"), z))
    return Node("vae", children=(encoder, decoder), formula="autoencoder_kl_mochi_decode")
