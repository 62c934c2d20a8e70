r"""Stable Audio Open's denoiser and conditioning projections (diffusers
``models/transformers/stable_audio_transformer.py``, ``pipelines/stable_audio/modeling_stable_audio.py``).

``StableAudioDiTModel.forward`` (stable_audio_transformer.py:288) on a latent of :math:`C` channels and :math:`L`
frames, :math:`T` conditioning tokens of width :math:`d_c'` (``cross_attention_input_dim``) and one global vector of
width :math:`d_g`, inner width :math:`d = h d_h`:

* ``cross_attention_proj`` (:math:`d_c' \to d_c \to d_c`, SiLU between, no biases) on the :math:`T` tokens,
  ``global_proj`` (:math:`d_g \to d \to d`) on the global vector, and the timestep: ``time_proj``
  (``StableAudioGaussianFourierProjection``: one ``x[:, None] @ weight[None, :]`` matmul of :math:`p/2` MACs, then
  cos and sin) and ``timestep_proj`` (:math:`p \to d \to d`). The pipeline passes one timestep per call
  (``t.unsqueeze(0)``, pipeline_stable_audio.py:693), which every row of the batch shares: the time path runs once
  per call, however many rows;
* ``preprocess_conv`` (1×1, :math:`C \to C`, no bias) on the :math:`L` frames, ``proj_in`` (:math:`C \to d`), the global
  token prepended (:math:`L + 1` tokens);
* per ``StableAudioDiTBlock`` (:76): LayerNorm, ``attn1`` self-attention of :math:`h` heads with partial rotary
  embeddings (elementwise), no biases; LayerNorm, ``attn2`` cross-attention with :math:`h_{kv}` key/value heads
  (``kv_heads``: keys and values :math:`h_{kv} d_h` wide, repeated to :math:`h` heads for the attention,
  ``StableAudioAttnProcessor2_0``), no biases; LayerNorm, a SwiGLU feed-forward (:math:`d \to 2 \cdot 4d`,
  :math:`4d \to d`, biases):

  .. math::

     \mathrm{MACs} = (L+1)\,4d^2 + h (L+1)^2 2 d_h
                   + (L+1)\,2 d^2 + 2 T d_c h_{kv} d_h + h (L+1) T\, 2 d_h + (L+1)\,12 d^2

* ``proj_out`` (:math:`d \to C`, no bias) on the :math:`L + 1` tokens, the global token dropped, ``postprocess_conv``
  (1×1) on the :math:`L` frames.

``StableAudioProjectionModel`` (modeling_stable_audio.py:108): ``text_projection`` (an ``nn.Identity`` when the text
encoder's width is the conditioning width, else ``Linear``) on the text states; two ``StableAudioNumberConditioner``
(start and end seconds), each a ``StableAudioPositionalEmbedding`` (:math:`1 \to 1 + 2 \cdot 128`, elementwise, a
``weights`` parameter of 128) and ``Linear(257, d_c)`` on one number.
"""

from __future__ import annotations

from typing import Any

from flopcalc.engine.cost import Cost, Node, block_kinds, module_list
from flopcalc.formulas import ops
from flopcalc.formulas.transformer_parts import feed_forward

BLOCK_KINDS = block_kinds("stable_audio_dit_block")

#: ``StableAudioNumberConditioner``'s ``internal_dim`` (modeling_stable_audio.py:64).
NUMBER_INTERNAL_DIM = 256


def gqa_attention(name: str, *, tokens: Any, dim: int, context_tokens: Any, context_dim: int, heads: int,
                  kv_heads: int, head_dim: int) -> Node:
    """``Attention(query_dim=dim, cross_attention_dim=context_dim, heads, dim_head=head_dim, kv_heads, bias=False,
    out_bias=False)`` under ``StableAudioAttnProcessor2_0``: q from the ``tokens``, k and v (``kv_heads`` heads)
    from the ``context_tokens``, the attention over ``heads`` heads (k and v repeated)."""
    inner, kv_inner = heads * head_dim, kv_heads * head_dim
    return Node(name, ops.attention(tokens, context_tokens, heads, head_dim), children=(
        Node("to_q", ops.linear(tokens, dim, inner, bias=False)),
        Node("to_k", ops.linear(context_tokens, context_dim, kv_inner, bias=False)),
        Node("to_v", ops.linear(context_tokens, context_dim, kv_inner, bias=False)),
        Node("to_out", children=(Node("0", ops.linear(tokens, inner, dim, bias=False)),)),
    ), formula="attention")


