"""``AutoencoderKL`` (diffusers ``models/autoencoders/autoencoder_kl.py``): ``decode`` runs
``post_quant_conv`` (when ``use_post_quant_conv``) and the ``Decoder``; ``encode`` runs the
``Encoder`` and ``quant_conv`` (when ``use_quant_conv``). Tiling and slicing are off by default
in every pipeline, so the whole latent is decoded in one pass; with ``vae.enable_tiling()``,
:func:`decode_split` and :func:`encode_split` give the tiles ``tiled_decode`` / ``_tiled_encode``
run, each a whole ``decode`` / ``encode`` of its own size (the blending between tiles is
elementwise: no MACs).
"""

from __future__ import annotations

from fractions import Fraction

from flopcalc.engine.image_tiling import ImageTiling

from typing import Any, Mapping

from flopcalc.engine.config import (
    FLAG, LAYERS, NAMES, SIZE, SIZES, Config, ListOf, count_int, declare_keys, positive_int,
)
from flopcalc.engine.cost import Node
from flopcalc.engine.errors import ConfigError, ResolutionError
from flopcalc.formulas import ops
from flopcalc.formulas.tiling import CallSplit, slices
from flopcalc.formulas.vae_decoder import vae_decoder, vae_encoder
from flopcalc.engine.registry import RunShape, register

#: ``AutoencoderKL.__init__`` keyword defaults (autoencoder_kl.py).
DEFAULTS = {
    "in_channels": 3,
    "out_channels": 3,
    "block_out_channels": [64],
    "layers_per_block": 1,
    "latent_channels": 4,
    "norm_num_groups": 32,
    "mid_block_add_attention": True,
    "use_quant_conv": True,
    "use_post_quant_conv": True,
    "down_block_types": ["DownEncoderBlock2D"],
    "up_block_types": ["UpDecoderBlock2D"],
    "sample_size": 32,
}
#: ``self.tile_overlap_factor`` (autoencoder_kl.py:140): tiles overlap by a quarter of their side.
TILE_OVERLAP_FACTOR = 0.25
SOURCE = "diffusers/models/autoencoders/autoencoder_kl.py"


def scale_factor(values) -> int:
    """``vae_scale_factor`` as the pipelines compute it: ``2 ** (len(block_out_channels) - 1)``."""
    return 2 ** (len(values.get("block_out_channels", DEFAULTS["block_out_channels"])) - 1)


def decode_split(values: Mapping[str, Any], latent_h: int, latent_w: int) -> CallSplit:
    """With ``enable_tiling()``: how ``_decode`` runs (autoencoder_kl.py:364): ``tiled_decode`` when a
    side exceeds ``tile_latent_min_size = int(sample_size / vae_scale_factor)`` (the first entry of a
    list ``sample_size``), tiles ``z[i : i + tile]`` every ``int(tile · (1 − 0.25))`` latent pixels
    along each side (``formulas/tiling.py``), each running ``post_quant_conv`` and the decoder on its
    own extent; else whole."""
    sample = values.get("sample_size", DEFAULTS["sample_size"])
    tile = int((sample[0] if isinstance(sample, list) else sample) / scale_factor(values))
    if not (latent_w > tile or latent_h > tile):
        return CallSplit.of(None, latent_h, latent_w)
    if isinstance(sample, list):  # tiled_decode multiplies tile_sample_min_size (the list) by a float
        raise ConfigError(f"AutoencoderKL sample_size {sample!r} is a list: diffusers' tiled_decode needs one "
                          "integer tile size (it fails on a list); give sample_size as one integer to estimate tiling")
    return _tiled(latent_h, latent_w, tile, sample, "latent")


def encode_split(values: Mapping[str, Any], height: int, width: int) -> CallSplit:
    """With ``enable_tiling()``: how ``_encode`` runs (autoencoder_kl.py:254): ``_tiled_encode`` when a
    side exceeds ``tile_sample_min_size = sample_size``, tiles ``x[i : i + sample_size]`` every
    ``int(sample_size · (1 − 0.25))`` pixels, each running the encoder and ``quant_conv``; else whole."""
    sample = values.get("sample_size", DEFAULTS["sample_size"])
    if isinstance(sample, list):  # _encode compares the image side with tile_sample_min_size, the list
        raise ConfigError(f"AutoencoderKL sample_size {sample!r} is a list: diffusers' tiled encode needs one "
                          "integer tile size (it fails on a list); give sample_size as one integer to estimate tiling")
    if not (width > sample or height > sample):
        return CallSplit.of(None, height, width)
    return _tiled(height, width, sample, sample, "pixel")


