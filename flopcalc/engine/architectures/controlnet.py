"""ControlNet: ``ControlNetModel`` (diffusers ``models/controlnets/controlnet.py``).

A trainable copy of a conditional UNet's encoder, run beside the UNet at every step:

* ``conv_in``, the time (and class / ``text_time``) embeddings, ``down_blocks`` and ``mid_block``:
  the UNet's own, built as ``UNet2DConditionModel`` would build them from the same keys
  (``ControlNetModel.__init__`` calls the same ``get_down_block`` / ``UNetMidBlock2DCrossAttn``;
  ``from_unet`` copies these keys), so they are assembled by
  :func:`flopcalc.engine.architectures.unet_2d_condition.unet_2d_condition` and its up path dropped;
* ``controlnet_cond_embedding`` (``ControlNetConditioningEmbedding``, controlnet.py:66-108) on the
  control image (``latent × 2^(n−1)`` pixels for ``n = len(conditioning_embedding_out_channels)``):
  a 3×3 ``conv_in`` (``conditioning_channels → c₀``), per level a 3×3 conv (``cᵢ → cᵢ``) and a 3×3
  stride-2 conv (``cᵢ → cᵢ₊₁``, halving the map, rounding up), a 3×3 ``conv_out`` (``c_last →
  block_out_channels[0]``);
* the zero convolutions (controlnet.py:370-412): ``controlnet_down_blocks``, one 1×1 conv per
  residual the down path returns (``conv_in``'s output, each ResNet layer's output, each
  downsampler's output), and ``controlnet_mid_block`` (1×1 on the mid block's output).

MACs per conditioning conv: ``C_in·C_out·k²·H_out·W_out`` (:func:`flopcalc.formulas.ops.conv2d`).
``encoder_hid_proj`` is built but never called by ``ControlNetModel.forward``; a config with one is
refused rather than counted with a silent difference.
"""

from __future__ import annotations

from typing import Any

from flopcalc.engine.architectures.unet_2d_condition import DEFAULTS as UNET_DEFAULTS
from flopcalc.engine.architectures.unet_2d_condition import unet_2d_condition
from flopcalc.engine.config import FLAG, SIZE, SIZES, Config, declare_keys, declared_keys, positive_int
from flopcalc.engine.cost import Node, block_kinds, module_list
from flopcalc.engine.errors import ConfigError, UnknownArchitectureError
from flopcalc.formulas import ops
from flopcalc.formulas.unet_blocks import downsample
from flopcalc.engine.registry import RunShape, register

#: Block kinds this module builds (the UNet's are declared by its own modules).
BLOCK_KINDS = block_kinds("controlnet_cond_embedding")

#: ``ControlNetModel.__init__`` keyword defaults (controlnet.py:180-222): those of the UNet keys it shares
#: are the UNet's (the same values in both signatures), plus its own.
_SHARED = ("in_channels", "down_block_types", "mid_block_type", "only_cross_attention", "block_out_channels",
           "layers_per_block", "downsample_padding", "norm_num_groups", "cross_attention_dim",
           "transformer_layers_per_block", "encoder_hid_dim", "encoder_hid_dim_type", "attention_head_dim",
           "num_attention_heads", "use_linear_projection", "class_embed_type", "addition_embed_type",
           "addition_time_embed_dim", "num_class_embeds", "resnet_time_scale_shift",
           "projection_class_embeddings_input_dim")
DEFAULTS = {**{key: UNET_DEFAULTS[key] for key in _SHARED}, "conditioning_channels": 3,
            "conditioning_embedding_out_channels": [16, 32, 96, 256], "global_pool_conditions": False}


#: Every config key ``ControlNetModel`` reads: the UNet's shared ones, as the UNet declares them, and its own.
declare_keys("ControlNetModel", {
    **{key: spec for key, spec in declared_keys("UNet2DConditionModel").items() if key in _SHARED},
    "conditioning_channels": SIZE, "conditioning_embedding_out_channels": SIZES, "global_pool_conditions": FLAG,
})

