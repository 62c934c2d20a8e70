"""LTX-Video transformer: ``LTXVideoTransformer3DModel`` (diffusers
``models/transformers/transformer_ltx.py``); block formula in ``formulas/ltx.py``.

``LTXPipeline`` packs the ``C × T × h × w`` latent (``_pack_latents``, patch ``p_t × p × p``) so the
model sees ``N = (T/p_t)(h/p)(w/p)`` tokens of ``in_channels`` features (1×1×1 patches for every
LTX-Video release: N = T·h·w), and ``L`` T5 tokens of ``caption_channels`` features:

* ``proj_in`` (in_channels → d) on the N tokens;
* ``time_embed`` (``AdaLayerNormSingle``): ``emb.timestep_embedder`` (256 → d → d) and ``linear``
  (SiLU, d → 6d) on one timestep per video, or on ``S`` = ``RunShape.timestep_tokens`` (one per token:
  ``LTXImageToVideoPipeline``'s ``t · (1 − conditioning_mask)``);
* ``caption_projection`` (``PixArtAlphaTextProjection``: caption_channels → d, tanh-GELU, d → d) on
  the L text tokens;
* ``rope`` (``LTXVideoRotaryPosEmbed``): cos/sin tables from the token grid, no counted work;
* ``LTXConditionPipeline`` appends the packed latents of conditioning items placed away from frame 0
  (``RunShape.reference_tokens``): every token-wise layer runs on ``N`` + those tokens;
* ``num_layers`` blocks; ``norm_out`` (``nn.LayerNorm`` without affine; thop: 2 ops per element),
  modulated by ``scale_shift_table`` (2·d), and ``proj_out`` (d → out_channels) on the N tokens.

.. math:: \\mathrm{MACs} = N (C_i d + d C_o) + S (256 d + 7 d^2) + L (C_c d + d^2) + \\text{layers}\\cdot\\text{block}
"""

from __future__ import annotations

from flopcalc.engine.gradients import gradient_graph
from flopcalc.engine.gradients import Blocks, Layer, LoraFlow
from flopcalc.engine.config import FLAG, LAYERS, NULL, SIZE, TEXT, Config, count_int, declare_keys, positive_int
from flopcalc.engine.cost import Node, module_list
from flopcalc.engine.errors import ConfigError
from flopcalc.formulas import ops
from flopcalc.formulas.conditioning import mlp_embedder
from flopcalc.formulas.ltx import ACTIVATIONS, TIMESTEP_CHANNELS, ltx_video_block
from flopcalc.formulas.transformer_parts import self_cross_block_flow
from flopcalc.engine.registry import RunShape, register

#: ``LTXVideoTransformer3DModel.__init__`` keyword defaults (transformer_ltx.py).
DEFAULTS = {
    "in_channels": 128,
    "out_channels": 128,
    "patch_size": 1,
    "patch_size_t": 1,
    "num_attention_heads": 32,
    "attention_head_dim": 64,
    "cross_attention_dim": 2048,
    "num_layers": 28,
    "activation_fn": "gelu-approximate",
    "qk_norm": "rms_norm_across_heads",
    "norm_elementwise_affine": False,
    "norm_eps": 1e-6,
    "caption_channels": 4096,
    "attention_bias": True,
    "attention_out_bias": True,
}

#: A valid shape for parameter counts: 2 latent frames of 4×4, 8 text tokens.
NOMINAL = RunShape(latent_height=4, latent_width=4, latent_frames=2, text_len=8)


def video_tokens(config: Config, shape: RunShape):
    """``N = (T/p_t)(h/p)(w/p)``: the tokens ``_pack_latents`` makes of the latent (an image: T = 1)."""
    frames = 1 if shape.latent_frames is None else shape.latent_frames
    p, pt = positive_int(config, "patch_size"), positive_int(config, "patch_size_t")
    return (ops.exact_div(frames, pt) * ops.exact_div(shape.latent_height, p)
            * ops.exact_div(shape.latent_width, p))


#: Every config key ``LTXVideoTransformer3DModel`` reads (assemblers and pipeline plan), as
#: :func:`flopcalc.engine.config.declare_keys` validates it.
declare_keys("LTXVideoTransformer3DModel", {
    "in_channels": SIZE, "out_channels": SIZE | NULL, "patch_size": SIZE, "patch_size_t": SIZE,
    "num_attention_heads": SIZE, "attention_head_dim": SIZE, "cross_attention_dim": SIZE, "num_layers": LAYERS,
    "activation_fn": TEXT, "qk_norm": TEXT | NULL, "norm_elementwise_affine": FLAG, "attention_bias": FLAG,
    "attention_out_bias": FLAG, "caption_channels": SIZE,
})


