r"""The ChatGLM layer (ChatGLM3-6B, Kolors' text encoder): diffusers ``pipelines/kolors/text_encoder.py``
``GLMBlock`` (the copy of THUDM's ``modeling_chatglm.py`` that diffusers vendors for Kolors).

A pre-norm decoder layer: ``input_layernorm`` → ``self_attention`` (one fused ``query_key_value``
projection, rotary q/k, ``core_attention`` = SDPA, ``dense``) → residual → ``post_attention_layernorm``
→ ``mlp`` (``dense_h_to_4h`` to twice the FFN width, SwiGLU, ``dense_4h_to_h``) → residual.

Symbols: :math:`n` tokens, :math:`d` hidden size, :math:`h` heads, :math:`g` key/value groups
(``multi_query_group_num`` with ``multi_query_attention``, else :math:`h`), :math:`d_h` head width
(``kv_channels``), :math:`d_f` FFN width (``ffn_hidden_size``).

.. math::

   \mathrm{MACs} = \underbrace{n d d_h (h + 2g)}_{\text{query\_key\_value}}
                 + \underbrace{2 h n^2 d_h}_{\text{QK}^\top,\ \text{AV}}
                 + \underbrace{n h d_h d}_{\text{dense}}
                 + \underbrace{3 n d d_f}_{\text{dense\_h\_to\_4h},\ \text{dense\_4h\_to\_h}}

With multi-query attention the keys and values are expanded to all :math:`h` heads before SDPA
(``key_layer.expand(...)``, ``SelfAttention.forward``), so the attention term has :math:`h`. The
causal mask (``is_causal=True``, or the padding mask) saves no MAC.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from flopcalc.engine.cost import Node, block_kinds
from flopcalc.formulas import ops

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds("glm_block")


@lru_cache(maxsize=1024)
def glm_block(*, tokens: Any, dim: int, heads: int, kv_groups: int, head_dim: int, d_ff: int, qkv_bias: bool,
              linear_bias: bool, rmsnorm: bool) -> Node:
    r"""``GLMBlock`` (text_encoder.py): two norms (``RMSNorm`` when ``rmsnorm``, else ``nn.LayerNorm``),
    ``self_attention`` and ``mlp``.
    :math:`\mathrm{MACs} = n d d_h (2h + 2g) + 2 h n^2 d_h + 3 n d d_f`."""
    norm = ops.rms_norm(tokens, dim) if rmsnorm else ops.layer_norm(tokens, dim)
    q_width, kv_width = heads * head_dim, kv_groups * head_dim
    self_attention = Node("self_attention", children=(
        Node("query_key_value", ops.linear(tokens, dim, q_width + 2 * kv_width, bias=qkv_bias or linear_bias)),
        Node("core_attention", ops.attention(tokens, tokens, heads, head_dim)),
        Node("dense", ops.linear(tokens, q_width, dim, bias=linear_bias)),
    ))
    mlp = Node("mlp", ops.activation(tokens * d_ff) * 2, children=(  # swiglu: silu(x0) * x1
        Node("dense_h_to_4h", ops.linear(tokens, dim, 2 * d_ff, bias=linear_bias)),
        Node("dense_4h_to_h", ops.linear(tokens, d_ff, dim, bias=linear_bias)),
    ))
    return Node("layer", children=(Node("input_layernorm", norm), self_attention,
                                   Node("post_attention_layernorm", norm), mlp), formula="glm_block")
