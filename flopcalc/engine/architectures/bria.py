"""Bria transformers: ``BriaTransformer2DModel`` (diffusers ``models/transformers/transformer_bria.py``, BRIA 3.x).

The FLUX.1 MMDiT without a pooled-text or guidance embedding: the pipeline packs the ``C × H/8 × W/8`` latent into
2×2 patches (``N = (H/16)(W/16)`` tokens of ``in_channels = 4C`` features), T5 gives ``T`` text tokens (zero-padded
to ``max_sequence_length`` by the pipeline), the timestep alone conditions the blocks (``time_embed``:
``BriaTimestepProjEmbeddings``, a sinusoidal projection and ``timestep_embedder``). The blocks are FLUX's
(``BriaTransformerBlock`` :364-445, ``BriaSingleTransformerBlock`` :449-501: the same layers as
``FluxTransformerBlock`` / ``FluxSingleTransformerBlock``), so their formulas are FLUX's
(:mod:`flopcalc.formulas.mmdit_joint_block`, :mod:`flopcalc.formulas.single_stream_block`). ``guidance_embeds``
cannot be built in diffusers 0.42.1 (``BriaTimestepProjEmbeddings`` is called without its ``time_theta``): refused.
Rotary embeddings (``BriaEmbedND``) are elementwise and parameter-free.
"""

from __future__ import annotations

from flopcalc.engine.config import (
    FLAG, LAYERS, NULL, SIZE, Config, Int, ListOf, boolean, count_int, declare_keys, positive_int,
)
from flopcalc.engine.cost import Node, module_list
from flopcalc.engine.errors import ConfigError
from flopcalc.engine.registry import RunShape, register
from flopcalc.formulas import ops
from flopcalc.formulas.conditioning import ada_layer_norm_continuous, mlp_embedder
from flopcalc.formulas.mmdit_joint_block import mmdit_joint_block
from flopcalc.formulas.single_stream_block import single_stream_block

SOURCE = "diffusers/models/transformers/transformer_bria.py"

#: ``BriaTransformer2DModel.__init__`` keyword defaults (transformer_bria.py:528-542).
DEFAULTS = {
    "patch_size": 1,
    "in_channels": 64,
    "num_layers": 19,
    "num_single_layers": 38,
    "attention_head_dim": 128,
    "num_attention_heads": 24,
    "joint_attention_dim": 4096,
    "pooled_projection_dim": None,
    "guidance_embeds": False,
    "axes_dims_rope": [16, 56, 56],
}

#: The pipelines pack 2×2 latent patches into one token.
PACKING = 2

declare_keys("BriaTransformer2DModel", {
    "patch_size": SIZE, "in_channels": SIZE, "num_layers": LAYERS, "num_single_layers": LAYERS,
    "attention_head_dim": SIZE, "num_attention_heads": SIZE, "joint_attention_dim": SIZE,
    "pooled_projection_dim": SIZE | NULL, "guidance_embeds": FLAG, "axes_dims_rope": ListOf(Int(0), lo=1),
})


def rotary_head_dim(config: Config) -> int:
    """The head width, which the rotary axes must fill exactly (``apply_rotary_emb`` multiplies per channel)."""
    head_dim = positive_int(config, "attention_head_dim")
    axes = config["axes_dims_rope"]
    if sum(axes) != head_dim:
        raise ConfigError(f"{config.component}/config.json: sum(axes_dims_rope) = {sum(axes)} must equal "
                          f"attention_head_dim {head_dim} (the rotary table spans one head)")
    return head_dim


def bria_trunk(config: Config, n, t, guidance: bool) -> tuple[Node, ...]:
    """What the Bria transformers share on ``n`` image and ``t`` text tokens: ``time_embed`` (and
    ``guidance_embed``), ``context_embedder``, ``x_embedder``, and the FLUX double- and single-stream blocks."""
    heads, head_dim = positive_int(config, "num_attention_heads"), rotary_head_dim(config)
    dim = heads * head_dim
    embeds = [Node("time_embed", children=(mlp_embedder("timestep_embedder", 256, dim),))]
    if guidance:
        embeds.append(Node("guidance_embed", children=(mlp_embedder("timestep_embedder", 256, dim),)))
    joint = mmdit_joint_block(dim=dim, heads=heads, head_dim=head_dim, image_tokens=n, text_tokens=t,
                              qk_norm="rms_norm")
    single = single_stream_block(dim=dim, heads=heads, head_dim=head_dim, tokens=n + t)
    return (*embeds,
            Node("context_embedder", ops.linear(t, positive_int(config, "joint_attention_dim"), dim)),
            Node("x_embedder", ops.linear(n, positive_int(config, "in_channels"), dim)),
            module_list("transformer_blocks", [joint] * count_int(config, "num_layers")),
            module_list("single_transformer_blocks", [single] * count_int(config, "num_single_layers")))


