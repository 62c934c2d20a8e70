"""``StableCascadeUNet`` (diffusers ``models/unets/unet_stable_cascade.py``) and ``PaellaVQModel``
(``pipelines/deprecated/wuerstchen/modeling_paella_vq_model.py``): Stable Cascade's stage C prior,
stage B decoder and stage A VQGAN.

``StableCascadeUNet.forward`` (unet_stable_cascade.py:538): sinusoidal timestep-ratio embeddings
(no MACs); ``get_clip_embeddings`` (:432): ``clip_txt_pooled_mapper`` on the pooled text vector
(``clip_seq`` tokens out) and, when the call passes both ``clip_text`` and ``clip_img`` (the prior
pipeline does, when the config has both mappers), ``clip_txt_mapper`` on the text tokens and
``clip_img_mapper`` on the image embeddings, then ``clip_norm``; ``embedding`` (``PixelUnshuffle``,
1×1 conv, norm) on the latent; ``effnet_mapper`` on the stage C latent interpolated to the
embedded size (the decoder pipeline always passes ``effnet``); ``pixels_mapper`` on an 8×8 zero
image (``pixels`` is never passed); ``_down_encode`` (:450): per level a downscaler (2×2 stride-2
conv, or with ``switch_level`` a 1×1 conv and a bilinear ×0.5 when enabled), then the level's blocks
``repeat_mappers`` times with a 1×1 conv between repeats; ``_up_decode`` (:488): the mirror, the
first ``SDCascadeResBlock`` of each level but the deepest concatenating the level's down output
(``x`` is first interpolated to its size when they differ), and an upscaler (2×2 stride-2
transposed conv, or a bilinear ×2 when enabled and a 1×1 conv); ``clf`` (norm, 1×1 conv,
``PixelShuffle``).

The call's conditioning comes from the shape: ``text_len`` CLIP text tokens and ``image_tokens``
image embeddings (the prior pipeline passes one zero embedding when no image is given).
"""

from __future__ import annotations

from typing import Any

from flopcalc.engine.config import (
    FLAG, FLAGS, LAYER_COUNTS, MAX_LAYERS, NAMES, NULL, SIZE, SIZES, TEXT, Config, Int, ListOf, MAX_WIDTH, Real,
    declare_keys,
    positive_int,
)
from flopcalc.engine.cost import Node, module_list
from flopcalc.engine.errors import ConfigError, ResolutionError
from flopcalc.formulas import ops
from flopcalc.formulas.kandinsky3 import conv_transpose2d
from flopcalc.formulas.stable_cascade import (
    ATTN_BLOCK, BLOCK_TYPES, RES_BLOCK, attn_block, bilinear, called, cascade_layer_norm, mapper, paella_decoder,
    paella_encoder, res_block, timestep_block,
)
from flopcalc.engine.registry import RunShape, register
from flopcalc.engine.loading import Buffer, loading_rules

#: ``StableCascadeUNet.__init__`` keyword defaults (unet_stable_cascade.py:140).
DEFAULTS = {
    "in_channels": 16,
    "out_channels": 16,
    "timestep_ratio_embedding_dim": 64,
    "patch_size": 1,
    "conditioning_dim": 2048,
    "block_out_channels": [2048, 2048],
    "num_attention_heads": [32, 32],
    "down_num_layers_per_block": [8, 24],
    "up_num_layers_per_block": [24, 8],
    "down_blocks_repeat_mappers": [1, 1],
    "up_blocks_repeat_mappers": [1, 1],
    "block_types_per_layer": [[RES_BLOCK, "SDCascadeTimestepBlock", ATTN_BLOCK]] * 2,
    "clip_text_in_channels": None,
    "clip_text_pooled_in_channels": 1280,
    "clip_image_in_channels": None,
    "clip_seq": 4,
    "effnet_in_channels": None,
    "pixel_mapper_in_channels": None,
    "kernel_size": 3,
    "dropout": [0.1, 0.1],
    "self_attn": True,
    "timestep_conditioning_type": ["sca", "crp"],
    "switch_level": None,
}
SOURCE = "diffusers/models/unets/unet_stable_cascade.py"

