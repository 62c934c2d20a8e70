"""ModelScope's video UNet: ``UNet3DConditionModel`` (diffusers ``models/unets/unet_3d_condition.py``, blocks in
``models/unets/unet_3d_blocks.py``), the denoiser of ``TextToVideoSDPipeline`` / ``VideoToVideoSDPipeline``.

The forward (unet_3d_condition.py:560-640) folds the ``F`` frames of ``sample`` ``(1, C, F, H, W)`` into the batch
and repeats the time embedding and the text states per frame, so its 2-D layers (ResNets, spatial transformers,
samplers, ``conv_in`` / ``conv_out``) are the 2-D UNet's formulas run once per frame. Between them run the
temporal layers (:mod:`flopcalc.formulas.motion_module`): after ``conv_in`` a ``transformer_in``
(``TransformerTemporalModel`` of 8 heads of ``attention_head_dim``), after every ResNet a ``TemporalConvLayer``
(``temp_convs``) and after every spatial transformer a ``TransformerTemporalModel`` (``temp_attentions``) with the
spatial one's heads. The blocks build their transformers as ``Transformer2DModel(C // n, n)`` with
``n = attention_head_dim`` (the naming quirk: ``n`` is the head width here) and ``use_linear_projection=True``
(``get_down_block`` / ``get_up_block``'s default, unet_3d_blocks.py:98).
"""

from __future__ import annotations

from typing import Any

from flopcalc.engine.architectures.unet_2d_condition import _per_block
from flopcalc.engine.config import (
    MAX_WIDTH, NAMES, NULL, SIZE, SIZES, TEXT, Config, Int, count_int, declare_keys, positive_int,
)
from flopcalc.engine.cost import Node, module_list
from flopcalc.engine.errors import ConfigError, UnknownArchitectureError
from flopcalc.formulas import ops
from flopcalc.formulas.conditioning import mlp_embedder
from flopcalc.formulas.motion_module import per_frame, temporal_conv_layer, temporal_transformer
from flopcalc.formulas.resnet_block import resnet_block
from flopcalc.formulas.unet_blocks import downsample, spatial_transformer, upsample
from flopcalc.engine.registry import RunShape, register

#: ``UNet3DConditionModel.__init__`` keyword defaults (unet_3d_condition.py:99).
DEFAULTS = {
    "sample_size": None,
    "in_channels": 4,
    "out_channels": 4,
    "down_block_types": ["CrossAttnDownBlock3D", "CrossAttnDownBlock3D", "CrossAttnDownBlock3D", "DownBlock3D"],
    "up_block_types": ["UpBlock3D", "CrossAttnUpBlock3D", "CrossAttnUpBlock3D", "CrossAttnUpBlock3D"],
    "block_out_channels": [320, 640, 1280, 1280],
    "layers_per_block": 2,
    "downsample_padding": 1,
    "norm_num_groups": 32,
    "cross_attention_dim": 1024,
    "attention_head_dim": 64,
    "num_attention_heads": None,
    "time_cond_proj_dim": None,
}
DOWN = ("CrossAttnDownBlock3D", "DownBlock3D")
UP = ("CrossAttnUpBlock3D", "UpBlock3D")
#: ``transformer_in``'s head count, hard-coded in ``UNet3DConditionModel.__init__`` (unet_3d_condition.py:185).
TRANSFORMER_IN_HEADS = 8

declare_keys("UNet3DConditionModel", {
    "sample_size": SIZE | NULL, "in_channels": SIZE, "out_channels": SIZE, "down_block_types": NAMES,
    "up_block_types": NAMES, "block_out_channels": SIZES, "layers_per_block": Int(1, 1024),
    "downsample_padding": Int(0, MAX_WIDTH), "norm_num_groups": SIZE | NULL, "cross_attention_dim": SIZE,
    "attention_head_dim": SIZE | SIZES, "num_attention_heads": NULL, "time_cond_proj_dim": SIZE | NULL,
    "act_fn": TEXT,
})


