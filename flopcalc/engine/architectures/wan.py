"""Wan 2.1 video transformer: ``WanTransformer3DModel`` (diffusers
``models/transformers/transformer_wan.py``); block formulas in ``formulas/wan.py``.

The model sees the ``z × T × h × w`` video latent (``T`` latent frames, ``h × w`` = H/8 × W/8) and
``L`` text tokens (UMT5 hidden states of width ``text_dim``):

* ``rope`` (``WanRotaryPosEmbed``): cos/sin tables built at init (buffers, no parameters), sliced and
  expanded per call; applied elementwise in the attention processor: no counted work;
* ``patch_embedding``: ``nn.Conv3d(z, d, kernel=stride=patch_size)`` into
  ``N = (T/p_t)(h/p_h)(w/p_w)`` tokens (the real code floors each side);
* ``condition_embedder``: timestep MLP (``freq_dim`` → d → d), ``time_proj`` (d → 6d) and the text
  projection (``text_dim`` → d → d on the L tokens); the timestep MLP and ``time_proj`` run once, or
  once per token when the pipeline expands the timestep (Wan 2.2 TI2V, ``expand_timesteps``: a
  ``(batch, N)`` timestep, ``RunShape.timestep_tokens``; ``forward`` flattens it, line ``timestep.ndim == 2``);
* ``num_layers`` ``WanTransformerBlock``s: self-attention over all N tokens, cross-attention to the L
  text tokens, feed-forward of width ``ffn_dim``;
* ``norm_out`` (``FP32LayerNorm``, no affine), ``proj_out`` (d → ``out_channels``·p_t·p_h·p_w), and
  a ``scale_shift_table`` (2d).

Image-to-video configs (Wan 2.1 I2V, ``WanImageToVideoPipeline``): ``image_dim`` adds
``condition_embedder.image_embedder`` on the ``I`` CLIP image tokens (``RunShape.image_tokens``), which
``forward`` puts before the text tokens; ``added_kv_proj_dim`` gives every ``attn2`` added k/v projections,
and its processor splits the context at a hard-coded 512 text tokens (``image_context_length =
encoder_hidden_states.shape[1] − 512``, Python slicing: :func:`context_split`). FLF2V configs
(``pos_embed_seq_len``) are refused.
"""

from __future__ import annotations

from math import prod
from typing import Any

from flopcalc.engine.gradients import gradient_graph
from flopcalc.engine.gradients import Blocks, Join, Layer, LoraFlow
from flopcalc.engine.config import (
    FLAG, LAYERS, NULL, SIZE, TEXT, Config, ListOf, count_int, declare_keys, positive_int,
)
from flopcalc.engine.cost import Node, module_list
from flopcalc.engine.errors import ConfigError, ResolutionError
from flopcalc.formulas import ops
from flopcalc.formulas.wan import I2V_BLOCK_FLOW, wan_condition_embedder, wan_image_embedder, wan_transformer_block
from flopcalc.formulas.transformer_parts import self_cross_block_flow
from flopcalc.engine.registry import RunShape, register
from flopcalc.engine.loading import Buffer, loading_rules

#: ``WanTransformer3DModel.__init__`` keyword defaults (transformer_wan.py).
DEFAULTS = {
    "patch_size": [1, 2, 2],
    "num_attention_heads": 40,
    "attention_head_dim": 128,
    "in_channels": 16,
    "out_channels": 16,
    "text_dim": 4096,
    "freq_dim": 256,
    "ffn_dim": 13824,
    "num_layers": 40,
    "cross_attn_norm": True,
    "qk_norm": "rms_norm_across_heads",
    "eps": 1e-6,
    "image_dim": None,
    "added_kv_proj_dim": None,
    "rope_max_seq_len": 1024,
    "pos_embed_seq_len": None,
}
SOURCE = "diffusers/models/transformers/transformer_wan.py"


def patch_size(config: Config) -> tuple[int, int, int]:
    """``patch_size`` as ``(p_t, p_h, p_w)``, each a positive integer."""
    value = config["patch_size"]
    if (not isinstance(value, (list, tuple)) or len(value) != 3
            or any(isinstance(p, bool) or not isinstance(p, int) or p <= 0 for p in value)):
        raise ConfigError(f"{config.component}/config.json: 'patch_size' must be three positive integers "
                          f"(t, h, w), got {value!r}")
    return int(value[0]), int(value[1]), int(value[2])


