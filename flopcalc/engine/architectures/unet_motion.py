"""AnimateDiff's UNet: ``UNetMotionModel`` (diffusers ``models/unets/unet_motion_model.py``), the
class ``AnimateDiffPipeline.__init__`` builds from an SD UNet and a ``MotionAdapter``
(``UNetMotionModel.from_unet2d(unet, motion_adapter)``, unet_motion_model.py:1538; a folder saved
by the pipeline holds its config as ``unet/config.json``).

Its 2-D layers are those of the ``UNet2DConditionModel`` of the same 2-D config (built by
:func:`flopcalc.engine.architectures.unet_2d_condition.unet_2d_condition` itself), run once per frame:
the forward folds the ``F`` frames of ``sample`` ``(1, C, F, H, W)`` into the batch and the pipeline
repeats the text states per frame (``prompt_embeds.repeat_interleave(num_frames)``). After each
ResNet (and spatial transformer) of every down, up (and, with ``use_motion_mid_block``, mid) block
runs a motion module over the frames (:mod:`flopcalc.formulas.motion_module`). The time embedding
MLP runs once per video (its output is repeated per frame, :1994).
"""

from __future__ import annotations

import re

from flopcalc.engine.architectures.unet_2d_condition import DEFAULTS as UNET_2D_DEFAULTS
from flopcalc.engine.architectures.unet_2d_condition import _per_block, _per_layer, unet_2d_condition
from flopcalc.engine.config import (
    FLAG, LAYER_COUNTS, LAYERS, MAX_WIDTH, NAMES, NULL, SIZE, SIZES, TEXT, Config, Int, ListOf, count_int,
    declare_keys, positive_int,
)
from flopcalc.engine.cost import Node, module_list
from flopcalc.engine.errors import UnknownArchitectureError
from flopcalc.engine.perturbed_attention import PerturbedAttention, selected, supports_perturbation
from flopcalc.formulas import ops
from flopcalc.formulas.motion_module import motion_module, per_frame
from flopcalc.formulas.resnet_block import resnet_block
from flopcalc.formulas.unet_blocks import downsample, spatial_transformer
from flopcalc.engine.registry import RunShape, register
from flopcalc.engine.loading import Buffer, loading_rules

#: ``UNetMotionModel.__init__`` keyword defaults (unet_motion_model.py:1214).
DEFAULTS = {
    "sample_size": None,
    "in_channels": 4,
    "out_channels": 4,
    "down_block_types": ["CrossAttnDownBlockMotion", "CrossAttnDownBlockMotion", "CrossAttnDownBlockMotion",
                         "DownBlockMotion"],
    "up_block_types": ["UpBlockMotion", "CrossAttnUpBlockMotion", "CrossAttnUpBlockMotion", "CrossAttnUpBlockMotion"],
    "block_out_channels": [320, 640, 1280, 1280],
    "layers_per_block": 2,
    "downsample_padding": 1,
    "norm_num_groups": 32,
    "cross_attention_dim": 1280,
    "transformer_layers_per_block": 1,
    "reverse_transformer_layers_per_block": None,
    "temporal_transformer_layers_per_block": 1,
    "reverse_temporal_transformer_layers_per_block": None,
    "transformer_layers_per_mid_block": None,
    "temporal_transformer_layers_per_mid_block": 1,
    "use_linear_projection": False,
    "num_attention_heads": 8,
    "motion_max_seq_length": 32,
    "motion_num_attention_heads": 8,
    "use_motion_mid_block": True,
    "mid_block_layers": 1,
    "encoder_hid_dim_type": None,
    "addition_embed_type": None,
    "addition_time_embed_dim": None,
    "projection_class_embeddings_input_dim": None,
    "time_cond_proj_dim": None,
}
DOWN = ("CrossAttnDownBlockMotion", "DownBlockMotion")
UP = ("CrossAttnUpBlockMotion", "UpBlockMotion")

