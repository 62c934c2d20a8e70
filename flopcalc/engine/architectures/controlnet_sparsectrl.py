"""SparseCtrl's ControlNet: ``SparseControlNetModel`` (diffusers ``models/controlnets/controlnet_sparsectrl.py``),
the ControlNet of ``AnimateDiffSparseControlNetPipeline``.

A ControlNet (:mod:`flopcalc.engine.architectures.controlnet`) whose down blocks carry motion modules:

* ``conv_in``, the time embedding and the down blocks' 2-D layers are those of the ``UNet2DConditionModel`` of the
  same keys (``CrossAttnDownBlockMotion`` / ``DownBlockMotion`` are ``CrossAttnDownBlock2D`` / ``DownBlock2D`` plus
  motion modules, unet_motion_model.py:350-560), assembled by
  :func:`flopcalc.engine.architectures.unet_2d_condition.unet_2d_condition`; the forward folds the ``F`` frames of
  ``sample`` ``(B, C, F, h, w)`` into the batch (controlnet_sparsectrl.py:629-633), so they run once per frame,
  the time embedding once per row (repeated per frame after it, :626);
* after each ResNet (and spatial transformer) of a down block, an ``AnimateDiffTransformer3D`` over the frames with
  ``double_self_attention=False`` (controlnet_sparsectrl.py:340, 362) and no cross-attention dimension: its blocks
  have ``attn1`` and the feed-forward only (:func:`flopcalc.formulas.motion_module.temporal_block`);
* the mid block: a plain ``UNetMidBlock2DCrossAttn`` (one layer, ``transformer_layers_per_mid_block`` deep, else the
  last down block's depth: controlnet_sparsectrl.py:383-404), per frame, no motion module;
* ``controlnet_cond_embedding`` on the conditioning ``controlnet_cond`` concatenated with its mask
  (``concat_conditioning_mask``: ``conditioning_channels + 1`` channels): a zero 3×3 conv at the latent size
  (``use_simplified_condition_embedding``: the conditioning frames are VAE latents) or a
  ``SparseControlNetConditioningEmbedding`` (``ControlNetConditioningEmbedding``'s convolutions, with SiLUs, on
  the ``latent × 2^(n−1)`` image). The pipeline hands it one conditioning video per call (batch 1,
  ``prepare_image``'s ``unsqueeze(0)``), which the forward adds to every row by broadcasting (:642): so it runs on
  ``frames`` frames (the run shape's ``frames``: the conditioning frames this run embeds, ``F`` by default; 0 for the
  other rows of a batched call);
* the zero convolutions ``controlnet_down_blocks`` (one 1×1 per down-path residual) and ``controlnet_mid_block``,
  per frame.
"""

from __future__ import annotations

from typing import Any

from flopcalc.engine.architectures.controlnet import conditioning_embedding
from flopcalc.engine.architectures.unet_2d_condition import DEFAULTS as UNET_DEFAULTS
from flopcalc.engine.architectures.unet_2d_condition import _per_block, _per_layer, unet_2d_condition
from flopcalc.engine.config import (
    FLAG, LAYER_COUNTS, LAYERS, NAMES, NULL, SIZE, SIZES, TEXT, Config, ListOf, declare_keys, declared_keys,
    positive_int,
)
from flopcalc.engine.cost import Node, module_list
from flopcalc.engine.errors import ConfigError, UnknownArchitectureError
from flopcalc.engine.loading import Buffer, loading_rules
from flopcalc.engine.registry import RunShape, register
from flopcalc.formulas import ops
from flopcalc.formulas.motion_module import motion_module, per_frame
from flopcalc.formulas.resnet_block import resnet_block
from flopcalc.formulas.unet_blocks import downsample, spatial_transformer