def floor_div(size: Any, k: int) -> Any:
    """``size // k`` as the real code floors it (a strided convolution, ``num_frames // p_t``); on a
    symbol, ``size / k`` (a law holds for sizes that divide)."""
    if k == 1:
        return size
    return size // k if isinstance(size, int) else size / k


#: ``WanAttnProcessor``: ``image_context_length = encoder_hidden_states.shape[1] - 512``.
PROCESSOR_TEXT_TOKENS = 512


def context_split(context: Any) -> tuple[Any, Any]:
    """``(image, text)`` context lengths as ``WanAttnProcessor`` slices a context of ``context`` tokens
    when the attention has added k/v: ``[:c]`` and ``[c:]`` with ``c = context − 512`` (Python slicing,
    so a negative ``c`` counts from the end). On a symbol: the ``c ≥ 0`` branch (the plan refuses a law
    otherwise)."""
    c = context - PROCESSOR_TEXT_TOKENS
    if not isinstance(context, int):
        return c, PROCESSOR_TEXT_TOKENS
    return len(range(context)[:c]), len(range(context)[c:])


def _refuse_first_last_frame(config: Config) -> None:
    if config["pos_embed_seq_len"] is not None:
        raise ConfigError(f"{config.component}/config.json: pos_embed_seq_len is set: a first-last-frame (FLF2V) Wan "
                          "transformer, which flopcalc does not plan; leave pos_embed_seq_len null")


#: Every config key ``WanTransformer3DModel`` reads (assemblers and pipeline plan), as
#: :func:`flopcalc.engine.config.declare_keys` validates it.
declare_keys("WanTransformer3DModel", {
    "patch_size": ListOf(SIZE, lo=3, hi=3), "num_attention_heads": SIZE, "attention_head_dim": SIZE,
    "in_channels": SIZE, "out_channels": SIZE | NULL, "text_dim": SIZE, "freq_dim": SIZE, "ffn_dim": SIZE,
    "num_layers": LAYERS, "cross_attn_norm": FLAG, "qk_norm": TEXT | NULL, "image_dim": SIZE | NULL,
    "added_kv_proj_dim": SIZE | NULL, "rope_max_seq_len": SIZE, "pos_embed_seq_len": SIZE | NULL,
})


def latent_tokens(config: Config, shape: RunShape) -> Any:
    """``N = (T/p_t)(h/p_h)(w/p_w)``: the tokens ``patch_embedding`` makes of the latent (each side floored)."""
    pt, ph, pw = patch_size(config)
    frames = 1 if shape.latent_frames is None else shape.latent_frames
    grid = (floor_div(frames, pt), floor_div(shape.latent_height, ph), floor_div(shape.latent_width, pw))
    if any(isinstance(g, int) and g == 0 for g in grid):
        raise ResolutionError(f"{config.component}: a latent of {frames}×{shape.latent_height}×{shape.latent_width} "
                              f"(frames × height × width) is smaller than one {pt}×{ph}×{pw} patch")
    return grid[0] * grid[1] * grid[2]


@register("WanTransformer3DModel", role="denoiser", defaults=DEFAULTS, source=SOURCE)
def wan_transformer(config: Config, shape: RunShape) -> Node:
    _refuse_first_last_frame(config)
    heads = positive_int(config, "num_attention_heads")
    head_dim = positive_int(config, "attention_head_dim")
    dim = heads * head_dim
    in_channels = positive_int(config, "in_channels")
    out_channels = config["out_channels"] or in_channels
    pt, ph, pw = patch_size(config)
    n = latent_tokens(config, shape)
    text = shape.text_len
    image_dim, added_kv = config["image_dim"], config["added_kv_proj_dim"]
    images = shape.image_tokens if image_dim is not None and shape.image_tokens is not None else 0
    context, image_context = images + text, 0  # forward: concat([image, text]) when image embeddings are given
    if added_kv is not None:
        image_context, context = context_split(context)
    block = wan_transformer_block(dim=dim, heads=heads, head_dim=head_dim, ffn_dim=positive_int(config, "ffn_dim"),
                                  tokens=n, text_tokens=context, cross_attn_norm=bool(config["cross_attn_norm"]),
                                  image_tokens=image_context,
                                  added_kv_dim=None if added_kv is None else positive_int(config, "added_kv_proj_dim"))
    image = None
    if image_dim is not None:
        image = wan_image_embedder(image_dim=positive_int(config, "image_dim"), dim=dim, image_tokens=images)
    return Node(
        "transformer",
        children=(
            Node("patch_embedding", ops.conv(in_channels, dim, pt * ph * pw, n)),
            wan_condition_embedder(dim=dim, freq_dim=positive_int(config, "freq_dim"),
                                   text_dim=positive_int(config, "text_dim"), text_tokens=text,
                                   timesteps=1 if shape.timestep_tokens is None else shape.timestep_tokens,
                                   image=image),
            module_list("blocks", [block] * count_int(config, "num_layers")),
            Node("norm_out", ops.layer_norm(n, dim, affine=False, thop_rule=False)),
            Node("proj_out", ops.linear(n, dim, out_channels * prod((pt, ph, pw)))),
            Node("scale_shift_table", ops.parameters(2 * dim)),
        ),
        formula="wan_transformer",
    )