def bria_head(config: Config, n) -> tuple[Node, Node]:
    """``norm_out`` and ``proj_out`` (d → p²·in_channels: ``out_channels = in_channels``) on the image tokens."""
    dim = positive_int(config, "num_attention_heads") * positive_int(config, "attention_head_dim")
    patch, c = positive_int(config, "patch_size"), positive_int(config, "in_channels")
    return ada_layer_norm_continuous("norm_out", dim, dim, n), Node("proj_out", ops.linear(n, dim, patch * patch * c))


def packed_tokens(shape: RunShape):
    return ops.exact_div(shape.latent_height, PACKING) * ops.exact_div(shape.latent_width, PACKING)


@register("BriaTransformer2DModel", role="denoiser", defaults=DEFAULTS, source=SOURCE)
def bria_transformer(config: Config, shape: RunShape) -> Node:
    """``BriaTransformer2DModel.forward`` (:583-714) on ``N`` packed image tokens and ``shape.text_len``."""
    if boolean(config, "guidance_embeds"):
        raise ConfigError(f"{config.component}/config.json: guidance_embeds true cannot be built by diffusers 0.42.1's "
                          "BriaTransformer2DModel (BriaTimestepProjEmbeddings(embedding_dim) misses time_theta)")
    n = packed_tokens(shape)
    return Node("transformer", children=(*bria_trunk(config, n, shape.text_len, False), *bria_head(config, n)),
                formula="bria_transformer")


# --------------------------------------------------------------------------- BRIA FIBO

#: ``BriaFiboTransformer2DModel.__init__`` keyword defaults (transformer_bria_fibo.py:447-463): Bria's, plus the
#: text encoder's width ``text_encoder_dim`` the caption projections read.
FIBO_DEFAULTS = {**DEFAULTS, "text_encoder_dim": 2048}
FIBO_SOURCE = "diffusers/models/transformers/transformer_bria_fibo.py"

declare_keys("BriaFiboTransformer2DModel", {
    "patch_size": SIZE, "in_channels": SIZE, "num_layers": LAYERS, "num_single_layers": LAYERS,
    "attention_head_dim": SIZE, "num_attention_heads": SIZE, "joint_attention_dim": SIZE,
    "pooled_projection_dim": SIZE | NULL, "guidance_embeds": FLAG, "axes_dims_rope": ListOf(Int(0), lo=1),
    "text_encoder_dim": SIZE,
})


def caption_projections(config: Config, t) -> Node:
    """``caption_projection``: one ``BriaFiboTextProjection`` per block (``num_layers + num_single_layers``), a
    bias-free linear ``text_encoder_dim`` → d/2 on the ``t`` text tokens of one text-encoder layer each (:294-301,
    :580-584); the block's text stream is ``context_embedder``'s first d/2 features joined with it."""
    dim = positive_int(config, "num_attention_heads") * positive_int(config, "attention_head_dim")
    if dim % 2:
        raise ConfigError(f"{config.component}/config.json: the width num_attention_heads × attention_head_dim = {dim} "
                          "must be even (each block's text stream is two halves of d/2)")
    blocks = count_int(config, "num_layers") + count_int(config, "num_single_layers")
    proj = Node("proj", children=(Node("linear", ops.linear(t, positive_int(config, "text_encoder_dim"), dim // 2,
                                                             bias=False)),))
    return module_list("caption_projection", [proj] * blocks)


@register("BriaFiboTransformer2DModel", role="denoiser", defaults=FIBO_DEFAULTS, source=FIBO_SOURCE)
def bria_fibo_transformer(config: Config, shape: RunShape) -> Node:
    """``BriaFiboTransformer2DModel.forward`` (:511-644) on the image tokens (``BriaFiboPipeline`` packs none by
    default: ``N = (H/16)(W/16)`` latent pixels of its ×16 VAE, one token each; ``shape.reference_tokens`` more for the edit
    pipeline's image) and ``shape.text_len``. ``guidance_embed`` (``guidance_embeds``) holds parameters; the
    pipelines pass no guidance, so it never runs."""
    n = shape.latent_height * shape.latent_width  # do_patching=False (the default): one token per latent pixel
    if shape.reference_tokens is not None:
        n = n + shape.reference_tokens
    t = shape.text_len
    trunk = list(bria_trunk(config, n, t, False))
    if boolean(config, "guidance_embeds"):
        dim = positive_int(config, "num_attention_heads") * positive_int(config, "attention_head_dim")
        trunk.insert(1, Node("guidance_embed", children=(mlp_embedder("timestep_embedder", 256, dim, tokens=0),)))
    return Node("transformer", children=(*trunk, *bria_head(config, n), caption_projections(config, t)),
                formula="bria_fibo_transformer")


__all__ = ["bria_head", "bria_trunk", "packed_tokens", "rotary_head_dim"]
