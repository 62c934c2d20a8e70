"""Stable Diffusion 3 / 3.5 MMDiT: ``SD3Transformer2DModel``
(diffusers ``models/transformers/transformer_sd3.py``).

The latent (``C × H/8 × W/8``) is patchified by a strided convolution (``PatchEmbed``) into
``N = (H/8p)(W/8p)`` tokens; the text stream is CLIP-L ⊕ CLIP-G (77) then T5 (256) tokens.
SD3.5 adds per-head RMS q/k norms (``qk_norm``); SD3.5-medium (MMDiT-X) runs a second,
image-only attention in the blocks listed in ``dual_attention_layers``. The last block is
``context_pre_only``.
"""

from __future__ import annotations

from flopcalc.engine.gradients import gradient_graph
from flopcalc.engine.gradients import Blocks, Layer, LoraFlow
from flopcalc.engine.config import (
    LAYERS, MAX_LAYERS, NULL, SIZE, Choice, Config, Int, ListOf, count_int, declare_keys, positive_int,
)
from flopcalc.engine.cost import Node, module_list
from flopcalc.engine.errors import OptionError, ResolutionError
from flopcalc.formulas import ops
from flopcalc.formulas.conditioning import ada_layer_norm_continuous, mlp_embedder
from flopcalc.formulas.mmdit_joint_block import JOINT_BLOCK_FLOW, mmdit_joint_block
from flopcalc.engine.perturbed_attention import selected, supports_perturbation
from flopcalc.engine.registry import RunShape, register
from flopcalc.engine.loading import Buffer, loading_rules

#: ``SD3Transformer2DModel.__init__`` keyword defaults (transformer_sd3.py).
DEFAULTS = {
    "sample_size": 128,
    "patch_size": 2,
    "in_channels": 16,
    "num_layers": 18,
    "attention_head_dim": 64,
    "num_attention_heads": 18,
    "joint_attention_dim": 4096,
    "caption_projection_dim": 1152,
    "pooled_projection_dim": 2048,
    "out_channels": 16,
    "pos_embed_max_size": 96,
    "dual_attention_layers": (),
    "qk_norm": None,
}


#: Every config key ``SD3Transformer2DModel`` reads (assemblers and pipeline plan), as
#: :func:`flopcalc.engine.config.declare_keys` validates it.
declare_keys("SD3Transformer2DModel", {
    "sample_size": SIZE, "patch_size": SIZE, "in_channels": SIZE, "num_layers": LAYERS,
    "attention_head_dim": SIZE, "num_attention_heads": SIZE, "joint_attention_dim": SIZE,
    "caption_projection_dim": SIZE, "pooled_projection_dim": SIZE, "out_channels": SIZE | NULL,
    "pos_embed_max_size": SIZE, "dual_attention_layers": ListOf(Int(0, MAX_LAYERS), lo=0, hi=MAX_LAYERS) | NULL,
    "qk_norm": Choice(None, "rms_norm", "layer_norm"),
})


supports_perturbation("SD3Transformer2DModel")


@register("SD3Transformer2DModel", role="denoiser", defaults=DEFAULTS,
          source="diffusers/models/transformers/transformer_sd3.py")
def sd3_transformer(config: Config, shape: RunShape) -> Node:
    heads = positive_int(config, "num_attention_heads")
    head_dim = positive_int(config, "attention_head_dim")
    dim = heads * head_dim
    patch = positive_int(config, "patch_size")
    in_channels = positive_int(config, "in_channels")
    out_channels = config["out_channels"] or in_channels
    layers = count_int(config, "num_layers")
    dual = set(config["dual_attention_layers"] or ())
    qk_norm = config["qk_norm"]
    grid_h = ops.exact_div(shape.latent_height, patch)
    grid_w = ops.exact_div(shape.latent_width, patch)
    _check_pos_embed(config, grid_h, grid_w, patch)
    n, t = grid_h * grid_w, shape.text_len

    pag = _pag_layers(config, shape, layers, dual)
    variants: dict[tuple[bool, bool, bool], Node] = {}  # (context_pre_only, dual_attention, PAG) → block, built once

    def block(i: int) -> Node:
        key = (i == layers - 1, i in dual, i in pag)
        if key not in variants:
            variants[key] = mmdit_joint_block(dim=dim, heads=heads, head_dim=head_dim, image_tokens=n, text_tokens=t,
                                              qk_norm=qk_norm, context_pre_only=key[0], dual_attention=key[1],
                                              pag=key[2])
        return variants[key]

    blocks = [block(i) for i in range(layers)]
    return Node(
        "transformer",
        children=(
            Node("pos_embed", children=(Node("proj", ops.conv2d(in_channels, dim, patch, grid_h, grid_w)),)),
            Node("time_text_embed", children=(
                mlp_embedder("timestep_embedder", 256, dim),
                mlp_embedder("text_embedder", positive_int(config, "pooled_projection_dim"), dim),
            )),
            Node("context_embedder", ops.linear(t, positive_int(config, "joint_attention_dim"),
                                                positive_int(config, "caption_projection_dim"))),
            module_list("transformer_blocks", blocks),
            ada_layer_norm_continuous("norm_out", dim, dim, n),
            Node("proj_out", ops.linear(n, dim, patch * patch * out_channels)),
        ),
        formula="sd3_transformer",
    )


