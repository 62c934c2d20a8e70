"""``SanaTransformer2DModel`` (diffusers ``models/transformers/sana_transformer.py``): SANA's linear
DiT. The latent is patchified by a strided convolution (``PatchEmbed``, no positional table unless
``interpolation_scale`` is set) into ``N = (h/p)(w/p)`` tokens; the timestep goes through
adaLN-single (``AdaLayerNormSingle``: one MLP and one ``D → 6D`` linear shared by every block), or,
with ``guidance_embeds`` (SANA-Sprint), ``SanaCombinedTimestepGuidanceEmbeddings``; the Gemma-2
caption is projected by ``PixArtAlphaTextProjection`` and RMS-normed; the blocks are
:func:`flopcalc.formulas.sana.sana_transformer_block`; the output is a modulated LayerNorm and a
linear back to ``p²·out_channels``.
"""

from __future__ import annotations

from dataclasses import replace

from flopcalc.engine.config import (
    FLAG, LAYERS, NULL, RATIO, SIZE, TEXT, Config, Real, count_int, declare_keys, positive_int,
)
from flopcalc.engine.cost import Node, module_list
from flopcalc.engine.errors import ConfigError
from flopcalc.formulas import ops
from flopcalc.formulas.conditioning import mlp_embedder
from flopcalc.formulas.sana import sana_transformer_block
from flopcalc.engine.perturbed_attention import selected, supports_perturbation
from flopcalc.engine.registry import RunShape, register

#: ``SanaTransformer2DModel.__init__`` keyword defaults (sana_transformer.py).
DEFAULTS = {
    "in_channels": 32, "out_channels": 32, "num_attention_heads": 70, "attention_head_dim": 32, "num_layers": 20,
    "num_cross_attention_heads": 20, "cross_attention_head_dim": 112, "cross_attention_dim": 2240,
    "caption_channels": 2304, "mlp_ratio": 2.5, "dropout": 0.0, "attention_bias": False, "sample_size": 32,
    "patch_size": 1, "norm_elementwise_affine": False, "norm_eps": 1e-6, "interpolation_scale": None,
    "guidance_embeds": False, "guidance_embeds_scale": 0.1, "qk_norm": None, "timestep_scale": 1.0,
}
SOURCE = "diffusers/models/transformers/sana_transformer.py"
#: The ``qk_norm`` values SANA's processors can run (``norm_q`` applied to the whole projection).
QK_NORMS = (None, "rms_norm_across_heads", "layer_norm_across_heads")


def _time_embed(dim: int, guidance_embeds: bool) -> Node:
    """``time_embed``: ``AdaLayerNormSingle`` (``emb.timestep_embedder`` 256 → D → D, then
    ``linear`` D → 6D on silu) or, with ``guidance_embeds``, ``SanaCombinedTimestepGuidanceEmbeddings``
    (a second 256 → D → D MLP for the guidance value, then the same ``linear``)."""
    linear = Node("linear", ops.activation(dim) + ops.linear(1, dim, 6 * dim))
    if guidance_embeds:
        return Node("time_embed", children=(mlp_embedder("timestep_embedder", 256, dim),
                                            mlp_embedder("guidance_embedder", 256, dim), linear))
    return Node("time_embed", children=(Node("emb", children=(mlp_embedder("timestep_embedder", 256, dim),)), linear))


#: Every config key ``SanaTransformer2DModel`` reads (assemblers and pipeline plan), as
#: :func:`flopcalc.engine.config.declare_keys` validates it.
declare_keys("SanaTransformer2DModel", {
    "in_channels": SIZE, "out_channels": SIZE | NULL, "num_attention_heads": SIZE, "attention_head_dim": SIZE,
    "num_layers": LAYERS, "num_cross_attention_heads": SIZE | NULL, "cross_attention_head_dim": SIZE | NULL,
    "cross_attention_dim": SIZE | NULL, "caption_channels": SIZE, "mlp_ratio": RATIO,
    "dropout": Real(0.0, 1.0, closed=True),
    "attention_bias": FLAG, "sample_size": SIZE, "patch_size": SIZE, "norm_elementwise_affine": FLAG,
    "guidance_embeds": FLAG, "qk_norm": TEXT | NULL,
})


supports_perturbation("SanaTransformer2DModel")


