"""FLUX.2 transformer: ``Flux2Transformer2DModel`` (diffusers ``models/transformers/transformer_flux2.py``).

``Flux2Pipeline`` / ``Flux2KleinPipeline`` patchify the ``C × H/8 × W/8`` latent 2×2 into
``in_channels = 4C`` features (``patch_size`` 1 in the model): ``N = (H/16)(W/16)`` image tokens, and
``T`` text tokens (the text encoder's stacked hidden states, ``joint_attention_dim`` wide). The
timestep (and, when ``guidance_embeds``, guidance) embedding runs once per sample; the three
``Flux2Modulation`` linears turn it into the modulation every block shares; then ``num_layers``
double-stream and ``num_single_layers`` single-stream blocks (:mod:`flopcalc.formulas.flux2`),
``norm_out`` and ``proj_out`` on the image tokens. Every linear is bias-free. Rotary tables
(``Flux2PosEmbed``) and the sinusoidal projections are parameter-free with no counted work.

With reference images the pipelines append their packed latents' tokens (``RunShape.reference_tokens``)
to the image tokens (``torch.cat([latents, image_latents], dim=1)``, pipeline_flux2.py:971), and
``forward`` runs on all ``N + reference_tokens`` of them, ``x_embedder`` to ``proj_out``
(transformer_flux2.py:1318-1424; the pipeline keeps the first ``N`` outputs).

FLUX.2 [klein] KV (``Flux2KleinKVPipeline``, ``RunShape.kv_cache``) caches the references' keys and values
(transformer_flux2.py:1226-1435 with ``Flux2KVAttnProcessor`` / ``Flux2KVParallelSelfAttnProcessor``, which the
pipeline installs):

* ``"extract"`` (the first step): the ``R`` reference tokens run with the latent (their tokens first); the text
  and latent queries attend to every key, the reference queries only to the reference keys (a second, ``R × R``
  SDPA call, :func:`~flopcalc.formulas.flux2.kv_attention`); the references are modulated from a second timestep
  embedding (``ref_temb``: ``time_guidance_embed``, ``double_stream_modulation_img`` and ``single_stream_modulation``
  run twice, :1304-1316); ``norm_out`` and ``proj_out`` see the ``N`` latent tokens only (:1418-1424);
* ``"cached"`` (every later step): the latent alone (``N`` tokens in every linear), its attention reading the
  cached ``R`` keys and values too: ``(T + N) × (T + R + N)`` scores.
"""

from __future__ import annotations

from dataclasses import replace

from flopcalc.engine.gradients import gradient_graph
from flopcalc.engine.config import (
    FLAG, LAYERS, NULL, RATIO, SIZE, SIZES, Config, boolean, count_int, declare_keys, positive_int, positive_int_list,
)
from flopcalc.engine.cost import Node, module_list, work_only
from flopcalc.engine.errors import ConfigError
from flopcalc.formulas import ops
from flopcalc.formulas.conditioning import ada_layer_norm_continuous, mlp_embedder
from flopcalc.formulas.flux2 import (
    FLUX2_DOUBLE_BLOCK_FLOW, FLUX2_SINGLE_BLOCK_FLOW, flux2_double_block, flux2_modulation, flux2_single_block,
    kv_attention,
)
from flopcalc.engine.gradients import Blocks, Join, Layer, LoraFlow
from flopcalc.engine.registry import RunShape, register

#: ``Flux2Transformer2DModel.__init__`` keyword defaults (transformer_flux2.py).
DEFAULTS = {
    "patch_size": 1,
    "in_channels": 128,
    "out_channels": None,
    "num_layers": 8,
    "num_single_layers": 48,
    "attention_head_dim": 128,
    "num_attention_heads": 48,
    "joint_attention_dim": 15360,
    "timestep_guidance_channels": 256,
    "mlp_ratio": 3.0,
    "axes_dims_rope": [32, 32, 32, 32],
    "guidance_embeds": True,
}

