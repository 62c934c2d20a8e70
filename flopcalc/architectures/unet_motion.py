"""AnimateDiff's UNet: ``UNetMotionModel`` (diffusers ``models/unets/unet_motion_model.py``), the
class ``AnimateDiffPipeline.__init__`` builds from an SD UNet and a ``MotionAdapter``
(``UNetMotionModel.from_unet2d(unet, motion_adapter)``, unet_motion_model.py:1538; a folder saved
by the pipeline holds its config as ``unet/config.json``).

Its 2-D layers are ``UNet2DConditionModel``'s (the same ResNets, spatial transformers and samplers,
assembled by :mod:`flopcalc.architectures.unet_2d_condition`'s block formulas), run once per frame:
the forward folds the ``F`` frames of ``sample`` ``(1, C, F, H, W)`` into the batch and the pipeline
repeats the text states per frame (``prompt_embeds.repeat_interleave(num_frames)``). After each
ResNet (and spatial transformer) of every down, up (and, with ``use_motion_mid_block``, mid) block
runs a motion module over the frames (:mod:`flopcalc.formulas.motion_module`). The time embedding
MLP runs once per video (its output is repeated per frame, :1994).
"""

from __future__ import annotations

from flopcalc.architectures.unet_2d_condition import _per_block, _per_layer
from flopcalc.config import (
    FLAG, LAYER_COUNTS, LAYERS, MAX_WIDTH, NAMES, NULL, SIZE, SIZES, TEXT, Config, Int, ListOf, count_int,
    declare_keys, positive_int,
)
from flopcalc.cost import Node, module_list
from flopcalc.errors import ConfigError, UnknownArchitectureError
from flopcalc.formulas import ops
from flopcalc.formulas.conditioning import mlp_embedder
from flopcalc.formulas.motion_module import motion_module, per_frame
from flopcalc.formulas.resnet_block import resnet_block
from flopcalc.formulas.unet_blocks import downsample, spatial_transformer, unet_block, upsample
from flopcalc.registry import RunShape, register
from flopcalc.weights import Buffer, loading_rules

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


def motion_layout(config: Config) -> list[tuple[str, int, int, list[int]]]:
    """Where ``UNetMotionModel.__init__`` puts its motion modules: ``(block path, channels, heads,
    [transformer depth of each module])`` for every down block, the mid block (``use_motion_mid_block``)
    and every up block (unet_motion_model.py:1356-1505)."""
    comp = config.component
    channels = [int(c) for c in config["block_out_channels"]]
    nb = len(channels)
    lpb = _per_block(config["layers_per_block"], nb, "layers_per_block", comp)
    ttlpb = _per_block(config["temporal_transformer_layers_per_block"], nb, "temporal_transformer_layers_per_block",
                       comp)
    rev_ttlpb = (_per_block(config["reverse_temporal_transformer_layers_per_block"], nb,
                            "reverse_temporal_transformer_layers_per_block", comp)
                 if config["reverse_temporal_transformer_layers_per_block"] is not None else ttlpb[::-1])
    heads = _per_block(config["motion_num_attention_heads"], nb, "motion_num_attention_heads", comp)
    layout = [(f"down_blocks.{i}", channels[i], heads[i],
               _per_layer(ttlpb[i], lpb[i], "temporal_transformer_layers_per_block", comp)) for i in range(nb)]
    if config["use_motion_mid_block"]:
        layout.append(("mid_block", channels[-1], heads[-1], _per_layer(
            config["temporal_transformer_layers_per_mid_block"], count_int(config, "mid_block_layers"),
            "temporal_transformer_layers_per_mid_block", comp)))
    rev_ch, rev_lpb, rev_heads = channels[::-1], lpb[::-1], heads[::-1]
    layout += [(f"up_blocks.{i}", rev_ch[i], rev_heads[i], _per_layer(
        rev_ttlpb[i], rev_lpb[i] + 1, "reverse_temporal_transformer_layers_per_block", comp)) for i in range(nb)]
    return layout