def dit_block(dim: int, heads: int, kv_heads: int, head_dim: int, cross_dim: int, tokens: Any, context: Any) -> Node:
    """``StableAudioDiTBlock`` on ``tokens`` tokens (the global token included) and ``context`` conditioning tokens."""
    ln = ops.layer_norm(tokens, dim)
    return Node("", children=(
        Node("norm1", ln),
        gqa_attention("attn1", tokens=tokens, dim=dim, context_tokens=tokens, context_dim=dim, heads=heads,
                      kv_heads=heads, head_dim=head_dim),
        Node("norm2", ln),
        gqa_attention("attn2", tokens=tokens, dim=dim, context_tokens=context, context_dim=cross_dim, heads=heads,
                      kv_heads=kv_heads, head_dim=head_dim),
        Node("norm3", ln),
        feed_forward("ff", tokens, dim, gated=True),
    ), formula="stable_audio_dit_block")


def mlp(name: str, rows: Any, d_in: int, d_hidden: int, d_out: int, *, bias: bool) -> Node:
    """``nn.Sequential(Linear(d_in, d_hidden), SiLU(), Linear(d_hidden, d_out))`` on ``rows`` vectors."""
    return Node(name, children=(Node("0", ops.linear(rows, d_in, d_hidden, bias=bias)),
                                Node("1", ops.activation(rows * d_hidden)),
                                Node("2", ops.linear(rows, d_hidden, d_out, bias=bias))))


def stable_audio_dit(*, in_channels: int, out_channels: int, layers: int, heads: int, kv_heads: int, head_dim: int,
                     cross_dim: int, cross_input_dim: int, global_dim: int, time_dim: int, frames: Any, context: Any,
                     time_rows: Any) -> Node:
    """``StableAudioDiTModel.forward`` on one row: ``frames`` latent frames, ``context`` conditioning tokens, and
    ``time_rows`` timestep embeddings (1 for the row that computes the call's shared timestep path, else 0)."""
    dim = heads * head_dim
    tokens = frames + 1
    half = time_dim // 2
    time_proj = Node("time_proj", ops.matmul(time_rows, 1, half) + ops.parameters(half)
                     + ops.activation(time_rows * time_dim))
    return Node("transformer", children=(
        time_proj,
        mlp("timestep_proj", time_rows, time_dim, dim, dim, bias=True),
        mlp("global_proj", 1, global_dim, dim, dim, bias=False),
        mlp("cross_attention_proj", context, cross_input_dim, cross_dim, cross_dim, bias=False),
        Node("preprocess_conv", ops.conv(in_channels, in_channels, 1, frames, bias=False)),
        Node("proj_in", ops.linear(frames, in_channels, dim, bias=False)),
        module_list("transformer_blocks", [dit_block(dim, heads, kv_heads, head_dim, cross_dim, tokens, context)]
                    * layers),
        Node("proj_out", ops.linear(tokens, dim, out_channels, bias=False)),
        Node("postprocess_conv", ops.conv(out_channels, out_channels, 1, frames, bias=False)),
    ), formula="stable_audio_dit")


def number_conditioner(name: str, dim: int, rows: Any) -> Node:
    """``StableAudioNumberConditioner(dim)`` on ``rows`` numbers: the Fourier features (``weights``, 128) and
    ``Linear(257, dim)``."""
    half = NUMBER_INTERNAL_DIM // 2
    return Node(name, children=(Node("time_positional_embedding", children=(
        Node("0", ops.parameters(half) + ops.activation(rows * NUMBER_INTERNAL_DIM)),
        Node("1", ops.linear(rows, NUMBER_INTERNAL_DIM + 1, dim)))),))


def stable_audio_projection(*, text_dim: int, dim: int, text_tokens: Any, numbers: Any) -> Node:
    """``StableAudioProjectionModel`` projecting ``text_tokens`` text states and ``numbers`` (start, end) pairs."""
    text = Node("text_projection", Cost() if text_dim == dim else ops.linear(text_tokens, text_dim, dim))
    return Node("projection_model", children=(text, number_conditioner("start_number_conditioner", dim, numbers),
                                              number_conditioner("end_number_conditioner", dim, numbers)),
                formula="stable_audio_projection")
