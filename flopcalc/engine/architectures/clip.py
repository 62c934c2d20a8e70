"""CLIP towers (transformers ``models/clip/modeling_clip.py``): the text tower ``CLIPTextModel`` and
``CLIPTextModelWithProjection``, and the vision tower ``CLIPVisionModelWithProjection`` (Wan 2.1
image-to-video's image encoder).

Text: pre-LayerNorm encoder of ``num_hidden_layers`` layers over ``seq_len`` tokens (77 in every
pipeline here), final LayerNorm, and for ``…WithProjection`` a bias-free ``text_projection`` of
the pooled (EOS) vector only. The causal mask does not reduce the dense attention work.

Vision: ``CLIPVisionEmbeddings`` (a bias-free ``patch_size``-strided Conv2d into ``(image_size /
patch_size)²`` patches, a class token, learned positions: ``N = (image_size / patch_size)² + 1``
tokens), ``pre_layrnorm``, the same encoder layers over the N tokens, ``post_layernorm`` and the
bias-free ``visual_projection`` on the pooled class token only. The input is always ``image_size²``
(the image processor resizes and crops to it; positions are not interpolated).
"""

from __future__ import annotations

from flopcalc.engine.config import LAYERS, POSITIONS, SIZE, Config, count_int, declare_keys, positive_int
from flopcalc.engine.cost import Node, block_kinds, module_list
from flopcalc.formulas import ops
from flopcalc.formulas.kaplan_transformer import mlp, self_attention
from flopcalc.engine.registry import KaplanShape, RunShape, register

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds("kaplan_transformer")
from flopcalc.engine.loading import Buffer, loading_rules

#: ``CLIPTextConfig`` defaults (transformers configuration_clip.py).
DEFAULTS = {
    "vocab_size": 49408,
    "hidden_size": 512,
    "intermediate_size": 2048,
    "projection_dim": 512,
    "num_hidden_layers": 12,
    "num_attention_heads": 8,
    "max_position_embeddings": 77,
}
SOURCE = "transformers/models/clip/modeling_clip.py"


def clip_text_model(config: Config, shape: RunShape) -> Node:
    """``CLIPTextModel``: embeddings, encoder, final LayerNorm (transformers ≥ 5 holds them directly)."""
    return Node("text_encoder", children=_text_transformer(config, shape.seq_len).children, formula="clip_text")


def clip_text_model_with_projection(config: Config, shape: RunShape) -> Node:
    """``CLIPTextModelWithProjection``: ``text_model`` (a ``CLIPTextModel``) plus ``text_projection``
    of the pooled vector."""
    d = positive_int(config, "hidden_size")
    return Node(
        "text_encoder",
        children=(
            _text_transformer(config, shape.seq_len),
            Node("text_projection", ops.linear(1, d, positive_int(config, "projection_dim"), bias=False)),
        ),
        formula="clip_text",
    )


#: Every config key ``CLIPTextModel`` and ``CLIPTextModelWithProjection`` reads (assemblers and pipeline plan), as
#: :func:`flopcalc.engine.config.declare_keys` validates it.
declare_keys(("CLIPTextModel", "CLIPTextModelWithProjection"), {
    "hidden_size": SIZE, "intermediate_size": SIZE, "max_position_embeddings": POSITIONS,
    "num_attention_heads": SIZE, "num_hidden_layers": LAYERS, "vocab_size": SIZE, "projection_dim": SIZE,
})

#: Kaplan's shape: ``num_hidden_layers`` layers of width ``hidden_size``; ``embeddings`` (token and position).
KAPLAN = KaplanShape(lambda c: (count_int(c, "num_hidden_layers"), positive_int(c, "hidden_size")),
                     embeddings=("embeddings",))
register("CLIPTextModel", role="text_encoder", defaults=DEFAULTS, source=SOURCE, kaplan=KAPLAN)(clip_text_model)
register("CLIPTextModelWithProjection", role="text_encoder", defaults=DEFAULTS, source=SOURCE, kaplan=KAPLAN)(
    clip_text_model_with_projection
)