#: ``SparseControlNetModel.__init__`` keyword defaults (controlnet_sparsectrl.py:162-197).
DEFAULTS = {
    "in_channels": 4,
    "conditioning_channels": 4,
    "flip_sin_to_cos": True,
    "freq_shift": 0,
    "down_block_types": ["CrossAttnDownBlockMotion", "CrossAttnDownBlockMotion", "CrossAttnDownBlockMotion",
                         "DownBlockMotion"],
    "only_cross_attention": False,
    "block_out_channels": [320, 640, 1280, 1280],
    "layers_per_block": 2,
    "downsample_padding": 1,
    "mid_block_scale_factor": 1,
    "act_fn": "silu",
    "norm_num_groups": 32,
    "norm_eps": 1e-5,
    "cross_attention_dim": 768,
    "transformer_layers_per_block": 1,
    "transformer_layers_per_mid_block": None,
    "temporal_transformer_layers_per_block": 1,
    "attention_head_dim": 8,
    "num_attention_heads": None,
    "use_linear_projection": False,
    "upcast_attention": False,
    "resnet_time_scale_shift": "default",
    "conditioning_embedding_out_channels": [16, 32, 96, 256],
    "global_pool_conditions": False,
    "controlnet_conditioning_channel_order": "rgb",
    "motion_max_seq_length": 32,
    "motion_num_attention_heads": 8,
    "concat_conditioning_mask": True,
    "use_simplified_condition_embedding": True,
}
#: The keys the 2-D UNet shares (read as ``UNet2DConditionModel`` declares them).
_SHARED = ("in_channels", "only_cross_attention", "block_out_channels", "downsample_padding", "norm_num_groups",
           "cross_attention_dim", "attention_head_dim", "num_attention_heads", "use_linear_projection",
           "resnet_time_scale_shift")
MOTION = {"CrossAttnDownBlockMotion": "CrossAttnDownBlock2D", "DownBlockMotion": "DownBlock2D"}

declare_keys("SparseControlNetModel", {
    **{key: spec for key, spec in declared_keys("UNet2DConditionModel").items() if key in _SHARED},
    "down_block_types": NAMES, "layers_per_block": LAYERS, "conditioning_channels": SIZE,
    "transformer_layers_per_block": LAYERS | LAYER_COUNTS | ListOf(LAYER_COUNTS),
    "transformer_layers_per_mid_block": LAYERS | LAYER_COUNTS | NULL,
    "temporal_transformer_layers_per_block": LAYERS | LAYER_COUNTS | ListOf(LAYER_COUNTS),
    "conditioning_embedding_out_channels": SIZES | NULL, "global_pool_conditions": FLAG,
    "controlnet_conditioning_channel_order": TEXT, "motion_max_seq_length": SIZE,
    "motion_num_attention_heads": SIZE | SIZES, "concat_conditioning_mask": FLAG,
    "use_simplified_condition_embedding": FLAG,
})


def _check(config: Config) -> None:
    comp = config.component
    for t in config["down_block_types"]:
        if t not in MOTION:  # controlnet_sparsectrl.py:311 raises ValueError
            raise ConfigError(f"{comp}/config.json: SparseControlNetModel down block type {t!r} is invalid (one of "
                              f"{', '.join(MOTION)})")
    if len(config["down_block_types"]) != len(config["block_out_channels"]):
        raise ConfigError(f"{comp}/config.json: block_out_channels and down_block_types differ in length "
                          "(SparseControlNetModel raises ValueError)")
    if config["norm_num_groups"] is None:
        raise UnknownArchitectureError(f"{comp}: SparseControlNetModel with norm_num_groups null is not supported "
                                       "(its motion modules need the groups)")
    if config["controlnet_conditioning_channel_order"] not in ("rgb", "bgr"):
        raise ConfigError(f"{comp}/config.json: controlnet_conditioning_channel_order must be rgb or bgr "
                          "(the forward raises ValueError)")
    if not config["use_simplified_condition_embedding"] and not config["conditioning_embedding_out_channels"]:
        raise ConfigError(f"{comp}/config.json: the full conditioning embedding needs "
                          "conditioning_embedding_out_channels")


