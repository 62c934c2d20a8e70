"""``Kandinsky3UNet`` (diffusers ``models/unets/unet_kandinsky3.py``).

The forward: ``time_proj`` (sinusoidal, no MACs) → ``time_embedding`` (two linears);
``encoder_hid_proj`` (bias-free linear ``encoder_hid_dim → cross_attention_dim`` and a LayerNorm
over every text token); ``add_time_condition`` (attention pooling of the text into the time
embedding); ``conv_in`` 3×3 to ``block_out_channels[0] // 2``; one down block per level (each
but the last halving the size with 2×2 stride-2 convolutions), one up block per level (each but
the first concatenating the mirror level's output and doubling the size with 2×2 stride-2
transposed convolutions); ``conv_norm_out``, SiLU, ``conv_out`` 3×3.

Which levels carry self- and cross-attention is fixed in ``__init__`` (``(False, True, True,
True)``, zipped with the levels; the up path reads the tuples reversed), as are the ResNet
compression ratio (2) and the attention feed-forward expansion (4). ``layers_per_block`` is one
int for every level. The real class cannot run more than four levels (its zips stop at four
down blocks but the up path expects all of them) nor ``layers_per_block < 2`` (the up block
then drops its output projection); those configs are refused with the reason.
"""

from __future__ import annotations

from flopcalc.engine.config import LAYERS, LAYER_COUNTS, SIZE, SIZES, Config, declare_keys, positive_int
from flopcalc.engine.cost import Node, module_list
from flopcalc.engine.errors import ConfigError
from flopcalc.formulas import ops
from flopcalc.formulas.conditioning import mlp_embedder
from flopcalc.formulas.kandinsky3 import (
    ADD_CROSS_ATTENTION,
    ADD_SELF_ATTENTION,
    attention_pooling,
    down_sample_block,
    up_sample_block,
)
from flopcalc.engine.registry import RunShape, register

#: ``Kandinsky3UNet.__init__`` keyword defaults (unet_kandinsky3.py).
DEFAULTS = {
    "in_channels": 4,
    "time_embedding_dim": 1536,
    "groups": 32,
    "attention_head_dim": 64,
    "layers_per_block": 3,
    "block_out_channels": [384, 768, 1536, 3072],
    "cross_attention_dim": 4096,
    "encoder_hid_dim": 4096,
}
SOURCE = "diffusers/models/unets/unet_kandinsky3.py"


def _channels(config: Config) -> list[int]:
    channels = config["block_out_channels"]
    if (not isinstance(channels, (list, tuple)) or not channels
            or any(isinstance(c, bool) or not isinstance(c, int) or c < 2 for c in channels)):
        raise ConfigError(f"{config.component}/config.json: 'block_out_channels' must be a non-empty list of "
                          f"integers ≥ 2, got {channels!r}")
    if len(channels) > len(ADD_CROSS_ATTENTION):
        raise ConfigError(f"{config.component}/config.json: Kandinsky3UNet builds at most {len(ADD_CROSS_ATTENTION)} "
                          f"levels (its per-level attention flags are a fixed 4-tuple), got {len(channels)} "
                          "block_out_channels: the real model cannot run this config.")
    return [int(c) for c in channels]


def _layers(config: Config) -> int:
    layers = positive_int(config, "layers_per_block")
    if layers < 2:
        raise ConfigError(f"{config.component}/config.json: Kandinsky3UNet needs layers_per_block ≥ 2 (with "
                          f"{layers}, Kandinsky3UpSampleBlock drops its output projection and the model cannot run).")
    return layers


def _head_dim(config: Config) -> int:
    return positive_int(config, "attention_head_dim")


def latent_multiple(values: dict) -> int:
    """The latent side must divide by ``2 ** (levels − 1)``: each down level but the last halves it
    and the up path concatenates the mirror level's output."""
    channels = values.get("block_out_channels", DEFAULTS["block_out_channels"])
    return 2 ** (len(channels) - 1) if isinstance(channels, (list, tuple)) and channels else 1


#: Every config key ``Kandinsky3UNet`` reads (assemblers and pipeline plan), as
#: :func:`flopcalc.engine.config.declare_keys` validates it.
declare_keys("Kandinsky3UNet", {
    "in_channels": SIZE, "time_embedding_dim": SIZE, "groups": SIZE, "attention_head_dim": SIZE,
    "layers_per_block": LAYERS | LAYER_COUNTS, "block_out_channels": SIZES, "cross_attention_dim": SIZE,
    "encoder_hid_dim": SIZE,
})


@register("Kandinsky3UNet", role="denoiser", defaults=DEFAULTS, source=SOURCE)
def kandinsky3_unet(config: Config, shape: RunShape) -> Node:
    channels = _channels(config)
    layers = _layers(config)
    head_dim = _head_dim(config)
    ted = positive_int(config, "time_embedding_dim")
    cross = positive_int(config, "cross_attention_dim")
    in_ch = positive_int(config, "in_channels")
    t = shape.text_len
    h, w = shape.latent_height, shape.latent_width
    init = channels[0] // 2
    dims = [init, *channels]
    n = len(channels)

    try:
        # down: levels with (in, out) = (dims[i], dims[i+1]), flags ADD_*[i]
        downs, sizes = [], [(h, w)]
        for i in range(n):
            hh, ww = sizes[-1]
            node, h2, w2 = down_sample_block(
                dims[i], dims[i + 1], ted, hh, ww, layers=layers, head_dim=head_dim,
                self_attention=ADD_SELF_ATTENTION[i], context_dim=cross if ADD_CROSS_ATTENTION[i] else None,
                context_tokens=t, down_sample=i != n - 1)
            downs.append(node)
            sizes.append((h2, w2))
        # up: level j mirrors down level n-1-j; flags read reversed from the fixed 4-tuples
        cat_dims = [dims[i + 1] if i != n - 1 else 0 for i in range(n)]
        ups = []
        hh, ww = sizes[-1]
        last = len(ADD_SELF_ATTENTION) - 1
        for j in range(n):
            out_dim, in_dim = dims[n - 1 - j], dims[n - j]
            node, hh, ww = up_sample_block(
                in_dim, cat_dims.pop(), out_dim, ted, hh, ww, layers=layers, head_dim=head_dim,
                self_attention=ADD_SELF_ATTENTION[last - j],
                context_dim=cross if ADD_CROSS_ATTENTION[last - j] else None, context_tokens=t, up_sample=j != 0)
            ups.append(node)
        pooling = attention_pooling(ted, cross, head_dim, t)
    except ValueError as exc:  # an attention width that does not split into heads
        raise ConfigError(f"{config.component}/config.json: {exc} (attention_head_dim {head_dim}).") from None

    children = [
        mlp_embedder("time_embedding", init, ted),
        pooling,
        Node("conv_in", ops.conv2d(in_ch, init, 3, h, w)),
        Node("encoder_hid_proj", children=(
            Node("projection_linear", ops.linear(t, positive_int(config, "encoder_hid_dim"), cross, bias=False)),
            Node("projection_norm", ops.layer_norm(t, cross)),
        )),
        module_list("down_blocks", downs),
        module_list("up_blocks", ups),
        Node("conv_norm_out", ops.group_norm(init, h * w) + ops.activation(init * h * w)),
        Node("conv_out", ops.conv2d(init, in_ch, 3, h, w)),
    ]
    return Node("unet", children=tuple(children), formula="kandinsky3_unet")