#: The FLUX.2 pipelines patchify 2×2 latent pixels into one token.
PACKING = 2


def _mlp_ratio(config: Config) -> float:
    ratio = config["mlp_ratio"]
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not ratio > 0 or ratio > 1e6:
        raise ConfigError(f"{config.component}/config.json: 'mlp_ratio' must be a positive number, got {ratio!r}")
    return float(ratio)


#: Every config key ``Flux2Transformer2DModel`` reads (assembler and plans), as
#: :func:`flopcalc.engine.config.declare_keys` validates it.
declare_keys("Flux2Transformer2DModel", {
    "patch_size": SIZE, "in_channels": SIZE, "out_channels": SIZE | NULL, "num_layers": LAYERS,
    "num_single_layers": LAYERS, "attention_head_dim": SIZE, "num_attention_heads": SIZE,
    "joint_attention_dim": SIZE, "timestep_guidance_channels": SIZE, "mlp_ratio": RATIO,
    "axes_dims_rope": SIZES, "guidance_embeds": FLAG,
})

@register("Flux2Transformer2DModel", role="denoiser", defaults=DEFAULTS,
          source="diffusers/models/transformers/transformer_flux2.py")
def flux2_transformer(config: Config, shape: RunShape) -> Node:
    heads = positive_int(config, "num_attention_heads")
    head_dim = positive_int(config, "attention_head_dim")
    dim = heads * head_dim
    axes = positive_int_list(config, "axes_dims_rope")
    if sum(axes) != head_dim:
        raise ConfigError(f"{config.component}/config.json: the rotary axes (axes_dims_rope {axes}) must sum to "
                          f"attention_head_dim {head_dim}")
    ratio = _mlp_ratio(config)
    if int(dim * ratio) < 1:
        raise ConfigError(f"{config.component}/config.json: 'mlp_ratio' {ratio} gives an empty MLP at width {dim}")
    in_channels = positive_int(config, "in_channels")
    out_channels = config["out_channels"] or in_channels
    patch = positive_int(config, "patch_size")
    channels = positive_int(config, "timestep_guidance_channels")
    latent = ops.exact_div(shape.latent_height, PACKING) * ops.exact_div(shape.latent_width, PACKING)
    t = shape.text_len
    refs = 0 if shape.reference_tokens is None else shape.reference_tokens
    mode = shape.kv_cache
    if mode not in (None, "extract", "cached"):
        raise ValueError(f"unknown kv_cache mode {mode!r}")
    if mode is not None and shape.reference_tokens is None:
        raise ValueError("a KV-cached FLUX.2 forward needs reference tokens")
    # the tokens every linear sees: the cached forward runs the latent alone; the output layers see the latent only
    n = latent if mode == "cached" else latent + refs
    out = n if mode is None else latent
    attention = None if mode is None else kv_attention(
        queries=t + latent, keys=t + refs + latent, heads=heads, head_dim=head_dim,
        self_attending=refs if mode == "extract" else 0)

    embed = [mlp_embedder("timestep_embedder", channels, dim, bias=False)]
    if boolean(config, "guidance_embeds"):
        embed.append(mlp_embedder("guidance_embedder", channels, dim, bias=False))
    double = flux2_double_block(dim=dim, heads=heads, head_dim=head_dim, image_tokens=n, text_tokens=t,
                                mlp_ratio=ratio, attention=attention)
    single = flux2_single_block(dim=dim, heads=heads, head_dim=head_dim, tokens=n + t, mlp_ratio=ratio,
                                attention=attention)
    # the extract forward embeds ref_temb as well: a second call of these modules (transformer_flux2.py:1304-1316)
    again = _called_twice if mode == "extract" else (lambda node: node)
    return Node(
        "transformer",
        children=(
            again(Node("time_guidance_embed", children=tuple(embed))),
            again(flux2_modulation("double_stream_modulation_img", dim, 2)),
            flux2_modulation("double_stream_modulation_txt", dim, 2),
            again(flux2_modulation("single_stream_modulation", dim, 1)),
            Node("x_embedder", ops.linear(n, in_channels, dim, bias=False)),
            Node("context_embedder", ops.linear(t, positive_int(config, "joint_attention_dim"), dim, bias=False)),
            module_list("transformer_blocks", [double] * count_int(config, "num_layers")),
            module_list("single_transformer_blocks", [single] * count_int(config, "num_single_layers")),
            ada_layer_norm_continuous("norm_out", dim, dim, out, bias=False),
            Node("proj_out", ops.linear(out, dim, patch * patch * out_channels, bias=False)),
        ),
        formula="flux2_transformer",
    )


