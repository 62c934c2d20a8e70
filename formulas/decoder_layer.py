r"""LLM and BERT layers used as diffusion text encoders.

Decoder layer (transformers 5 ``models/gemma/modeling_gemma.py`` ``GemmaDecoderLayer``,
``models/gemma2/modeling_gemma2.py`` ``Gemma2DecoderLayer``, ``models/qwen2_5_vl/modeling_qwen2_5_vl.py``
``Qwen2_5_VLDecoderLayer``, ``models/qwen3/modeling_qwen3.py`` ``Qwen3DecoderLayer``, whose per-head q/k
RMSNorms add parameters and no MACs): RMS-normed grouped-query self-attention with rotary positions, then an
RMS-normed gated MLP ``down(act(gate(x)) ⊙ up(x))``.

Symbols: :math:`n` tokens, :math:`d` hidden size, :math:`h` query heads, :math:`h_{kv}` key/value
heads, :math:`d_h` head width, :math:`d_f` intermediate size.

.. math::

   \mathrm{MACs} = \underbrace{n d d_h (2h + 2h_{kv})}_{q,o:\ h d_h;\ \ k,v:\ h_{kv} d_h}
                 + \underbrace{2 h n^2 d_h}_{\text{QK}^\top,\ \text{AV}}
                 + \underbrace{3 n d d_f}_{\text{gate, up, down}}

The attention term has :math:`h`, not :math:`h_{kv}`: ``repeat_kv`` (eager) and SDPA's GQA
both expand K and V to every query head before the two matmuls. A causal or sliding-window mask
(Gemma-2's odd layers) is an additive mask on the dense :math:`n × n` scores: no MAC is saved.
Gemma-2's logit soft-capping (``tanh(s/c)·c``) is elementwise. The rotary tables
(``position_ids[..., None] * inv_freq``, then cos/sin) are a broadcast product in the installed
transformers 5: 0 MACs (earlier releases wrote ``inv_freq_expanded @ position_ids_expanded``, a
matmul FlopCounterMode would count; measured here, nothing is counted there).

BERT layer (``models/bert/modeling_bert.py`` ``BertLayer``), post-LayerNorm, :math:`d = h d_h`:

.. math::

   \mathrm{MACs} = \underbrace{4 n d^2}_{\text{query, key, value, output.dense}}
                 + \underbrace{2 n^2 d}_{\text{QK}^\top,\ \text{AV}}
                 + \underbrace{2 n d d_f}_{\text{intermediate, output}}
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from typing import Any

from flopcalc.engine.cost import Cost, Node, block_kinds
from flopcalc.formulas import ops

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds("decoder_layer", "bert_layer")

#: Elementwise ops per attention score for logit soft-capping: divide, tanh, multiply.
SOFTCAP_OPS = 3


def gqa_self_attention(
    name: str,
    *,
    tokens: Any,
    dim: int,
    heads: int,
    kv_heads: int,
    head_dim: int,
    qkv_bias: bool,
    out_bias: bool,
    softcap: bool = False,
    qk_norm: bool = False,
) -> Node:
    r"""Grouped-query self-attention (``GemmaAttention``, ``Gemma2Attention``, ``Qwen2_5_VLAttention``,
    ``Qwen3Attention``): ``q_proj`` d → h·d_h, ``k_proj``/``v_proj`` d → h_kv·d_h, the two attention
    matmuls over all h heads, ``o_proj`` h·d_h → d. :math:`\mathrm{MACs} = n d d_h(2h + 2h_{kv}) + 2 h n^2 d_h`.
    ``softcap`` adds Gemma-2's elementwise ``tanh`` capping of the scores; ``qk_norm`` the per-head
    RMSNorms of q and k (Qwen3's ``q_norm``/``k_norm``, diffusers' ``norm_q``/``norm_k``; no MACs, d_h
    parameters each)."""
    q_width, kv_width = heads * head_dim, kv_heads * head_dim
    cost = (
        ops.linear(tokens, dim, q_width, bias=qkv_bias)
        + ops.linear(tokens, dim, kv_width, bias=qkv_bias) * 2
        + ops.attention(tokens, tokens, heads, head_dim)
        + ops.linear(tokens, q_width, dim, bias=out_bias)
    )
    if softcap:
        cost = cost + Cost(elementwise=SOFTCAP_OPS * heads * tokens * tokens)
    if qk_norm:
        cost = cost + ops.rms_norm(tokens * heads, head_dim) + ops.rms_norm(tokens * kv_heads, head_dim)
    return Node(name, cost, formula="gqa_self_attention")


def gated_mlp(name: str, tokens: Any, dim: int, d_ff: int, *, bias: bool = False, fused: bool = False) -> Node:
    r"""``down_proj(act(gate_proj(x)) * up_proj(x))`` (``GemmaMLP``, ``Gemma2MLP``, ``Qwen2MLP``,
    ``Qwen2_5_VLMLP``): :math:`\mathrm{MACs} = 3 n d d_f`. ``fused``: one ``gate_up_proj`` of width
    :math:`2 d_f`, chunked in two (``GlmMLP``, ``models/glm/modeling_glm.py:52``): the same MACs, one layer."""
    gate_up = ops.linear(tokens, dim, 2 * d_ff, bias=bias) if fused else ops.linear(tokens, dim, d_ff, bias=bias) * 2
    cost = (
        gate_up
        + ops.activation(tokens * d_ff) * 2  # the activation, and the gating product
        + ops.linear(tokens, d_ff, dim, bias=bias)
    )
    return Node(name, cost, formula="gated_mlp")


def lm_head(tokens: Any, dim: int, vocab: int, *, tied: bool) -> Node:
    r"""``lm_head``: hidden size → vocabulary, bias-free, on every token (the ``*ForCausalLM`` /
    ``*ForConditionalGeneration`` forwards of transformers 5 compute all logits at ``logits_to_keep=0``, e.g.
    ``models/llama/modeling_llama.py`` ``LlamaForCausalLM.forward``): :math:`\mathrm{MACs} = n d V`. ``tied``
    (``tie_word_embeddings``): its weight is the token embedding's, counted once there (0 parameters here)."""
    cost = ops.linear(tokens, dim, vocab, bias=False)
    return Node("lm_head", replace(cost, params=0) if tied else cost)


