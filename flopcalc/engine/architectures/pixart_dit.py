"""Class- and caption-conditioned DiTs built from ``BasicTransformerBlock``:
``PixArtTransformer2DModel`` (diffusers ``models/transformers/pixart_transformer_2d.py``) and
``DiTTransformer2DModel`` (``models/transformers/dit_transformer_2d.py``). Their Hub configs may
still say ``Transformer2DModel``; :func:`flopcalc.engine.config.class_name_of` remaps them by
``norm_type`` as diffusers does.

Both patchify the latent with a strided convolution (``PatchEmbed``) into
``N = (h/p)(w/p)`` tokens.
"""

from __future__ import annotations

from flopcalc.engine.gradients import gradient_graph
from flopcalc.engine.gradients import Blocks, Layer, LoraFlow
from flopcalc.engine.config import FLAG, LAYERS, NULL, SIZE, Choice, Config, count_int, declare_keys, positive_int
from flopcalc.engine.cost import Node, module_list, work_only
from flopcalc.engine.errors import ResolutionError
from flopcalc.formulas import ops
from flopcalc.formulas.conditioning import mlp_embedder
from flopcalc.formulas.cross_attention_block import (
    cross_attention_block,
    timestep_label_embedding,
)
from flopcalc.formulas.transformer_parts import self_cross_block_flow
from flopcalc.engine.perturbed_attention import selected, supports_perturbation
from flopcalc.engine.registry import RunShape, register
from flopcalc.engine.loading import Buffer, loading_rules

#: ``PixArtTransformer2DModel.__init__`` keyword defaults.
PIXART_DEFAULTS = {
    "num_attention_heads": 16, "attention_head_dim": 72, "in_channels": 4, "out_channels": 8, "num_layers": 28,
    "cross_attention_dim": 1152, "attention_bias": True, "sample_size": 128, "patch_size": 2,
    "activation_fn": "gelu-approximate", "num_embeds_ada_norm": 1000, "norm_type": "ada_norm_single",
    "norm_elementwise_affine": False, "use_additional_conditions": None, "caption_channels": None,
}
#: ``DiTTransformer2DModel.__init__`` keyword defaults.
DIT_DEFAULTS = {
    "num_attention_heads": 16, "attention_head_dim": 72, "in_channels": 4, "out_channels": None, "num_layers": 28,
    "attention_bias": True, "sample_size": 32, "patch_size": 2, "activation_fn": "gelu-approximate",
    "num_embeds_ada_norm": 1000, "norm_type": "ada_norm_zero", "norm_elementwise_affine": False,
}


def _patches(config: Config, shape: RunShape, dim: int) -> tuple[Node, object, object]:
    patch = positive_int(config, "patch_size")
    gh, gw = ops.exact_div(shape.latent_height, patch), ops.exact_div(shape.latent_width, patch)
    proj = ops.conv2d(positive_int(config, "in_channels"), dim, patch, gh, gw)
    return Node("pos_embed", children=(Node("proj", proj),)), gh, gw


def pixart_uses_additional_conditions(values) -> bool:
    """``use_additional_conditions``, or (unset) ``sample_size == 128``: the 1024px models embed
    the resolution and aspect ratio (pixart_transformer_2d.py)."""
    flag = values.get("use_additional_conditions")
    return bool(flag) if flag is not None else values.get("sample_size", 128) == 128


#: Every config key ``PixArtTransformer2DModel`` and ``DiTTransformer2DModel`` reads (assemblers and pipeline plan), as
#: :func:`flopcalc.engine.config.declare_keys` validates it.
declare_keys(("PixArtTransformer2DModel", "DiTTransformer2DModel"), {
    "num_attention_heads": SIZE, "attention_head_dim": SIZE, "in_channels": SIZE, "out_channels": SIZE | NULL,
    "num_layers": LAYERS, "sample_size": SIZE, "patch_size": SIZE,
    "activation_fn": Choice("geglu", "gelu", "gelu-approximate"), "num_embeds_ada_norm": SIZE | NULL,
    "norm_type": Choice("layer_norm", "ada_norm_single", "ada_norm_zero"), "norm_elementwise_affine": FLAG,
    "caption_channels": SIZE | NULL, "cross_attention_dim": SIZE | NULL, "attention_bias": FLAG,
    "use_additional_conditions": FLAG | NULL,
})