def adapter_layout(config: Config) -> list[tuple[str, int, int, list[int]]]:
    """The same for a ``MotionAdapter`` (unet_motion_model.py:1062): ``MotionModules`` per block, each a
    ``motion_modules`` list of ``motion_layers_per_block`` (up: + 1) ``AnimateDiffTransformer3D``."""
    comp = config.component
    channels = [int(c) for c in config["block_out_channels"]]
    nb = len(channels)
    lpb = _per_block(config["motion_layers_per_block"], nb, "motion_layers_per_block", comp)
    tlpb = _per_block(config["motion_transformer_layers_per_block"], nb, "motion_transformer_layers_per_block", comp)
    heads = _per_block(config["motion_num_attention_heads"], nb, "motion_num_attention_heads", comp)
    layout = [(f"down_blocks.{i}", channels[i], heads[i],
               _per_layer(tlpb[i], lpb[i], "motion_transformer_layers_per_block", comp)) for i in range(nb)]
    if config["use_motion_mid_block"]:
        layout.append(("mid_block", channels[-1], heads[-1], _per_layer(
            config["motion_transformer_layers_per_mid_block"], count_int(config, "motion_mid_block_layers_per_block"),
            "motion_transformer_layers_per_mid_block", comp)))
    layout += [(f"up_blocks.{i}", channels[::-1][i], heads[::-1][i], _per_layer(
        tlpb[::-1][i], lpb[::-1][i] + 1, "motion_transformer_layers_per_block", comp)) for i in range(nb)]
    return layout


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


@register("UNetMotionModel", role="denoiser", defaults=DEFAULTS, source="diffusers/models/unets/unet_motion_model.py",
          nominal=RunShape(latent_height=64, latent_width=64, text_len=8, latent_frames=2))