def _unet_config(config: Config) -> Config:
    """The ``UNet2DConditionModel`` whose ``conv_in``, time embedding and down blocks' 2-D layers these are (no mid
    block: built by :func:`_mid_block`; an up path of plain blocks, dropped)."""
    nb = len(config["block_out_channels"])
    values: dict[str, Any] = {key: config[key] for key in _SHARED}
    values.update(_class_name="UNet2DConditionModel", layers_per_block=positive_int(config, "layers_per_block"),
                  down_block_types=[MOTION[t] for t in config["down_block_types"]],
                  up_block_types=["UpBlock2D"] * nb, mid_block_type=None,
                  transformer_layers_per_block=config["transformer_layers_per_block"])
    return Config(config.component, values, UNET_DEFAULTS)


def motion_layout(config: Config) -> list[tuple[int, int, int, list[int]]]:
    """``(level, channels, heads, [depth of each motion module])`` per down block: ``layers_per_block`` modules
    (controlnet_sparsectrl.py:327-366, unet_motion_model.py:389-451)."""
    comp = config.component
    channels = [int(c) for c in config["block_out_channels"]]
    nb = len(channels)
    lpb = positive_int(config, "layers_per_block")
    depths = _per_block(config["temporal_transformer_layers_per_block"], nb, "temporal_transformer_layers_per_block",
                        comp)
    heads = _per_block(config["motion_num_attention_heads"], nb, "motion_num_attention_heads", comp)
    return [(i, channels[i], heads[i], _per_layer(depths[i], lpb, "temporal_transformer_layers_per_block", comp))
            for i in range(nb)]


def _mid_block(config: Config, top: int, heads: int, cross: int, h: Any, w: Any, t: Any) -> Node:
    """``UNetMidBlock2DCrossAttn(num_layers=1)`` (controlnet_sparsectrl.py:388-404): resnet, attention, resnet."""
    depth = config["transformer_layers_per_mid_block"]
    if depth is None:  # the last down block's depth when an int, else 1 (:384-386)
        last = config["transformer_layers_per_block"]
        last = last if isinstance(last, int) else last[-1]
        depth = last if isinstance(last, int) else 1
    c0 = int(config["block_out_channels"][0])
    res = resnet_block(top, top, h, w, temb_channels=4 * c0,
                       scale_shift=config["resnet_time_scale_shift"] == "scale_shift")
    return Node("mid_block", children=(
        module_list("attentions", [spatial_transformer(top, heads, h, w, layers=k, context_tokens=t, context_dim=cross,
                                                       linear_projection=bool(config["use_linear_projection"]))
                                   for k in _per_layer(depth, 1, "transformer_layers_per_mid_block",
                                                       config.component)]),
        module_list("resnets", [res, res]),
    ), formula="UNetMidBlock2DCrossAttn")


def _blocks(list_node: Node) -> list[Node]:
    out = []
    for child in list_node.children:
        first, last = child.span or (int(child.name), int(child.name))
        out += [Node(str(i), child.cost, child.children, formula=child.formula) for i in range(first, last + 1)]
    return out


def cond_embedding_factor(config: Config) -> int:
    """How much smaller than the conditioning frames the embedding's output is: 1 for the simplified embedding (it
    takes latents), else ``2^(n−1)`` for ``n`` conditioning channels widths (the stride-2 convolutions)."""
    if config["use_simplified_condition_embedding"]:
        return 1
    return 2 ** (len(config["conditioning_embedding_out_channels"]) - 1)


@register("SparseControlNetModel", role="controlnet", defaults=DEFAULTS,
          source="diffusers/models/controlnets/controlnet_sparsectrl.py",
          nominal=RunShape(latent_height=64, latent_width=64, text_len=8, latent_frames=2))
