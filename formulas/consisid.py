r"""ConsisID's face modules (diffusers ``models/transformers/consisid_transformer_3d.py``): the ``LocalFacialExtractor``
(a Perceiver resampler over the face ViT's hidden states) and the ``PerceiverCrossAttention`` layers that add its
tokens to the video tokens after every ``cross_attn_interval``-th block.

``PerceiverAttention`` (:36-78) and ``PerceiverCrossAttention`` (:183-229) compute attention with two ``@`` matmuls
(no SDPA; thop misses them): :math:`2 h\,q\,k\,d_h` MACs for :math:`q` queries and :math:`k` keys.

``LocalFacialExtractor`` (:81-180), on one face (``id_cond`` and the ``S`` ViT hidden states of :math:`V` tokens each,
width :math:`v`; :math:`Q` queries, :math:`k` id tokens, ``depth / S`` layers per scale):

.. math::
   \mathrm{MACs} = (d_{id} v + v^2 + v \cdot k v) + S\,3 V v^2
       + \mathrm{depth}\,\big[(Q{+}k)\,v\,i + (Q{+}k{+}k{+}V)\,2 v i + 2 h (Q{+}k)(Q{+}2k{+}V) d_h + (Q{+}k)\,i v
       + 2 (Q{+}k)\,m v^2\big] + Q v o

(``id_embedding_mapping``, the ``mapping_i`` MLPs, the layers' ``to_q``, ``to_kv`` on the context and the latents,
the attention, ``to_out``, the feed-forward of ratio :math:`m`, and ``latents @ proj_out``; :math:`i = h d_h`).
"""

from __future__ import annotations

from typing import Any

from flopcalc.engine.cost import Cost, Node, block_kinds, module_list
from flopcalc.formulas import ops

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds("consisid_perceiver_layer", "consisid_perceiver_cross_attention")


def _mlp3(name: str, d_in: int, width: int, d_out: int, tokens: Any) -> Node:
    """``nn.Sequential(Linear, LayerNorm, LeakyReLU, Linear, LayerNorm, LeakyReLU, Linear)`` (indices 0-6)."""
    return Node(name, children=(
        Node("0", ops.linear(tokens, d_in, width)),
        Node("1", ops.layer_norm(tokens, width)),
        Node("2", ops.activation(tokens * width)),
        Node("3", ops.linear(tokens, width, width)),
        Node("4", ops.layer_norm(tokens, width)),
        Node("5", ops.activation(tokens * width)),
        Node("6", ops.linear(tokens, width, d_out)),
    ))


def _attention_matmuls(queries: Any, keys: Any, heads: int, head_dim: int) -> Cost:
    """``(q · s) @ (k · s)ᵀ`` and ``softmax(·) @ v``: two functional matmuls and a softmax."""
    return ops.matmul(queries, head_dim, keys, batch=heads) + ops.matmul(queries, keys, head_dim, batch=heads) + Cost(
        elementwise=ops.SOFTMAX_OPS * heads * queries * keys)


def local_facial_extractor(*, id_dim: int, vit_dim: int, depth: int, head_dim: int, heads: int, id_tokens: int,
                           queries: int, output_dim: int, ff_mult: int, scales: int, vit_tokens: Any) -> Node:
    """``LocalFacialExtractor`` on one face (module doc)."""
    inner = heads * head_dim
    latents = queries + id_tokens
    context = id_tokens + vit_tokens
    layer = Node("layer", children=(
        Node("0", _attention_matmuls(latents, context + latents, heads, head_dim), (
            Node("norm1", ops.layer_norm(context, vit_dim)),
            Node("norm2", ops.layer_norm(latents, vit_dim)),
            Node("to_q", ops.linear(latents, vit_dim, inner, bias=False)),
            Node("to_kv", ops.linear(context + latents, vit_dim, 2 * inner, bias=False)),
            Node("to_out", ops.linear(latents, inner, vit_dim, bias=False)),
        )),
        Node("1", children=(
            Node("0", ops.layer_norm(latents, vit_dim)),
            Node("1", ops.linear(latents, vit_dim, vit_dim * ff_mult, bias=False)),
            Node("2", ops.activation(latents * vit_dim * ff_mult)),
            Node("3", ops.linear(latents, vit_dim * ff_mult, vit_dim, bias=False)),
        )),
    ), formula="consisid_perceiver_layer")
    children = [
        Node("latents", ops.parameters(queries * vit_dim)),
        Node("proj_out", ops.parameters(vit_dim * output_dim) + ops.matmul(queries, vit_dim, output_dim)),
        module_list("layers", [layer] * depth),
        *(_mlp3(f"mapping_{i}", vit_dim, vit_dim, vit_dim, vit_tokens) for i in range(scales)),
        _mlp3("id_embedding_mapping", id_dim, vit_dim, vit_dim * id_tokens, 1),
    ]
    return Node("local_facial_extractor", children=tuple(children), formula="consisid_local_facial_extractor")


def perceiver_cross_attention(*, dim: int, head_dim: int, heads: int, kv_dim: int, tokens: Any, face_tokens: int,
                              per_call: bool) -> Node:
    """``PerceiverCrossAttention`` adding the face tokens to ``tokens`` video tokens of one row; ``per_call``: this row
    also runs the work done once per call on the (one) face's tokens (``norm1``, ``to_kv``)."""
    inner = heads * head_dim
    faces = face_tokens if per_call else 0
    return Node("attention", _attention_matmuls(tokens, face_tokens, heads, head_dim), (
        Node("norm1", ops.layer_norm(faces, kv_dim)),
        Node("norm2", ops.layer_norm(tokens, dim)),
        Node("to_q", ops.linear(tokens, dim, inner, bias=False)),
        Node("to_kv", ops.linear(faces, kv_dim, 2 * inner, bias=False)),
        Node("to_out", ops.linear(tokens, inner, dim, bias=False)),
    ), formula="consisid_perceiver_cross_attention")