def _lora_steps(image: bool) -> tuple:
    """The LoRA dataflow of a text-to-video config, or with ``image`` of an image-to-video one (``image_dim``,
    ``added_kv_proj_dim``: the embedded CLIP tokens ``clip``, put before the text states, feed every ``attn2``)."""
    embed_image = (
        # :349 image_embedder (WanImageEmbedding :296-305) on the CLIP image states
        Layer("condition_embedder.image_embedder.ff.net.0.proj", ("image",), "ih"),
        Layer("condition_embedder.image_embedder.ff.net.2", ("ih",), "clip"),
        Join(("clip", "txt"), "ctx"),  # :694 torch.concat([encoder_hidden_states_image, encoder_hidden_states])
    ) if image else ()
    return (
        Layer("patch_embedding", ("latents",), "img"),  # transformer_wan.py:670
        # :683 condition_embedder: text_embedder (PixArtAlphaTextProjection) on the UMT5 states
        Layer("condition_embedder.text_embedder.linear_1", ("text",), "t"),
        Layer("condition_embedder.text_embedder.linear_2", ("t",), "txt"),
        *embed_image,
        # WanTransformerBlock.forward :462-504
        Blocks("blocks", I2V_BLOCK_FLOW if image else self_cross_block_flow("ffn")),
        Layer("proj_out", ("img",), "out"),  # :724
    )


gradient_graph(
    "WanTransformer3DModel",
    # transformer_wan.py:670, 683: patch_embedding(latents); condition_embedder: time_embedder.linear_1 reads
    # the sinusoidal projection, text_embedder.linear_1 the UMT5 states (time_proj reads silu(temb): it needs one)
    input_layers=("patch_embedding", "condition_embedder.time_embedder.linear_1",
                  "condition_embedder.text_embedder.linear_1"),
    # (I2V: the image embedder's first linear reads its affine norm1's output, which needs a gradient)
    checkpointed=("blocks.*",),  # transformer_wan.py:699
    source="diffusers/models/transformers/transformer_wan.py:670-699",
    lora=LoraFlow(
        steps=lambda tree: _lora_steps(tree.find("condition_embedder.image_embedder") is not None),
        lists=("blocks",),
        # the timestep embedder and time_proj (the blocks' modulation) read the timestep only
        frozen=("condition_embedder.time_embedder.**", "condition_embedder.time_proj"),
        default_targets=(),
        targets_source="diffusers has no LoRA training example for Wan: --lora-targets names them",
        source="diffusers/models/transformers/transformer_wan.py:88-159, 296-305, 462-504, 670-724",
    ),
)


#: transformer_wan.py:549: ``_keep_in_fp32_modules``, applied for every dtype (model_loading_utils.py:238).
KEEP_IN_FP32 = ("rope", "time_embedder", "scale_shift_table", "norm1", "norm2", "norm3")


def rotary_buffers(config: Config) -> tuple[Buffer, ...]:
    """transformer_wan.py:392-393: ``WanRotaryPosEmbed``'s float32 cos/sin tables, max_seq_len (1024) × head_dim each."""
    return tuple(Buffer(f"rope.freqs_{f}", 1024 * positive_int(config, "attention_head_dim"), "float32")
                 for f in ("cos", "sin"))


loading_rules("WanTransformer3DModel", keep_in_fp32=KEEP_IN_FP32, buffers=rotary_buffers,
              source="diffusers/models/transformers/transformer_wan.py:392, 549")