declare_keys("UNetMotionModel", {
    "sample_size": SIZE | NULL, "in_channels": SIZE, "out_channels": SIZE, "down_block_types": NAMES,
    "up_block_types": NAMES, "block_out_channels": SIZES, "layers_per_block": LAYERS | LAYER_COUNTS,
    "downsample_padding": Int(0, MAX_WIDTH), "norm_num_groups": SIZE | NULL, "cross_attention_dim": SIZE | SIZES,
    "transformer_layers_per_block": LAYERS | LAYER_COUNTS | ListOf(LAYER_COUNTS),
    "reverse_transformer_layers_per_block": LAYERS | ListOf(LAYER_COUNTS) | LAYER_COUNTS | NULL,
    "temporal_transformer_layers_per_block": LAYERS | LAYER_COUNTS | ListOf(LAYER_COUNTS),
    "reverse_temporal_transformer_layers_per_block": LAYERS | ListOf(LAYER_COUNTS) | LAYER_COUNTS | NULL,
    "transformer_layers_per_mid_block": LAYERS | LAYER_COUNTS | NULL,
    "temporal_transformer_layers_per_mid_block": LAYERS | LAYER_COUNTS | NULL,
    "use_linear_projection": FLAG, "num_attention_heads": SIZE | SIZES, "motion_max_seq_length": SIZE,
    "motion_num_attention_heads": SIZE | SIZES, "use_motion_mid_block": FLAG, "mid_block_layers": LAYERS,
    "encoder_hid_dim_type": TEXT | NULL, "addition_embed_type": TEXT | NULL, "addition_time_embed_dim": SIZE | NULL,
    "projection_class_embeddings_input_dim": SIZE | NULL, "time_cond_proj_dim": SIZE | NULL,
})

#: The keys of a ``MotionAdapter`` config (``MotionAdapter.__init__``, unet_motion_model.py:1062), which
#: ``from_unet2d`` copies into the UNet's config; the adapter itself runs nothing.
declare_keys("MotionAdapter", {
    "block_out_channels": SIZES, "motion_layers_per_block": LAYERS | LAYER_COUNTS,
    "motion_transformer_layers_per_block": LAYERS | LAYER_COUNTS | ListOf(LAYER_COUNTS),
    "motion_mid_block_layers_per_block": LAYERS, "motion_transformer_layers_per_mid_block": LAYERS | LAYER_COUNTS,
    "motion_num_attention_heads": SIZE | SIZES, "motion_norm_num_groups": SIZE, "motion_max_seq_length": SIZE,
    "use_motion_mid_block": FLAG, "conv_in_channels": SIZE | NULL,
})


def _layout(config: Config, *, layers: str, depths: str, reverse_depths: str | None, mid_layers: str,
            mid_depths: str) -> list[tuple[str, int, int, list[int]]]:
    """``(block path, channels, heads, [transformer depth of each motion module])`` for every down block, the mid
    block (``use_motion_mid_block``) and every up block (``layers`` + 1 modules), read from the named keys."""
    comp = config.component
    channels = [int(c) for c in config["block_out_channels"]]
    nb = len(channels)
    lpb = _per_block(config[layers], nb, layers, comp)
    down = _per_block(config[depths], nb, depths, comp)
    up = (_per_block(config[reverse_depths], nb, reverse_depths, comp)
          if reverse_depths is not None and config[reverse_depths] is not None else down[::-1])
    heads = _per_block(config["motion_num_attention_heads"], nb, "motion_num_attention_heads", comp)
    layout = [(f"down_blocks.{i}", channels[i], heads[i], _per_layer(down[i], lpb[i], depths, comp))
              for i in range(nb)]
    if config["use_motion_mid_block"]:
        layout.append(("mid_block", channels[-1], heads[-1],
                       _per_layer(config[mid_depths], count_int(config, mid_layers), mid_depths, comp)))
    layout += [(f"up_blocks.{i}", channels[::-1][i], heads[::-1][i],
                _per_layer(up[i], lpb[::-1][i] + 1, reverse_depths or depths, comp)) for i in range(nb)]
    return layout


