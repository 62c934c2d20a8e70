"""CogVideoX: ``CogVideoXTransformer3DModel`` (diffusers
``models/transformers/cogvideox_transformer_3d.py``), block formulas in ``formulas/cogvideox.py``.

One forward sees ``T`` latent frames of ``h × w`` (``RunShape.latent_frames``, ``latent_height``,
``latent_width``) and ``L`` T5 tokens: the time embedding (``Timesteps`` → ``TimestepEmbedding``
inner → ``time_embed_dim``), CogVideoX 1.5 image-to-video's ``ofs_embedding`` (when
``ofs_embed_dim``), the patch embedding, ``num_layers`` ``CogVideoXBlock``\\ s over the joint
text + video sequence, ``norm_final`` (``nn.LayerNorm`` on the video tokens), ``norm_out``
(``AdaLayerNorm``) and ``proj_out`` to ``p² [p_t] · out_channels`` values per token.

Positional information: CogVideoX-2b adds a 3-D sincos table (recomputed, no MACs, for sizes
other than the config's ``sample_*``), which covers exactly ``max_text_seq_length`` text
positions: the text must have that many tokens (the pipeline plan checks it, and that learned
tables, CogVideoX-5b-I2V's, only run at the config's sample size). CogVideoX-5b and 1.5 use rotary
embeddings (``use_rotary_positional_embeddings``) computed by the pipeline and applied elementwise.
"""

from __future__ import annotations

from typing import Any

from flopcalc.engine.gradients import gradient_graph
from flopcalc.engine.gradients import Attend, Blocks, Join, Layer, LoraFlow
from flopcalc.engine.config import (
    FLAG, LAYERS, NULL, RATIO, SIZE, TEXT, Config, count_int, declare_keys, positive_int,
)
from flopcalc.engine.cost import Node, module_list
from flopcalc.engine.errors import ConfigError
from flopcalc.formulas import ops
from flopcalc.formulas.cogvideox import (
    ACTIVATIONS,
    ada_layer_norm_out,
    cogvideox_block,
    patch_embed,
)
from flopcalc.formulas.conditioning import mlp_embedder
from flopcalc.engine.registry import RunShape, register
from flopcalc.engine.loading import Buffer, loading_rules

#: ``CogVideoXTransformer3DModel.__init__`` keyword defaults (cogvideox_transformer_3d.py).
DEFAULTS = {
    "num_attention_heads": 30,
    "attention_head_dim": 64,
    "in_channels": 16,
    "out_channels": 16,
    "flip_sin_to_cos": True,
    "freq_shift": 0,
    "time_embed_dim": 512,
    "ofs_embed_dim": None,
    "text_embed_dim": 4096,
    "num_layers": 30,
    "dropout": 0.0,
    "attention_bias": True,
    "sample_width": 90,
    "sample_height": 60,
    "sample_frames": 49,
    "patch_size": 2,
    "patch_size_t": None,
    "temporal_compression_ratio": 4,
    "max_text_seq_length": 226,
    "activation_fn": "gelu-approximate",
    "timestep_activation_fn": "silu",
    "norm_elementwise_affine": True,
    "norm_eps": 1e-5,
    "spatial_interpolation_scale": 1.875,
    "temporal_interpolation_scale": 1.0,
    "use_rotary_positional_embeddings": False,
    "use_learned_positional_embeddings": False,
    "patch_bias": True,
}
SOURCE = "diffusers/models/transformers/cogvideox_transformer_3d.py"
#: A one-frame video when a shape has no frame count (parameter counts, a bare image).
_ONE_FRAME = 1


def uses_positional_table(values: dict[str, Any]) -> bool:
    """Whether ``CogVideoXPatchEmbed`` adds a positional table (sincos, or learned): then the text
    must have exactly ``max_text_seq_length`` tokens."""
    rotary = values.get("use_rotary_positional_embeddings", DEFAULTS["use_rotary_positional_embeddings"])
    learned = values.get("use_learned_positional_embeddings", DEFAULTS["use_learned_positional_embeddings"])
    return not rotary or bool(learned)


def _optional_positive(config: Config, key: str) -> int | None:
    value = config[key]
    if value is None:
        return None
    return positive_int(config, key)


