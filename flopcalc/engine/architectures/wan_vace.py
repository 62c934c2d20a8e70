"""Wan VACE: ``WanVACETransformer3DModel`` (diffusers ``models/transformers/transformer_wan_vace.py``): the Wan
transformer (:func:`flopcalc.engine.architectures.wan.wan_transformer`: patch embedding, condition embedder, ``blocks``,
output) plus the control branch:

* ``vace_patch_embedding``: ``nn.Conv3d(vace_in_channels, d, kernel=stride=patch_size)`` on the control latent
  (``control_hidden_states``, on the noise latent's ``T × h × w`` grid: N tokens);
* ``vace_blocks``: one ``WanVACETransformerBlock`` per entry of ``vace_layers``, each a Wan block on the N
  control tokens (self-attention, cross-attention to the same context, feed-forward) plus ``proj_out``
  (d → d: the hint added after ``blocks[vace_layers[i]]``); the first also has ``proj_in`` (d → d, its
  output added to the noise tokens).

.. math:: \\mathrm{MACs} = \\mathrm{Wan} + N\\,c_v\\,p_t p_h p_w\\,d + V\\,(\\text{block} + N d^2) + N d^2

with :math:`V` = ``len(vace_layers)`` (transformer_wan_vace.py:232-258, forward :322-372).
"""

from __future__ import annotations

from dataclasses import replace
from math import prod

from flopcalc.engine.architectures import wan
from flopcalc.engine.config import COUNT, SIZE, Config, ListOf, declare_keys, declared_keys, positive_int
from flopcalc.engine.cost import Node, block_kinds, module_list
from flopcalc.engine.errors import ConfigError
from flopcalc.formulas import ops
from flopcalc.engine.registry import RunShape, register
from flopcalc.engine.loading import loading_rules

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds("wan_vace_transformer_block")
#: ``WanVACETransformer3DModel.__init__`` keyword defaults (transformer_wan_vace.py): Wan's, and the VACE keys.
DEFAULTS = {**wan.DEFAULTS, "vace_layers": [0, 5, 10, 15, 20, 25, 30, 35], "vace_in_channels": 96}
SOURCE = "diffusers/models/transformers/transformer_wan_vace.py"

declare_keys("WanVACETransformer3DModel", {
    **declared_keys("WanTransformer3DModel"), "vace_layers": ListOf(COUNT, lo=1), "vace_in_channels": SIZE,
})


@register("WanVACETransformer3DModel", role="denoiser", defaults=DEFAULTS, source=SOURCE)
def wan_vace_transformer(config: Config, shape: RunShape) -> Node:
    layers = list(config["vace_layers"])
    if 0 not in layers or max(layers) >= config["num_layers"]:
        raise ConfigError(f"{config.component}/config.json: vace_layers {layers} must include 0 and stay below "
                          f"num_layers {config['num_layers']} (WanVACETransformer3DModel refuses them otherwise)")
    base = wan.wan_transformer(config, shape)
    block = base.find("blocks.0")  # every Wan block is alike: a VACE block is one plus its projections
    dim = positive_int(config, "num_attention_heads") * positive_int(config, "attention_head_dim")
    n = wan.latent_tokens(config, shape)
    vace = [Node("block", children=block.children
                 + ((Node("proj_in", ops.linear(n, dim, dim)),) if i == 0 else ())
                 + (Node("proj_out", ops.linear(n, dim, dim)),), formula="wan_vace_transformer_block")
            for i in range(len(layers))]
    embedding = Node("vace_patch_embedding",
                     ops.conv(positive_int(config, "vace_in_channels"), dim, prod(wan.patch_size(config)), n))
    ordered: list[Node] = []
    for child in base.children:
        ordered.append(child)
        if child.name == "patch_embedding":
            ordered.append(embedding)
        elif child.name == "blocks":
            ordered.append(module_list("vace_blocks", vace))
    return replace(base, children=tuple(ordered), formula="wan_vace_transformer")


# transformer_wan_vace.py:180: the same _keep_in_fp32_modules as Wan, and the same rotary tables
loading_rules("WanVACETransformer3DModel", keep_in_fp32=wan.KEEP_IN_FP32, buffers=wan.rotary_buffers,
              source="diffusers/models/transformers/transformer_wan_vace.py:180; transformer_wan.py:392")