def _check(config: Config, channels: list[int], widths: list[int], cls: str) -> None:
    comp = config.component
    types = list(config["down_block_types"]) + list(config["up_block_types"])
    if len(config["down_block_types"]) != len(channels) or len(config["up_block_types"]) != len(channels):
        raise ConfigError(f"{comp}/config.json: down/up_block_types must have one entry per block_out_channels")
    for t in types:
        if t not in DOWN + UP:
            raise UnknownArchitectureError(f"{comp}: {cls} block type {t!r} is not supported "
                                           f"(supported: {', '.join(DOWN + UP)}).")
    if config["norm_num_groups"] is None:
        raise UnknownArchitectureError(f"{comp}: {cls} with norm_num_groups null is not supported")
    if not isinstance(config["attention_head_dim"], int):
        raise UnknownArchitectureError(f"{comp}: {cls} with a per-block attention_head_dim is not "
                                       "supported (transformer_in takes it whole)")
    for c, n in zip(channels, widths):
        if c % n:
            raise UnknownArchitectureError(f"{comp}: block width {c} is not a multiple of attention_head_dim {n}: "
                                           "its transformers' inner width differs from the block's (not supported)")


def _layer(c: int, n: int, h: Any, w: Any, frames: Any, t: Any, cross: int) -> tuple[Node, Node]:
    """A spatial transformer (per frame) and its temporal transformer, ``Transformer2DModel(c // n, n)`` and
    ``TransformerTemporalModel(c // n, n)``."""
    spatial = per_frame(spatial_transformer(c, c // n, h, w, layers=1, context_tokens=t, context_dim=cross,
                                            linear_projection=True), frames)
    return spatial, temporal_transformer(c, c // n, n, h, w, frames, layers=1)


def _block(name: str, resnets: list[tuple[int, int]], c: int, n: int, h: Any, w: Any, frames: Any, t: Any,
           cross: int | None, temb: int, sampler: Node | None, sampler_name: str) -> Node:
    """A ``(CrossAttn)Down/UpBlock3D``: per layer a ResNet (per frame) and a ``TemporalConvLayer``, and with
    cross-attention a spatial and a temporal transformer; then its sampler (per frame)."""
    parts = [module_list("resnets", [per_frame(resnet_block(ci, co, h, w, temb_channels=temb), frames)
                                     for ci, co in resnets]),
             module_list("temp_convs", [temporal_conv_layer(co, h, w, frames) for _, co in resnets])]
    if cross is not None:
        layers = [_layer(co, n, h, w, frames, t, cross) for _, co in resnets]
        parts += [module_list("attentions", [s for s, _ in layers]),
                  module_list("temp_attentions", [tt for _, tt in layers])]
    if sampler is not None:
        parts.append(module_list(sampler_name, [per_frame(sampler, frames)]))
    return Node("block", children=tuple(parts), formula=name)


def unet_3d_body(config: Config, shape: RunShape, widths: list[int], *, conv_in_channels: int, context_tokens: Any,
                 embeddings: list[Node], transformer_in_width: int, downsample_padding: int) -> Node:
    """The frame-folded 3-D UNet both ModelScope's ``UNet3DConditionModel`` and ``I2VGenXLUNet`` build: ``conv_in``
    (``conv_in_channels`` → C0, per frame), ``embeddings`` (run once per video, given), ``transformer_in``
    (8 heads of ``transformer_in_width``), the 3-D down / mid / up blocks with ``widths[i]``-wide heads whose
    cross-attentions read ``context_tokens`` vectors, ``conv_norm_out`` and ``conv_out`` (per frame)."""
    channels = [int(c) for c in config["block_out_channels"]]
    nb = len(channels)
    frames = 1 if shape.latent_frames is None else shape.latent_frames
    lpb = count_int(config, "layers_per_block")
    cross = positive_int(config, "cross_attention_dim")
    t = context_tokens
    c0 = channels[0]
    temb = 4 * c0
    h, w = shape.latent_height, shape.latent_width

    sizes = [(h, w)]
    downs, c_out = [], c0
    for i, kind in enumerate(config["down_block_types"]):
        c_in, c_out = c_out, channels[i]
        hh, ww = sizes[-1]
        sampler = None
        if i < nb - 1:
            sampler, h2, w2 = downsample(c_out, hh, ww, downsample_padding)
            sizes.append((h2, w2))
        downs.append(_block(kind, [(c_in if j == 0 else c_out, c_out) for j in range(lpb)], c_out, widths[i], hh, ww,
                            frames, t, cross if kind == "CrossAttnDownBlock3D" else None, temb, sampler,
                            "downsamplers"))

    # UNetMidBlock3DCrossAttn (unet_3d_blocks.py:266): resnet, temp_conv, then attention, temp_attention,
    # resnet, temp_conv
    hm, wm = sizes[-1]
    top = channels[-1]
    res = per_frame(resnet_block(top, top, hm, wm, temb_channels=temb), frames)
    spatial, temporal = _layer(top, widths[-1], hm, wm, frames, t, cross)
    mid = Node("mid_block", children=(
        module_list("resnets", [res, res]),
        module_list("temp_convs", [temporal_conv_layer(top, hm, wm, frames)] * 2),
        module_list("attentions", [spatial]),
        module_list("temp_attentions", [temporal]),
    ), formula="UNetMidBlock3DCrossAttn")

    rev_ch, rev_widths = channels[::-1], widths[::-1]
    ups, out_c = [], rev_ch[0]
    layers = lpb + 1
    for i, kind in enumerate(config["up_block_types"]):
        prev, out_c = out_c, rev_ch[i]
        skip_in = rev_ch[min(i + 1, nb - 1)]
        hh, ww = sizes[nb - 1 - i]
        sampler = upsample(out_c, *sizes[nb - 2 - i]) if i < nb - 1 else None
        ups.append(_block(kind, [((prev if j == 0 else out_c) + (skip_in if j == layers - 1 else out_c), out_c)
                                 for j in range(layers)], out_c, rev_widths[i], hh, ww, frames, t,
                          cross if kind == "CrossAttnUpBlock3D" else None, temb, sampler, "upsamplers"))

    return Node("unet", children=(
        per_frame(Node("conv_in", ops.conv2d(conv_in_channels, c0, 3, h, w)), frames),
        *embeddings,
        Node("transformer_in", children=temporal_transformer(c0, TRANSFORMER_IN_HEADS, transformer_in_width, h, w,
                                                             frames, layers=1).children,
             formula="temporal_transformer"),
        module_list("down_blocks", downs),
        mid,
        module_list("up_blocks", ups),
        per_frame(Node("conv_norm_out", ops.group_norm(c0, h * w) + ops.activation(c0 * h * w)), frames),
        per_frame(Node("conv_out", ops.conv2d(c0, count_int(config, "out_channels"), 3, h, w)), frames),
    ), formula="unet_3d")


@register("UNet3DConditionModel", role="denoiser", defaults=DEFAULTS,
          source="diffusers/models/unets/unet_3d_condition.py",
          nominal=RunShape(latent_height=32, latent_width=32, text_len=8, latent_frames=2))
def unet_3d_condition(config: Config, shape: RunShape) -> Node:
    """``UNet3DConditionModel.forward`` on ``sample`` ``(1, in_channels, F, h, w)`` (F = ``latent_frames``) and
    ``encoder_hidden_states`` ``(1, text_len, cross_attention_dim)`` (repeated per frame inside)."""
    channels = [int(c) for c in config["block_out_channels"]]
    widths = _per_block(config["attention_head_dim"], len(channels), "attention_head_dim", config.component)
    _check(config, channels, widths, "UNet3DConditionModel")
    c0 = channels[0]
    time = Node("time_embedding", children=mlp_embedder("time_embedding", c0, 4 * c0).children
                + ((Node("cond_proj", ops.linear(0, config["time_cond_proj_dim"], c0, bias=False)),)
                   if config["time_cond_proj_dim"] else ()))
    return unet_3d_body(config, shape, widths, conv_in_channels=positive_int(config, "in_channels"),
                        context_tokens=shape.text_len, embeddings=[time], transformer_in_width=config["attention_head_dim"],
                        downsample_padding=config["downsample_padding"])