#: Every config key ``CogVideoXTransformer3DModel`` reads (assemblers and pipeline plan), as
#: :func:`flopcalc.engine.config.declare_keys` validates it.
declare_keys("CogVideoXTransformer3DModel", {
    "num_attention_heads": SIZE, "attention_head_dim": SIZE, "in_channels": SIZE, "out_channels": SIZE,
    "num_layers": LAYERS, "patch_size": SIZE, "patch_size_t": SIZE | NULL, "patch_bias": FLAG,
    "text_embed_dim": SIZE, "time_embed_dim": SIZE, "ofs_embed_dim": SIZE | NULL,
    "activation_fn": TEXT, "attention_bias": FLAG, "norm_elementwise_affine": FLAG,
    "use_rotary_positional_embeddings": FLAG, "use_learned_positional_embeddings": FLAG,
    "sample_width": SIZE, "sample_height": SIZE, "sample_frames": SIZE, "max_text_seq_length": SIZE,
    "temporal_compression_ratio": SIZE, "spatial_interpolation_scale": RATIO, "temporal_interpolation_scale": RATIO,
})


@register("CogVideoXTransformer3DModel", role="denoiser", defaults=DEFAULTS, source=SOURCE)
def cogvideox_transformer(config: Config, shape: RunShape) -> Node:
    heads = positive_int(config, "num_attention_heads")
    head_dim = positive_int(config, "attention_head_dim")
    dim = heads * head_dim
    patch = positive_int(config, "patch_size")
    patch_t = _optional_positive(config, "patch_size_t")
    in_channels = positive_int(config, "in_channels")
    out_channels = positive_int(config, "out_channels")
    cond = positive_int(config, "time_embed_dim")
    ofs = _optional_positive(config, "ofs_embed_dim")
    activation = config["activation_fn"]
    if activation not in ACTIVATIONS:
        raise ConfigError(f"{config.component}/config.json: activation_fn {activation!r} is not one of "
                          f"{', '.join(ACTIVATIONS)}")
    if config["use_learned_positional_embeddings"] and not config["use_rotary_positional_embeddings"]:
        raise ConfigError(f"{config.component}/config.json: learned positional embeddings without rotary ones "
                          "are refused by CogVideoXTransformer3DModel")
    affine = bool(config["norm_elementwise_affine"])
    h, w, t = shape.latent_height, shape.latent_width, shape.text_len
    # no frame count (parameter counts): one patch in time (patch_size_t frames for CogVideoX 1.5)
    frames = (patch_t or _ONE_FRAME) if shape.latent_frames is None else shape.latent_frames
    grid_h, grid_w = ops.exact_div(h, patch), ops.exact_div(w, patch)
    n = (frames if patch_t is None else ops.exact_div(frames, patch_t)) * grid_h * grid_w

    block = cogvideox_block(dim=dim, heads=heads, head_dim=head_dim, cond_dim=cond, video_tokens=n, text_tokens=t,
                            activation=activation, attention_bias=bool(config["attention_bias"]),
                            norm_affine=affine)
    children = [
        patch_embed(in_channels=in_channels, dim=dim, text_dim=positive_int(config, "text_embed_dim"), patch=patch,
                    patch_t=patch_t, frames=frames, grid_h=grid_h, grid_w=grid_w, text_tokens=t,
                    bias=bool(config["patch_bias"])),
        mlp_embedder("time_embedding", dim, cond),
    ]
    if ofs is not None:
        if ofs != cond:
            raise ConfigError(f"{config.component}/config.json: ofs_embed_dim ({ofs}) must equal time_embed_dim "
                              f"({cond}): the ofs embedding is added to the time embedding")
        children.append(mlp_embedder("ofs_embedding", ofs, ofs))
    out_dim = patch * patch * (patch_t or 1) * out_channels
    children += [
        module_list("transformer_blocks", [block] * count_int(config, "num_layers")),
        Node("norm_final", ops.layer_norm(n, dim, affine=affine)),
        ada_layer_norm_out("norm_out", dim=dim, cond_dim=cond, tokens=n, affine=affine),
        Node("proj_out", ops.linear(n, dim, out_dim)),
    ]
    return Node("transformer", children=tuple(children), formula="cogvideox_transformer")