def _unet_config(config: Config) -> Config:
    """The ``UNet2DConditionModel`` config whose encoder this ControlNet copies: every shared key as
    the ControlNet sets it (its own defaults included), an up path of plain blocks (dropped), and the
    UNet defaults the ControlNet hard-codes (``conv_in_kernel`` 3, time embedding ``4·c₀``)."""
    if config["encoder_hid_dim"] is not None or config["encoder_hid_dim_type"] is not None:
        raise UnknownArchitectureError(f"{config.component}: ControlNetModel with encoder_hid_dim is not supported "
                                       "(ControlNetModel.forward never applies its encoder_hid_proj)")
    if config["mid_block_type"] not in ("UNetMidBlock2DCrossAttn", "UNetMidBlock2D"):
        raise ConfigError(f"{config.component}/config.json: unknown mid_block_type {config['mid_block_type']!r} "
                          "(ControlNetModel raises ValueError)")
    nb = len(config["block_out_channels"])
    values: dict[str, Any] = {key: config[key] for key in _SHARED}
    values.update(_class_name="UNet2DConditionModel", up_block_types=["UpBlock2D"] * nb)
    return Config(config.component, values, UNET_DEFAULTS)


def _conv(c_in: int, c_out: int, kernel: int, h: Any, w: Any) -> Node:
    return Node("", ops.conv2d(c_in, c_out, kernel, h, w))


def _named(name: str, node: Node) -> Node:
    return Node(name, node.cost, node.children, formula=node.formula)


def conditioning_embedding(conditioning_channels: int, channels: list[int], out_channels: int,
                           height: Any, width: Any) -> Node:
    """``ControlNetConditioningEmbedding`` on a ``height × width`` control image."""
    h, w = height, width
    blocks = []
    for c_in, c_out in zip(channels, channels[1:]):
        blocks.append(_conv(c_in, c_in, 3, h, w))
        h, w = ops.conv_output_size(h, 3, 2, 1), ops.conv_output_size(w, 3, 2, 1)
        blocks.append(_conv(c_in, c_out, 3, h, w))
    return Node("controlnet_cond_embedding", children=(
        _named("conv_in", _conv(conditioning_channels, channels[0], 3, height, width)),
        module_list("blocks", blocks),
        _named("conv_out", _conv(channels[-1], out_channels, 3, h, w)),
    ), formula="controlnet_cond_embedding")


@register("ControlNetModel", role="controlnet", defaults=DEFAULTS,
          source="diffusers/models/controlnets/controlnet.py")
def controlnet_model(config: Config, shape: RunShape) -> Node:
    channels = [int(c) for c in config["block_out_channels"]]
    cond_channels = [int(c) for c in config["conditioning_embedding_out_channels"]]
    lpb = positive_int(config, "layers_per_block")
    unet = unet_2d_condition(_unet_config(config), shape)
    kept = {"conv_in", "time_embedding", "class_embedding", "add_embedding", "down_blocks", "mid_block"}
    h, w = shape.latent_height, shape.latent_width
    # zero convolutions on every residual of the down path, at its size
    zero = [_conv(channels[0], channels[0], 1, h, w)]
    for i, c in enumerate(channels):
        zero += [_conv(c, c, 1, h, w)] * lpb
        if i < len(channels) - 1:
            _sampler, h, w = downsample(c, h, w, config["downsample_padding"])
            zero.append(_conv(c, c, 1, h, w))
    factor = 2 ** (len(cond_channels) - 1)
    children = [c for c in unet.children if c.name in kept]
    children.insert(1, conditioning_embedding(positive_int(config, "conditioning_channels"), cond_channels,
                                              channels[0], shape.latent_height * factor,
                                              shape.latent_width * factor))
    children += [module_list("controlnet_down_blocks", zero),
                 Node("controlnet_mid_block", ops.conv2d(channels[-1], channels[-1], 1, h, w))]
    return Node("controlnet", children=tuple(children), formula="controlnet")