#: ``PaellaVQModel.__init__`` keyword defaults (modeling_paella_vq_model.py:76).
PAELLA_DEFAULTS = {
    "in_channels": 3,
    "out_channels": 3,
    "up_down_scale_factor": 2,
    "levels": 2,
    "bottleneck_blocks": 12,
    "embed_dim": 384,
    "latent_channels": 4,
    "num_vq_embeddings": 8192,
    "scale_factor": 0.3764,
}
PAELLA_SOURCE = "diffusers/pipelines/deprecated/wuerstchen/modeling_paella_vq_model.py"
#: A shape every config can run at, for parameter counts: sides divisible by every patch and scale factor up
#: to 16 (720720 = lcm(1, …, 16)), one CLIP image embedding.
NOMINAL = RunShape(latent_height=720720, latent_width=720720, text_len=8, image_tokens=1, height=720720,
                   width=720720)

#: how often each level's blocks run (the real module builds ``repeats - 1`` 1×1 mapper convs): a layer count
REPEATS = ListOf(Int(1, MAX_LAYERS))

declare_keys("StableCascadeUNet", {
    "in_channels": SIZE, "out_channels": SIZE, "timestep_ratio_embedding_dim": SIZE, "patch_size": SIZE,
    "conditioning_dim": SIZE, "block_out_channels": SIZES, "num_attention_heads": ListOf(Int(-1, MAX_WIDTH)),
    "down_num_layers_per_block": LAYER_COUNTS, "up_num_layers_per_block": LAYER_COUNTS,
    "down_blocks_repeat_mappers": REPEATS, "up_blocks_repeat_mappers": REPEATS,
    "block_types_per_layer": ListOf(NAMES), "clip_text_in_channels": SIZE | NULL,
    "clip_text_pooled_in_channels": SIZE, "clip_image_in_channels": SIZE | NULL, "clip_seq": SIZE,
    "effnet_in_channels": SIZE | NULL, "pixel_mapper_in_channels": SIZE | NULL, "kernel_size": SIZE,
    "self_attn": FLAG | FLAGS, "timestep_conditioning_type": ListOf(TEXT, lo=0), "switch_level": FLAGS | NULL,
    "dropout": Real(0.0, 1.0, closed=True) | ListOf(Real(0.0, 1.0, closed=True)),
})
declare_keys("PaellaVQModel", {
    "in_channels": SIZE, "out_channels": SIZE, "up_down_scale_factor": SIZE, "levels": SIZE,
    "bottleneck_blocks": Int(0, 1024), "embed_dim": SIZE, "latent_channels": SIZE, "num_vq_embeddings": SIZE,
    "scale_factor": Real(0.0, 1e3),
})


#: An ``nn.Identity`` entry of a module list (no work, no parameters).
IDENTITY = Node("identity", formula="identity")


