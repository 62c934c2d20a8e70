"""CLIP text tower: ``CLIPTextModel`` and ``CLIPTextModelWithProjection``
(transformers ``models/clip/modeling_clip.py``).

Pre-LayerNorm encoder of ``num_hidden_layers`` layers over ``seq_len`` tokens (77 in every
pipeline here), final LayerNorm, and for ``…WithProjection`` a bias-free ``text_projection`` of
the pooled (EOS) vector only. The causal mask does not reduce the dense attention work.
"""

from __future__ import annotations

from flopcalc.config import Config, count_int, positive_int
from flopcalc.cost import Node, block_kinds, module_list
from flopcalc.formulas import ops
from flopcalc.formulas.kaplan_transformer import mlp, self_attention
from flopcalc.registry import KaplanShape, RunShape, register

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds("kaplan_transformer")
from flopcalc.weights import Buffer, loading_rules

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


#: Kaplan's shape: ``num_hidden_layers`` layers of width ``hidden_size``; ``embeddings`` (token and position).
KAPLAN = KaplanShape(lambda c: (count_int(c, "num_hidden_layers"), positive_int(c, "hidden_size")),
                     embeddings=("embeddings",))
register("CLIPTextModel", role="text_encoder", defaults=DEFAULTS, source=SOURCE, kaplan=KAPLAN)(clip_text_model)
register("CLIPTextModelWithProjection", role="text_encoder", defaults=DEFAULTS, source=SOURCE, kaplan=KAPLAN)(
    clip_text_model_with_projection
)


def _text_transformer(config: Config, n) -> Node:
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
    embeddings = ops.embedding(positive_int(config, "vocab_size"), d) + ops.embedding(
        positive_int(config, "max_position_embeddings"), d
    )
    return Node(
        "text_model",
        children=(
            Node("embeddings", embeddings),
            Node("encoder", children=(module_list("layers", [layer] * count_int(config, "num_hidden_layers")),)),
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
