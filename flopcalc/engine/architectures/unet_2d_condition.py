"""Conditional UNet: ``UNet2DConditionModel`` (diffusers ``models/unets/unet_2d_condition.py``),
in the generality its config gives it: per-block ``layers_per_block``,
``transformer_layers_per_block`` (an int, one per block, or one per layer; SDXL), the
``attention_head_dim`` / ``num_attention_heads`` naming quirk (``num_attention_heads or
attention_head_dim`` is the head *count*), ``use_linear_projection``, per-block
``cross_attention_dim``, ``addition_embed_type: text_time`` (SDXL's pooled text and time ids),
``class_embed_type`` and ``num_class_embeds`` (the x4 upscaler's noise-level classes: a table lookup),
``only_cross_attention`` (per block: ``attn1`` attends to the text too), ``time_cond_proj_dim`` (LCM's
guidance embedding), ``encoder_hid_dim`` projections, ``resnet_time_scale_shift``, and the
up path's skip-connection channel arithmetic.

Sizes: the down path halves the latent with stride-2 convolutions (odd sizes round up with
padding 1); each up block runs at the size of its mirror down level and upsamples to the next,
which is what the real forward's ``upsample_size`` does.
"""

from __future__ import annotations

from typing import Any, Callable

from flopcalc.engine.gradients import Checkpointed, gradient_graph
from flopcalc.engine.errors import FlopcalcError
from flopcalc.engine.gradients import Attend, Join, Layer, LoraFlow, Step
from flopcalc.engine.loading import loading_rules
from flopcalc.engine.config import (
    COUNT, FLAG, FLAGS, LAYERS, LAYER_COUNTS, MAX_WIDTH, NAMES, NULL, SIZE, SIZES, TEXT, Config, Int, ListOf,
    count_int, declare_keys, positive_int,
)
from flopcalc.engine.cost import Node, module_list
from flopcalc.engine.errors import ConfigError, OptionError, ResolutionError, UnknownArchitectureError
from flopcalc.formulas import ops
from flopcalc.formulas.conditioning import mlp_embedder
from flopcalc.formulas.resnet_block import resnet_block
from flopcalc.formulas.transformer_parts import cross_attention, feed_forward
from flopcalc.formulas.unet_added_kv_blocks import added_kv_block, added_kv_mid_block, resnet_resample
from flopcalc.formulas.unet_blocks import (
    downsample,
    spatial_transformer,
    unet_block,
    upsample,
)
from flopcalc.engine.perturbed_attention import selected, supports_perturbation
from flopcalc.engine.registry import RunShape, register

