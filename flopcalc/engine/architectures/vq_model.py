"""``VQModel`` (diffusers ``models/autoencoders/vq_model.py``), Kandinsky's MoVQ.

``decode`` is what ``Kandinsky3Pipeline`` runs: ``movq.decode(latents, force_not_quantize=True)``
skips the quantizer (``quant = h``; the codebook is looked up only without
``force_not_quantize``), then ``post_quant_conv`` and the ``Decoder``, which with
``norm_type: spatial`` is conditioned on ``quant`` at every normalisation. ``encode`` (the
image-to-image pipeline's ``movq.encode(image)``) runs the ``Encoder`` and ``quant_conv``.

Parameters of the whole model are the sum over both calls: ``decode`` holds ``post_quant_conv``,
the ``Decoder`` and the ``quantize`` codebook (parameters only), ``encode`` the ``Encoder`` and
``quant_conv``.
"""

from __future__ import annotations

from flopcalc.engine.config import (
    FLAG, LAYERS, NAMES, NULL, SIZE, SIZES, TEXT, Config, count_int, declare_keys, positive_int,
)
from flopcalc.engine.cost import Node
from flopcalc.engine.errors import ConfigError, UnknownArchitectureError
from flopcalc.formulas import ops
from flopcalc.formulas.vq_model import (
    ATTENTION_DOWN,
    ATTENTION_UP,
    PLAIN_DOWN,
    PLAIN_UP,
    decoder,
    encoder,
)
from flopcalc.engine.registry import RunShape, register

#: ``VQModel.__init__`` keyword defaults (vq_model.py).
DEFAULTS = {
    "in_channels": 3,
    "out_channels": 3,
    "down_block_types": ["DownEncoderBlock2D"],
    "up_block_types": ["UpDecoderBlock2D"],
    "block_out_channels": [64],
    "layers_per_block": 1,
    "act_fn": "silu",
    "latent_channels": 3,
    "sample_size": 32,
    "num_vq_embeddings": 256,
    "norm_num_groups": 32,
    "vq_embed_dim": None,
    "scaling_factor": 0.18215,
    "norm_type": "group",
    "mid_block_add_attention": True,
    "lookup_from_codebook": False,
    "force_upcast": False,
}
SOURCE = "diffusers/models/autoencoders/vq_model.py"


def scale_factor(values) -> int:
    """``movq_scale_factor`` as the Kandinsky pipelines compute it: ``2 ** (len(block_out_channels) - 1)``."""
    return 2 ** (len(values.get("block_out_channels", DEFAULTS["block_out_channels"])) - 1)


def _common(config: Config) -> dict:
    comp = config.component
    channels = config["block_out_channels"]
    if (not isinstance(channels, (list, tuple)) or not channels
            or any(isinstance(c, bool) or not isinstance(c, int) or c <= 0 for c in channels)):
        raise ConfigError(f"{comp}/config.json: 'block_out_channels' must be a non-empty list of positive "
                          f"integers, got {channels!r}")
    for key, allowed in (("down_block_types", (PLAIN_DOWN, ATTENTION_DOWN)), ("up_block_types", (PLAIN_UP, ATTENTION_UP))):
        kinds = list(config[key])
        if len(kinds) != len(channels):
            raise ConfigError(f"{comp}/config.json: {key!r} needs one entry per block_out_channels "
                              f"({len(channels)}), got {len(kinds)}")
        unknown = sorted(set(kinds) - set(allowed))
        if unknown:
            raise UnknownArchitectureError(f"{comp}: VQModel {key} {unknown} is not supported "
                                           f"(supported: {', '.join(allowed)}).")
    latent = positive_int(config, "latent_channels")
    vq_dim = config["vq_embed_dim"]
    vq_dim = latent if vq_dim is None else vq_dim
    if isinstance(vq_dim, bool) or not isinstance(vq_dim, int) or vq_dim <= 0:
        raise ConfigError(f"{comp}/config.json: 'vq_embed_dim' must be a positive integer or null, got {vq_dim!r}")
    return {"channels": [int(c) for c in channels], "layers": count_int(config, "layers_per_block"),
            "latent": latent, "vq_dim": vq_dim, "mid_attention": bool(config["mid_block_add_attention"])}


