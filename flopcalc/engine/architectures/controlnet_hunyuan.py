"""HunyuanDiT ControlNet: ``HunyuanDiT2DControlNetModel`` (diffusers ``models/controlnets/controlnet_hunyuan.py``).

The first half of a HunyuanDiT transformer (:mod:`flopcalc.engine.architectures.hunyuan_dit`) that returns one
residual per block (controlnet_hunyuan.py:30-120 ``__init__``, :214-283 ``forward``):

* ``pos_embed`` (the strided patch convolution, no positional table) runs twice: on the noisy latent and on the
  control image's VAE latent (``pos_embed(controlnet_cond)``, the same ``in_channels``), the latter through
  ``input_block`` (a zero-initialised d → d linear) and added to the former;
* ``time_extra_emb`` (the timestep and the attention pool over the mT5 states; the image-meta size and style
  embeddings when ``use_style_cond_and_image_meta_size``), ``text_embedder`` on the mT5 states and the
  ``text_embedding_padding`` table, as the transformer;
* ``transformer_num_layers // 2 − 1`` ``HunyuanDiTBlock``\\ s without long skips (``skip=False``: the first half of
  the model), each followed by one ``controlnet_blocks`` linear (d → d) on its N output tokens. No ``norm_out``,
  no ``proj_out``.

``HunyuanDiTPipeline``'s transformer adds the residuals to its long skips (additions: no counted work).
"""

from __future__ import annotations

from dataclasses import replace

from flopcalc.engine.config import FLAG, LAYERS, RATIO, SIZE, TEXT, Config, count_int, declare_keys, positive_int
from flopcalc.engine.cost import Node, module_list, work_only
from flopcalc.engine.registry import RunShape, register
from flopcalc.engine.architectures.hunyuan_dit import _grid, _text_tokens, feed_forward, ff_inner_dim, t5_width, widths
from flopcalc.formulas import ops
from flopcalc.formulas.conditioning import mlp_embedder
from flopcalc.formulas.hunyuan_dit import hunyuan_dit_block, hunyuan_timestep_embedding

#: ``HunyuanDiT2DControlNetModel.__init__`` keyword defaults (controlnet_hunyuan.py:30-47).
DEFAULTS = {
    "conditioning_channels": 3,
    "num_attention_heads": 16,
    "attention_head_dim": 88,
    "in_channels": None,
    "patch_size": None,
    "activation_fn": "gelu-approximate",
    "sample_size": 32,
    "hidden_size": 1152,
    "transformer_num_layers": 40,
    "mlp_ratio": 4.0,
    "cross_attention_dim": 1024,
    "cross_attention_dim_t5": 2048,
    "pooled_projection_dim": 1024,
    "text_len": 77,
    "text_len_t5": 256,
    "use_style_cond_and_image_meta_size": True,
}


def control_blocks(transformer_num_layers: int) -> int:
    """``HunyuanDiTBlock``\\ s of the ControlNet: ``transformer_num_layers // 2 - 1`` (controlnet_hunyuan.py:96)."""
    return max(0, transformer_num_layers // 2 - 1)


#: Every config key ``HunyuanDiT2DControlNetModel`` reads (assembler and pipeline plan), as
#: :func:`flopcalc.engine.config.declare_keys` validates it.
declare_keys("HunyuanDiT2DControlNetModel", {
    "conditioning_channels": SIZE, "num_attention_heads": SIZE, "attention_head_dim": SIZE, "in_channels": SIZE,
    "patch_size": SIZE, "activation_fn": TEXT, "sample_size": SIZE, "hidden_size": SIZE,
    "transformer_num_layers": LAYERS, "mlp_ratio": RATIO, "cross_attention_dim": SIZE, "cross_attention_dim_t5": SIZE,
    "pooled_projection_dim": SIZE, "text_len": SIZE, "text_len_t5": SIZE, "use_style_cond_and_image_meta_size": FLAG,
})


@register("HunyuanDiT2DControlNetModel", role="controlnet", defaults=DEFAULTS,
          source="diffusers/models/controlnets/controlnet_hunyuan.py",
          nominal=RunShape(latent_height=64, latent_width=64))
def hunyuan_dit_controlnet(config: Config, shape: RunShape) -> Node:
    heads, dim = widths(config)
    hidden = dim
    patch = positive_int(config, "patch_size")
    in_channels = positive_int(config, "in_channels")
    context_dim = positive_int(config, "cross_attention_dim")
    t5_dim = t5_width(config)
    t5_tokens, bert_tokens = count_int(config, "text_len_t5"), count_int(config, "text_len")
    mlp_ratio, activation = feed_forward(config)
    gh, gw = _grid(config, shape, patch)
    n, t = gh * gw, _text_tokens(config, shape)
    block = hunyuan_dit_block(dim=dim, heads=heads, tokens=n, context_tokens=t, context_dim=context_dim,
                              ff_inner_dim=ff_inner_dim(dim, mlp_ratio), activation=activation, skip=False,
                              identity_self_attention=False)
    layers = control_blocks(count_int(config, "transformer_num_layers"))
    patch_conv = ops.conv2d(in_channels, hidden, patch, gh, gw)
    return Node(
        "controlnet",
        children=(
            mlp_embedder("text_embedder", t5_dim, 4 * t5_dim, context_dim, tokens=t5_tokens),
            Node("text_embedding_padding", ops.parameters((bert_tokens + t5_tokens) * context_dim)),
            # called on the latent and again on the control latent (controlnet_hunyuan.py:260-262)
            Node("pos_embed", children=(Node("proj", patch_conv + work_only(patch_conv)),)),
            hunyuan_timestep_embedding(
                "time_extra_emb", dim=hidden, pooled_dim=positive_int(config, "pooled_projection_dim"),
                t5_tokens=t5_tokens, t5_dim=t5_dim,
                style_and_size=bool(config["use_style_cond_and_image_meta_size"]),
            ),
            module_list("controlnet_blocks", [Node("block", ops.linear(n, hidden, hidden))] * layers),
            module_list("blocks", [replace(block, name="block")] * layers),
            Node("input_block", ops.linear(n, hidden, hidden)),
        ),
        formula="hunyuan_dit_controlnet",
    )