def _levels(config: Config) -> dict[str, Any]:
    """The per-level lists, checked as ``__init__`` checks them (one entry per level)."""
    comp = config.component
    channels = list(config["block_out_channels"])
    n = len(channels)
    lists = {key: list(config[key]) for key in ("num_attention_heads", "down_num_layers_per_block",
                                                 "up_num_layers_per_block", "down_blocks_repeat_mappers",
                                                 "up_blocks_repeat_mappers", "block_types_per_layer")}
    for key, values in lists.items():
        if len(values) < n or (key != "num_attention_heads" and len(values) != n):
            raise ConfigError(f"{comp}/config.json: {key!r} needs one entry per block_out_channels ({n}), "
                              f"got {len(values)}: StableCascadeUNet refuses this config.")
    for types in lists["block_types_per_layer"]:
        unknown = sorted(set(types) - set(BLOCK_TYPES))
        if unknown:
            raise ConfigError(f"{comp}/config.json: block type(s) {unknown} are not supported "
                              f"(StableCascadeUNet builds {', '.join(BLOCK_TYPES)}).")
    self_attn = config["self_attn"]
    self_attn = [self_attn] * n if isinstance(self_attn, bool) else list(self_attn)
    switch = config["switch_level"]
    needed = {"self_attn": (self_attn, n), "switch_level": (switch, n - 1)}
    for key, (values, count) in needed.items():
        if values is not None and len(values) < count:
            raise ConfigError(f"{comp}/config.json: {key!r} needs {count} entries for {n} levels, got {len(values)}.")
    for i, types in enumerate(lists["block_types_per_layer"]):
        heads = lists["num_attention_heads"][i]
        if ATTN_BLOCK in types and (heads <= 0 or channels[i] // heads == 0):
            raise ConfigError(f"{comp}/config.json: level {i} has an SDCascadeAttnBlock but num_attention_heads "
                              f"{heads} for {channels[i]} channels: the real model cannot run this config.")
    if positive_int(config, "timestep_ratio_embedding_dim") < 4:
        raise ConfigError(f"{comp}/config.json: timestep_ratio_embedding_dim below 4 divides by zero in "
                          "get_timestep_ratio_embedding (log(max_positions) / (half_dim − 1)): the real model cannot run.")
    kernel = positive_int(config, "kernel_size")
    if kernel % 2 == 0:
        raise ConfigError(f"{comp}/config.json: kernel_size {kernel} is even: the depthwise conv (padding "
                          "kernel_size // 2) grows the map and the residual add fails in the real model.")
    return {"channels": channels, "self_attn": self_attn, "switch": switch, "kernel": kernel, **lists}


def latent_patch(values) -> int:
    """The ``patch_size`` a latent side must divide by (``PixelUnshuffle``)."""
    return values.get("patch_size", DEFAULTS["patch_size"])


def clip_tokens(config: Config, shape: RunShape) -> Any:
    """Conditioning tokens ``get_clip_embeddings`` returns: ``clip_seq`` from the pooled text vector,
    plus the ``text_len`` text tokens and ``clip_seq`` per image embedding when the config has both
    the text and the image mapper (the prior pipeline's call)."""
    seq = positive_int(config, "clip_seq")
    if _full_clip(config):
        return shape.text_len + seq * (1 + shape.image_tokens)
    return seq


def _full_clip(config: Config) -> bool:
    return config["clip_text_in_channels"] is not None and config["clip_image_in_channels"] is not None


def _conditioning(config: Config, shape: RunShape, cond: int) -> list[Node]:
    seq = positive_int(config, "clip_seq")
    full = _full_clip(config)
    nodes = [Node("clip_txt_pooled_mapper",
                  ops.linear(1, positive_int(config, "clip_text_pooled_in_channels"), cond * seq))]
    for key, name, tokens in (("clip_text_in_channels", "clip_txt_mapper", shape.text_len),
                              ("clip_image_in_channels", "clip_img_mapper", shape.image_tokens)):
        d_in = config[key]
        if d_in is not None:
            d_out = cond if name == "clip_txt_mapper" else cond * seq
            cost = ops.linear(tokens, d_in, d_out) if full else ops.parameters(d_in * d_out + d_out)
            nodes.append(Node(name, cost))
    nodes.append(Node("clip_norm", ops.layer_norm(clip_tokens(config, shape), cond, affine=False)))
    return nodes


def _level_blocks(types: list[str], layers: int, c: int, cfg: dict, i: int, h: Any, w: Any, *, skip: int,
                  up: bool, cond_tokens: Any, config: Config) -> tuple[list[Node], Any, Any]:
    """One level's flat block list (``layers`` × ``types``); the first block gets ``skip`` channels.
    Returns the blocks and the size they leave (an up level's first ResBlock interpolates ``x`` to
    the skip's size, which is the level's size ``h × w``)."""
    cond = positive_int(config, "conditioning_dim")
    t_dim = positive_int(config, "timestep_ratio_embedding_dim")
    conds = list(config["timestep_conditioning_type"])
    blocks = []
    for j in range(layers):
        for k, kind in enumerate(types):
            name = str(len(blocks))
            if kind == RES_BLOCK:
                blocks.append(res_block(name, c, skip if j == k == 0 else 0, cfg["kernel"], h, w))
            elif kind == ATTN_BLOCK:
                blocks.append(attn_block(name, c, cond, cfg["num_attention_heads"][i], cfg["self_attn"][i], h, w,
                                         cond_tokens))
            else:
                blocks.append(timestep_block(name, c, t_dim, conds))
    return blocks, h, w


def _check_halvable(h: Any, w: Any, level: int) -> None:
    """A level's 2× downscaling needs at least 2 positions a side (the real conv or resize fails below)."""
    if isinstance(h, int) and isinstance(w, int) and min(h, w) < 2:
        raise ResolutionError(f"the latent is {h}×{w} at level {level}, too small to halve again: the real "
                              "StableCascadeUNet fails at this size; use a larger height and width")


@register("StableCascadeUNet", role="denoiser", defaults=DEFAULTS, source=SOURCE, nominal=NOMINAL)
def stable_cascade_unet(config: Config, shape: RunShape) -> Node:
    """One ``StableCascadeUNet.forward`` on a ``latent_height × latent_width`` latent."""
    cfg = _levels(config)
    channels, switch = cfg["channels"], cfg["switch"]
    n = len(channels)
    patch = positive_int(config, "patch_size")
    cond = positive_int(config, "conditioning_dim")
    m = clip_tokens(config, shape)
    h, w = ops.exact_div(shape.latent_height, patch), ops.exact_div(shape.latent_width, patch)
    c0 = channels[0]
    children = _conditioning(config, shape, cond)
    children.append(Node("embedding", children=(
        Node("1", ops.conv2d(positive_int(config, "in_channels") * patch**2, c0, 1, h, w)),
        Node("2", cascade_layer_norm(c0, h * w)),
    )))
    if config["effnet_in_channels"] is not None:
        children.append(mapper("effnet_mapper", config["effnet_in_channels"], c0, h, w))
    if config["pixel_mapper_in_channels"] is not None:
        children.append(mapper("pixels_mapper", config["pixel_mapper_in_channels"], c0, 8, 8))

    downs, downscalers, down_maps, sizes = [], [IDENTITY], [], []
    for i in range(n):
        c = channels[i]
        if i > 0:
            prev = channels[i - 1]
            parts = [Node("0", cascade_layer_norm(prev, h * w))]
            if switch is None:
                _check_halvable(h, w, i)
                h, w = ops.conv_output_size(h, 2, 2), ops.conv_output_size(w, 2, 2)
                parts.append(Node("1", ops.conv2d(prev, c, 2, h, w)))
            else:
                inner = [Node("0", ops.conv2d(prev, c, 1, h, w))]
                if switch[i - 1]:
                    _check_halvable(h, w, i)
                    h, w = ops.conv_output_size(h, 2, 2), ops.conv_output_size(w, 2, 2)
                    inner.append(Node("1", bilinear(c * h * w)))
                parts.append(Node("1", children=(module_list("blocks", inner),)))
            downscalers.append(Node(str(i), children=tuple(parts)))
        repeats = cfg["down_blocks_repeat_mappers"][i]
        blocks, h, w = _level_blocks(cfg["block_types_per_layer"][i], cfg["down_num_layers_per_block"][i], c, cfg,
                                     i, h, w, skip=0, up=False, cond_tokens=m, config=config)
        downs.append(called(module_list(str(i), blocks), repeats))
        down_maps.append(module_list(str(i), [Node(str(r), ops.conv2d(c, c, 1, h, w)) for r in range(repeats - 1)]))
        sizes.append((h, w))

    ups, upscalers, up_maps = [], [], []
    for k in range(n):
        i = n - 1 - k
        c = channels[i]
        types = cfg["block_types_per_layer"][i]
        layers = cfg["up_num_layers_per_block"][k]
        skip = c if i < n - 1 and types and types[0] == RES_BLOCK else 0
        if skip and layers:
            h, w = sizes[i]  # _up_decode interpolates x to the skip's size before the first ResBlock
        repeats = cfg["up_blocks_repeat_mappers"][k]
        blocks, h, w = _level_blocks(types, layers, c, cfg, i, h, w, skip=skip,
                                     up=True, cond_tokens=m, config=config)
        ups.append(called(module_list(str(k), blocks), repeats))
        up_maps.append(module_list(str(k), [Node(str(r), ops.conv2d(c, c, 1, h, w)) for r in range(repeats - 1)]))
        if i > 0:
            prev = channels[i - 1]
            parts = [Node("0", cascade_layer_norm(c, h * w))]
            if switch is None:
                parts.append(Node("1", conv_transpose2d(c, prev, 2, 2, h, w)))
                h, w = 2 * h, 2 * w
            else:
                inner = [IDENTITY]
                if switch[i - 1]:
                    h, w = 2 * h, 2 * w
                    inner = [Node("0", bilinear(c * h * w))]
                inner.append(Node("1", ops.conv2d(c, prev, 1, h, w)))
                parts.append(Node("1", children=(module_list("blocks", inner),)))
            upscalers.append(Node(str(k), children=tuple(parts)))

    children += [
        module_list("down_blocks", downs), module_list("down_downscalers", downscalers),
        module_list("down_repeat_mappers", down_maps),
        module_list("up_blocks", ups), module_list("up_upscalers", upscalers), module_list("up_repeat_mappers", up_maps),
        Node("clf", children=(Node("0", cascade_layer_norm(c0, h * w)),
                              Node("1", ops.conv2d(c0, positive_int(config, "out_channels") * patch**2, 1, h, w)))),
    ]
    return Node("unet", children=tuple(children), formula="stable_cascade_unet")


def paella_scale_factor(values) -> int:
    """Image pixels per latent pixel of ``PaellaVQModel.decode``: ``up_down_scale_factor`` (``PixelShuffle``)
    × 2 per level below the top (the stride-2 transposed convs)."""
    levels = values.get("levels", PAELLA_DEFAULTS["levels"])
    return values.get("up_down_scale_factor", PAELLA_DEFAULTS["up_down_scale_factor"]) * 2 ** (levels - 1)


def _paella(config: Config) -> dict[str, int]:
    levels = positive_int(config, "levels")
    embed = positive_int(config, "embed_dim")
    if embed // 2 ** (levels - 1) == 0:
        raise ConfigError(f"{config.component}/config.json: embed_dim {embed} halves to 0 channels over "
                          f"{levels} levels: the real model cannot be built.")
    return {"levels": levels, "embed_dim": embed, "latent_channels": positive_int(config, "latent_channels"),
            "scale": positive_int(config, "up_down_scale_factor")}


@register("PaellaVQModel", call="decode", role="vae", defaults=PAELLA_DEFAULTS, source=PAELLA_SOURCE,
          scale_factor=paella_scale_factor, nominal=NOMINAL)
def paella_vq_decode(config: Config, shape: RunShape) -> Node:
    """``decode(h)`` (``force_not_quantize=True``, the default and what ``StableCascadeDecoderPipeline``
    calls): no quantizer; ``up_blocks`` and ``out_block`` on the ``latent_height × latent_width`` latent.
    The ``vquantizer`` codebook is counted as parameters."""
    kw = _paella(config)
    up, out = paella_decoder(out_channels=positive_int(config, "out_channels"),
                             bottleneck_blocks=config["bottleneck_blocks"], h=shape.latent_height,
                             w=shape.latent_width, **kw)
    quantizer = Node("vquantizer", children=(
        Node("embedding", ops.embedding(positive_int(config, "num_vq_embeddings"), kw["latent_channels"])),))
    return Node("vqgan", children=(quantizer, up, out), formula="paella_vq_decode")


@register("PaellaVQModel", call="encode", role="vae", defaults=PAELLA_DEFAULTS, source=PAELLA_SOURCE,
          scale_factor=paella_scale_factor, nominal=NOMINAL)
def paella_vq_encode(config: Config, shape: RunShape) -> Node:
    """``encode(x)``: ``in_block`` and ``down_blocks`` on the ``height × width`` image."""
    kw = _paella(config)
    del kw["latent_channels"]
    in_block, down = paella_encoder(in_channels=positive_int(config, "in_channels"),
                                    latent_channels=positive_int(config, "latent_channels"), height=shape.height,
                                    width=shape.width, **kw)
    return Node("vqgan", children=(in_block, down), formula="paella_vq_encode")


def _paella_buffers(config: Config) -> tuple[Buffer, ...]:
    """The encoder's final ``BatchNorm2d(latent_channels)``: running mean and variance (loaded) and
    ``num_batches_tracked``."""
    levels = positive_int(config, "levels")
    name = f"down_blocks.{2 * levels - 1}.1"
    c = positive_int(config, "latent_channels")
    return (Buffer(f"{name}.running_mean", c, "loaded"), Buffer(f"{name}.running_var", c, "loaded"),
            Buffer(f"{name}.num_batches_tracked", 1, "int64"))


loading_rules("PaellaVQModel", buffers=_paella_buffers, source=PAELLA_SOURCE)