#: ``UNet2DConditionModel.__init__`` keyword defaults (unet_2d_condition.py).
DEFAULTS = {
    "in_channels": 4,
    "out_channels": 4,
    "down_block_types": ["CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "DownBlock2D"],
    "mid_block_type": "UNetMidBlock2DCrossAttn",
    "up_block_types": ["UpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D"],
    "only_cross_attention": False,
    "block_out_channels": [320, 640, 1280, 1280],
    "layers_per_block": 2,
    "downsample_padding": 1,
    "norm_num_groups": 32,
    "cross_attention_dim": 1280,
    "transformer_layers_per_block": 1,
    "reverse_transformer_layers_per_block": None,
    "encoder_hid_dim": None,
    "encoder_hid_dim_type": None,
    "attention_head_dim": 8,
    "num_attention_heads": None,
    "dual_cross_attention": False,
    "use_linear_projection": False,
    "class_embed_type": None,
    "addition_embed_type": None,
    "addition_time_embed_dim": None,
    "num_class_embeds": None,
    "resnet_time_scale_shift": "default",
    "time_embedding_type": "positional",
    "time_embedding_dim": None,
    "time_cond_proj_dim": None,
    "conv_in_kernel": 3,
    "conv_out_kernel": 3,
    "projection_class_embeddings_input_dim": None,
    "attention_type": "default",
    "class_embeddings_concat": False,
    "mid_block_only_cross_attention": None,
    "cross_attention_norm": None,
    "addition_embed_type_num_heads": 64,
}
DOWN = ("CrossAttnDownBlock2D", "DownBlock2D", "SimpleCrossAttnDownBlock2D", "ResnetDownsampleBlock2D")
UP = ("CrossAttnUpBlock2D", "UpBlock2D", "SimpleCrossAttnUpBlock2D", "ResnetUpsampleBlock2D")
#: The k-diffusion blocks (the x2 latent upscaler): a UNet of these only, no mid block (:func:`k_unet`).
K_DOWN = ("KDownBlock2D", "KCrossAttnDownBlock2D")
K_UP = ("KUpBlock2D", "KCrossAttnUpBlock2D")
MID = ("UNetMidBlock2DCrossAttn", "UNetMidBlock2D", "UNetMidBlock2DSimpleCrossAttn", None)
#: Blocks whose sampler is a ResNet (``down=True`` / ``up=True``) and whose attention has added K/V.
ADDED_KV_DOWN = ("SimpleCrossAttnDownBlock2D", "ResnetDownsampleBlock2D")
ADDED_KV_UP = ("SimpleCrossAttnUpBlock2D", "ResnetUpsampleBlock2D")
#: ``ImageProjection(num_image_text_embeds=32)`` (embeddings.py): the ``image_proj`` context is 32 vectors.
IMAGE_PROJECTION_TOKENS = 32
#: An IP-Adapter's ``ImageProjection`` makes 4 tokens of one image embedding (``num_image_text_embeds = 4``,
#: loaders/unet.py:405, and ``num_image_text_embeds += [4]`` for its processors, :655).
IP_ADAPTER_TOKENS = 4


def ip_adapter_projection(config: Config, embed_dim: int, resampler: tuple | None = None) -> tuple[Node, int]:
    """The ``encoder_hid_proj`` ``load_ip_adapter`` installs for one IP-Adapter (``loaders/unet.py:403-414,
    519-538, 717-719``): ``MultiIPAdapterImageProjection([layer])`` (embeddings.py:2339-2376) with ``layer`` a
    plain adapter's ``ImageProjection(cross_attention_dim, image_embed_dim, 4)`` (embeddings.py:1280-1300) on one
    image embedding per row, or (``resampler``: ``(encoder tokens, queries, width, heads)``) an IP-Adapter Plus's
    ``IPAdapterPlusImageProjection`` (:func:`ip_adapter_resampler`) on the image encoder's hidden states; and the
    image tokens every ``attn2`` then reads. The UNet must have no ``encoder_hid_proj`` of its own
    (``encoder_hid_dim_type`` null)."""
    if config["encoder_hid_dim_type"] is not None or config["encoder_hid_dim"]:
        raise OptionError(f"{config.component}: flopcalc models an IP-Adapter on a UNet without encoder_hid_proj "
                          f"(this one has encoder_hid_dim_type {config['encoder_hid_dim_type']!r})")
    cad = config["cross_attention_dim"]
    if not isinstance(cad, int):
        raise OptionError(f"{config.component}: an IP-Adapter needs one cross_attention_dim (the loader builds every "
                          "processor with config.cross_attention_dim)")
    if resampler is None:
        layer, tokens = Node("0", children=(Node("image_embeds", ops.linear(1, embed_dim, IP_ADAPTER_TOKENS * cad)),
                                            Node("norm", ops.layer_norm(IP_ADAPTER_TOKENS, cad)))), IP_ADAPTER_TOKENS
    else:
        layer, tokens = ip_adapter_resampler(embed_dim, cad, *resampler), resampler[1]
    return Node("encoder_hid_proj", children=(Node("image_projection_layers", children=(layer,)),)), tokens


#: ``IPAdapterPlusImageProjection``'s blocks and head width (``depth=4``, ``dim_head=64``: the loader passes neither,
#: loaders/unet.py:533-539; embeddings.py:2035-2045).
RESAMPLER_DEPTH, RESAMPLER_HEAD_DIM = 4, 64


def ip_adapter_resampler(embed_dim: int, out_dim: int, tokens: int, queries: int, width: int, heads: int) -> Node:
    """``IPAdapterPlusImageProjection(embed_dims, output_dims, hidden_dims=width, heads, num_queries)``
    (embeddings.py:1986-2075) on ``tokens`` image-encoder hidden states of ``embed_dim``: ``latents`` (queries ×
    width parameters), ``proj_in``, four blocks (``ln0`` on the states, ``ln1`` on the latents, ``attn``: the
    latents attend to [states, latents], no biases; ``ff``: a LayerNorm and a GELU ``FeedForward`` ×4 without
    biases), ``proj_out`` and ``norm_out`` on the queries."""
    block = Node("0", children=(
        Node("ln0", ops.layer_norm(tokens, width)),
        Node("ln1", ops.layer_norm(queries, width)),
        cross_attention("attn", tokens=queries, dim=width, context_tokens=tokens + queries, context_dim=width,
                        heads=heads, head_dim=RESAMPLER_HEAD_DIM, bias=False, out_bias=False),
        Node("ff", children=(Node("0", ops.layer_norm(queries, width)),
                             feed_forward("1", queries, width, mult=4, bias=False))),
    ))
    return Node("0", ops.parameters(queries * width), children=(
        Node("proj_in", ops.linear(tokens, embed_dim, width)),
        module_list("layers", [block] * RESAMPLER_DEPTH),
        Node("proj_out", ops.linear(queries, width, out_dim)),
        Node("norm_out", ops.layer_norm(queries, out_dim)),
    ))


def _per_block(value: Any, n: int, key: str, component: str) -> list:
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise ConfigError(f"{component}/config.json: {key!r} has {len(value)} entries for {n} blocks")
        return list(value)
    return [value] * n


def _per_layer(value: Any, n: int, key: str, component: str) -> list[int]:
    """Transformer depths of a block's ``n`` attention layers: one int for all, or a list whose first
    ``n`` entries the block reads (``transformer_layers_per_block[i] for i in range(num_layers)``)."""
    if not isinstance(value, (list, tuple)):
        return [value] * n
    if len(value) < n:
        raise ConfigError(f"{component}/config.json: {key!r} lists {len(value)} transformer depth(s) for a block "
                          f"of {n} layers; expected at least {n}")
    return list(value[:n])


def block_types(config: Config, levels: int, supported: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """``down_block_types`` and ``up_block_types``, one per level and each of a ``supported`` kind."""
    down, up = list(config["down_block_types"]), list(config["up_block_types"])
    if len(down) != levels or len(up) != levels:
        raise ConfigError(f"{config.component}/config.json: down/up_block_types must have one entry per "
                          "block_out_channels")
    for kind in down + up:
        if kind not in supported:
            raise UnknownArchitectureError(f"{config.component}: UNet block type {kind!r} is not supported yet "
                                           f"(supported: {', '.join(supported)}).")
    return down, up


def _known_mismatch(a: tuple, b: tuple) -> bool:
    """Two sizes that are numbers and differ (a law's sizes are taken as the plan made them: divisible)."""
    return all(isinstance(v, int) for v in a + b) and a != b


def _unsupported(config: Config) -> None:
    checks = {
        "dual_cross_attention": lambda v: bool(v),
        "attention_type": lambda v: v != "default",
        # group_norm: DeepFloyd IF's added-KV attentions (a LayerNorm there would be built on the wrong width)
        "cross_attention_norm": lambda v: v not in (None, "group_norm"),
        "time_embedding_type": lambda v: v not in ("positional", "fourier"),
        "addition_embed_type": lambda v: v not in (None, "text", "text_time", "text_image", "image", "image_hint"),
        "encoder_hid_dim_type": lambda v: v not in (None, "text_proj", "text_image_proj", "image_proj"),
        "class_embeddings_concat": lambda v: bool(v),
    }
    for key, bad in checks.items():
        if bad(config[key]):
            raise UnknownArchitectureError(
                f"{config.component}: UNet2DConditionModel with {key}={config[key]!r} is not supported yet.")


def _embeddings(config: Config, c0: int, text_tokens: Any, hint_size: tuple | None) -> tuple[list[Node], int]:
    """time_embedding, class_embedding, add_embedding, encoder_hid_proj; and the time-embedding width.
    ``hint_size``: the control image's size (``addition_embed_type: image_hint``), else None.
    With ``time_cond_proj_dim`` (LCM's guidance embedding ``w``) ``time_embedding.cond_proj`` maps the
    ``timestep_cond`` vector to the sinusoid's width before ``linear_1`` (``embeddings.py:1042,1060-1062``,
    ``TimestepEmbedding.forward``): every pipeline loading such a UNet passes ``timestep_cond``
    (``pipeline_stable_diffusion.py:1022-1026``, ``pipeline_latent_consistency_text2img.py:849,874``)."""
    # _set_time_proj (unet_2d_condition.py:550-575): fourier (the latent upscaler) embeds the timestep with a
    # GaussianFourierProjection of time_embed_dim // 2 frequencies (a fixed weight parameter), positional with a
    # sinusoid of block_out_channels[0]
    fourier = config["time_embedding_type"] == "fourier"
    ted = config["time_embedding_dim"] or (2 if fourier else 4) * c0
    t_in = ted if fourier else c0
    nodes = [Node("time_proj", ops.parameters(exact_half(ted, config.component)))] if fourier else []
    nodes.append(Node("time_embedding", children=mlp_embedder("time_embedding", t_in, ted).children
                      + ((Node("cond_proj", ops.linear(1, config["time_cond_proj_dim"], t_in, bias=False)),)
                         if config["time_cond_proj_dim"] else ())))
    kind, n_classes = config["class_embed_type"], config["num_class_embeds"]

    def proj_dim() -> int:  # required by the projection class embeddings and text_time, as the real __init__
        return positive_int(config, "projection_class_embeddings_input_dim")
    if kind is None and n_classes is not None:
        nodes.append(Node("class_embedding", ops.embedding(n_classes, ted)))
    elif kind == "timestep":
        nodes.append(mlp_embedder("class_embedding", c0, ted))
    elif kind == "projection":
        nodes.append(mlp_embedder("class_embedding", proj_dim(), ted))
    elif kind == "simple_projection":
        nodes.append(Node("class_embedding", ops.linear(1, proj_dim(), ted)))
    elif kind not in (None, "identity"):
        raise UnknownArchitectureError(f"{config.component}: class_embed_type {kind!r} is not supported yet.")
    addition = config["addition_embed_type"]
    cad = config["cross_attention_dim"]
    cad = cad if isinstance(cad, int) else cad[0]
    if addition == "text_time":
        nodes.append(mlp_embedder("add_embedding", proj_dim(), ted))
    elif addition == "text":  # DeepFloyd IF: pools the text states as given (before encoder_hid_proj)
        nodes.append(text_time_embedding(config["encoder_hid_dim"] or cad, ted, text_tokens,
                                         positive_int(config, "addition_embed_type_num_heads")))
    elif addition == "text_image":  # Kandinsky 2.1 (embeddings.py:1612-1631): pooled text and image embeddings
        nodes.append(Node("add_embedding", children=(
            Node("text_proj", ops.linear(1, cad, ted)), Node("text_norm", ops.layer_norm(1, ted)),
            Node("image_proj", ops.linear(1, cad, ted)))))
    elif addition in ("image", "image_hint"):
        nodes.append(image_time_embedding(positive_int(config, "encoder_hid_dim"), ted, hint_size))
    hid_type = config["encoder_hid_dim_type"]
    if hid_type == "text_proj" or (config["encoder_hid_dim"] and not hid_type):
        nodes.append(Node("encoder_hid_proj", ops.linear(text_tokens, positive_int(config, "encoder_hid_dim"), cad)))
    elif hid_type == "text_image_proj":
        # TextImageProjection (embeddings.py:1253-1277): 10 context vectors of the image embedding (its width is
        # cross_attention_dim, _set_encoder_hid_proj) before the projected text states
        nodes.append(Node("encoder_hid_proj", children=(
            Node("image_embeds", ops.linear(1, cad, TEXT_IMAGE_TOKENS * cad)),
            Node("text_proj", ops.linear(text_tokens, positive_int(config, "encoder_hid_dim"), cad)))))
    elif hid_type == "image_proj":
        # ImageProjection (embeddings.py:1280): one image embedding → 32 context vectors, LayerNormed
        nodes.append(Node("encoder_hid_proj", children=(
            Node("image_embeds", ops.linear(1, positive_int(config, "encoder_hid_dim"), IMAGE_PROJECTION_TOKENS * cad)),
            Node("norm", ops.layer_norm(IMAGE_PROJECTION_TOKENS, cad)))))
    return nodes, ted


def _identity_layers(config: Config, shape: RunShape, down_types: list, up_types: list, lpb: list, tlpb: list,
                     rev_tlpb: list) -> Callable[[str, int], frozenset[int]]:
    """Perturbed-attention guidance: ``identity(prefix, k)``, the transformer blocks of the spatial
    transformer ``prefix`` (of ``k`` blocks) whose ``attn1`` takes the identity path in this run. The
    UNet's self-attention modules are the ``attn1`` of every ``BasicTransformerBlock`` (``attn2`` is
    the cross-attention); the PAG layers are chosen among them as ``PAGMixin`` chooses
    (:mod:`flopcalc.engine.perturbed_attention`). The original rows run ``attn1`` unchanged."""
    nb = len(lpb)
    spatial = [(f"down_blocks.{i}.attentions.{j}", k) for i in range(nb) if down_types[i] == "CrossAttnDownBlock2D"
               for j, k in enumerate(_per_layer(tlpb[i], lpb[i], "transformer_layers_per_block", config.component))]
    if config["mid_block_type"] == "UNetMidBlock2DCrossAttn":
        spatial += [(f"mid_block.attentions.{j}", k)
                    for j, k in enumerate(_per_layer(tlpb[-1], 1, "transformer_layers_per_block", config.component))]
    rev_lpb = lpb[::-1]
    spatial += [(f"up_blocks.{i}.attentions.{j}", k) for i in range(nb) if up_types[i] == "CrossAttnUpBlock2D"
                for j, k in enumerate(_per_layer(rev_tlpb[i], rev_lpb[i] + 1, "reverse_transformer_layers_per_block",
                                                 config.component))]
    names = [f"{prefix}.transformer_blocks.{b}.attn1" for prefix, k in spatial for b in range(k)]
    chosen = selected(shape.perturbed, names, config.component)
    on = shape.perturbed is not None and shape.perturbed.identity

    def identity(prefix: str, k: int) -> frozenset[int]:
        return frozenset(b for b in range(k) if on and f"{prefix}.transformer_blocks.{b}.attn1" in chosen)
    return identity


supports_perturbation("UNet2DConditionModel")


def exact_half(value: int, component: str) -> int:
    if value % 2:  # _set_time_proj raises it
        raise ConfigError(f"{component}/config.json: a fourier time embedding needs an even time_embedding_dim, got "
                          f"{value}")
    return value // 2


def k_unet(config: Config, shape: RunShape) -> Node:
    """A ``UNet2DConditionModel`` of k-diffusion blocks (``K_DOWN`` / ``K_UP``, :mod:`flopcalc.formulas.k_unet_blocks`;
    unet_2d_condition.py:362-476 and unet_2d_blocks.py:1997-3580), as the x2 latent upscaler's: no mid block, no
    ``conv_norm_out`` (``norm_num_groups`` null), 1×1 ``conv_in`` / ``conv_out``. The skip connections are the
    down blocks' states (one per ResNet; ``None`` where a down block has no downsampler); each up block
    concatenates only the last of the ``layers_per_block`` states it takes (``res_hidden_states_tuple[-1]``)."""
    from flopcalc.formulas.k_unet_blocks import (k_attention_block, k_block, k_downsample, k_upsample,
                                                 resnet_cond_norm)

    comp = config.component
    channels = [int(c) for c in config["block_out_channels"]]
    nb = len(channels)
    down_types, up_types = block_types(config, nb, K_DOWN + K_UP)
    if config["mid_block_type"] is not None:
        raise UnknownArchitectureError(f"{comp}: a k-diffusion UNet with a mid block is not supported yet")
    if config["norm_num_groups"] is not None:
        raise UnknownArchitectureError(f"{comp}: a k-diffusion UNet with norm_num_groups (conv_norm_out) is not "
                                       "supported yet")
    lpb = _per_block(config["layers_per_block"], nb, "layers_per_block", comp)
    head_dims = [d if d is not None else channels[i] for i, d in enumerate(
        _per_block(config["attention_head_dim"], nb, "attention_head_dim", comp))]
    cross = _per_block(config["cross_attention_dim"], nb, "cross_attention_dim", comp)
    c0, h, w, t = channels[0], shape.latent_height, shape.latent_width, shape.text_len
    embeddings, temb = _embeddings(config, c0, t, None)
    # down: every ResNet's output is a skip state (None in a block without a downsampler)
    sizes, downs, skips = [(h, w)], [], [(c0, (h, w))]
    c_out = c0
    for i, kind in enumerate(down_types):
        c_in, c_out = c_out, channels[i]
        hh, ww = sizes[-1]
        last = i == nb - 1
        resnets = [resnet_cond_norm(c_in if j == 0 else c_out, c_out, hh, ww, temb=temb) for j in range(lpb[i])]
        attentions = None
        if kind == "KCrossAttnDownBlock2D":  # get_down_block: add_self_attention=True if not add_downsample
            attentions = [k_attention_block(c_out, head_dims[i], hh, ww, temb=temb, context_tokens=t,
                                            context_dim=cross[i], self_attention=last) for _ in range(lpb[i])]
        sampler = None
        if not last:
            sampler, h2, w2 = k_downsample(c_out, hh, ww)
            sizes.append((h2, w2))
        skips += [(None if last else c_out, (hh, ww))] * lpb[i]
        downs.append(k_block(resnets=resnets, attentions=attentions, sampler=sampler, sampler_name="downsamplers",
                             formula=kind))
    # up
    rev, rev_lpb, rev_cross = channels[::-1], lpb[::-1], cross[::-1]
    hidden, (hh, ww) = channels[-1], sizes[-1]
    ups = []
    for i, kind in enumerate(up_types):
        out, inp, layers = rev[i], rev[min(i + 1, nb - 1)], rev_lpb[i]
        taken, skips = skips[len(skips) - layers:], skips[:len(skips) - layers]
        skip_c, skip_size = taken[-1]
        if skip_c is not None and _known_mismatch(skip_size, (hh, ww)):
            raise ResolutionError(f"{comp}: a {hh}×{ww} level meets a {skip_size[0]}×{skip_size[1]} skip connection: "
                                  f"the latent must divide by {2 ** (nb - 1)} (the real model fails too)")
        c_first = hidden + (skip_c or 0)
        if kind == "KCrossAttnUpBlock2D":
            first, middle = inp == out == temb, inp != out
            k_in = out if first else 2 * out
        else:
            first = middle = False
            k_in = 2 * out
        if c_first != k_in:
            raise ConfigError(f"{comp}: up block {i} ({kind}) is built for {k_in} input channels but receives "
                              f"{c_first} (the real model fails too)")
        resnets, attentions = [], []
        for j in range(layers):
            ci = k_in if j == 0 else out
            if kind == "KCrossAttnUpBlock2D":
                resnets.append(resnet_cond_norm(ci, out, hh, ww, temb=temb,
                                                c_out_2=inp if (middle and j == layers - 1) else None))
                attentions.append(k_attention_block(inp if j == layers - 1 else out, head_dims[i], hh, ww, temb=temb,
                                                    context_tokens=t, context_dim=rev_cross[i], self_attention=first))
            else:
                co = inp if j == layers - 1 else out
                resnets.append(resnet_cond_norm(ci, co, hh, ww, temb=temb))
        hidden = inp
        sampler = None
        if i < nb - 1:
            sampler, hh, ww = k_upsample(hidden, hh, ww)
        ups.append(k_block(resnets=resnets, attentions=attentions or None, sampler=sampler, sampler_name="upsamplers",
                           formula=kind))
    if hidden != c0:
        raise ConfigError(f"{comp}: the last up block returns {hidden} channels, conv_out takes {c0}")
    k_in_k, k_out_k = positive_int(config, "conv_in_kernel"), positive_int(config, "conv_out_kernel")
    return Node("unet", children=(
        Node("conv_in", ops.conv2d(positive_int(config, "in_channels"), c0, k_in_k, h, w)), *embeddings,
        module_list("down_blocks", downs), module_list("up_blocks", ups),
        Node("conv_out", ops.conv2d(c0, count_int(config, "out_channels"), k_out_k, h, w))), formula="unet_2d_condition")


#: ``TextImageProjection(num_image_text_embeds=10)`` (embeddings.py:1253): Kandinsky 2.1's image vectors.
TEXT_IMAGE_TOKENS = 10


def text_time_embedding(dim: int, ted: int, tokens: Any, heads: int) -> Node:
    r"""``TextTimeEmbedding(dim, ted, num_heads=heads)`` (``addition_embed_type: text``, DeepFloyd IF;
    embeddings.py:1596-1609): ``norm1`` (LayerNorm) on the ``L`` text states, ``pool`` an
    ``AttentionPooling`` (embeddings.py:1674-1721: a class token, the mean of the states plus a learned
    ``positional_embedding``, attends to itself and the states; ``q_proj`` on the class token, ``k_proj``
    and ``v_proj`` on the :math:`L + 1` tokens, two ``einsum`` products of :math:`(L + 1)\,d` MACs each),
    ``proj`` to the time width and ``norm2``:

    .. math:: \mathrm{MACs} = d^2 + 2 (L + 1) d^2 + 2 (L + 1) d + d\,d_t
    """
    if heads == 0 or dim % heads:  # AttentionPooling reshapes to heads × dim // heads
        raise ConfigError(f"addition_embed_type text: the text width {dim} must divide into "
                          f"addition_embed_type_num_heads={heads} heads")
    n = tokens + 1
    pool = Node("pool", ops.matmul(1, dim // heads, n, batch=heads) + ops.matmul(1, n, dim // heads, batch=heads)
                + ops.parameters(dim), children=(
                    Node("k_proj", ops.linear(n, dim, dim)), Node("q_proj", ops.linear(1, dim, dim)),
                    Node("v_proj", ops.linear(n, dim, dim))))
    return Node("add_embedding", children=(Node("norm1", ops.layer_norm(tokens, dim)), pool,
                                           Node("proj", ops.linear(1, dim, ted)), Node("norm2", ops.layer_norm(1, ted))),
                formula="text_time_embedding")


#: ``ImageHintTimeEmbedding.input_hint_block`` (embeddings.py:1648): (in, out, stride) of its 3×3 convolutions.
HINT_CONVS = ((3, 16, 1), (16, 16, 1), (16, 32, 2), (32, 32, 1), (32, 96, 2), (96, 96, 1), (96, 256, 2), (256, 4, 1))


def image_time_embedding(image_dim: int, ted: int, hint_size: tuple | None) -> Node:
    """``ImageTimeEmbedding`` (``addition_embed_type: image``, embeddings.py:1630): ``image_proj``
    (image embedding → time width) and ``image_norm``; ``ImageHintTimeEmbedding`` (``image_hint``,
    embeddings.py:1643) adds ``input_hint_block``, eight 3×3 convolutions (padding 1, three of stride 2)
    from the ``hint_size`` control image down to the 4-channel map concatenated to the latent."""
    children = [Node("image_proj", ops.linear(1, image_dim, ted)), Node("image_norm", ops.layer_norm(1, ted))]
    if hint_size is not None:
        h, w = hint_size
        convs = []
        for i, (c_in, c_out, stride) in enumerate(HINT_CONVS):
            h, w = ops.conv_output_size(h, 3, stride, 1), ops.conv_output_size(w, 3, stride, 1)
            cost = ops.conv2d(c_in, c_out, 3, h, w)
            if i < len(HINT_CONVS) - 1:  # an nn.SiLU follows every convolution but the last
                cost = cost + ops.activation(c_out * h * w)
            convs.append(Node(str(2 * i), cost))
        children.append(Node("input_hint_block", children=tuple(convs)))
    return Node("add_embedding", children=tuple(children))


#: Every config key ``UNet2DConditionModel`` reads (assemblers and pipeline plan), as
#: :func:`flopcalc.engine.config.declare_keys` validates it.
declare_keys("UNet2DConditionModel", {
    "sample_size": SIZE | ListOf(SIZE, lo=2, hi=2) | NULL, "in_channels": SIZE, "out_channels": COUNT,
    "down_block_types": NAMES, "mid_block_type": TEXT | NULL, "up_block_types": NAMES,
    "only_cross_attention": FLAG | FLAGS, "block_out_channels": SIZES, "layers_per_block": LAYERS | LAYER_COUNTS,
    "downsample_padding": Int(0, MAX_WIDTH), "norm_num_groups": SIZE | NULL,
    "cross_attention_dim": SIZE | SIZES, "transformer_layers_per_block": LAYERS | LAYER_COUNTS | ListOf(LAYER_COUNTS),
    "reverse_transformer_layers_per_block": ListOf(LAYER_COUNTS) | NULL, "encoder_hid_dim": SIZE | NULL,
    "encoder_hid_dim_type": TEXT | NULL, "attention_head_dim": SIZE | SIZES, "num_attention_heads": SIZE | SIZES | NULL,
    "dual_cross_attention": FLAG, "use_linear_projection": FLAG, "class_embed_type": TEXT | NULL,
    "addition_embed_type": TEXT | NULL, "addition_time_embed_dim": SIZE | NULL, "num_class_embeds": SIZE | NULL,
    "resnet_time_scale_shift": TEXT, "time_embedding_type": TEXT, "time_embedding_dim": SIZE | NULL,
    "time_cond_proj_dim": SIZE | NULL, "conv_in_kernel": SIZE, "conv_out_kernel": SIZE,
    "projection_class_embeddings_input_dim": SIZE | NULL, "attention_type": TEXT, "class_embeddings_concat": FLAG,
    "mid_block_only_cross_attention": FLAG | NULL, "cross_attention_norm": TEXT | NULL,
    "addition_embed_type_num_heads": SIZE,
})


@register("UNet2DConditionModel", role="denoiser", defaults=DEFAULTS,
          source="diffusers/models/unets/unet_2d_condition.py")
def unet_2d_condition(config: Config, shape: RunShape) -> Node:
    _unsupported(config)
    comp = config.component
    channels = [int(c) for c in config["block_out_channels"]]
    nb = len(channels)
    if any(kind in K_DOWN for kind in config["down_block_types"]):
        return k_unet(config, shape)
    down_types, up_types = block_types(config, nb, DOWN + UP)
    if config["mid_block_type"] not in MID:
        raise UnknownArchitectureError(f"{comp}: mid_block_type {config['mid_block_type']!r} is not supported yet.")

    heads = _per_block(config["num_attention_heads"] or config["attention_head_dim"], nb, "attention_head_dim", comp)
    # the added-KV blocks take attention_head_dim itself as the head width (or the block's channels when
    # null), the up blocks *not* reversed (unet_2d_condition.py:391, 416, 474)
    head_dims = [d if d is not None else channels[i] for i, d in enumerate(
        _per_block(config["attention_head_dim"], nb, "attention_head_dim", comp))]
    cross = _per_block(config["cross_attention_dim"], nb, "cross_attention_dim", comp)
    lpb = _per_block(config["layers_per_block"], nb, "layers_per_block", comp)
    tlpb = _per_block(config["transformer_layers_per_block"], nb, "transformer_layers_per_block", comp)
    rev_tlpb = (_per_block(config["reverse_transformer_layers_per_block"], nb, "reverse_transformer_layers_per_block",
                           comp) if config["reverse_transformer_layers_per_block"] else list(reversed(tlpb)))
    # unet_2d_condition.py:329-333, 433: one flag for every block, or one per down block (reversed for the up
    # blocks); get_mid_block (unet_2d_blocks.py:274-291) passes mid_block_only_cross_attention only to
    # UNetMidBlock2DSimpleCrossAttn, so UNetMidBlock2DCrossAttn's attentions always attend to themselves first
    only = [bool(v) for v in _per_block(config["only_cross_attention"], nb, "only_cross_attention", comp)]
    linear = bool(config["use_linear_projection"])
    scale_shift = config["resnet_time_scale_shift"] == "scale_shift"
    # image_proj replaces encoder_hidden_states by the projected image embedding (unet_2d_condition.py:956)
    # text_image_proj (Kandinsky 2.1) puts 10 image vectors before the projected text states
    t = {"image_proj": IMAGE_PROJECTION_TOKENS,
         "text_image_proj": TEXT_IMAGE_TOKENS + shape.text_len}.get(config["encoder_hid_dim_type"], shape.text_len)
    c0 = channels[0]
    h, w = shape.latent_height, shape.latent_width
    identity = _identity_layers(config, shape, down_types, up_types, lpb, tlpb, rev_tlpb)
    # image_hint: the control image is at the generated size, 8× the latent (three stride-2 convolutions)
    hint = (8 * h, 8 * w) if config["addition_embed_type"] == "image_hint" else None

    embeddings, temb = _embeddings(config, c0, t if config["encoder_hid_dim_type"] == "image_proj" else shape.text_len,
                                   hint)
    ip_tokens = None
    if shape.ip_image_embed_dim is not None:  # an IP-Adapter (unet_2d_condition.py:964-975)
        projection, ip_tokens = ip_adapter_projection(config, shape.ip_image_embed_dim, shape.ip_resampler)
        embeddings.append(projection)

    def attn(i: int, only_cross: bool) -> dict:
        return {"heads": heads[i], "context_tokens": t, "context_dim": cross[i], "linear_projection": linear,
                "only_cross_attention": only_cross, "ip_tokens": ip_tokens}

    norm_cross = config["cross_attention_norm"] == "group_norm"

    def added_kv(i: int, up: bool = False) -> dict:
        return {"head_dim": head_dims[i], "context_tokens": t, "context_dim": cross[nb - 1 - i] if up else cross[i],
                "only_cross": only[::-1][i] if up else only[i], "norm_cross": norm_cross}

    # down
    sizes = [(h, w)]
    downs, c_out = [], c0
    for i, kind in enumerate(down_types):
        c_in, c_out = c_out, channels[i]
        hh, ww = sizes[-1]
        sampler = None
        resnets = [(c_in if j == 0 else c_out, c_out) for j in range(lpb[i])]
        if kind in ADDED_KV_DOWN:
            if i < nb - 1:  # ResnetBlock2D(down=True): a 2×2 average pool
                h2, w2 = hh // 2, ww // 2
                sampler = resnet_resample(c_out, hh, ww, h2, w2, temb_channels=temb, scale_shift=scale_shift, up=False)
                sizes.append((h2, w2))
            downs.append(added_kv_block(resnet_channels=resnets, height=hh, width=ww, temb_channels=temb,
                                        scale_shift=scale_shift,
                                        attention=added_kv(i) if kind == "SimpleCrossAttnDownBlock2D" else None,
                                        sampler=sampler, sampler_name="downsamplers", formula=kind))
            continue
        if i < nb - 1:
            sampler, h2, w2 = downsample(c_out, hh, ww, config["downsample_padding"])
            sizes.append((h2, w2))
        downs.append(unet_block(
            resnet_channels=resnets, height=hh, width=ww,
            temb_channels=temb, scale_shift=scale_shift,
            attention=attn(i, only[i]) if kind == "CrossAttnDownBlock2D" else None,
            transformer_layers=_per_layer(tlpb[i], lpb[i], "transformer_layers_per_block", comp),
            sampler=sampler, sampler_name="downsamplers",
            formula=kind, identity_layers=[identity(f"down_blocks.{i}.attentions.{j}", k) for j, k in enumerate(
                _per_layer(tlpb[i], lpb[i], "transformer_layers_per_block", comp))],
        ))

    # mid
    hm, wm = sizes[-1]
    top = channels[-1]
    mid = None
    if config["mid_block_type"] == "UNetMidBlock2DCrossAttn":
        res = resnet_block(top, top, hm, wm, temb_channels=temb, scale_shift=scale_shift)
        layers = _per_layer(tlpb[-1], 1, "transformer_layers_per_block", comp)
        mid = Node("mid_block", children=(
            module_list("attentions", [spatial_transformer(top, height=hm, width=wm, layers=k, **attn(nb - 1, False),
                                                           identity_layers=identity(f"mid_block.attentions.{j}", k))
                                       for j, k in enumerate(layers)]),
            module_list("resnets", [res] * (1 + len(layers))),
        ), formula="UNetMidBlock2DCrossAttn")
    elif config["mid_block_type"] == "UNetMidBlock2DSimpleCrossAttn":
        # unet_2d_condition.py:329-336: mid_block_only_cross_attention, or the one only_cross_attention flag
        mid_only = config["mid_block_only_cross_attention"]
        if mid_only is None:
            mid_only = config["only_cross_attention"] if isinstance(config["only_cross_attention"], bool) else False
        mid = added_kv_mid_block(top, hm, wm, temb_channels=temb, scale_shift=scale_shift, head_dim=head_dims[-1],
                                 context_tokens=t, context_dim=cross[-1], only_cross=bool(mid_only),
                                 norm_cross=norm_cross)
    elif config["mid_block_type"] == "UNetMidBlock2D":
        mid = Node("mid_block", children=(module_list("resnets", [
            resnet_block(top, top, hm, wm, temb_channels=temb, scale_shift=scale_shift)]),), formula="UNetMidBlock2D")

    # up: channel bookkeeping of UNet2DConditionModel.__init__ and the up blocks' constructors
    rev_ch, rev_heads, rev_cross, rev_lpb = channels[::-1], heads[::-1], cross[::-1], lpb[::-1]
    ups, out_c = [], rev_ch[0]
    for i, kind in enumerate(up_types):
        prev, out_c = out_c, rev_ch[i]
        skip_in = rev_ch[min(i + 1, nb - 1)]
        layers = rev_lpb[i] + 1
        hh, ww = sizes[nb - 1 - i]
        resnets = [((prev if j == 0 else out_c) + (skip_in if j == layers - 1 else out_c), out_c)
                   for j in range(layers)]
        if kind in ADDED_KV_UP:
            sampler = None
            if i < nb - 1:  # ResnetBlock2D(up=True) doubles the map; the next level's skip must match
                if _known_mismatch(sizes[nb - 2 - i], (2 * hh, 2 * ww)):
                    raise ResolutionError(f"{comp}: {kind} doubles a {hh}×{ww} latent level to {2 * hh}×{2 * ww}, "
                                          f"but the skip connection is {sizes[nb - 2 - i][0]}×{sizes[nb - 2 - i][1]}: "
                                          f"the latent must divide by {2 ** (nb - 1)} (the real model fails too)")
                sampler = resnet_resample(out_c, hh, ww, 2 * hh, 2 * ww, temb_channels=temb, scale_shift=scale_shift,
                                          up=True)
            ups.append(added_kv_block(resnet_channels=resnets, height=hh, width=ww, temb_channels=temb,
                                      scale_shift=scale_shift,
                                      attention=added_kv(i, up=True) if kind == "SimpleCrossAttnUpBlock2D" else None,
                                      sampler=sampler, sampler_name="upsamplers", formula=kind))
            continue
        sampler = upsample(out_c, *sizes[nb - 2 - i]) if i < nb - 1 else None
        ups.append(unet_block(
            resnet_channels=resnets,
            height=hh, width=ww, temb_channels=temb, scale_shift=scale_shift,
            attention={"heads": rev_heads[i], "context_tokens": t, "context_dim": rev_cross[i],
                       "linear_projection": linear, "only_cross_attention": only[::-1][i], "ip_tokens": ip_tokens}
            if kind == "CrossAttnUpBlock2D" else None,
            transformer_layers=_per_layer(rev_tlpb[i], layers, "reverse_transformer_layers_per_block", comp),
            sampler=sampler, sampler_name="upsamplers",
            formula=kind, identity_layers=[identity(f"up_blocks.{i}.attentions.{j}", k) for j, k in enumerate(
                _per_layer(rev_tlpb[i], layers, "reverse_transformer_layers_per_block", comp))],
        ))

    k_in, k_out = positive_int(config, "conv_in_kernel"), positive_int(config, "conv_out_kernel")
    children = [Node("conv_in", ops.conv2d(positive_int(config, "in_channels"), c0, k_in, h, w)), *embeddings,
                module_list("down_blocks", downs)]
    if mid is not None:
        children.append(mid)
    children.append(module_list("up_blocks", ups))
    if config["norm_num_groups"] is not None:
        children.append(Node("conv_norm_out", ops.group_norm(c0, h * w) + ops.activation(c0 * h * w)))
    children.append(Node("conv_out", ops.conv2d(c0, count_int(config, "out_channels"), k_out, h, w)))
    return Node("unet", children=tuple(children), formula="unet_2d_condition")


def _untrained_variants(tree: Node, checkpointing: bool) -> str | None:
    """Kandinsky 2.2's UNets, measured forward + backward (validation/configs/kandinsky-2.2-*-tiny): the
    image-embedding one matches the graph below without checkpointing; with ``image_hint`` the hint's
    convolutions make ``conv_in``'s input need a gradient, and ``UNetMidBlock2DSimpleCrossAttn`` wraps none
    of its resnets (unet_2d_blocks.py), which the patterns below cannot tell apart."""
    add = tree.find("add_embedding")
    if add is not None and add.find("input_hint_block") is not None:
        return "addition_embed_type image_hint (the control hint feeds conv_in through trained convolutions)"
    mid = tree.find("mid_block")
    if checkpointing and mid is not None and mid.formula == "UNetMidBlock2DSimpleCrossAttn":
        return ("gradient checkpointing with UNetMidBlock2DSimpleCrossAttn (it checkpoints none of its resnets); "
                "without --gradient-checkpointing it is counted")
    return None


def _list(tree: Node, path: str) -> list[int]:
    """The indices of the ``ModuleList`` at ``path`` (none when absent)."""
    node = tree.find(path)
    out: list[int] = []
    for child in () if node is None else node.children:
        out += list(range(child.span[0], child.span[1] + 1)) if child.span is not None else [int(child.name)]
    return out


def _resnet(tree: Node, p: str) -> list[Step]:
    """``ResnetBlock2D.forward`` (resnet.py:319-373): conv1, + time_emb_proj(temb) (conditioning), conv2, the
    shortcut conv on the input where the block has one, the residual sum."""
    steps: list[Step] = [Layer(f"{p}.conv1", ("x",), "h"), Layer(f"{p}.conv2", ("h",), "h")]
    if tree.find(f"{p}.conv_shortcut") is not None:
        steps.append(Layer(f"{p}.conv_shortcut", ("x",), "x"))
    return [*steps, Join(("x", "h"), "x")]


def _transformer(tree: Node, p: str) -> list[Step]:
    """``Transformer2DModel`` (transformer_2d.py:464-511: proj_in, the blocks, proj_out, + the input) of
    ``BasicTransformerBlock``s (attention.py:1005-1075): self-attention on the tokens, cross-attention whose
    keys and values read the text encoder states as given (never a gradient), the feed-forward; each adds
    to the tokens."""
    steps: list[Step] = [Layer(f"{p}.proj_in", ("x",), "t")]
    for k in _list(tree, f"{p}.transformer_blocks"):
        b = f"{p}.transformer_blocks.{k}"
        for attn, kv in (("attn1", "t"), ("attn2", "text")):
            if tree.find(f"{b}.{attn}") is None:
                continue
            steps += [Layer(f"{b}.{attn}.to_q", ("t",), "q"), Layer(f"{b}.{attn}.to_k", (kv,), "k"),
                      Layer(f"{b}.{attn}.to_v", (kv,), "v"), Attend(f"{b}.{attn}", ("q",), ("k",), ("v",), "o"),
                      Layer(f"{b}.{attn}.to_out.0", ("o",), "a"), Join(("t", "a"), "t")]
        steps += [Layer(f"{b}.ff.net.0.proj", ("t",), "f"), Layer(f"{b}.ff.net.2", ("f",), "f"), Join(("t", "f"), "t")]
    return [*steps, Layer(f"{p}.proj_out", ("t",), "o"), Join(("x", "o"), "x")]


_KINDS = {"down_blocks": ("CrossAttnDownBlock2D", "DownBlock2D"), "up_blocks": ("CrossAttnUpBlock2D", "UpBlock2D"),
          "mid_block": ("UNetMidBlock2DCrossAttn", "UNetMidBlock2D")}


def _lora_steps(tree: Node) -> tuple[Step, ...]:
    """``UNet2DConditionModel.forward`` in order (unet_2d_condition.py:1108-1230): conv_in; each down block's
    resnets, each followed by its attention (unet_2d_blocks.py CrossAttnDownBlock2D.forward), then its
    downsampler, every output kept as a skip; the mid block (resnets[0], then attention and resnet pairs); each up
    block's resnets on cat([x, skip]) (unet_2d_blocks.py:2444), each followed by its attention, then its
    upsampler; conv_out. (``UNetMidBlock2D``, as UNet2DConditionModel builds it: one resnet, no attention.)"""
    for name, kinds in _KINDS.items():
        blocks = [tree.find(name)] if name == "mid_block" else list(tree.find(name).children)
        for block in blocks:
            if block is not None and block.formula not in kinds:
                raise FlopcalcError(f"LoRA training is not modelled for a UNet with {block.formula} ({name}); "
                                    f"it is for {', '.join(k for ks in _KINDS.values() for k in ks)}")
    steps: list[Step] = [Layer("conv_in", ("latents",), "x")]
    skips = 0

    def keep() -> None:
        nonlocal skips
        steps.append(Join(("x",), f"skip{skips}"))
        skips += 1

    keep()
    for i in _list(tree, "down_blocks"):
        p = f"down_blocks.{i}"
        for j in _list(tree, f"{p}.resnets"):
            steps.extend(_resnet(tree, f"{p}.resnets.{j}"))
            if tree.find(f"{p}.attentions.{j}") is not None:
                steps.extend(_transformer(tree, f"{p}.attentions.{j}"))
            keep()
        if tree.find(f"{p}.downsamplers.0.conv") is not None:
            steps.append(Layer(f"{p}.downsamplers.0.conv", ("x",), "x"))
            keep()
    if tree.find("mid_block") is not None:
        steps.extend(_resnet(tree, "mid_block.resnets.0"))
        for j in _list(tree, "mid_block.attentions"):
            steps += [*_transformer(tree, f"mid_block.attentions.{j}"), *_resnet(tree, f"mid_block.resnets.{j + 1}")]
    for i in _list(tree, "up_blocks"):
        p = f"up_blocks.{i}"
        for j in _list(tree, f"{p}.resnets"):
            skips -= 1
            steps.append(Join(("x", f"skip{skips}"), "x"))
            steps.extend(_resnet(tree, f"{p}.resnets.{j}"))
            if tree.find(f"{p}.attentions.{j}") is not None:
                steps.extend(_transformer(tree, f"{p}.attentions.{j}"))
        if tree.find(f"{p}.upsamplers.0.conv") is not None:
            steps.append(Layer(f"{p}.upsamplers.0.conv", ("x",), "x"))
    return (*steps, Layer("conv_out", ("x",), "out"))


gradient_graph(
    "UNet2DConditionModel",
    # unet_2d_condition.py:1082, 922, 1108: time_embedding and add_embedding read sinusoidal projections
    # (and SDXL's pooled text embedding), conv_in the latents; every cross-attention's to_k/to_v reads the
    # text encoder states as given (no encoder_hid_proj in the supported configs)
    input_layers=("conv_in", "time_embedding.linear_1", "add_embedding.linear_1", "**.attn2.to_k",
                  "**.attn2.to_v", "add_embedding.image_proj", "encoder_hid_proj.image_embeds"),
    # unet_2d_blocks.py: each resnet of the down/up blocks is checkpointed, of the mid block all but the first
    # (UNetMidBlock2DCrossAttn.forward runs resnets[0] directly); transformer_2d.py:416: each
    # BasicTransformerBlock. Not recomputed (torch's early stop): a resnet's conv_shortcut, else its conv2;
    # a transformer block's ff.net.2.
    checkpointed=(Checkpointed("down_blocks.*.resnets.*", ("conv_shortcut", "conv2")),
                  Checkpointed("up_blocks.*.resnets.*", ("conv_shortcut", "conv2")),
                  Checkpointed("mid_block.resnets.1:", ("conv_shortcut", "conv2")),
                  Checkpointed("**.transformer_blocks.*", ("ff.net.2",))),
    source="diffusers/models/unets/unet_2d_condition.py:1082-1108, unet_2d_blocks.py, transformer_2d.py:416",
    refuses=_untrained_variants,
    lora=LoraFlow(
        steps=_lora_steps,
        # the timestep (and SDXL's added time/text) embedding and each resnet's time_emb_proj read temb only
        frozen=("time_embedding.**", "add_embedding.**", "**.time_emb_proj"),
        default_targets=("to_k", "to_q", "to_v", "to_out.0"),
        targets_source="diffusers examples/text_to_image/train_text_to_image_lora.py and train_text_to_image_lora_sdxl.py, "
                       "main(): unet_lora_config = LoraConfig(..., target_modules=['to_k', 'to_q', 'to_v', 'to_out.0'])",
        source="diffusers/models/unets/unet_2d_condition.py:1108-1230, unet_2d_blocks.py, resnet.py:319-373, "
               "transformers/transformer_2d.py:464-511, attention.py:1005-1075",
        lists=("down_blocks", "up_blocks", "resnets", "attentions", "transformer_blocks", "downsamplers", "upsamplers"),
    ),
)


def _k_sampler_buffers(config: Config) -> tuple:
    """The k-diffusion samplers' non-persistent float32 ``kernel`` (4×4: the outer product of the 1-D FIR kernel,
    ``KDownsample2D`` / ``KUpsample2D``, models/downsampling.py:268, upsampling.py:339) of every K down / up block
    but the last level's; a UNet of other blocks has no buffers."""
    from flopcalc.engine.loading import Buffer

    down, up = list(config["down_block_types"]), list(config["up_block_types"])
    last = len(config["block_out_channels"]) - 1
    return (tuple(Buffer(f"down_blocks.{i}.downsamplers.0.kernel", 16, "float32") for i, t in enumerate(down)
                  if t in K_DOWN and i < last)
            + tuple(Buffer(f"up_blocks.{i}.upsamplers.0.kernel", 16, "float32") for i, t in enumerate(up)
                    if t in K_UP and i < last))


loading_rules("UNet2DConditionModel", buffers=_k_sampler_buffers,
              source="diffusers/models/downsampling.py:268, models/upsampling.py:339")