def _pos_embedding(config: Config) -> tuple[Buffer, ...]:
    """CogVideoXPatchEmbed (embeddings.py:490-515): without rotary embeddings, a float64 sin-cos table of
    (max_text_seq_length + frames' · (sample_height/p) · (sample_width/p)) × inner_dim, frames' =
    (sample_frames − 1) // temporal_compression_ratio + 1; persistent only when learned."""
    if config["use_rotary_positional_embeddings"] and not config["use_learned_positional_embeddings"]:
        return ()
    p = positive_int(config, "patch_size")
    frames = (positive_int(config, "sample_frames") - 1) // positive_int(config, "temporal_compression_ratio") + 1
    patches = (positive_int(config, "sample_height") // p) * (positive_int(config, "sample_width") // p) * frames
    inner = positive_int(config, "num_attention_heads") * positive_int(config, "attention_head_dim")
    numel = (positive_int(config, "max_text_seq_length") + patches) * inner
    return (Buffer("patch_embed.pos_embedding", numel,
                   "loaded" if config["use_learned_positional_embeddings"] else "float64"),)


loading_rules("CogVideoXTransformer3DModel", buffers=_pos_embedding, source="diffusers/models/embeddings.py:490")


gradient_graph(
    "CogVideoXTransformer3DModel",
    # cogvideox_transformer_3d.py: patch_embed.proj(latents) and patch_embed.text_proj(T5 states),
    # time_embedding (and ofs_embedding) read sinusoidal projections
    input_layers=("patch_embed.proj", "patch_embed.text_proj", "time_embedding.linear_1", "ofs_embedding.linear_1"),
    checkpointed=("transformer_blocks.*",),  # cogvideox_transformer_3d.py:436
    source="diffusers/models/transformers/cogvideox_transformer_3d.py:436",
    lora=LoraFlow(
        steps=(
            # cogvideox_transformer_3d.py:426, embeddings.py:528-547: text_proj(T5 states), proj(latents), joined
            Layer("patch_embed.text_proj", ("text",), "txt"),
            Layer("patch_embed.proj", ("latents",), "img"),
            Blocks("transformer_blocks", (  # CogVideoXBlock.forward :118-157, CogVideoXAttnProcessor2_0
                Join(("txt", "img"), "x"),  # the processor attends over cat([text, video])
                *(Layer(f"attn1.{p}", ("x",), p) for p in ("to_q", "to_k", "to_v")),
                Attend("attn1", q=("to_q",), k=("to_k",), v=("to_v",), to="o"),
                Layer("attn1.to_out.0", ("o",), "a"),
                Join(("img", "a"), "img", gated="a"),  # :142-143, each stream + its gate * its half
                Join(("txt", "a"), "txt", gated="a"),
                Join(("txt", "img"), "x"),  # :151-152 the feed-forward on cat([text, video])
                Layer("ff.net.0.proj", ("x",), "h"),
                Layer("ff.net.2", ("h",), "f"),
                Join(("img", "f"), "img", gated="f"),  # :154-155
                Join(("txt", "f"), "txt", gated="f"),
            )),
            Layer("proj_out", ("img",), "out"),  # :453-457 after norm_final and norm_out (its linear: temb)
        ),
        # the timestep (and CogVideoX 1.5's ofs) embedders and every norm's modulation linear read temb only
        frozen=("time_embedding.**", "ofs_embedding.**", "transformer_blocks.*.norm1.linear",
                "transformer_blocks.*.norm2.linear", "norm_out.linear"),
        default_targets=("to_k", "to_q", "to_v", "to_out.0"),
        targets_source="diffusers examples/cogvideo/train_cogvideox_lora.py (commit 02303d1), main(): "
                       "transformer.add_adapter(LoraConfig(..., target_modules=['to_k', 'to_q', 'to_v', 'to_out.0']))",
        source="diffusers/models/transformers/cogvideox_transformer_3d.py:118-157, 426-457, "
               "attention_processor.py CogVideoXAttnProcessor2_0",
    ),
)
