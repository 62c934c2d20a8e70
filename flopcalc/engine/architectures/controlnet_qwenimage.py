"""Qwen-Image ControlNet: ``QwenImageControlNetModel`` (diffusers ``models/controlnets/controlnet_qwenimage.py``).

A shortened Qwen-Image transformer (:mod:`flopcalc.engine.architectures.qwen_image`) returning one residual per
block (controlnet_qwenimage.py:54-97 ``__init__``, :129-216 ``forward``):

* ``img_in`` (in_channels → d) on the N packed latent tokens, plus ``controlnet_x_embedder``
  (in_channels + ``extra_condition_channels`` → d) on the N packed tokens of the control condition (the control
  image's latent; for inpainting the masked image's latent and the mask, ``extra_condition_channels`` 4 more);
* ``time_text_embed`` (one timestep), ``txt_norm`` and ``txt_in`` on the T text tokens, as the transformer; the
  rotary tables (``pos_embed``) hold no parameters and no counted work;
* ``num_layers`` ``QwenImageTransformerBlock``\\ s (:func:`flopcalc.formulas.qwen_image.qwen_image_block`), then
  one ``controlnet_blocks`` linear (d → d) per block on its N image tokens. No ``norm_out``, no ``proj_out``.

The transformer adds the residuals to its blocks' image stream (additions: no counted work).
"""

from __future__ import annotations

from flopcalc.engine.config import COUNT, LAYERS, NULL, SIZE, SIZES, Config, count_int, declare_keys, positive_int
from flopcalc.engine.cost import Node, module_list
from flopcalc.engine.registry import RunShape, register
from flopcalc.engine.architectures.qwen_image import PACKING, TIMESTEP_CHANNELS
from flopcalc.formulas import ops
from flopcalc.formulas.conditioning import mlp_embedder
from flopcalc.formulas.qwen_image import qwen_image_block

#: ``QwenImageControlNetModel.__init__`` keyword defaults (controlnet_qwenimage.py:54-66).
DEFAULTS = {
    "patch_size": 2,
    "in_channels": 64,
    "out_channels": 16,
    "num_layers": 60,
    "attention_head_dim": 128,
    "num_attention_heads": 24,
    "joint_attention_dim": 3584,
    "axes_dims_rope": (16, 56, 56),
    "extra_condition_channels": 0,
}

#: Every config key ``QwenImageControlNetModel`` reads (assembler and pipeline plans), as
#: :func:`flopcalc.engine.config.declare_keys` validates it.
declare_keys("QwenImageControlNetModel", {
    "patch_size": SIZE, "in_channels": SIZE, "out_channels": SIZE | NULL, "num_layers": LAYERS,
    "attention_head_dim": SIZE, "num_attention_heads": SIZE, "joint_attention_dim": SIZE, "axes_dims_rope": SIZES,
    "extra_condition_channels": COUNT,
})


@register("QwenImageControlNetModel", role="controlnet", defaults=DEFAULTS,
          source="diffusers/models/controlnets/controlnet_qwenimage.py")
def qwen_image_controlnet(config: Config, shape: RunShape) -> Node:
    heads = positive_int(config, "num_attention_heads")
    head_dim = positive_int(config, "attention_head_dim")
    dim = heads * head_dim
    in_channels = positive_int(config, "in_channels")
    extra = count_int(config, "extra_condition_channels")
    text_dim = positive_int(config, "joint_attention_dim")
    n = ops.exact_div(shape.latent_height, PACKING) * ops.exact_div(shape.latent_width, PACKING)
    t = shape.text_len
    layers = count_int(config, "num_layers")
    block = qwen_image_block(dim=dim, heads=heads, head_dim=head_dim, image_tokens=n, text_tokens=t,
                             image_mod_rows=1)
    return Node(
        "controlnet",
        children=(
            Node("time_text_embed", children=(mlp_embedder("timestep_embedder", TIMESTEP_CHANNELS, dim, tokens=1),)),
            Node("txt_norm", ops.rms_norm(t, text_dim)),
            Node("img_in", ops.linear(n, in_channels, dim)),
            Node("txt_in", ops.linear(t, text_dim, dim)),
            module_list("transformer_blocks", [block] * layers),
            module_list("controlnet_blocks", [Node("block", ops.linear(n, dim, dim))] * layers),
            Node("controlnet_x_embedder", ops.linear(n, in_channels + extra, dim)),
        ),
        formula="qwen_image_controlnet",
    )
