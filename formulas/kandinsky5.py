r"""Kandinsky 5 block formulas: ``Kandinsky5Transformer3DModel`` (diffusers
``models/transformers/transformer_kandinsky.py``), the denoiser of the Kandinsky 5 text-to-video, image-to-video,
text-to-image and image-to-image pipelines.

**Attention** (``Kandinsky5Attention`` with ``Kandinsky5AttnProcessor``, transformer_kandinsky.py:273-380): ``to_query``,
``to_key``, ``to_value`` and ``out_layer`` are ``d → d`` linears with biases; ``query_norm`` / ``key_norm`` are
``nn.RMSNorm(head_dim)`` per head (affine); rotary tables are applied elementwise; :math:`h = d / d_h` heads of
:math:`d_h = \sum` ``axes_dims``. Queries from :math:`n` tokens, keys and values from :math:`m`:

.. math:: \mathrm{MACs} = 2 n d^2 + 2 m d^2 + 2 h n m d_h

**Feed-forward** (``Kandinsky5FeedForward``): ``in_layer`` (d → f) and ``out_layer`` (f → d), no biases, GELU between:
:math:`2 n d f`.

**Text block** (``Kandinsky5TransformerEncoderBlock``, :417) on the :math:`T` prompt tokens: ``text_modulation``
(SiLU, ``time_dim → 6d`` on the one time embedding), LayerNorm (no affine), self-attention, LayerNorm, feed-forward:
:math:`6 t_d d + 4 T d^2 + 2 h T^2 d_h + 2 T d f`.

**Visual block** (``Kandinsky5TransformerDecoderBlock``, :447) on the :math:`N` video tokens: ``visual_modulation``
(``time_dim → 9d``), self-attention over the :math:`N` tokens (dense: the ``flash`` / ``regular`` attention types),
cross-attention to the :math:`T` text tokens, feed-forward:

.. math:: \mathrm{MACs} = 9 t_d d + 4 N d^2 + 2 h N^2 d_h + 2 N d^2 + 2 T d^2 + 2 h N T d_h + 2 N d f

Every LayerNorm here is an ``nn.LayerNorm`` (thop: 2 ops per element without affine, 4 with), every RMSNorm an
``nn.RMSNorm`` (no thop rule).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from flopcalc.engine.cost import Node, block_kinds, module_list
from flopcalc.formulas import ops

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds("kandinsky5_text_block", "kandinsky5_visual_block", "kandinsky5_attention")


def k5_attention(name: str, *, tokens: Any, dim: int, head_dim: int, context_tokens: Any = None) -> Node:
    r"""``Kandinsky5Attention(dim, head_dim)``: self-attention (``context_tokens`` None) or cross-attention (keys and
    values from ``context_tokens`` vectors of the same width); closed form in the module doc."""
    heads = ops.exact_div(dim, head_dim) if isinstance(dim, int) else dim // head_dim
    kv = tokens if context_tokens is None else context_tokens
    cost = (ops.rms_norm(tokens * heads, head_dim) + ops.rms_norm(kv * heads, head_dim)
            + ops.attention(tokens, kv, heads, head_dim))
    return Node(name, cost, children=(
        Node("to_query", ops.linear(tokens, dim, dim)),
        Node("to_key", ops.linear(kv, dim, dim)),
        Node("to_value", ops.linear(kv, dim, dim)),
        Node("out_layer", ops.linear(tokens, dim, dim)),
    ), formula="kandinsky5_attention")


def k5_feed_forward(name: str, tokens: Any, dim: int, ff_dim: int) -> Node:
    """``Kandinsky5FeedForward(dim, ff_dim)``: ``in_layer`` (no bias), GELU, ``out_layer`` (no bias)."""
    return Node(name, ops.activation(tokens * ff_dim), children=(
        Node("in_layer", ops.linear(tokens, dim, ff_dim, bias=False)),
        Node("out_layer", ops.linear(tokens, ff_dim, dim, bias=False)),
    ), formula="feed_forward")


def k5_modulation(name: str, time_dim: int, dim: int, params: int) -> Node:
    """``Kandinsky5Modulation(time_dim, dim, k)``: SiLU, ``out_layer`` (time_dim → k·d) on the one time embedding."""
    return Node(name, ops.activation(time_dim), children=(Node("out_layer", ops.linear(1, time_dim, params * dim)),))


@lru_cache(maxsize=256)
def text_block(*, tokens: Any, dim: int, time_dim: int, ff_dim: int, head_dim: int) -> Node:
    """``Kandinsky5TransformerEncoderBlock`` on ``tokens`` text tokens."""
    norm = ops.layer_norm(tokens, dim, affine=False)
    return Node("block", children=(
        k5_modulation("text_modulation", time_dim, dim, 6),
        Node("self_attention_norm", norm),
        k5_attention("self_attention", tokens=tokens, dim=dim, head_dim=head_dim),
        Node("feed_forward_norm", norm),
        k5_feed_forward("feed_forward", tokens, dim, ff_dim),
    ), formula="kandinsky5_text_block")


@lru_cache(maxsize=256)
def visual_block(*, tokens: Any, text_tokens: Any, dim: int, time_dim: int, ff_dim: int, head_dim: int) -> Node:
    """``Kandinsky5TransformerDecoderBlock`` on ``tokens`` video tokens attending to ``text_tokens``."""
    norm = ops.layer_norm(tokens, dim, affine=False)
    return Node("block", children=(
        k5_modulation("visual_modulation", time_dim, dim, 9),
        Node("self_attention_norm", norm),
        k5_attention("self_attention", tokens=tokens, dim=dim, head_dim=head_dim),
        Node("cross_attention_norm", norm),
        k5_attention("cross_attention", tokens=tokens, dim=dim, head_dim=head_dim, context_tokens=text_tokens),
        Node("feed_forward_norm", norm),
        k5_feed_forward("feed_forward", tokens, dim, ff_dim),
    ), formula="kandinsky5_visual_block")


def kandinsky5_transformer(*, visual_tokens: Any, text_tokens: Any, in_visual_dim: int, visual_cond: bool,
                           out_visual_dim: int, patch_volume: int, in_text_dim: int, in_text_dim2: int, dim: int,
                           time_dim: int, ff_dim: int, head_dim: int, text_blocks: int, visual_blocks: int) -> Node:
    r"""``Kandinsky5Transformer3DModel.forward`` (:611) on one row: ``text_embeddings`` (``in_text_dim → d`` and an
    affine LayerNorm on the :math:`T` tokens), ``time_embeddings`` (sinusoid of width d → ``time_dim`` → ``time_dim``),
    ``pooled_text_embeddings`` (``in_text_dim2 → time_dim`` and an affine LayerNorm on the pooled CLIP vector),
    ``visual_embeddings`` (the patch's ``p_t p_h p_w · C`` features → d on the :math:`N` tokens, ``C = 2c + 1`` with
    ``visual_cond``: the latent, the condition and its mask), the text blocks, the visual blocks, and ``out_layer``
    (``modulation`` → 2d, LayerNorm without affine, ``d → p_t p_h p_w · c_out``)."""
    n, t = visual_tokens, text_tokens
    embed_dim = 2 * in_visual_dim + 1 if visual_cond else in_visual_dim
    text = text_block(tokens=t, dim=dim, time_dim=time_dim, ff_dim=ff_dim, head_dim=head_dim)
    visual = visual_block(tokens=n, text_tokens=t, dim=dim, time_dim=time_dim, ff_dim=ff_dim, head_dim=head_dim)
    return Node("transformer", children=(
        Node("time_embeddings", ops.activation(time_dim), children=(
            Node("in_layer", ops.linear(1, dim, time_dim)), Node("out_layer", ops.linear(1, time_dim, time_dim)))),
        Node("text_embeddings", children=(Node("in_layer", ops.linear(t, in_text_dim, dim)),
                                          Node("norm", ops.layer_norm(t, dim)))),
        Node("pooled_text_embeddings", children=(Node("in_layer", ops.linear(1, in_text_dim2, time_dim)),
                                                 Node("norm", ops.layer_norm(1, time_dim)))),
        Node("visual_embeddings", children=(Node("in_layer", ops.linear(n, patch_volume * embed_dim, dim)),)),
        module_list("text_transformer_blocks", [text] * text_blocks),
        module_list("visual_transformer_blocks", [visual] * visual_blocks),
        Node("out_layer", children=(
            k5_modulation("modulation", time_dim, dim, 2),
            Node("norm", ops.layer_norm(n, dim, affine=False)),
            Node("out_layer", ops.linear(n, dim, patch_volume * out_visual_dim)),
        )),
    ), formula="kandinsky5_transformer")