@register("SanaTransformer2DModel", role="denoiser", defaults=DEFAULTS, source=SOURCE)
def sana_transformer(config: Config, shape: RunShape) -> Node:
    heads, head_dim = positive_int(config, "num_attention_heads"), positive_int(config, "attention_head_dim")
    dim = heads * head_dim
    patch = positive_int(config, "patch_size")
    if config["cross_attention_dim"] is None:
        raise ConfigError(f"{config.component}/config.json: SanaTransformer2DModel with cross_attention_dim null "
                          "cannot run (its blocks then have no attn2/norm2, which forward calls)")
    if config["qk_norm"] not in QK_NORMS:
        raise ConfigError(f"{config.component}/config.json: qk_norm {config['qk_norm']!r} cannot run in SANA's "
                          f"attention processors (they normalise all heads at once); use one of {QK_NORMS}")
    gh, gw = ops.exact_div(shape.latent_height, patch), ops.exact_div(shape.latent_width, patch)
    n, t = gh * gw, shape.text_len
    out_channels = config["out_channels"] or positive_int(config, "in_channels")
    layers = count_int(config, "num_layers")
    # perturbed-attention guidance: the self-attention modules are the blocks' attn1 (attn2 reads the caption)
    chosen = selected(shape.perturbed, [f"transformer_blocks.{i}.attn1" for i in range(layers)], config.component)
    row = None if shape.perturbed is None else "identity" if shape.perturbed.identity else "original"
    blocks = [sana_transformer_block(
        dim=dim, heads=heads, head_dim=head_dim,
        cross_heads=positive_int(config, "num_cross_attention_heads"),
        cross_head_dim=positive_int(config, "cross_attention_head_dim"),
        cross_attention_dim=positive_int(config, "cross_attention_dim"), height=gh, width=gw, text_tokens=t,
        attention_bias=bool(config["attention_bias"]), norm_affine=bool(config["norm_elementwise_affine"]),
        mlp_ratio=float(config["mlp_ratio"]), qk_norm=config["qk_norm"],
        pag=row if f"transformer_blocks.{i}.attn1" in chosen else None,
    ) for i in range(layers)]
    children = (
        Node("patch_embed", children=(Node("proj", ops.conv2d(positive_int(config, "in_channels"), dim, patch, gh, gw)),)),
        _time_embed(dim, bool(config["guidance_embeds"])),
        mlp_embedder("caption_projection", positive_int(config, "caption_channels"), dim, tokens=t),
        Node("caption_norm", ops.rms_norm(t, dim)),
        module_list("transformer_blocks", blocks),
        Node("scale_shift_table", ops.parameters(2 * dim)),
        Node("norm_out", children=(Node("norm", ops.layer_norm(n, dim, affine=False)),)),
        Node("proj_out", ops.linear(n, dim, patch * patch * out_channels)),
    )
    return Node("transformer", children=children, formula="sana_transformer")


#: ``SanaControlNetModel.__init__`` keyword defaults (diffusers ``models/controlnets/controlnet_sana.py``).
CONTROLNET_DEFAULTS = {
    "in_channels": 32, "out_channels": 32, "num_attention_heads": 70, "attention_head_dim": 32, "num_layers": 7,
    "num_cross_attention_heads": 20, "cross_attention_head_dim": 112, "cross_attention_dim": 2240,
    "caption_channels": 2304, "mlp_ratio": 2.5, "dropout": 0.0, "attention_bias": False, "sample_size": 32,
    "patch_size": 1, "norm_elementwise_affine": False, "norm_eps": 1e-6, "interpolation_scale": None,
}
declare_keys("SanaControlNetModel", {
    "in_channels": SIZE, "out_channels": SIZE | NULL, "num_attention_heads": SIZE, "attention_head_dim": SIZE,
    "num_layers": LAYERS, "num_cross_attention_heads": SIZE, "cross_attention_head_dim": SIZE,
    "cross_attention_dim": SIZE, "caption_channels": SIZE, "mlp_ratio": RATIO, "dropout": Real(0.0, 1.0, closed=True),
    "attention_bias": FLAG, "sample_size": SIZE, "patch_size": SIZE, "norm_elementwise_affine": FLAG,
})


@register("SanaControlNetModel", role="denoiser", defaults=CONTROLNET_DEFAULTS,
          source="diffusers/models/controlnets/controlnet_sana.py")
def sana_controlnet(config: Config, shape: RunShape) -> Node:
    """``SanaControlNetModel.forward`` (controlnet_sana.py): ``patch_embed`` on the latent and again on the
    control image's latent (``controlnet_cond``, same shape), ``input_block`` (zero Linear D → D) on the
    latter, added; adaLN-single ``time_embed``, the caption projection and RMSNorm; ``num_layers``
    ``SanaTransformerBlock`` s (no q/k norms: the class has no ``qk_norm``); ``controlnet_blocks``: a
    zero Linear D → D on each block's output (the residuals the transformer adds to its blocks)."""
    heads, head_dim = positive_int(config, "num_attention_heads"), positive_int(config, "attention_head_dim")
    dim = heads * head_dim
    patch = positive_int(config, "patch_size")
    gh, gw = ops.exact_div(shape.latent_height, patch), ops.exact_div(shape.latent_width, patch)
    n, t = gh * gw, shape.text_len
    proj = ops.conv2d(positive_int(config, "in_channels"), dim, patch, gh, gw)
    block = sana_transformer_block(
        dim=dim, heads=heads, head_dim=head_dim, cross_heads=positive_int(config, "num_cross_attention_heads"),
        cross_head_dim=positive_int(config, "cross_attention_head_dim"),
        cross_attention_dim=positive_int(config, "cross_attention_dim"), height=gh, width=gw, text_tokens=t,
        attention_bias=bool(config["attention_bias"]), norm_affine=bool(config["norm_elementwise_affine"]),
        mlp_ratio=float(config["mlp_ratio"]))
    layers = count_int(config, "num_layers")
    children = (
        Node("patch_embed", children=(Node("proj", proj + replace(proj, params=0)),)),  # latent, then control
        Node("input_block", ops.linear(n, dim, dim)),
        _time_embed(dim, False),
        mlp_embedder("caption_projection", positive_int(config, "caption_channels"), dim, tokens=t),
        Node("caption_norm", ops.rms_norm(t, dim)),
        module_list("transformer_blocks", [block] * layers),
        module_list("controlnet_blocks", [Node("block", ops.linear(n, dim, dim))] * layers),
    )
    return Node("controlnet", children=children, formula="sana_controlnet")