@register("LTXVideoTransformer3DModel", role="denoiser", defaults=DEFAULTS, nominal=NOMINAL,
          source="diffusers/models/transformers/transformer_ltx.py")
def ltx_video_transformer(config: Config, shape: RunShape) -> Node:
    heads = positive_int(config, "num_attention_heads")
    head_dim = positive_int(config, "attention_head_dim")
    dim = heads * head_dim
    in_channels = positive_int(config, "in_channels")
    out_channels = config["out_channels"] or in_channels
    if config["qk_norm"] != "rms_norm_across_heads":
        raise ConfigError(f"{config.component}/config.json: LTXAttention supports only qk_norm "
                          f"'rms_norm_across_heads', got {config['qk_norm']!r}")
    if config["activation_fn"] not in ACTIVATIONS:
        raise ConfigError(f"{config.component}/config.json: activation_fn {config['activation_fn']!r} is not one "
                          f"diffusers' FeedForward builds ({', '.join(ACTIVATIONS)})")
    # conditioning tokens LTXConditionPipeline appends to the sequence (items away from frame 0), as packed
    n, t = video_tokens(config, shape) + (shape.reference_tokens or 0), shape.text_len
    block = ltx_video_block(
        dim=dim, heads=heads, head_dim=head_dim, tokens=n, text_tokens=t,
        cross_attention_dim=positive_int(config, "cross_attention_dim"), activation=config["activation_fn"],
        attention_bias=bool(config["attention_bias"]), attention_out_bias=bool(config["attention_out_bias"]),
        norm_affine=bool(config["norm_elementwise_affine"]),
    )
    # one timestep per video, or one per token (``RunShape.timestep_tokens``: the image-to-video and
    # condition pipelines pass ``(batch, N)`` timesteps; forward flattens them, transformer_ltx.py:553)
    steps = 1 if shape.timestep_tokens is None else shape.timestep_tokens
    time_embed = Node("time_embed", children=(
        Node("emb", children=(mlp_embedder("timestep_embedder", TIMESTEP_CHANNELS, dim, tokens=steps),)),
        Node("linear", ops.activation(steps * dim) + ops.linear(steps, dim, 6 * dim)),
    ), formula="ada_layer_norm_single")
    return Node(
        "transformer",
        children=(
            Node("proj_in", ops.linear(n, in_channels, dim)),
            Node("scale_shift_table", ops.parameters(2 * dim)),
            time_embed,
            mlp_embedder("caption_projection", positive_int(config, "caption_channels"), dim, tokens=t),
            module_list("transformer_blocks", [block] * count_int(config, "num_layers")),
            Node("norm_out", ops.layer_norm(n, dim, affine=False)),
            Node("proj_out", ops.linear(n, dim, out_channels)),
        ),
        formula="ltx_video_transformer",
    )


gradient_graph(
    "LTXVideoTransformer3DModel",
    # transformer_ltx.py: proj_in(latents), time_embed's timestep embedder reads the sinusoidal projection,
    # caption_projection.linear_1 the T5 states
    input_layers=("proj_in", "**.timestep_embedder.linear_1", "caption_projection.linear_1"),
    checkpointed=("transformer_blocks.*",),  # transformer_ltx.py:567
    source="diffusers/models/transformers/transformer_ltx.py:567",
    lora=LoraFlow(
        steps=(
            Layer("proj_in", ("latents",), "img"),  # transformer_ltx.py:551
            Layer("caption_projection.linear_1", ("text",), "t"),  # :562 on the T5 states
            Layer("caption_projection.linear_2", ("t",), "txt"),
            Blocks("transformer_blocks", self_cross_block_flow()),  # LTXVideoTransformerBlock.forward :344-381
            Layer("proj_out", ("img",), "out"),
        ),
        # time_embed (AdaLayerNormSingle: the timestep embedder and its linear) reads the timestep only
        frozen=("time_embed.**",),
        default_targets=(),
        targets_source="diffusers has no LoRA training example for LTX-Video: --lora-targets names them",
        source="diffusers/models/transformers/transformer_ltx.py:344-381, 551-590",
    ),
)