def unet_motion(config: Config, shape: RunShape) -> Node:
    """``UNetMotionModel.forward`` on ``sample`` ``(1, in_channels, F, h, w)`` (F = ``latent_frames``),
    ``encoder_hidden_states`` ``(F, text_len, cross_attention_dim)`` as the pipeline repeats them."""
    _unsupported(config)
    comp = config.component
    down_types, up_types = list(config["down_block_types"]), list(config["up_block_types"])
    channels = [int(c) for c in config["block_out_channels"]]
    nb = len(channels)
    if len(down_types) != nb or len(up_types) != nb:
        raise ConfigError(f"{comp}/config.json: down/up_block_types must have one entry per block_out_channels")
    for t in down_types + up_types:
        if t not in DOWN + UP:
            raise UnknownArchitectureError(f"{comp}: UNetMotionModel block type {t!r} is not supported "
                                           f"(supported: {', '.join(DOWN + UP)}).")
    frames = 1 if shape.latent_frames is None else shape.latent_frames
    heads = _per_block(config["num_attention_heads"], nb, "num_attention_heads", comp)
    cross = _per_block(config["cross_attention_dim"], nb, "cross_attention_dim", comp)
    lpb = _per_block(config["layers_per_block"], nb, "layers_per_block", comp)
    tlpb = _per_block(config["transformer_layers_per_block"], nb, "transformer_layers_per_block", comp)
    rev_tlpb = (_per_block(config["reverse_transformer_layers_per_block"], nb, "reverse_transformer_layers_per_block",
                           comp) if config["reverse_transformer_layers_per_block"] is not None else tlpb[::-1])
    motion = {path: (c, heads_, depths) for path, c, heads_, depths in motion_layout(config)}
    linear = bool(config["use_linear_projection"])
    t = shape.text_len
    c0 = channels[0]
    temb = 4 * c0
    h, w = shape.latent_height, shape.latent_width

    def attn(i: int, up: bool = False) -> dict:
        j = nb - 1 - i if up else i
        return {"heads": heads[j], "context_tokens": t, "context_dim": cross[j], "linear_projection": linear}

    def motions(path: str, hh, ww) -> Node:
        c, mheads, depths = motion[path]
        return module_list("motion_modules", [motion_module(c, mheads, hh, ww, frames, layers=k) for k in depths])

    def with_motion(block: Node, motion: Node) -> Node:
        return Node(block.name, children=(*(per_frame(c, frames) for c in block.children), motion),
                    formula=block.formula)

    # down (unet_motion_model.py:1356)
    sizes = [(h, w)]
    downs, c_out = [], c0
    for i, kind in enumerate(down_types):
        c_in, c_out = c_out, channels[i]
        hh, ww = sizes[-1]
        sampler = None
        if i < nb - 1:
            sampler, h2, w2 = downsample(c_out, hh, ww, config["downsample_padding"])
            sizes.append((h2, w2))
        block = unet_block(
            resnet_channels=[(c_in if j == 0 else c_out, c_out) for j in range(lpb[i])], height=hh, width=ww,
            temb_channels=temb, scale_shift=False, attention=attn(i) if kind == "CrossAttnDownBlockMotion" else None,
            transformer_layers=_per_layer(tlpb[i], lpb[i], "transformer_layers_per_block", comp),
            sampler=sampler, sampler_name="downsamplers", formula=kind)
        downs.append(with_motion(block, motions(f"down_blocks.{i}", hh, ww)))

    # mid (:1406): the motion mid block, or UNetMidBlock2DCrossAttn
    hm, wm = sizes[-1]
    top = channels[-1]
    n_mid = count_int(config, "mid_block_layers")
    tl_mid = config["transformer_layers_per_mid_block"]
    if tl_mid is None:
        tl_mid = tlpb[-1] if isinstance(tlpb[-1], int) else 1
    res = resnet_block(top, top, hm, wm, temb_channels=temb)
    parts = [
        module_list("attentions", [spatial_transformer(top, height=hm, width=wm, layers=k, **attn(nb - 1))
                                   for k in _per_layer(tl_mid, n_mid, "transformer_layers_per_mid_block", comp)]),
        module_list("resnets", [res] * (1 + n_mid)),
    ]
    parts = [per_frame(p, frames) for p in parts]
    if config["use_motion_mid_block"]:
        parts.append(motions("mid_block", hm, wm))
    mid = Node("mid_block", children=tuple(parts),
               formula="UNetMidBlockCrossAttnMotion" if config["use_motion_mid_block"] else "UNetMidBlock2DCrossAttn")

    # up (:1449)
    rev_ch, rev_lpb = channels[::-1], lpb[::-1]
    ups, out_c = [], rev_ch[0]
    for i, kind in enumerate(up_types):
        prev, out_c = out_c, rev_ch[i]
        skip_in = rev_ch[min(i + 1, nb - 1)]
        layers = rev_lpb[i] + 1
        hh, ww = sizes[nb - 1 - i]
        sampler = upsample(out_c, *sizes[nb - 2 - i]) if i < nb - 1 else None
        block = unet_block(
            resnet_channels=[((prev if j == 0 else out_c) + (skip_in if j == layers - 1 else out_c), out_c)
                             for j in range(layers)],
            height=hh, width=ww, temb_channels=temb, scale_shift=False,
            attention=attn(i, up=True) if kind == "CrossAttnUpBlockMotion" else None,
            transformer_layers=_per_layer(rev_tlpb[i], layers, "reverse_transformer_layers_per_block", comp),
            sampler=sampler, sampler_name="upsamplers", formula=kind)
        ups.append(with_motion(block, motions(f"up_blocks.{i}", hh, ww)))

    embeddings = [Node("time_embedding", children=mlp_embedder("time_embedding", c0, temb).children
                       + ((Node("cond_proj", ops.linear(0, config["time_cond_proj_dim"], c0, bias=False)),)
                          if config["time_cond_proj_dim"] else ()))]
    if config["addition_embed_type"] == "text_time":
        embeddings.append(mlp_embedder("add_embedding", positive_int(config, "projection_class_embeddings_input_dim"),
                                       temb))
    in_ch = positive_int(config, "in_channels")
    return Node("unet", children=(
        per_frame(Node("conv_in", ops.conv2d(in_ch, c0, 3, h, w)), frames),
        *embeddings,
        module_list("down_blocks", downs),
        mid,
        module_list("up_blocks", ups),
        per_frame(Node("conv_norm_out", ops.group_norm(c0, h * w) + ops.activation(c0 * h * w)), frames),
        per_frame(Node("conv_out", ops.conv2d(c0, count_int(config, "out_channels"), 3, h, w)), frames),
    ), formula="unet_motion")


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
