"""SD3 ControlNet: ``SD3ControlNetModel`` (diffusers ``models/controlnets/controlnet_sd3.py``).

A shortened copy of the SD3 MMDiT (:mod:`flopcalc.engine.architectures.sd3`) that reads the noisy latent
and the control condition and returns one residual per block (controlnet_sd3.py:312-369):

* ``pos_embed`` (``PatchEmbed``, lines 113-122): the transformer's patch embedding, a stride-``p``
  ``p×p`` convolution ``in_channels → d`` on the latent (its sin-cos table is a buffer, added);
* ``time_text_embed`` and ``context_embedder`` (lines 125-129): as the transformer's;
* ``pos_embed_input`` (lines 165-173): a second ``PatchEmbed`` with no positional table,
  ``in_channels + extra_conditioning_channels → d``, on the control condition (the VAE latent of the
  control image; for inpainting the masked image's latent and the mask, 16 + 1 channels), added to
  the latent's tokens;
* ``transformer_blocks`` (lines 133-145): ``num_layers`` ``JointTransformerBlock`` s, none of them
  ``context_pre_only`` (the text stream keeps its output projection and MLP in every block);
* ``controlnet_blocks`` (lines 160-164): one ``d → d`` linear per block on the N image tokens.

No ``norm_out`` / ``proj_out``. Per block the MACs are :func:`flopcalc.formulas.mmdit_joint_block.mmdit_joint_block`'s
(not ``context_pre_only``); the embeddings add ``(C + C + E)·d·N`` for the two patch embeddings
(``C`` latent channels, ``E`` extra conditioning channels), and the zero linears ``L·N·d²``.

The SD3.5 Large ControlNets (stabilityai/stable-diffusion-3.5-controlnets, as diffusers'
``scripts/convert_sd3_controlnet_to_diffusers.py`` builds them: ``use_pos_embed`` false,
``joint_attention_dim`` null) have no ``pos_embed`` of their own: the pipeline's ``__init__``
(pipeline_stable_diffusion_3_controlnet.py:214-224) grafts the transformer's on
(``_get_pos_embed_from_transformer``, controlnet_sd3.py:241-251), so it is counted here, weights included
(a copy in memory); no ``context_embedder`` and ``SD3SingleTransformerBlock`` s on the image tokens alone
(the text does not enter).
"""

from __future__ import annotations

from flopcalc.engine.architectures.sd3 import DEFAULTS as SD3_DEFAULTS
from flopcalc.engine.architectures.sd3 import sd3_transformer
from flopcalc.engine.config import COUNT, FLAG, NULL, SIZE, Choice, Config, count_int, declare_keys, declared_keys, positive_int
from flopcalc.engine.cost import Node, block_kinds, module_list
from flopcalc.formulas import ops
from flopcalc.formulas.conditioning import ada_layer_norm_zero
from flopcalc.formulas.mmdit_joint_block import mmdit_joint_block
from flopcalc.formulas.transformer_parts import attention_module, feed_forward
from flopcalc.engine.registry import RunShape, register
from flopcalc.engine.loading import loading_rules, rules_of

#: Block kinds this module builds.
BLOCK_KINDS = block_kinds("sd3_single_block")

#: ``SD3ControlNetModel.__init__`` keyword defaults (controlnet_sd3.py:88-107): the transformer's
#: (same names, same values) plus its own four.
DEFAULTS = {**SD3_DEFAULTS, "extra_conditioning_channels": 0, "pos_embed_type": "sincos", "use_pos_embed": True,
            "force_zeros_for_pooled_projection": True}

#: Every config key ``SD3ControlNetModel`` reads (assembler and pipeline plans).
declare_keys("SD3ControlNetModel", {
    **declared_keys("SD3Transformer2DModel"),
    "joint_attention_dim": SIZE | NULL, "pos_embed_max_size": SIZE | NULL, "extra_conditioning_channels": COUNT,
    "pos_embed_type": Choice("sincos", None), "use_pos_embed": FLAG, "force_zeros_for_pooled_projection": FLAG,
})