def _encoder_layers(config: Config, n) -> Node:
    """``CLIPEncoder``: ``num_hidden_layers`` ``CLIPEncoderLayer``s (pre-LayerNorm self-attention with
    biases, a plain two-linear MLP) over ``n`` tokens."""
    d = positive_int(config, "hidden_size")
    heads = positive_int(config, "num_attention_heads")
    d_ff = positive_int(config, "intermediate_size")
    layer = Node(
        "layer",
        children=(
            Node("layer_norm1", ops.layer_norm(n, d)),
            Node("self_attn", self_attention(n, d, heads, d // heads, bias=True)),
            Node("layer_norm2", ops.layer_norm(n, d)),
            Node("mlp", mlp(n, d, d_ff, bias=True, gated=False)),
        ),
        formula="kaplan_transformer",
    )
    return Node("encoder", children=(module_list("layers", [layer] * count_int(config, "num_hidden_layers")),))


def _text_transformer(config: Config, n) -> Node:
    d = positive_int(config, "hidden_size")
    embeddings = ops.embedding(positive_int(config, "vocab_size"), d) + ops.embedding(
        positive_int(config, "max_position_embeddings"), d
    )
    return Node(
        "text_model",
        children=(
            Node("embeddings", embeddings),
            _encoder_layers(config, n),
            Node("final_layer_norm", ops.layer_norm(n, d)),
        ),
    )


def _position_ids(config: Config) -> tuple[Buffer, ...]:
    """CLIPTextEmbeddings: a non-persistent int64 ``position_ids`` (1, max_position_embeddings)."""
    return (Buffer("text_model.embeddings.position_ids", positive_int(config, "max_position_embeddings"), "int64"),)


loading_rules("CLIPTextModel", buffers=_position_ids, source="transformers/models/clip/modeling_clip.py")
# text_projection holds the last parameter: get_keys_to_not_convert keeps it out of a quantizer
loading_rules("CLIPTextModelWithProjection", buffers=_position_ids, not_quantized=("text_projection",),
              source="transformers/models/clip/modeling_clip.py")


#: ``CLIPVisionConfig`` defaults (transformers configuration_clip.py).
VISION_DEFAULTS = {
    "hidden_size": 768,
    "intermediate_size": 3072,
    "projection_dim": 512,
    "num_hidden_layers": 12,
    "num_attention_heads": 12,
    "num_channels": 3,
    "image_size": 224,
    "patch_size": 32,
}


def vision_tokens(config: Config) -> int:
    """``N = (image_size // patch_size)² + 1``: the patches and the class token."""
    return (positive_int(config, "image_size") // positive_int(config, "patch_size")) ** 2 + 1


#: Every config key ``CLIPVisionModelWithProjection`` reads (assemblers and pipeline plan), as
#: :func:`flopcalc.engine.config.declare_keys` validates it.
declare_keys("CLIPVisionModelWithProjection", {
    "hidden_size": SIZE, "intermediate_size": SIZE, "projection_dim": SIZE, "num_hidden_layers": LAYERS,
    "num_attention_heads": SIZE, "num_channels": SIZE, "image_size": SIZE, "patch_size": SIZE,
})


def _vision_model(config: Config) -> Node:
    """``vision_model`` (``CLIPVisionTransformer``): embeddings, ``pre_layrnorm``, encoder, ``post_layernorm`` on
    the class token (the pooled output)."""
    d = positive_int(config, "hidden_size")
    patch = positive_int(config, "patch_size")
    side = positive_int(config, "image_size") // patch
    n = vision_tokens(config)
    embeddings = Node("embeddings", ops.parameters(d) + ops.embedding(n, d), children=(
        Node("patch_embedding", ops.conv(positive_int(config, "num_channels"), d, patch * patch, side * side,
                                         bias=False)),
    ))
    return Node("vision_model", children=(
        embeddings,
        Node("pre_layrnorm", ops.layer_norm(n, d)),
        _encoder_layers(config, n),
        Node("post_layernorm", ops.layer_norm(1, d)),
    ))


@register("CLIPVisionModelWithProjection", role="image_encoder", defaults=VISION_DEFAULTS, source=SOURCE)
def clip_vision_model_with_projection(config: Config, shape: RunShape) -> Node:
    """``CLIPVisionModelWithProjection``: ``vision_model`` (a ``CLIPVisionModel``: embeddings,
    ``pre_layrnorm``, encoder, ``post_layernorm`` on the class token) and ``visual_projection``."""
    d = positive_int(config, "hidden_size")
    return Node("image_encoder", children=(
        _vision_model(config),
        Node("visual_projection", ops.linear(1, d, positive_int(config, "projection_dim"), bias=False)),
    ), formula="clip_vision")


#: Every config key ``CLIPVisionModel`` reads (its assembler and the plans that run it).
declare_keys("CLIPVisionModel", {
    "hidden_size": SIZE, "intermediate_size": SIZE, "num_hidden_layers": LAYERS, "num_attention_heads": SIZE,
    "num_channels": SIZE, "image_size": SIZE, "patch_size": SIZE,
})


@register("CLIPVisionModel", role="image_encoder", defaults=VISION_DEFAULTS, source=SOURCE)
def clip_vision_model(config: Config, shape: RunShape) -> Node:
    """``CLIPVisionModel`` (no projection; ``WanAnimatePipeline``'s image encoder): the vision transformer's modules
    (embeddings, ``pre_layrnorm``, encoder, ``post_layernorm``) directly on the model, as transformers 5 builds it."""
    return Node("image_encoder", children=_vision_model(config).children, formula="clip_vision")


# modeling_clip.py CLIPVisionEmbeddings: a non-persistent int64 ``position_ids`` (1, num_positions)
# visual_projection holds the last parameter: get_keys_to_not_convert keeps it out of a quantizer
loading_rules("CLIPVisionModelWithProjection", buffers=lambda c: (
    Buffer("vision_model.embeddings.position_ids", vision_tokens(c), "int64"),), not_quantized=("visual_projection",),
    source=SOURCE)
loading_rules("CLIPVisionModel", buffers=lambda c: (
    Buffer("embeddings.position_ids", vision_tokens(c), "int64"),), source=SOURCE)
