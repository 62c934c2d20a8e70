"""Chroma transformer: ``ChromaTransformer2DModel`` (diffusers ``models/transformers/transformer_chroma.py``).

FLUX.1's layout (``FluxTransformer2DModel``, :mod:`flopcalc.engine.architectures.flux`) with its
modulation pruned: no timestep/guidance/pooled-text embedders and no adaLN linears in the blocks;
one ``distilled_guidance_layer`` (:func:`~flopcalc.formulas.chroma.chroma_approximator`) computes
every block's shift/scale/gate vectors at once. The blocks are FLUX's double- and single-stream
blocks with pruned norms (``pruned=True``). The pipeline packs the ``C × H/8 × W/8`` latent into 2×2
patches: ``N = (H/16)(W/16)`` image tokens of ``in_channels = 4C`` features, and ``T`` T5 tokens.
Rotary embeddings (``FluxPosEmbed``) and the timestep projections are parameter-free.
"""

from __future__ import annotations

from flopcalc.engine.gradients import gradient_graph
from flopcalc.engine.config import LAYERS, NULL, SIZE, SIZES, Config, count_int, declare_keys, positive_int
from flopcalc.engine.cost import Node, module_list
from flopcalc.engine.errors import ConfigError
from flopcalc.formulas import ops
from flopcalc.formulas.chroma import chroma_approximator
from flopcalc.formulas.conditioning import pruned_ada_layer_norm
from flopcalc.formulas.mmdit_joint_block import JOINT_BLOCK_FLOW, mmdit_joint_block
from flopcalc.formulas.single_stream_block import SINGLE_STREAM_SEQUENCE_FLOW, single_stream_block
from flopcalc.engine.gradients import Blocks, Join, Layer, LoraFlow
from flopcalc.engine.registry import RunShape, register
from flopcalc.engine.loading import Buffer, loading_rules

#: ``ChromaTransformer2DModel.__init__`` keyword defaults (transformer_chroma.py).
DEFAULTS = {
    "patch_size": 1,
    "in_channels": 64,
    "out_channels": None,
    "num_layers": 19,
    "num_single_layers": 38,
    "attention_head_dim": 128,
    "num_attention_heads": 24,
    "joint_attention_dim": 4096,
    "axes_dims_rope": [16, 56, 56],
    "approximator_num_channels": 64,
    "approximator_hidden_dim": 5120,
    "approximator_layers": 5,
}

#: ChromaPipeline packs 2×2 latent patches into one token (as FLUX).
PACKING = 2


def modulation_vectors(double_blocks: int, single_blocks: int) -> int:
    """Rows of the approximator's input (``mod_proj``'s length, ``out_dim`` of
    ``ChromaCombinedTimestepTextProjEmbeddings``): 3 per single-stream block, 2 × 6 per
    double-stream block (image and text streams) and 2 for ``norm_out``."""
    return 3 * single_blocks + 2 * 6 * double_blocks + 2


#: Every config key ``ChromaTransformer2DModel`` reads (assemblers and pipeline plan), as
#: :func:`flopcalc.engine.config.declare_keys` validates it.
declare_keys("ChromaTransformer2DModel", {
    "patch_size": SIZE, "in_channels": SIZE, "out_channels": SIZE | NULL, "num_layers": LAYERS,
    "num_single_layers": LAYERS, "attention_head_dim": SIZE, "num_attention_heads": SIZE,
    "joint_attention_dim": SIZE, "axes_dims_rope": SIZES, "approximator_num_channels": SIZE,
    "approximator_hidden_dim": SIZE, "approximator_layers": LAYERS,
})


@register("ChromaTransformer2DModel", role="denoiser", defaults=DEFAULTS,
          source="diffusers/models/transformers/transformer_chroma.py")
