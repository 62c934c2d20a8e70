r"""HunyuanDiT: its transformer block (self-attention with per-head LayerNorm q/k norms and 2-D
rotary embeddings, cross-attention to the concatenated BERT ⊕ mT5 text, feed-forward, and in the
second half a long skip connection) and its conditioning (the attention pool over the mT5
states). Mirrors diffusers ``models/transformers/hunyuan_transformer_2d.py`` (``HunyuanDiTBlock``,
``AdaLayerNormShift``) and ``models/embeddings.py`` (``HunyuanDiTAttentionPool``,
``HunyuanCombinedTimestepTextSizeStyleEmbedding``).

Symbols: :math:`N` image tokens of width :math:`d = h d_h` (:math:`h` heads of width
:math:`d_h`), :math:`T` text tokens (BERT then mT5, 77 + 256) of width :math:`C` (the cross
attention dim), FFN width :math:`f` (``int(d · mlp_ratio)``), :math:`g = 2` for a gated
feed-forward (``geglu``/``swiglu``), else 1.

.. math::

   \mathrm{MACs}_\text{block} =
       \underbrace{d^2}_{\text{norm1 shift}}
     + \underbrace{4 N d^2 + 2 h N^2 d_h}_{\text{attn1}}
     + \underbrace{2 N d^2 + 2 T C d + 2 h N T d_h}_{\text{attn2}}
     + \underbrace{(g + 1) N d f}_{\text{ff}}
     \;\Big[+ \underbrace{2 N d^2}_{\text{skip\_linear}}\Big]

Derivation: ``norm1`` (``AdaLayerNormShift``) adds ``linear(silu(temb))`` (one d × d product on
the conditioning vector) to a LayerNorm; ``attn1`` projects q, k, v and the output over the N
tokens and attends N × N; ``attn2`` projects q and the output over the N tokens, k and v over the
T text vectors, and attends N × T. The rotary embedding and the q/k LayerNorms are elementwise.
The blocks after the middle one (``layer > num_layers // 2``) first concatenate the stream with a
skip from the first half, LayerNorm it (2d wide) and project 2d → d (``skip_linear``).

The attention pool (``HunyuanDiTAttentionPool``, :math:`S` mT5 tokens of width :math:`D`, 8 heads,
output :math:`P`) prepends the mean token and lets it alone attend over the :math:`S + 1`:

.. math:: \mathrm{MACs}_\text{pool} = D^2 + 2 (S + 1) D^2 + 2 (S + 1) D + D P

all functional (``F.multi_head_attention_forward`` with the weights of its ``nn.Linear``
modules: thop hooks none of them).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from flopcalc.formulas import ops
from flopcalc.formulas.conditioning import mlp_embedder
from flopcalc.formulas.transformer_parts import attention_module, feed_forward, identity_attention, qk_norm_cost

from flopcalc.engine.cost import Node, block_kinds

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds("hunyuan_dit_block", "hunyuan_attention_pool")

#: ``HunyuanDiTAttentionPool(..., num_heads=8)`` in ``HunyuanCombinedTimestepTextSizeStyleEmbedding``.
POOL_HEADS = 8
#: ``Timesteps(num_channels=256)`` for the timestep and for each of the 6 image-meta-size values.
TIME_PROJ_DIM = 256
IMAGE_META_VALUES = 6

#: FeedForward activations whose projection emits value and gate (``GEGLU``, ``SwiGLU``).
GATED_ACTIVATIONS = ("geglu", "swiglu")
#: All ``FeedForward`` activation_fn values diffusers accepts.
ACTIVATIONS = ("gelu", "gelu-approximate", "geglu", "geglu-approximate", "swiglu", "linear-silu")


def hunyuan_attention_pool(name: str, *, tokens: Any, dim: int, out_dim: int, heads: int = POOL_HEADS) -> Node:
    r"""``HunyuanDiTAttentionPool(spacial_dim=S, embed_dim=D, num_heads=8, output_dim=P)``
    (``embeddings.py``): ``x = [mean(x); x] + positional_embedding``, then
    ``F.multi_head_attention_forward(query=x[:1], key=x, value=x)`` with ``q_proj``/``k_proj``/
    ``v_proj`` as separate weights and ``c_proj`` as the output projection.

    .. math:: \mathrm{MACs} = D^2 + 2 (S + 1) D^2 + 2 (S + 1) D + D P

    Every product is functional (``F.linear`` inside ``multi_head_attention_forward``, then
    scaled dot-product attention): thop counts none of it.
    """
    seq = tokens + 1
    cost = (
        ops.linear(1, dim, dim, thop_hooked=False)  # q from the mean token only
        + ops.linear(seq, dim, dim, thop_hooked=False) * 2  # k, v
        + ops.attention(1, seq, heads, ops.exact_div(dim, heads))
        + ops.linear(1, dim, out_dim, thop_hooked=False)  # c_proj
        + ops.parameters(seq * dim)  # positional_embedding (S + 1, D)
    )
    return Node(name, cost, formula="hunyuan_attention_pool")


def hunyuan_timestep_embedding(name: str, *, dim: int, pooled_dim: int, t5_tokens: Any, t5_dim: int,
                               style_and_size: bool) -> Node:
    r"""``HunyuanCombinedTimestepTextSizeStyleEmbedding`` (``embeddings.py``): the timestep MLP
    (256 → d → d), the attention pool of the mT5 states (to ``pooled_projection_dim`` P), and
    ``extra_embedder`` (``PixArtAlphaTextProjection``: e → 4d → d) on the concatenated extra
    conditions, e = P, or P + 6·256 + d with ``use_style_cond_and_image_meta_size`` (v1.0/1.1:
    image meta sizes through sinusoids, and a one-row ``style_embedder`` table).

    .. math:: \mathrm{MACs} = 256 d + d^2 + \mathrm{MACs}_\text{pool} + 4 e d + 4 d^2
    """
    extra_in = pooled_dim + (IMAGE_META_VALUES * TIME_PROJ_DIM + dim if style_and_size else 0)
    children = [
        mlp_embedder("timestep_embedder", TIME_PROJ_DIM, dim),
        hunyuan_attention_pool("pooler", tokens=t5_tokens, dim=t5_dim, out_dim=pooled_dim),
    ]
    if style_and_size:
        children.append(Node("style_embedder", ops.embedding(1, dim)))
    children.append(mlp_embedder("extra_embedder", extra_in, 4 * dim, dim))
    return Node(name, children=tuple(children), formula="hunyuan_timestep_embedding")


def ada_layer_norm_shift(name: str, dim: int, tokens: Any, *, affine: bool = True) -> Node:
    r"""``AdaLayerNormShift`` (``hunyuan_transformer_2d.py``): ``norm(x) + linear(silu(temb))``,
    the norm an ``FP32LayerNorm`` (an ``nn.LayerNorm`` subclass: thop has no rule for it).

    .. math:: \mathrm{MACs} = d^2
    """
    return Node(
        name,
        children=(
            Node("linear", ops.activation(dim) + ops.linear(1, dim, dim)),
            Node("norm", ops.layer_norm(tokens, dim, affine=affine, thop_rule=False)),
        ),
        formula="ada_layer_norm_shift",
    )


def qk_norm_cross_attention(name: str, *, tokens: Any, dim: int, context_tokens: Any, context_dim: int, heads: int,
                            head_dim: int) -> Node:
    r"""``Attention(query_dim=d, cross_attention_dim=C, qk_norm="layer_norm", bias=True)`` with
    ``HunyuanAttnProcessor2_0`` (``attention_processor.py``): q from the N image tokens, k and v
    from the T text vectors, a per-head ``nn.LayerNorm`` on q (N·h vectors) and on k (T·h), the
    rotary embedding on q only (elementwise), N × T attention, ``to_out.0``.

    .. math:: \mathrm{MACs} = 2 N d d_i + 2 T C d_i + 2 h N T d_h
    """
    inner = heads * head_dim
    cost = (
        ops.linear(tokens, dim, inner)
        + ops.linear(context_tokens, context_dim, inner) * 2
        + ops.layer_norm(tokens * heads, head_dim)  # norm_q
        + ops.layer_norm(context_tokens * heads, head_dim)  # norm_k
        + ops.attention(tokens, context_tokens, heads, head_dim)
        + ops.linear(tokens, inner, dim)
    )
    return Node(name, cost, formula="cross_attention")


@lru_cache(maxsize=1024)
def hunyuan_dit_block(
    *,
    dim: int,
    heads: int,
    tokens: Any,
    context_tokens: Any,
    context_dim: int,
    ff_inner_dim: int,
    activation: str = "gelu-approximate",
    skip: bool = False,
    identity_self_attention: bool = False,
) -> Node:
    """One ``HunyuanDiTBlock`` (``hunyuan_transformer_2d.py``), ``qk_norm=True`` as the model
    builds it, ``norm_elementwise_affine=True``: [``skip_norm``, ``skip_linear``,] ``norm1``,
    ``attn1``, ``norm2``, ``attn2``, ``norm3``, ``ff``. ``dim_head = dim // heads``.
    ``identity_self_attention``: the perturbed row of perturbed-attention guidance, whose ``attn1``
    runs ``to_v`` and ``to_out`` only (``PAGCFGHunyuanAttnProcessor2_0``, attention_processor.py:3540)."""
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation_fn {activation!r} is not supported (one of {', '.join(ACTIVATIONS)})")
    head_dim = dim // heads
    ln = ops.layer_norm(tokens, dim, thop_rule=False)  # FP32LayerNorm(dim, eps, elementwise_affine=True)
    children = []
    if skip:
        children += [
            Node("skip_norm", ops.layer_norm(tokens, 2 * dim, thop_rule=False)),
            Node("skip_linear", ops.linear(tokens, 2 * dim, dim)),
        ]
    children += [
        ada_layer_norm_shift("norm1", dim, tokens),
        identity_attention("attn1", tokens=tokens, dim=dim, inner=heads * head_dim,
                           idle=qk_norm_cost("layer_norm", 0, head_dim)) if identity_self_attention else
        attention_module("attn1", tokens=tokens, dim=dim, heads=heads, head_dim=head_dim, qk_norm="layer_norm"),
        Node("norm2", ln),
        qk_norm_cross_attention("attn2", tokens=tokens, dim=dim, context_tokens=context_tokens,
                                context_dim=context_dim, heads=heads, head_dim=head_dim),
        Node("norm3", ln),
        feed_forward("ff", tokens, dim, inner=ff_inner_dim, gated=activation in GATED_ACTIVATIONS),
    ]
    return Node("block", children=tuple(children), formula="hunyuan_dit_block")