@lru_cache(maxsize=1024)
def decoder_layer(
    *,
    tokens: Any,
    dim: int,
    heads: int,
    kv_heads: int,
    head_dim: int,
    d_ff: int,
    qkv_bias: bool = False,
    out_bias: bool = False,
    sandwich_norms: bool = False,
    softcap: bool = False,
    qk_norm: bool = False,
    fused_gate_up: bool = False,
) -> Node:
    """One decoder layer: ``input_layernorm`` → ``self_attn`` → (``post_attention_layernorm``) →
    residual; ``post_attention_layernorm`` (Gemma, Qwen) or ``pre_feedforward_layernorm`` (Gemma-2)
    → ``mlp`` → (``post_feedforward_layernorm``, Gemma-2) → residual. ``sandwich_norms``: Gemma-2's
    four RMSNorms per layer instead of two. ``qk_norm``: Qwen3's per-head q/k RMSNorms. ``fused_gate_up``:
    see :func:`gated_mlp`."""
    norm = ops.rms_norm(tokens, dim)
    attn = gqa_self_attention("self_attn", tokens=tokens, dim=dim, heads=heads, kv_heads=kv_heads,
                              head_dim=head_dim, qkv_bias=qkv_bias, out_bias=out_bias, softcap=softcap,
                              qk_norm=qk_norm)
    mlp = gated_mlp("mlp", tokens, dim, d_ff, fused=fused_gate_up)
    if sandwich_norms:
        children = (Node("input_layernorm", norm), attn, Node("post_attention_layernorm", norm),
                    Node("pre_feedforward_layernorm", norm), mlp, Node("post_feedforward_layernorm", norm))
    else:
        children = (Node("input_layernorm", norm), attn, Node("post_attention_layernorm", norm), mlp)
    return Node("layer", children=children, formula="decoder_layer")


def rotary_embedding(name: str, tokens: Any, head_dim: int, *, axes: int = 1) -> Node:
    """The rotary tables (``GemmaRotaryEmbedding``, ``Gemma2RotaryEmbedding``,
    ``Qwen2_5_VLRotaryEmbedding`` with ``axes=3`` for mRoPE's temporal/height/width rows):
    ``freqs = position_ids[..., None] * inv_freq`` is a broadcast product (0 MACs); elementwise:
    the product, cos and sin over ``axes · n · ⌈d_h/2⌉`` frequencies (``arange(0, d_h, 2)``). No
    parameters (buffers only)."""
    freqs = axes * tokens * ((head_dim + 1) // 2)  # head_dim is a config int, not a size
    return Node(name, Cost(elementwise=3 * freqs), formula="rotary_embedding")


# --------------------------------------------------------------------------- BERT


@lru_cache(maxsize=1024)
def bert_layer(*, tokens: Any, dim: int, heads: int, d_ff: int) -> Node:
    r"""``BertLayer``: ``attention`` (``self``: query/key/value d → d with bias and the two
    attention matmuls; ``output``: dense d → d and a LayerNorm), ``intermediate`` (dense d → d_f,
    activation) and ``output`` (dense d_f → d, LayerNorm).
    :math:`\mathrm{MACs} = 4 n d^2 + 2 n^2 d + 2 n d d_f`."""
    head_dim = ops.exact_div(dim, heads)
    attention = Node("attention", children=(
        Node("self", ops.linear(tokens, dim, dim) * 3 + ops.attention(tokens, tokens, heads, head_dim)),
        Node("output", ops.linear(tokens, dim, dim) + ops.layer_norm(tokens, dim)),
    ))
    intermediate = Node("intermediate", ops.linear(tokens, dim, d_ff) + ops.activation(tokens * d_ff))
    output = Node("output", ops.linear(tokens, d_ff, dim) + ops.layer_norm(tokens, dim))
    return Node("layer", children=(attention, intermediate, output), formula="bert_layer")


def bert_cross_attention_params(dim: int) -> Cost:
    """``crossattention`` of a decoder BERT with ``add_cross_attention``: built, but it runs only
    with ``encoder_hidden_states`` (never in a text encoder): parameters only."""
    return ops.linear(0, dim, dim) * 4 + ops.layer_norm(0, dim)  # query, key, value, output.dense; LayerNorm


def bert_embeddings(name: str, tokens: Any, dim: int, *, vocab: int, positions: int, token_types: int) -> Node:
    """``BertEmbeddings``: word, absolute position and token-type tables (lookups), summed, then a
    LayerNorm over the n tokens."""
    tables = ops.embedding(vocab, dim) + ops.embedding(positions, dim) + ops.embedding(token_types, dim)
    return Node(name, tables + ops.layer_norm(tokens, dim), formula="bert_embeddings")


def bert_pooler(name: str, dim: int) -> Node:
    r"""``BertPooler``: ``dense`` d → d on the first token only, then tanh.
    :math:`\mathrm{MACs} = d^2`."""
    return Node(name, children=(Node("dense", ops.linear(1, dim, dim)), Node("activation", ops.activation(dim))),
                formula="bert_pooler")
