"""SigLIP vision tower: ``SiglipVisionModel`` (transformers ``models/siglip/modeling_siglip.py``), the
image encoder of FLUX.1 Redux (``FluxPriorReduxPipeline``).

``SiglipVisionEmbeddings`` (lines 116-185): a ``patch_size``-strided Conv2d with bias into
``N = (image_size / patch_size)²`` patches (no class token) plus learned positions; the CLIP-style
pre-LayerNorm encoder (``SiglipEncoderLayer``, lines 325-370: ``layer_norm1``, q/k/v/out with biases,
``layer_norm2``, a two-linear MLP; :func:`flopcalc.engine.architectures.clip._encoder_layers`) over the N
tokens; ``post_layernorm`` on every token; with ``vision_use_head`` (the default) the
``SiglipMultiheadAttentionPoolingHead`` (lines 622-643): a learned probe token attends to the N
tokens through ``nn.MultiheadAttention`` (``batch_first``; run functionally by
``F.multi_head_attention_forward``: the probe's q projection ``d²``, the packed k/v projection of
the N tokens ``2Nd²``, scores and weighted sum ``2Nd``, the output projection ``d²``; no submodule
is called), then ``layernorm`` and the MLP on the one pooled vector. The input is always
``image_size²`` (the image processor resizes to it).

MACs: ``C·d·p²·N + L·(4Nd² + 2N²d + 2N·d·f) + 3d² + 2Nd² + 2Nd + 2d·f`` (``f`` = ``intermediate_size``,
the head's terms last).
"""

from __future__ import annotations

from flopcalc.engine.architectures.clip import _encoder_layers
from flopcalc.engine.config import FLAG, LAYERS, SIZE, Choice, Config, declare_keys, positive_int
from flopcalc.engine.cost import Node
from flopcalc.formulas import ops
from flopcalc.engine.registry import RunShape, register
from flopcalc.engine.loading import Buffer, loading_rules

SOURCE = "transformers/models/siglip/modeling_siglip.py"

#: ``SiglipVisionConfig`` defaults (transformers configuration_siglip.py:93-103).
DEFAULTS = {
    "hidden_size": 768,
    "intermediate_size": 3072,
    "num_hidden_layers": 12,
    "num_attention_heads": 12,
    "num_channels": 3,
    "image_size": 224,
    "patch_size": 16,
    "vision_use_head": True,
}

#: Every config key ``SiglipVisionModel`` reads (assembler and pipeline plans).
declare_keys("SiglipVisionModel", {
    "hidden_size": SIZE, "intermediate_size": SIZE, "num_hidden_layers": LAYERS, "num_attention_heads": SIZE,
    "num_channels": SIZE, "image_size": SIZE, "patch_size": SIZE, "vision_use_head": FLAG,
    "model_type": Choice("siglip_vision_model"),
})


def siglip_patches(config: Config) -> int:
    """``N = (image_size // patch_size)²``: the patch tokens (no class token)."""
    return (positive_int(config, "image_size") // positive_int(config, "patch_size")) ** 2


def _pooling_head(n: int, d: int, heads: int, d_ff: int) -> Node:
    # in_proj_weight / in_proj_bias: bare parameters, F.linear on the probe (q) and the N tokens (packed k, v)
    in_proj = ops.matmul(1, d, d) + ops.matmul(n, d, 2 * d) + ops.parameters(3 * d * d + 3 * d)
    return Node("head", ops.parameters(d), children=(
        Node("attention", in_proj + ops.attention(1, n, heads, d // heads), children=(
            Node("out_proj", ops.linear(1, d, d, thop_hooked=False)),)),  # an nn.Linear subclass, applied by F.linear
        Node("layernorm", ops.layer_norm(1, d)),
        Node("mlp", ops.activation(d_ff), children=(
            Node("fc1", ops.linear(1, d, d_ff)), Node("fc2", ops.linear(1, d_ff, d)))),
    ))


@register("SiglipVisionModel", role="image_encoder", defaults=DEFAULTS, source=SOURCE)
def siglip_vision_model(config: Config, shape: RunShape) -> Node:
    d = positive_int(config, "hidden_size")
    patch = positive_int(config, "patch_size")
    side = positive_int(config, "image_size") // patch
    n = siglip_patches(config)
    children = [
        Node("embeddings", ops.embedding(n, d), children=(
            Node("patch_embedding", ops.conv(positive_int(config, "num_channels"), d, patch * patch, side * side)),
        )),
        _encoder_layers(config, n),
        Node("post_layernorm", ops.layer_norm(n, d)),
    ]
    if config["vision_use_head"]:
        children.append(_pooling_head(n, d, positive_int(config, "num_attention_heads"),
                                      positive_int(config, "intermediate_size")))
    return Node("image_encoder", children=tuple(children), formula="siglip_vision")


# modeling_siglip.py:135: a non-persistent int64 position_ids (1, num_patches)
# the pooling head's out_proj is a NonDynamicallyQuantizableLinear: bitsandbytes leaves it, quanto converts it
loading_rules("SiglipVisionModel", buffers=lambda c: (Buffer("embeddings.position_ids", siglip_patches(c), "int64"),),
              not_bnb_quantized=("out_proj",), source=SOURCE)