def _tiled(height: int, width: int, tile: int, sample: int, unit: str) -> CallSplit:
    """Both sides sliced by :func:`~flopcalc.formulas.tiling.slices` (tile ``tile``, stride
    ``int(tile × 0.75)``), within the tile budget."""
    from flopcalc.engine.limits import check_tiles

    stride = int(tile * (1 - TILE_OVERLAP_FACTOR))
    if stride < 1:  # range(0, side, 0) raises in diffusers
        raise ConfigError(f"AutoencoderKL sample_size {sample} gives {tile}-{unit} tiles whose overlap stride "
                          f"int({tile} × 0.75) is 0: diffusers' tiling cannot step; use a larger sample_size")
    check_tiles(-(-height // stride) * -(-width // stride), "AutoencoderKL tiles")
    return CallSplit(None, slices(height, tile, stride), slices(width, tile, stride))


def _check_encodable(height: Any, width: Any, downsamplings: int) -> None:
    """Each ``Downsample2D`` pads one pixel and runs a 3×3 stride-2 conv: a side under 2 pixels at
    any level (a thin edge tile of ``_tiled_encode``) makes the real encoder fail, so it is refused."""
    h, w = height, width
    for _ in range(downsamplings):
        if isinstance(h, int) and isinstance(w, int) and min(h, w) < 2:
            raise ResolutionError(f"AutoencoderKL cannot encode a {height}×{width} image (or edge tile): after the "
                                  f"downsamplings one side is {min(h, w)} pixel(s), under the 3×3 conv's 2-pixel "
                                  "minimum (as the real encoder fails); choose another size")
        h, w = ops.conv_output_size(h + 1, 3, 2), ops.conv_output_size(w + 1, 3, 2)


def _blocks(config: Config) -> dict:
    channels = [int(c) for c in config["block_out_channels"]]
    for key, wanted in (("down_block_types", "DownEncoderBlock2D"), ("up_block_types", "UpDecoderBlock2D")):
        kinds = set(config[key])
        if kinds - {wanted}:
            from flopcalc.engine.errors import UnknownArchitectureError

            raise UnknownArchitectureError(f"{config.component}: AutoencoderKL {key} {sorted(kinds)} "
                                           f"is not supported (only {wanted}).")
    return {
        "latent_channels": positive_int(config, "latent_channels"),
        "block_out_channels": channels,
        "layers_per_block": count_int(config, "layers_per_block"),
        "mid_block_add_attention": bool(config["mid_block_add_attention"]),
    }


#: Every config key ``AutoencoderKL`` reads (assemblers and pipeline plan), as
#: :func:`flopcalc.engine.config.declare_keys` validates it.
declare_keys("AutoencoderKL", {
    "in_channels": SIZE, "out_channels": SIZE, "latent_channels": SIZE, "block_out_channels": SIZES,
    "layers_per_block": LAYERS, "down_block_types": NAMES, "up_block_types": NAMES,
    "mid_block_add_attention": FLAG, "use_quant_conv": FLAG, "use_post_quant_conv": FLAG,
    "norm_num_groups": SIZE, "sample_size": SIZE | ListOf(SIZE, lo=2, hi=2),
})


@register("AutoencoderKL", call="decode", role="vae", defaults=DEFAULTS, source=SOURCE,
          scale_factor=scale_factor)
def autoencoder_kl_decode(config: Config, shape: RunShape) -> Node:
    kw = _blocks(config)
    z = kw["latent_channels"]
    h, w = shape.latent_height, shape.latent_width
    children = []
    if config["use_post_quant_conv"]:
        children.append(Node("post_quant_conv", ops.conv2d(z, z, 1, h, w)))
    children.append(vae_decoder(out_channels=positive_int(config, "out_channels"), height=h, width=w, **kw))
    return Node("vae", children=tuple(children), formula="autoencoder_kl_decode")


@register("AutoencoderKL", call="encode", role="vae", defaults=DEFAULTS, source=SOURCE,
          scale_factor=scale_factor)
def autoencoder_kl_encode(config: Config, shape: RunShape) -> Node:
    kw = _blocks(config)
    z = kw["latent_channels"]
    _check_encodable(shape.height, shape.width, len(kw["block_out_channels"]) - 1)
    enc = vae_encoder(in_channels=positive_int(config, "in_channels"), height=shape.height, width=shape.width, **kw)
    children = [enc]
    if config["use_quant_conv"]:  # on the encoder's output grid (H/f × W/f; any size, e.g. an edge tile)
        h, w = shape.height, shape.width
        for _ in kw["block_out_channels"][1:]:  # each Downsample2D: pad (0, 1, 0, 1), 3×3 conv, stride 2
            h, w = ops.conv_output_size(h + 1, 3, 2), ops.conv_output_size(w + 1, 3, 2)
        children.append(Node("quant_conv", ops.conv2d(2 * z, 2 * z, 1, h, w)))
    return Node("vae", children=tuple(children), formula="autoencoder_kl_encode")


def _sample_tile(values) -> int:
    sample = values.get("sample_size", DEFAULTS["sample_size"])
    return sample[0] if isinstance(sample, list) else sample


#: ``AutoencoderMixin.enable_tiling()`` takes no tile sizes (diffusers/models/autoencoders/vae.py:899-907): tiles of
#: the config's ``sample_size``, stride ``int(tile · 0.75)`` (autoencoder_kl.py:140, :func:`decode_split`).
IMAGE_TILING = ImageTiling(default_tile=_sample_tile, stride=Fraction(3, 4), takes_sizes=False,
                           compression=scale_factor,
                           decode_split=lambda values, h, w, tile_px: decode_split(values, h, w),
                           source="diffusers/models/autoencoders/vae.py:899-907, autoencoder_kl.py:140, 364",
                           encode_split=encode_split)
