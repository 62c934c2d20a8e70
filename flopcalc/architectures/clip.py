"""CLIP text tower: ``CLIPTextModel`` and ``CLIPTextModelWithProjection``
(transformers ``models/clip/modeling_clip.py``).

Pre-LayerNorm encoder of ``num_hidden_layers`` layers over ``seq_len`` tokens (77 in every
pipeline here), final LayerNorm, and for ``…WithProjection`` a bias-free ``text_projection`` of
the pooled (EOS) vector only. The causal mask does not reduce the dense attention work.
"""

from __future__ import annotations

from flopcalc.config import LAYERS, POSITIONS, SIZE, Config, count_int, declare_keys, positive_int
from flopcalc.cost import Node, module_list
from flopcalc.formulas import ops
from flopcalc.formulas.kaplan_transformer import mlp, self_attention
from flopcalc.registry import RunShape, register

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
#: :func:`flopcalc.config.declare_keys` validates it.
declare_keys(("CLIPTextModel", "CLIPTextModelWithProjection"), {
    "hidden_size": SIZE, "intermediate_size": SIZE, "max_position_embeddings": POSITIONS,
    "num_attention_heads": SIZE, "num_hidden_layers": LAYERS, "vocab_size": SIZE, "projection_dim": SIZE,
})


register("CLIPTextModel", role="text_encoder", defaults=DEFAULTS, source=SOURCE)(clip_text_model)
register("CLIPTextModelWithProjection", role="text_encoder", defaults=DEFAULTS, source=SOURCE)(
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