def _pag_layers(config: Config, shape: RunShape, layers: int, dual: set) -> frozenset[int]:
    """Perturbed-attention guidance: the blocks whose joint ``attn`` gets the PAG processor. The
    self-attention modules are every block's ``attn`` and the MMDiT-X blocks' image-only ``attn2``;
    diffusers' joint PAG processors read ``encoder_hidden_states``, which ``attn2`` is called without
    (``attention.py`` ``JointTransformerBlock.forward``), so a PAG layer on an ``attn2`` fails there and
    is refused here."""
    names = [f"transformer_blocks.{i}.{a}" for i in range(layers) for a in (("attn", "attn2") if i in dual else ("attn",))]
    chosen = selected(shape.perturbed, names, config.component)
    broken = sorted(name for name in chosen if name.endswith("attn2"))
    if broken:
        raise OptionError(f"{config.component}: pag_applied_layers {list(shape.perturbed.layers)} match the image-only "
                          f"attn2 of MMDiT-X blocks ({', '.join(broken[:3])}{', ...' if len(broken) > 3 else ''}), "
                          "which diffusers' joint PAG processors cannot run (they need the text states); choose "
                          "layers without dual attention, e.g. --pag-applied-layers transformer_blocks.20.attn")
    return frozenset(i for i in range(layers) if f"transformer_blocks.{i}.attn" in chosen)


def _check_pos_embed(config: Config, grid_h, grid_w, patch: int) -> None:
    """``PatchEmbed.cropped_pos_embed`` refuses grids larger than ``pos_embed_max_size``."""
    limit = config["pos_embed_max_size"]
    if limit and isinstance(grid_h, int) and max(grid_h, grid_w) > limit:
        raise ResolutionError(
            f"transformer: a {grid_h}×{grid_w} patch grid exceeds pos_embed_max_size={limit}; this model takes at "
            f"most {limit * patch} latent pixels per side ({limit * patch * 8} image pixels with an 8× VAE)."
        )


gradient_graph(
    "SD3Transformer2DModel",
    # transformer_sd3.py:291-295: pos_embed.proj(latents), time_text_embed(timestep, pooled) whose first
    # linears read the sinusoidal projection / the pooled embedding, context_embedder(text states)
    input_layers=("pos_embed.proj", "context_embedder", "time_text_embed.*.linear_1"),
    checkpointed=("transformer_blocks.*",),  # transformer_sd3.py:308
    source="diffusers/models/transformers/transformer_sd3.py:291-308",
    lora=LoraFlow(
        steps=(
            Layer("pos_embed.proj", ("latents",), "img"),  # transformer_sd3.py:291
            Layer("context_embedder", ("text",), "txt"),  # :295
            Blocks("transformer_blocks", JOINT_BLOCK_FLOW),  # :308-320; the last block is context_pre_only
            Layer("proj_out", ("img",), "out"),  # :329
        ),
        # the timestep and pooled-text embedders and every AdaLN modulation linear read temb only
        frozen=("time_text_embed.**", "transformer_blocks.*.norm1.linear", "transformer_blocks.*.norm1_context.linear",
                "norm_out.linear"),
        default_targets=("to_k", "to_q", "to_v", "to_out.0"),
        targets_source="diffusers examples/dreambooth/train_dreambooth_lora_sd3.py (commit 0185674), main(): "
                       "transformer.add_adapter(LoraConfig(..., target_modules=['to_k', 'to_q', 'to_v', 'to_out.0']))",
        source="diffusers/models/transformers/transformer_sd3.py:291-329, attention.py:681-750",
    ),
)


loading_rules(
    "SD3Transformer2DModel",
    # embeddings.py:332 (PatchEmbed): with pos_embed_max_size the sin-cos table of
    # pos_embed_max_size² × inner_dim is a persistent buffer, loaded like the weights
    buffers=lambda c: (Buffer("pos_embed.pos_embed", positive_int(c, "pos_embed_max_size") ** 2
                              * positive_int(c, "num_attention_heads") * positive_int(c, "attention_head_dim"),
                              "loaded"),),
    source="diffusers/models/embeddings.py:332",
)
