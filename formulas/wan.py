r"""Wan 2.1 video transformer block and embedders: diffusers
``models/transformers/transformer_wan.py`` (``WanTransformerBlock``, ``WanAttention`` with
``WanAttnProcessor``, ``WanTimeTextImageEmbedding``).

Symbols: :math:`N` video tokens (latent frames × patches per frame), :math:`T` text tokens, width
:math:`d = h d_h`, feed-forward width :math:`f`.

.. math::

   \mathrm{MACs}_\text{block} = \underbrace{4 N d^2 + 2 h N^2 d_h}_{\text{attn1}}
       + \underbrace{2 N d^2 + 2 T d^2 + 2 h N T d_h}_{\text{attn2}}
       + \underbrace{2 N d f}_{\text{ffn}}

Derivation: ``attn1`` is self-attention over all :math:`N` spatio-temporal tokens (``to_q/k/v``,
``to_out.0``, all ``d → d`` with bias); the rotary embedding is applied elementwise (no matmul);
``attn2`` is cross-attention, queries from the :math:`N` tokens, keys and values from the
:math:`T` text tokens already projected to width :math:`d` by the ``text_embedder``; ``ffn`` is
``FeedForward(d, inner_dim=f, activation_fn="gelu-approximate")``. Each ``WanAttention`` also holds
``norm_q``/``norm_k`` (``nn.RMSNorm(d)`` across heads, whatever the config's ``qk_norm`` says: the
block does not pass it on). ``norm1``/``norm3`` are ``FP32LayerNorm`` without affine, ``norm2``
(``cross_attn_norm``) with affine: ``nn.LayerNorm`` subclasses, which thop (exact-type rules) counts 0,
as it counts ``nn.RMSNorm``. The block's modulation is a learned ``scale_shift_table`` (6d) added to
the shared ``timestep_proj``: no matmul.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from flopcalc.engine.cost import Node, block_kinds
from flopcalc.formulas import ops
from flopcalc.formulas.conditioning import mlp_embedder
from flopcalc.formulas.transformer_parts import feed_forward, self_cross_block_flow
from flopcalc.engine.gradients import Attend, Join, Layer

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds("wan_transformer_block")


def _i2v_block_flow() -> tuple:
    """:func:`self_cross_block_flow` with the image-to-video ``attn2`` (``WanAttnProcessor``,
    transformer_wan.py:88-159): ``to_q`` on the tokens, ``to_k``/``to_v`` on the text part and ``add_k_proj``/
    ``add_v_proj`` (:123) on the image part of the context ``ctx`` (:89-91: slices of ``cat([clip, txt])``,
    transformer_wan.py:694, so each part requires grad when either the embedded CLIP tokens or the text states do:
    autograd then computes these layers' input gradients and the image attention's dK/dV, as measured), the attention
    over the image tokens (:129), then the one over the text, their outputs added (:158) into ``to_out.0``."""
    base = self_cross_block_flow("ffn")
    return (
        *base[:6],  # attn1, gated into the residual
        Layer("attn2.to_q", ("img",), "q"),
        Layer("attn2.to_k", ("ctx",), "k"),
        Layer("attn2.to_v", ("ctx",), "v"),
        Layer("attn2.add_k_proj", ("ctx",), "ik"),
        Layer("attn2.add_v_proj", ("ctx",), "iv"),
        Attend("attn2", q=("q",), k=("ik",), v=("iv",), to="oi", sizes=("to_q", "add_k_proj")),
        Attend("attn2", q=("q",), k=("k",), v=("v",), to="ot", sizes=("to_q", "to_k")),
        Join(("oi", "ot"), "o"),
        *base[10:],  # attn2.to_out.0, the residual, the feed-forward
    )


#: A ``WanTransformerBlock`` whose ``attn2`` has added k/v projections (Wan 2.1 I2V), for the backward of a LoRA run.
I2V_BLOCK_FLOW = _i2v_block_flow()


def wan_attention(name: str, *, tokens: Any, context_tokens: Any, dim: int, heads: int, head_dim: int,
                  image_tokens: Any = 0, added_kv_dim: int | None = None) -> Node:
    r"""``WanAttention(dim, heads, dim_head, added_kv_proj_dim)`` with ``WanAttnProcessor``: ``to_q`` on the
    ``tokens`` queries, ``to_k``/``to_v`` on ``context_tokens`` (the queries themselves for
    self-attention), RMS-normed q and k (``norm_q``, ``norm_k``: ``nn.RMSNorm(h·d_h)``), scaled
    dot-product attention, ``to_out.0``. With added k/v (image-to-video cross-attention,
    ``added_kv_dim`` set): the processor splits off the first ``image_tokens`` context tokens
    (``encoder_hidden_states.shape[1] − 512`` of them), projects them with ``add_k_proj``/``add_v_proj``
    (``norm_added_k`` on the keys) and adds a second attention of the queries over them.

    .. math:: \mathrm{MACs} = 2 N d\,d_i + 2 M d\,d_i + h N M (2 d_h)
              + 2 I d_a d_i + h N I (2 d_h),\quad d_i = h d_h

    The projections are children named as the real module's (``to_q``, ``to_k``, ``to_v``, ``add_k_proj``,
    ``add_v_proj``, ``to_out.0``); the node's own cost is the norms and the attention.
    """
    inner = heads * head_dim
    cost = (ops.rms_norm(tokens, inner) + ops.rms_norm(context_tokens, inner)
            + ops.attention(tokens, context_tokens, heads, head_dim))
    projections = [Node("to_q", ops.linear(tokens, dim, inner)), Node("to_k", ops.linear(context_tokens, dim, inner)),
                   Node("to_v", ops.linear(context_tokens, dim, inner))]
    if added_kv_dim is not None:
        projections += [Node(p, ops.linear(image_tokens, added_kv_dim, inner)) for p in ("add_k_proj", "add_v_proj")]
        cost = cost + ops.rms_norm(image_tokens, inner) + ops.attention(tokens, image_tokens, heads, head_dim)
    projections.append(Node("to_out", children=(Node("0", ops.linear(tokens, inner, dim)),)))
    return Node(name, cost, tuple(projections), formula="wan_attention")


@lru_cache(maxsize=256)
def wan_transformer_block(*, dim: int, heads: int, head_dim: int, ffn_dim: int, tokens: Any, text_tokens: Any,
                          cross_attn_norm: bool, image_tokens: Any = 0, added_kv_dim: int | None = None) -> Node:
    """One ``WanTransformerBlock`` (module names as in diffusers): ``norm1``, ``attn1`` (self),
    ``norm2`` (affine LayerNorm when ``cross_attn_norm``, else ``nn.Identity``), ``attn2`` (cross),
    ``norm3``, ``ffn``, and the ``scale_shift_table`` (6·d parameters)."""
    n, t = tokens, text_tokens
    children = [
        Node("norm1", ops.layer_norm(n, dim, affine=False, thop_rule=False)),
        wan_attention("attn1", tokens=n, context_tokens=n, dim=dim, heads=heads, head_dim=head_dim),
        wan_attention("attn2", tokens=n, context_tokens=t, dim=dim, heads=heads, head_dim=head_dim,
                      image_tokens=image_tokens, added_kv_dim=added_kv_dim),
    ]
    if cross_attn_norm:
        children.append(Node("norm2", ops.layer_norm(n, dim, thop_rule=False)))
    children += [
        feed_forward("ffn", n, dim, inner=ffn_dim),
        Node("norm3", ops.layer_norm(n, dim, affine=False, thop_rule=False)),
        Node("scale_shift_table", ops.parameters(6 * dim)),
    ]
    return Node("block", children=tuple(children), formula="wan_transformer_block")


def wan_image_embedder(*, image_dim: int, dim: int, image_tokens: Any) -> Node:
    r"""``WanImageEmbedding(image_dim, dim)`` (no ``pos_embed``): ``norm1`` (``FP32LayerNorm(image_dim)``),
    ``ff`` (``FeedForward(image_dim, dim, mult=1, activation_fn="gelu")``: ``net.0.proj`` image_dim →
    image_dim, GELU, ``net.2`` image_dim → dim), ``norm2`` (``FP32LayerNorm(dim)``), on the :math:`I`
    CLIP image tokens.

    .. math:: \mathrm{MACs} = I (d_c^2 + d_c d)
    """
    i = image_tokens
    up = Node("proj", ops.linear(i, image_dim, image_dim))
    net = Node("net", children=(Node("0", ops.activation(i * image_dim), (up,)), Node("2", ops.linear(i, image_dim, dim))))
    return Node("image_embedder", children=(
        Node("norm1", ops.layer_norm(i, image_dim, thop_rule=False)),
        Node("ff", children=(net,), formula="feed_forward"),
        Node("norm2", ops.layer_norm(i, dim, thop_rule=False)),
    ), formula="wan_image_embedder")


def wan_condition_embedder(*, dim: int, freq_dim: int, text_dim: int, text_tokens: Any, timesteps: Any = 1,
                           image: Node | None = None) -> Node:
    r"""``WanTimeTextImageEmbedding`` without an image embedder (``image_dim`` null): the
    sinusoidal ``timesteps_proj`` (no parameters), ``time_embedder`` (``TimestepEmbedding``:
    f → d → d on each of the :math:`n_t` timesteps: one, or one per token under Wan 2.2 TI2V's
    ``expand_timesteps``), SiLU and ``time_proj`` (d → 6d, on each), and ``text_embedder``
    (``PixArtAlphaTextProjection``: d_t → d → d with tanh GELU, on every text token).

    .. math:: \mathrm{MACs} = n_t (f d + d^2 + 6 d^2) + T (d_t d + d^2)
    """
    return Node(
        "condition_embedder",
        children=(
            mlp_embedder("time_embedder", freq_dim, dim, tokens=timesteps),
            Node("time_proj", ops.activation(timesteps * dim) + ops.linear(timesteps, dim, 6 * dim)),
            mlp_embedder("text_embedder", text_dim, dim, tokens=text_tokens),
            *(() if image is None else (image,)),
        ),
        formula="wan_condition_embedder",
    )
