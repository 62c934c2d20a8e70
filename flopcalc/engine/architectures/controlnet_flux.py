"""FLUX.1 ControlNet: ``FluxControlNetModel`` (diffusers ``models/controlnets/controlnet_flux.py``).

A shortened copy of the FLUX transformer's trunk (:func:`flopcalc.engine.architectures.flux.flux_trunk`:
embedders, ``num_layers`` dual-stream and ``num_single_layers`` single-stream blocks) that reads
the noisy latent and the control condition and returns one residual per block:

* ``x_embedder`` (in_channels → d) on the N packed latent tokens, plus ``controlnet_x_embedder``
  (in_channels → d) on the condition's N tokens (lines 184–197 of controlnet_flux.py);
* InstantX style (``conditioning_embedding_channels`` None): the condition is the VAE-encoded,
  packed control image; XLabs style: the control *pixels* go through ``input_hint_block``
  (``ControlNetConditioningEmbedding``, ``block_out_channels=(16, 16, 16, 16)``: a 3×3 conv, three
  pairs of 3×3 convs the second of stride 2, a 3×3 conv to ``conditioning_embedding_channels``),
  then are patched ``patch_size``² into tokens;
* Union (``num_mode`` set): ``controlnet_mode_embedder`` (``nn.Embedding``) prepends one token to
  the text, so every block sees T + 1 text tokens;
* ``controlnet_blocks`` / ``controlnet_single_blocks``: one d → d linear per block on the N image
  tokens (the single blocks return the image part on its own). No ``norm_out`` / ``proj_out``.
"""

from __future__ import annotations

from typing import Any

from flopcalc.engine.config import NULL, SIZE, Config, count_int, declare_keys, positive_int
from flopcalc.engine.cost import Node, block_kinds, module_list
from flopcalc.formulas import ops
from flopcalc.engine.registry import RunShape, register
from flopcalc.engine.architectures.flux import DEFAULTS as FLUX_DEFAULTS
from flopcalc.engine.architectures.flux import FLUX_KEYS, PACKING, flux_trunk

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds("controlnet_conditioning_embedding")

#: ``FluxControlNetModel.__init__`` keyword defaults (controlnet_flux.py, lines 49–63): the FLUX
#: transformer's (same names, same values; no ``out_channels``) plus the ControlNet's own two.
DEFAULTS = {**{k: v for k, v in FLUX_DEFAULTS.items() if k != "out_channels"},
            "num_mode": None, "conditioning_embedding_channels": None}

#: ``input_hint_block = ControlNetConditioningEmbedding(..., block_out_channels=(16, 16, 16, 16))``.
HINT_BLOCK_OUT_CHANNELS = (16, 16, 16, 16)
#: ``ControlNetConditioningEmbedding``'s default ``conditioning_channels``: an RGB control image.
HINT_IN_CHANNELS = 3


def conditioning_embedding(name: str, c_in: int, channels: tuple[int, ...], c_out: int, height: Any,
                           width: Any) -> tuple[Node, Any, Any]:
    """``ControlNetConditioningEmbedding`` (diffusers ``models/controlnets/controlnet.py``, lines 66–108)
    on a ``c_in × height × width`` image: ``conv_in`` (3×3), then per step up the channel list a 3×3
    conv and a 3×3 stride-2 conv, then ``conv_out`` (3×3) to ``c_out``; SiLU after each but the last.
    Returns the node and the output size."""
    convs = [Node("conv_in", ops.conv2d(c_in, channels[0], 3, height, width)
                  + ops.activation(channels[0] * height * width))]
    blocks = []
    h, w = height, width
    for c, c_next in zip(channels, channels[1:]):
        blocks.append(Node(str(len(blocks)), ops.conv2d(c, c, 3, h, w) + ops.activation(c * h * w)))
        h, w = ops.conv_output_size(h, 3, 2, 1), ops.conv_output_size(w, 3, 2, 1)
        blocks.append(Node(str(len(blocks)), ops.conv2d(c, c_next, 3, h, w) + ops.activation(c_next * h * w)))
    convs.append(Node("blocks", children=tuple(blocks)))
    convs.append(Node("conv_out", ops.conv2d(channels[-1], c_out, 3, h, w)))
    return Node(name, children=tuple(convs), formula="controlnet_conditioning_embedding"), h, w


#: Every config key ``FluxControlNetModel`` reads (assemblers and pipeline plan), as
#: :func:`flopcalc.engine.config.declare_keys` validates it: the FLUX transformer's (no ``out_channels``) and its own two.
declare_keys("FluxControlNetModel", {
    **{k: v for k, v in FLUX_KEYS.items() if k != "out_channels"},
    "num_mode": SIZE | NULL, "conditioning_embedding_channels": SIZE | NULL,
})


@register("FluxControlNetModel", role="denoiser", defaults=DEFAULTS,
          source="diffusers/models/controlnets/controlnet_flux.py",
          nominal=RunShape(latent_height=64, latent_width=64, text_len=8, height=512, width=512))
def flux_controlnet(config: Config, shape: RunShape) -> Node:
    heads, head_dim = positive_int(config, "num_attention_heads"), positive_int(config, "attention_head_dim")
    dim = heads * head_dim
    in_channels = positive_int(config, "in_channels")
    n = ops.exact_div(shape.latent_height, PACKING) * ops.exact_div(shape.latent_width, PACKING)
    union = config["num_mode"] is not None
    children = [Node("x_embedder", ops.linear(n, in_channels, dim))]
    cond_tokens = n
    hint_channels = config["conditioning_embedding_channels"]
    if hint_channels is not None:
        patch = positive_int(config, "patch_size")
        hint, h, w = conditioning_embedding("input_hint_block", HINT_IN_CHANNELS, HINT_BLOCK_OUT_CHANNELS,
                                            positive_int(config, "conditioning_embedding_channels"),
                                            shape.height, shape.width)
        children.append(hint)
        cond_tokens = ops.exact_div(h, patch) * ops.exact_div(w, patch)
    children.append(Node("controlnet_x_embedder", ops.linear(cond_tokens, in_channels, dim)))
    # Union: the mode embedding joins the text after context_embedder (one more text token in every block)
    embed, context, joint, single = flux_trunk(config, n, shape.text_len, prepended=1 if union else 0)
    children += [embed, context]
    if union:
        children.append(Node("controlnet_mode_embedder", ops.embedding(positive_int(config, "num_mode"), dim)))
    children += [
        joint,
        single,
        module_list("controlnet_blocks", [Node("block", ops.linear(n, dim, dim))] * count_int(config, "num_layers")),
        module_list("controlnet_single_blocks",
                    [Node("block", ops.linear(n, dim, dim))] * count_int(config, "num_single_layers")),
    ]
    return Node("controlnet", children=tuple(children), formula="flux_controlnet")