def sparse_controlnet(config: Config, shape: RunShape) -> Node:
    """``SparseControlNetModel.forward`` on ``sample`` ``(1, C, F, h, w)`` (F = ``latent_frames``), the text states
    ``(F, text_len, cross_attention_dim)``, and ``frames`` conditioning frames embedded (see the module doc)."""
    _check(config)
    comp = config.component
    frames = 1 if shape.latent_frames is None else shape.latent_frames
    cond_frames = frames if shape.frames is None else shape.frames
    h, w = shape.latent_height, shape.latent_width
    channels = [int(c) for c in config["block_out_channels"]]
    nb = len(channels)
    unet = unet_2d_condition(_unet_config(config), RunShape(latent_height=h, latent_width=w, text_len=shape.text_len))
    sizes = [(h, w)]
    for _ in range(nb - 1):
        sizes.append(downsample(1, *sizes[-1], config["downsample_padding"])[1:])
    motions = {i: module_list("motion_modules", [motion_module(c, heads, *sizes[i], frames, layers=k, double=False)
                                                 for k in depths])
               for i, c, heads, depths in motion_layout(config)}
    cond_in = positive_int(config, "conditioning_channels") + (1 if config["concat_conditioning_mask"] else 0)
    if config["use_simplified_condition_embedding"]:
        embedding = Node("controlnet_cond_embedding", ops.conv2d(cond_in, channels[0], 3, h, w))
    else:
        factor = cond_embedding_factor(config)
        embedding = conditioning_embedding(cond_in, [int(c) for c in config["conditioning_embedding_out_channels"]],
                                           channels[0], h * factor, w * factor)
    children = []
    for node in unet.children:
        if node.name == "conv_in":
            children += [per_frame(node, frames), per_frame(embedding, cond_frames)]
        elif node.name == "time_embedding":  # once per row (controlnet_sparsectrl.py:622-626)
            children.append(node)
        elif node.name == "down_blocks":
            children.append(module_list("down_blocks", [
                Node(b.name, children=(*(per_frame(c, frames) for c in b.children), motions[i]), formula=b.formula)
                for i, b in enumerate(_blocks(node))]))
    heads = _per_block(config["num_attention_heads"] or config["attention_head_dim"], nb, "attention_head_dim", comp)
    cross = _per_block(config["cross_attention_dim"], nb, "cross_attention_dim", comp)
    children.append(per_frame(_mid_block(config, channels[-1], heads[-1], cross[-1], *sizes[-1], shape.text_len),
                              frames))
    # the zero convolutions on every residual of the down path, at its size (controlnet_sparsectrl.py:317-381)
    lpb = positive_int(config, "layers_per_block")
    zero = [Node("", ops.conv2d(channels[0], channels[0], 1, h, w))]
    for i, c in enumerate(channels):
        zero += [Node("", ops.conv2d(c, c, 1, *sizes[i]))] * lpb
        if i < nb - 1:
            zero.append(Node("", ops.conv2d(c, c, 1, *sizes[i + 1])))
    children += [per_frame(module_list("controlnet_down_blocks", zero), frames),
                 per_frame(Node("controlnet_mid_block", ops.conv2d(channels[-1], channels[-1], 1, *sizes[-1])), frames)]
    return Node("controlnet", children=tuple(children), formula="sparse_controlnet")


def _pos_embed_buffers(config: Config) -> tuple[Buffer, ...]:
    """Each motion block's ``pos_embed.pe`` (``SinusoidalPositionalEmbedding``, embeddings.py:1137): a persistent
    ``(1, motion_max_seq_length, inner)`` table, loaded in the weights' dtype."""
    max_seq = positive_int(config, "motion_max_seq_length")
    return tuple(Buffer(f"down_blocks.{i}.motion_modules.{j}.transformer_blocks.{t}.pos_embed.pe",
                        max_seq * heads * (c // heads), "loaded")
                 for i, c, heads, depths in motion_layout(config) for j, k in enumerate(depths) for t in range(k))


loading_rules("SparseControlNetModel", buffers=_pos_embed_buffers,
              source="diffusers/models/controlnets/controlnet_sparsectrl.py, models/embeddings.py:1137")