#: Every config key ``VQModel`` reads (assemblers and pipeline plan), as
#: :func:`flopcalc.engine.config.declare_keys` validates it.
declare_keys("VQModel", {
    "in_channels": SIZE, "out_channels": SIZE, "down_block_types": NAMES, "up_block_types": NAMES,
    "block_out_channels": SIZES, "layers_per_block": LAYERS, "latent_channels": SIZE, "norm_num_groups": SIZE,
    "num_vq_embeddings": SIZE, "vq_embed_dim": SIZE | NULL, "norm_type": TEXT, "mid_block_add_attention": FLAG,
    "lookup_from_codebook": FLAG, "force_upcast": FLAG, "sample_size": SIZE,
})


@register("VQModel", call="decode", role="vae", defaults=DEFAULTS, source=SOURCE,
          scale_factor=scale_factor)
def vq_model_decode(config: Config, shape: RunShape) -> Node:
    """``decode(h, force_not_quantize=True)``: ``post_quant_conv`` (1×1, ``vq_embed_dim →
    latent_channels``) and the ``Decoder`` on the ``latent_height × latent_width`` grid."""
    kw = _common(config)
    comp = config.component
    norm_type = config["norm_type"]
    if norm_type not in ("group", "spatial"):
        raise UnknownArchitectureError(f"{comp}: VQModel norm_type {norm_type!r} is not supported (group, spatial).")
    if config["lookup_from_codebook"]:
        raise UnknownArchitectureError(f"{comp}: VQModel with lookup_from_codebook decodes codebook indices; "
                                       "only the latent decode the Kandinsky pipelines run is supported.")
    if norm_type == "spatial" and kw["vq_dim"] != kw["latent"]:
        raise ConfigError(f"{comp}/config.json: norm_type 'spatial' conditions the decoder on the "
                          f"{kw['vq_dim']}-channel quantized latent but builds its SpatialNorms for "
                          f"latent_channels={kw['latent']}: the real model cannot run this config.")
    h, w = shape.latent_height, shape.latent_width
    dec = decoder(latent_channels=kw["latent"], out_channels=positive_int(config, "out_channels"),
                  block_out_channels=kw["channels"], up_block_types=list(config["up_block_types"]),
                  layers_per_block=kw["layers"], height=h, width=w, spatial=norm_type == "spatial",
                  mid_block_add_attention=kw["mid_attention"])
    children = (
        Node("quantize", children=(Node("embedding", ops.embedding(positive_int(config, "num_vq_embeddings"),
                                                                   kw["vq_dim"])),),
             formula="vector_quantizer (skipped: force_not_quantize)"),
        Node("post_quant_conv", ops.conv2d(kw["vq_dim"], kw["latent"], 1, h, w)),
        dec,
    )
    return Node("movq", children=children, formula="vq_model_decode")


@register("VQModel", call="encode", role="vae", defaults=DEFAULTS, source=SOURCE,
          scale_factor=scale_factor)
def vq_model_encode(config: Config, shape: RunShape) -> Node:
    """``encode(x)``: the ``Encoder`` (``double_z=False``) on the ``height × width`` image and
    ``quant_conv`` (1×1, ``latent_channels → vq_embed_dim``) on its output grid."""
    kw = _common(config)
    enc = encoder(in_channels=positive_int(config, "in_channels"), latent_channels=kw["latent"],
                  block_out_channels=kw["channels"], down_block_types=list(config["down_block_types"]),
                  layers_per_block=kw["layers"], height=shape.height, width=shape.width,
                  mid_block_add_attention=kw["mid_attention"])
    h, w = _encoder_output_size(shape.height, len(kw["channels"])), _encoder_output_size(shape.width, len(kw["channels"]))
    return Node("movq", children=(enc, Node("quant_conv", ops.conv2d(kw["latent"], kw["vq_dim"], 1, h, w))),
                formula="vq_model_encode")


def _encoder_output_size(size, levels: int):
    """Each of the ``levels − 1`` stride-2 downsamplers (padding (0, 1, 0, 1)) maps ``s`` to
    ``⌊(s − 1) / 2⌋ + 1``."""
    for _ in range(levels - 1):
        size = ops.conv_output_size(size + 1, 3, 2)
    return size