def chroma_transformer(config: Config, shape: RunShape) -> Node:
    heads = positive_int(config, "num_attention_heads")
    head_dim = positive_int(config, "attention_head_dim")
    dim = heads * head_dim
    in_channels = positive_int(config, "in_channels")
    out_channels = config["out_channels"] or in_channels
    patch = positive_int(config, "patch_size")
    double, single = count_int(config, "num_layers"), count_int(config, "num_single_layers")
    channels = positive_int(config, "approximator_num_channels")
    if channels % 4:
        # time_proj and guidance_proj give channels//4 features each, mod_proj 2·(channels//4):
        # the approximator's in_proj (channels wide) only fits when channels divides by 4.
        raise ConfigError(f"{config.component}/config.json: 'approximator_num_channels' must be a multiple of 4, "
                          f"got {channels}")
    n = ops.exact_div(shape.latent_height, PACKING) * ops.exact_div(shape.latent_width, PACKING)
    t = shape.text_len

    joint = mmdit_joint_block(dim=dim, heads=heads, head_dim=head_dim, image_tokens=n, text_tokens=t,
                              qk_norm="rms_norm", pruned=True)
    single_block = single_stream_block(dim=dim, heads=heads, head_dim=head_dim, tokens=n + t, pruned=True)
    return Node(
        "transformer",
        children=(
            chroma_approximator("distilled_guidance_layer", vectors=modulation_vectors(double, single),
                                in_dim=channels, hidden_dim=positive_int(config, "approximator_hidden_dim"),
                                out_dim=dim, layers=count_int(config, "approximator_layers")),
            Node("context_embedder", ops.linear(t, positive_int(config, "joint_attention_dim"), dim)),
            Node("x_embedder", ops.linear(n, in_channels, dim)),
            module_list("transformer_blocks", [joint] * double),
            module_list("single_transformer_blocks", [single_block] * single),
            pruned_ada_layer_norm("norm_out", dim, n),
            Node("proj_out", ops.linear(n, dim, patch * patch * out_channels)),
        ),
        formula="chroma_transformer",
    )


def _chroma_buffers(config: Config) -> tuple[Buffer, ...]:
    """``time_text_embed.mod_proj`` (transformer_chroma.py ``ChromaCombinedTimestepTextProjEmbeddings``): a
    non-persistent float32 table of ``out_dim × 2·(approximator_num_channels // 4)`` sinusoids."""
    channels = positive_int(config, "approximator_num_channels") // 4
    rows = modulation_vectors(count_int(config, "num_layers"), count_int(config, "num_single_layers"))
    return (Buffer("time_text_embed.mod_proj", rows * 2 * channels, "float32"),)


loading_rules("ChromaTransformer2DModel", buffers=_chroma_buffers,
              source="diffusers/models/transformers/transformer_chroma.py")


gradient_graph(
    "ChromaTransformer2DModel",
    # transformer_chroma.py:515-522: x_embedder(latents); the approximator's in_proj reads time_text_embed's
    # parameter-free output (sinusoids and the mod_proj table); context_embedder(T5)
    input_layers=("x_embedder", "context_embedder", "distilled_guidance_layer.in_proj"),
    # transformer_chroma.py:557, 588: each double- and single-stream block is checkpointed; both end in
    # ``gate * output`` (:352, :256), which saves the block's last layer output: the whole block is run again
    checkpointed=("transformer_blocks.*", "single_transformer_blocks.*"),
    source="diffusers/models/transformers/transformer_chroma.py:515-618",
    lora=LoraFlow(
        steps=(
            Layer("x_embedder", ("latents",), "img"),  # transformer_chroma.py:515
            Layer("context_embedder", ("text",), "txt"),  # :522
            Blocks("transformer_blocks", JOINT_BLOCK_FLOW),  # ChromaTransformerBlock.forward :296-356
            Join(("txt", "img"), "x"),  # :583 cat([encoder_hidden_states, hidden_states])
            Blocks("single_transformer_blocks", SINGLE_STREAM_SEQUENCE_FLOW),  # :585-612
            Join(("x",), "img"),  # :614 the text tokens dropped (a slice: the text stream still gets a gradient)
            Layer("proj_out", ("img",), "out"),  # :618
        ),
        # the approximator reads only the timestep (and the fixed mod_proj table): every block's modulation and
        # norm_out's come from it, conditioning only
        frozen=("distilled_guidance_layer.**",),
        default_targets=(),  # diffusers has no Chroma LoRA training script: the targets are named
        targets_source="",
        source="diffusers/models/transformers/transformer_chroma.py:183-262, 296-356, 515-618",
    ),
)