def motion_layout(config: Config) -> list[tuple[str, int, int, list[int]]]:
    """Where ``UNetMotionModel.__init__`` puts its motion modules (unet_motion_model.py:1356-1505)."""
    return _layout(config, layers="layers_per_block", depths="temporal_transformer_layers_per_block",
                   reverse_depths="reverse_temporal_transformer_layers_per_block", mid_layers="mid_block_layers",
                   mid_depths="temporal_transformer_layers_per_mid_block")


def adapter_layout(config: Config) -> list[tuple[str, int, int, list[int]]]:
    """The same for a ``MotionAdapter`` (unet_motion_model.py:1062): ``MotionModules`` per block, each a
    ``motion_modules`` list of ``motion_layers_per_block`` (up: + 1) ``AnimateDiffTransformer3D``."""
    return _layout(config, layers="motion_layers_per_block", depths="motion_transformer_layers_per_block",
                   reverse_depths=None, mid_layers="motion_mid_block_layers_per_block",
                   mid_depths="motion_transformer_layers_per_mid_block")


def _pos_embed_buffers(layout: list[tuple[str, int, int, list[int]]], max_seq: int) -> tuple[Buffer, ...]:
    """Each temporal ``BasicTransformerBlock``'s ``pos_embed.pe`` (``SinusoidalPositionalEmbedding``,
    embeddings.py:1137): a persistent ``(1, max_seq_length, inner)`` table, loaded in the weights' dtype."""
    return tuple(Buffer(f"{path}.motion_modules.{j}.transformer_blocks.{t}.pos_embed.pe",
                        max_seq * heads * (c // heads), "loaded")
                 for path, c, heads, depths in layout for j, k in enumerate(depths) for t in range(k))


def _unsupported(config: Config) -> None:
    if config["encoder_hid_dim_type"] is not None:
        raise UnknownArchitectureError(f"{config.component}: UNetMotionModel with encoder_hid_dim_type="
                                       f"{config['encoder_hid_dim_type']!r} is not supported yet.")
    if config["addition_embed_type"] not in (None, "text_time"):
        raise UnknownArchitectureError(f"{config.component}: UNetMotionModel with addition_embed_type="
                                       f"{config['addition_embed_type']!r} is not supported yet.")
    if config["norm_num_groups"] is None:
        raise UnknownArchitectureError(f"{config.component}: UNetMotionModel with norm_num_groups null is not "
                                       "supported (its motion modules need the groups)")


#: ``from_unet2d``'s block mapping (unet_motion_model.py:1571), read backwards: each motion block is the 2-D block
#: of the same kind plus its motion modules.
AS_2D = {"CrossAttnDownBlockMotion": "CrossAttnDownBlock2D", "DownBlockMotion": "DownBlock2D",
         "CrossAttnUpBlockMotion": "CrossAttnUpBlock2D", "UpBlockMotion": "UpBlock2D"}
#: The keys a ``UNetMotionModel`` shares with the ``UNet2DConditionModel`` its 2-D layers are (``from_unet2d``
#: copies them across); its ``num_attention_heads`` is the 2-D class's ``attention_head_dim`` (the head count).
SHARED_2D_KEYS = ("in_channels", "out_channels", "block_out_channels", "layers_per_block", "downsample_padding",
                  "norm_num_groups", "cross_attention_dim", "transformer_layers_per_block",
                  "reverse_transformer_layers_per_block", "use_linear_projection", "addition_embed_type",
                  "addition_time_embed_dim", "projection_class_embeddings_input_dim", "time_cond_proj_dim")


def _unet_2d_config(config: Config) -> Config:
    """The ``UNet2DConditionModel`` whose layers the motion UNet runs per frame, without its mid block (the motion
    UNet builds its own, :func:`_mid_block`)."""
    for t in list(config["down_block_types"]) + list(config["up_block_types"]):
        if t not in AS_2D:
            raise UnknownArchitectureError(f"{config.component}: UNetMotionModel block type {t!r} is not supported "
                                           f"(supported: {', '.join(AS_2D)}).")
    values = {"_class_name": "UNet2DConditionModel", **{k: config[k] for k in SHARED_2D_KEYS},
              "down_block_types": [AS_2D[t] for t in config["down_block_types"]],
              "up_block_types": [AS_2D[t] for t in config["up_block_types"]],
              "attention_head_dim": config["num_attention_heads"], "mid_block_type": None}
    return Config(config.component, values, UNET_2D_DEFAULTS)


def _mid_depths(config: Config) -> list[int]:
    """The transformer depth of each of the mid block's ``mid_block_layers`` spatial attentions
    (unet_motion_model.py:1406-1430: ``transformer_layers_per_mid_block``, else the last down block's depth)."""
    tl_mid = config["transformer_layers_per_mid_block"]
    if tl_mid is None:
        tl_mid = (config["transformer_layers_per_block"] if isinstance(config["transformer_layers_per_block"], int)
                  else config["transformer_layers_per_block"][-1])
        tl_mid = tl_mid if isinstance(tl_mid, int) else 1
    return _per_layer(tl_mid, count_int(config, "mid_block_layers"), "transformer_layers_per_mid_block",
                      config.component)


def _spatial_self_attention(config: Config) -> list[str]:
    """The ``attn1`` of every spatial ``BasicTransformerBlock``: in the cross-attention down / up blocks (as the
    ``UNet2DConditionModel`` of the same 2-D config lays them out) and the mid block."""
    c2 = _unet_2d_config(config)
    comp = config.component
    nb = len(config["block_out_channels"])
    lpb = _per_block(c2["layers_per_block"], nb, "layers_per_block", comp)
    tlpb = _per_block(c2["transformer_layers_per_block"], nb, "transformer_layers_per_block", comp)
    rev = (_per_block(c2["reverse_transformer_layers_per_block"], nb, "reverse_transformer_layers_per_block", comp)
           if c2["reverse_transformer_layers_per_block"] else tlpb[::-1])
    spatial = [(f"down_blocks.{i}.attentions.{j}", k) for i in range(nb) if c2["down_block_types"][i] ==
               "CrossAttnDownBlock2D" for j, k in enumerate(_per_layer(tlpb[i], lpb[i], "transformer_layers_per_block",
                                                                       comp))]
    spatial += [(f"mid_block.attentions.{j}", k) for j, k in enumerate(_mid_depths(config))]
    spatial += [(f"up_blocks.{i}.attentions.{j}", k) for i in range(nb) if c2["up_block_types"][i] ==
                "CrossAttnUpBlock2D" for j, k in enumerate(_per_layer(
                    rev[i], lpb[::-1][i] + 1, "reverse_transformer_layers_per_block", comp))]
    return [f"{prefix}.transformer_blocks.{b}.attn1" for prefix, k in spatial for b in range(k)]


def _motion_self_attention(config: Config) -> list[str]:
    """Both attentions of every motion module's blocks: ``double_self_attention`` makes ``attn2`` a self-attention
    too (no ``cross_attention_dim``), so ``PAGMixin`` counts it among the self-attention layers."""
    return [f"{path}.motion_modules.{j}.transformer_blocks.{t}.{a}" for path, _c, _h, depths in motion_layout(config)
            for j, k in enumerate(depths) for t in range(k) for a in ("attn1", "attn2")]


def _mid_block(config: Config, top: int, heads: int, cross: int, h, w, t, frames, motions: Node | None,
               identity=lambda prefix, k: frozenset()) -> Node:
    """``UNetMidBlockCrossAttnMotion`` (with ``use_motion_mid_block``) or ``UNetMidBlock2DCrossAttn`` of
    ``mid_block_layers`` layers (unet_motion_model.py:1406): resnet, then per layer attention, resnet (and motion
    module)."""
    n_mid = count_int(config, "mid_block_layers")
    res = resnet_block(top, top, h, w, temb_channels=4 * int(config["block_out_channels"][0]))
    parts = [per_frame(module_list("attentions", [
        spatial_transformer(top, heads, h, w, layers=k, context_tokens=t, context_dim=cross,
                            linear_projection=bool(config["use_linear_projection"]),
                            identity_layers=identity(f"mid_block.attentions.{j}", k))
        for j, k in enumerate(_mid_depths(config))]), frames),
        per_frame(module_list("resnets", [res] * (1 + n_mid)), frames)]
    if motions is not None:
        parts.append(motions)
    return Node("mid_block", children=tuple(parts),
                formula="UNetMidBlockCrossAttnMotion" if motions is not None else "UNetMidBlock2DCrossAttn")


def _blocks(list_node: Node) -> list[Node]:
    """The entries of a grouped ``ModuleList`` node, one node per index."""
    out = []
    for child in list_node.children:
        first, last = child.span or (int(child.name), int(child.name))
        out += [Node(str(i), child.cost, child.children, formula=child.formula) for i in range(first, last + 1)]
    return out


@register("UNetMotionModel", role="denoiser", defaults=DEFAULTS, source="diffusers/models/unets/unet_motion_model.py",
          nominal=RunShape(latent_height=64, latent_width=64, text_len=8, latent_frames=2))
def unet_motion(config: Config, shape: RunShape) -> Node:
    """``UNetMotionModel.forward`` on ``sample`` ``(1, in_channels, F, h, w)`` (F = ``latent_frames``),
    ``encoder_hidden_states`` ``(F, text_len, cross_attention_dim)`` as the pipeline repeats them: the
    ``UNet2DConditionModel`` of the same 2-D config (:func:`unet_2d_condition`), its layers per frame and its
    embeddings once, each down / up block followed by its motion modules, and the motion UNet's own mid block."""
    _unsupported(config)
    comp = config.component
    frames = 1 if shape.latent_frames is None else shape.latent_frames
    spatial_names = _spatial_self_attention(config)
    chosen = selected(shape.perturbed, spatial_names + _motion_self_attention(config), comp)
    on = shape.perturbed is not None and shape.perturbed.identity
    perturbed = sorted(n for n in chosen if on and n in spatial_names and not n.startswith("mid_block."))
    # the 2-D UNet's own blocks (no mid block) with exactly the chosen spatial layers (anchored, escaped ids)
    unet_2d = unet_2d_condition(_unet_2d_config(config), RunShape(
        latent_height=shape.latent_height, latent_width=shape.latent_width, text_len=shape.text_len,
        perturbed=PerturbedAttention(tuple(f"^{re.escape(n)}$" for n in perturbed), True) if perturbed else None))

    def identity(prefix: str, k: int) -> frozenset[int]:
        return frozenset(b for b in range(k) if on and f"{prefix}.transformer_blocks.{b}.attn1" in chosen)
    channels = [int(c) for c in config["block_out_channels"]]
    nb = len(channels)
    motion = {path: (c, heads, depths) for path, c, heads, depths in motion_layout(config)}
    # each level's latent size: the down path's stride-2 convolutions (formulas.unet_blocks.downsample)
    sizes = [(shape.latent_height, shape.latent_width)]
    for _ in range(nb - 1):
        sizes.append(downsample(1, *sizes[-1], config["downsample_padding"])[1:])

    def motions(path: str, size) -> Node:
        c, heads, depths = motion[path]
        return module_list("motion_modules", [motion_module(c, heads, *size, frames, layers=k, identity=tuple(
            tuple(on and f"{path}.motion_modules.{j}.transformer_blocks.{t}.{a}" in chosen for a in ("attn1", "attn2"))
            for t in range(k))) for j, k in enumerate(depths)])

    def with_motion(block: Node, path: str, size) -> Node:
        return Node(block.name, children=(*(per_frame(c, frames) for c in block.children), motions(path, size)),
                    formula=block.formula)

    heads = _per_block(config["num_attention_heads"], nb, "num_attention_heads", comp)
    cross = _per_block(config["cross_attention_dim"], nb, "cross_attention_dim", comp)
    mid = _mid_block(config, channels[-1], heads[-1], cross[-1], *sizes[-1], shape.text_len, frames,
                     motions("mid_block", sizes[-1]) if config["use_motion_mid_block"] else None, identity)
    children = []
    for node in unet_2d.children:
        if node.name == "down_blocks":
            node = module_list("down_blocks", [with_motion(b, f"down_blocks.{i}", sizes[i])
                                               for i, b in enumerate(_blocks(node))])
        elif node.name == "up_blocks":
            children.append(mid)
            node = module_list("up_blocks", [with_motion(b, f"up_blocks.{i}", sizes[nb - 1 - i])
                                             for i, b in enumerate(_blocks(node))])
        elif node.name not in ("time_embedding", "add_embedding"):  # once per video (unet_motion_model.py:1994)
            node = per_frame(node, frames)
        children.append(node)
    return Node("unet", children=tuple(children), formula="unet_motion")


supports_perturbation("UNetMotionModel")
loading_rules("UNetMotionModel", buffers=lambda c: _pos_embed_buffers(motion_layout(c), positive_int(
    c, "motion_max_seq_length")), source="diffusers/models/unets/unet_motion_model.py, models/embeddings.py:1137")


#: ``MotionAdapter.__init__`` keyword defaults (unet_motion_model.py:1062).
ADAPTER_DEFAULTS = {
    "block_out_channels": [320, 640, 1280, 1280],
    "motion_layers_per_block": 2,
    "motion_transformer_layers_per_block": 1,
    "motion_mid_block_layers_per_block": 1,
    "motion_transformer_layers_per_mid_block": 1,
    "motion_num_attention_heads": 8,
    "motion_norm_num_groups": 32,
    "motion_max_seq_length": 32,
    "use_motion_mid_block": True,
    "conv_in_channels": None,
}


@register("MotionAdapter", role="motion_adapter", defaults=ADAPTER_DEFAULTS,
          source="diffusers/models/unets/unet_motion_model.py")
def motion_adapter(config: Config, shape: RunShape) -> Node:
    """``MotionAdapter``: the container of the motion modules ``from_unet2d`` copies into the UNet. Its
    ``forward`` does nothing (unet_motion_model.py:1193), so its tree holds parameters only: the motion
    modules (as the UNet's) and, for PIA adapters, ``conv_in``."""
    blocks: dict[str, list[Node]] = {}
    for path, c, heads, depths in adapter_layout(config):
        modules = module_list("motion_modules", [per_frame(motion_module(c, heads, 1, 1, 1, layers=k), 0)
                                                 for k in depths])
        kind, _, index = path.partition(".")
        blocks.setdefault(kind, []).append(Node(index or kind, children=(modules,), formula="MotionModules"))
    children = []
    if config["conv_in_channels"]:
        children.append(per_frame(Node("conv_in", ops.conv2d(config["conv_in_channels"],
                                                             int(config["block_out_channels"][0]), 3, 1, 1)), 0))
    children.append(Node("down_blocks", children=tuple(blocks["down_blocks"])))
    if "mid_block" in blocks:
        children.append(Node("mid_block", children=blocks["mid_block"][0].children, formula="MotionModules"))
    children.append(Node("up_blocks", children=tuple(blocks["up_blocks"])))
    return Node("motion_adapter", children=tuple(children), formula="motion_adapter")


loading_rules("MotionAdapter", buffers=lambda c: _pos_embed_buffers(adapter_layout(c), positive_int(
    c, "motion_max_seq_length")), source="diffusers/models/unets/unet_motion_model.py, models/embeddings.py:1137")