supports_perturbation("PixArtTransformer2DModel")


@register("PixArtTransformer2DModel", role="denoiser", defaults=PIXART_DEFAULTS,
          source="diffusers/models/transformers/pixart_transformer_2d.py")
def pixart_transformer(config: Config, shape: RunShape) -> Node:
    heads, head_dim = positive_int(config, "num_attention_heads"), positive_int(config, "attention_head_dim")
    dim = heads * head_dim
    pos_embed, gh, gw = _patches(config, shape, dim)
    n, t = gh * gw, shape.text_len
    patch = positive_int(config, "patch_size")
    out_channels = config["out_channels"] or positive_int(config, "in_channels")
    emb = [mlp_embedder("timestep_embedder", 256, dim)]
    if pixart_uses_additional_conditions(config.values):
        # resolution is (batch, 2) and aspect ratio (batch, 1): flattened, one embedding per value
        emb += [mlp_embedder("resolution_embedder", 256, dim // 3, tokens=2),
                mlp_embedder("aspect_ratio_embedder", 256, dim // 3)]
    children = [
        pos_embed,
        Node("adaln_single", children=(Node("emb", children=tuple(emb)),
                                       Node("linear", ops.activation(dim) + ops.linear(1, dim, 6 * dim)))),
    ]
    context_dim = config["cross_attention_dim"]
    if config["caption_channels"] is not None:
        children.append(mlp_embedder("caption_projection", positive_int(config, "caption_channels"), dim, tokens=t))
    layers = count_int(config, "num_layers")
    # perturbed-attention guidance: the self-attention modules are the blocks' attn1 (attn2 reads the text)
    chosen = selected(shape.perturbed, [f"transformer_blocks.{i}.attn1" for i in range(layers)], config.component)
    identity = shape.perturbed is not None and shape.perturbed.identity
    blocks = [cross_attention_block(
        dim=dim, heads=heads, head_dim=head_dim, tokens=n, context_tokens=t, context_dim=context_dim,
        activation=config["activation_fn"], attention_bias=bool(config["attention_bias"]),
        norm_affine=bool(config["norm_elementwise_affine"]), norm_type="ada_norm_single",
        identity_self_attention=identity and f"transformer_blocks.{i}.attn1" in chosen,
    ) for i in range(layers)]
    children += [
        module_list("transformer_blocks", blocks),
        Node("norm_out", ops.layer_norm(n, dim, affine=False)),
        Node("scale_shift_table", ops.parameters(2 * dim)),
        Node("proj_out", ops.linear(n, dim, patch * patch * out_channels)),
    ]
    return Node("transformer", children=tuple(children), formula="pixart_transformer")


@register("DiTTransformer2DModel", role="denoiser", defaults=DIT_DEFAULTS,
          source="diffusers/models/transformers/dit_transformer_2d.py")
def dit_transformer(config: Config, shape: RunShape) -> Node:
    if isinstance(shape.latent_height, int) and shape.latent_height != shape.latent_width:
        raise ResolutionError("DiTTransformer2DModel takes square inputs only (its unpatchify assumes height == "
                              "width): give equal --height and --width.")
    heads, head_dim = positive_int(config, "num_attention_heads"), positive_int(config, "attention_head_dim")
    dim = heads * head_dim
    pos_embed, gh, gw = _patches(config, shape, dim)
    n = gh * gw
    patch = positive_int(config, "patch_size")
    out_channels = config["out_channels"] or positive_int(config, "in_channels")

    block = cross_attention_block(
        dim=dim, heads=heads, head_dim=head_dim, tokens=n, context_tokens=0, context_dim=None,
        activation=config["activation_fn"], attention_bias=bool(config["attention_bias"]),
        norm_affine=bool(config["norm_elementwise_affine"]), norm_type="ada_norm_zero",
        num_embeds_ada_norm=positive_int(config, "num_embeds_ada_norm"),
    )
    blocks = [block] * count_int(config, "num_layers")
    # forward() calls transformer_blocks[0].norm1.emb once more, from the model itself, for the
    # output modulation: the same weights (no parameters here), counted at the root.
    # Its layers stay apart (timestep_embedder.linear_1 reads the sinusoidal projection: no input gradient).
    conditioning = _second_call(timestep_label_embedding("conditioning", dim,
                                                         positive_int(config, "num_embeds_ada_norm")))
    return Node(
        "transformer",
        children=(
            pos_embed,
            module_list("transformer_blocks", blocks),
            conditioning,
            Node("norm_out", ops.layer_norm(n, dim, affine=False)),
            Node("proj_out_1", ops.activation(dim) + ops.linear(1, dim, 2 * dim)),
            Node("proj_out_2", ops.linear(n, dim, patch * patch * out_channels)),
        ),
        formula="dit_transformer",
    )


def _second_call(node: Node) -> Node:
    """``node`` again without its parameters: a second call of weights counted where they live."""
    return Node(node.name, work_only(node.cost), tuple(_second_call(c) for c in node.children), node.count,
                formula=node.formula)


def _pos_embed_buffer(config: Config) -> tuple[Buffer, ...]:
    """PatchEmbed without ``pos_embed_max_size`` (embeddings.py:332): a non-persistent float32 sin-cos table of
    (sample_size / patch_size)² × inner_dim."""
    grid = positive_int(config, "sample_size") // positive_int(config, "patch_size")
    inner = positive_int(config, "num_attention_heads") * positive_int(config, "attention_head_dim")
    return (Buffer("pos_embed.pos_embed", grid * grid * inner, "float32"),)


loading_rules("PixArtTransformer2DModel", buffers=_pos_embed_buffer, source="diffusers/models/embeddings.py:332")
loading_rules("DiTTransformer2DModel", buffers=_pos_embed_buffer, source="diffusers/models/embeddings.py:332")


gradient_graph(
    "DiTTransformer2DModel",
    # dit_transformer_2d.py:181-211: pos_embed.proj(latents); each block's AdaLayerNormZero embeds the timestep
    # (its timestep_embedder.linear_1 reads the sinusoidal projection) and the class label (an embedding, no
    # MACs); the output's second call of transformer_blocks[0].norm1.emb (:208) likewise
    input_layers=("pos_embed.proj", "transformer_blocks.*.norm1.emb.timestep_embedder.linear_1",
                  "conditioning.timestep_embedder.linear_1"),
    # dit_transformer_2d.py:185-195: each BasicTransformerBlock; its last saving op is the gating multiply
    # (gate_mlp * ff_output, no FLOPs), so everything is recomputed; the output's conditioning is outside
    checkpointed=("transformer_blocks.*",),
    source="diffusers/models/transformers/dit_transformer_2d.py:181-211",
)

gradient_graph(
    "PixArtTransformer2DModel",
    # pixart_transformer_2d.py:306-313: pos_embed.proj(latents); adaln_single's embedders read the sinusoidal
    # projections (and the resolution / aspect-ratio conditions); caption_projection.linear_1 the T5 states
    input_layers=("pos_embed.proj", "adaln_single.emb.*.linear_1", "caption_projection.linear_1"),
    # pixart_transformer_2d.py:319: each BasicTransformerBlock; its last saving op is the gating multiply
    # (gate_mlp * ff_output, no FLOPs), so everything is recomputed
    checkpointed=("transformer_blocks.*",),
    source="diffusers/models/transformers/pixart_transformer_2d.py:306-319",
    lora=LoraFlow(
        steps=(
            Layer("pos_embed.proj", ("latents",), "img"),  # pixart_transformer_2d.py:306
            Layer("caption_projection.linear_1", ("text",), "t"),  # :313 on the T5 states
            Layer("caption_projection.linear_2", ("t",), "txt"),
            Blocks("transformer_blocks", self_cross_block_flow()),  # BasicTransformerBlock, ada_norm_single
            Layer("proj_out", ("img",), "out"),  # :347
        ),
        # adaln_single (timestep, resolution and aspect-ratio embedders, its linear) reads the conditions only
        frozen=("adaln_single.**",),
        default_targets=(),
        targets_source="diffusers has no LoRA training example for PixArt: --lora-targets names them",
        source="diffusers/models/transformers/pixart_transformer_2d.py:306-347, attention.py:1000-1076",
    ),
)