def _called_twice(node: Node) -> Node:
    """``node`` called a second time on the same weights: its work twice, its parameters once."""
    return replace(node, cost=node.cost + work_only(node.cost), children=tuple(_called_twice(c) for c in node.children))


def _idle_modulation(tree: Node, checkpointing: bool) -> str | None:
    """A model without double- (or single-) stream blocks computes their shared modulation for nothing: autograd
    skips its backward (measured; not modelled), so full fine-tuning of such a config is refused."""
    for blocks, modulation in (("transformer_blocks", "double_stream_modulation_img/_txt"),
                               ("single_transformer_blocks", "single_stream_modulation")):
        node = tree.find(blocks)
        if node is None or not node.children:
            return f"with no {blocks} its {modulation} feeds nothing (autograd skips that backward)"
    return None


gradient_graph(
    "Flux2Transformer2DModel",
    # transformer_flux2.py:1289, 1318-1319: time_guidance_embed's first linears read the sinusoidal timestep
    # (and guidance) projections, x_embedder the latents, context_embedder the text encoder's hidden states
    input_layers=("x_embedder", "context_embedder", "time_guidance_embed.*.linear_1"),
    # transformer_flux2.py:1357, 1398: each double- and single-stream block is checkpointed; both end in
    # ``gate * output`` (:964, :865), which saves the block's last layer output: the whole block is run again
    checkpointed=("transformer_blocks.*", "single_transformer_blocks.*"),
    source="diffusers/models/transformers/transformer_flux2.py:1289-1424",
    refuses=_idle_modulation,
    lora=LoraFlow(
        steps=(
            Layer("x_embedder", ("latents",), "img"),  # transformer_flux2.py:1318
            Layer("context_embedder", ("text",), "txt"),  # :1319
            Blocks("transformer_blocks", FLUX2_DOUBLE_BLOCK_FLOW),  # :1353-1374
            Join(("txt", "img"), "x"),  # :1377 cat([encoder_hidden_states, hidden_states])
            Blocks("single_transformer_blocks", FLUX2_SINGLE_BLOCK_FLOW),  # :1394-1416
            Join(("x",), "img"),  # :1420 the text tokens dropped (a slice: the text stream still gets a gradient)
            Layer("proj_out", ("img",), "out"),  # :1424
        ),
        # the timestep/guidance embedders, the three shared modulations and norm_out's linear read temb only
        frozen=("time_guidance_embed.**", "double_stream_modulation_img.**", "double_stream_modulation_txt.**",
                "single_stream_modulation.**", "norm_out.linear"),
        # examples/dreambooth/train_dreambooth_lora_flux2_klein.py (huggingface/diffusers@edc24228) names the
        # single blocks' attn.to_out one by one (``single_transformer_blocks.{i}.attn.to_out``: the bare name also
        # matches the double blocks' to_out ModuleList, which peft cannot wrap); target names with a block index
        # are not modelled, so there is no default: name the targets
        default_targets=(),
        targets_source="",
        source="diffusers/models/transformers/transformer_flux2.py:327-395, 572-631, 837-968, 1318-1424",
    ),
)