def sd3_single_block(dim: int, heads: int, head_dim: int, tokens) -> Node:
    """``SD3SingleTransformerBlock`` (transformer_sd3.py:39-76) on ``tokens`` image tokens: ``norm1``
    (``AdaLayerNormZero``, 6·d² on the conditioning vector), self-attention with biases (q/k/v/out),
    ``norm2`` (LayerNorm without affine) and a 4× GELU ``ff``: ``6d² + 4Nd² + 2N²d + 8Nd²`` MACs."""
    return Node("block", children=(
        ada_layer_norm_zero("norm1", dim, tokens),
        attention_module("attn", tokens=tokens, dim=dim, heads=heads, head_dim=head_dim),
        Node("norm2", ops.layer_norm(tokens, dim, affine=False)),
        feed_forward("ff", tokens, dim),
    ), formula="sd3_single_block")


@register("SD3ControlNetModel", role="controlnet", defaults=DEFAULTS,
          source="diffusers/models/controlnets/controlnet_sd3.py")
def sd3_controlnet(config: Config, shape: RunShape) -> Node:
    heads, head_dim = positive_int(config, "num_attention_heads"), positive_int(config, "attention_head_dim")
    dim = heads * head_dim
    patch = positive_int(config, "patch_size")
    joint = config["joint_attention_dim"] is not None
    # pos_embed and time_text_embed: the transformer's, built from the same keys (without its own pos_embed, the
    # SD3.5 Large ControlNets run the transformer's, which the pipeline grafts on: the same patch convolution);
    # context_embedder when joint_attention_dim is set
    values = dict(config.values) if joint else {**config.values, "joint_attention_dim": config["caption_projection_dim"]}
    transformer = sd3_transformer(Config(config.component, values, config.defaults, validated=True), shape)
    kept = ("pos_embed", "time_text_embed") + (("context_embedder",) if joint else ())
    grid_h, grid_w = ops.exact_div(shape.latent_height, patch), ops.exact_div(shape.latent_width, patch)
    n, t = grid_h * grid_w, shape.text_len
    dual = set(config["dual_attention_layers"] or ())
    layers = count_int(config, "num_layers")
    if joint:
        kinds = {d: mmdit_joint_block(dim=dim, heads=heads, head_dim=head_dim, image_tokens=n, text_tokens=t,
                                      qk_norm=config["qk_norm"], dual_attention=d)
                 for d in {i in dual for i in range(layers)}}
        blocks = [kinds[i in dual] for i in range(layers)]
    else:
        blocks = [sd3_single_block(dim, heads, head_dim, n)] * layers
    extra = config["extra_conditioning_channels"]
    return Node(
        "controlnet",
        children=(
            *(c for c in transformer.children if c.name in kept),
            Node("pos_embed_input", children=(
                Node("proj", ops.conv2d(positive_int(config, "in_channels") + extra, dim, patch, grid_h, grid_w)),)),
            module_list("transformer_blocks", blocks),
            module_list("controlnet_blocks", [Node("block", ops.linear(n, dim, dim))] * layers),
        ),
        formula="sd3_controlnet",
    )


def _pos_embed_buffer(config: Config):
    """The sin-cos table of the pos_embed (its own, with ``pos_embed_max_size``), as the transformer's; none on a
    grafted pos_embed (the transformer's table is loaded with the transformer)."""
    if not config["use_pos_embed"] or config["pos_embed_max_size"] is None or config["pos_embed_type"] is None:
        return ()
    return rules_of("SD3Transformer2DModel").buffers(config)


# embeddings.py:332 (PatchEmbed): pos_embed's persistent sin-cos table, as the transformer's (pos_embed_input has
# pos_embed_type None: no table)
loading_rules("SD3ControlNetModel", buffers=_pos_embed_buffer,
              source="diffusers/models/embeddings.py:332")
