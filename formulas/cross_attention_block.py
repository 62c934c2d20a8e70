r"""Cross-attention transformer block: self-attention, cross-attention to the text, feed-forward,
each pre-LayerNormed. Mirrors diffusers ``attention.BasicTransformerBlock`` (the blocks inside every UNet
``Transformer2DModel``, PixArt and DiT); the closed form below is ``norm_type="layer_norm"``.

Symbols: :math:`n` image tokens of width :math:`d`, :math:`m` text tokens of width :math:`d_c`,
:math:`h` heads of width :math:`d_h` (:math:`d_i = h d_h`), MLP width :math:`f` (``4d``), and
:math:`g = 2` for the default GEGLU feed-forward (its projection emits value and gate), else 1.

.. math::

   \mathrm{MACs} = \underbrace{4 n d d_i + 2 h n^2 d_h}_{\text{attn1}}
                 + \underbrace{2 n d d_i + 2 m d_c d_i + 2 h n m d_h}_{\text{attn2}}
                 + \underbrace{(g + 1)\, n d f}_{\text{ff}}

Derivation: ``attn1`` projects q, k, v and the output over the n tokens and attends n × n;
``attn2`` projects q and the output over the n tokens but k and v over the m text vectors, and
attends n × m. The q/k/v projections have no bias unless ``attention_bias``.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from flopcalc.engine.cost import Node, block_kinds
from flopcalc.formulas import ops
from flopcalc.formulas.conditioning import ada_layer_norm_zero, mlp_embedder
from flopcalc.formulas.transformer_parts import attention_module, cross_attention, feed_forward, identity_attention

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds("cross_attention_block")


def timestep_label_embedding(name: str, dim: int, num_classes: int) -> Node:
    """``CombinedTimestepLabelEmbeddings``: a timestep MLP (256 → d → d) and a class table with
    one extra row, the CFG null class (``class_dropout_prob`` 0.1 > 0)."""
    return Node(name, children=(mlp_embedder("timestep_embedder", 256, dim),
                                Node("class_embedder", ops.embedding(num_classes + 1, dim))))


def ip_adapter_attention(attn2: Node, *, tokens: Any, heads: int, head_dim: int, ip_tokens: Any,
                         context_dim: int) -> Node:
    r"""``attn2`` with diffusers' ``IPAdapterAttnProcessor2_0`` (``models/attention_processor.py:4408-4617``),
    which ``UNet2DConditionLoadersMixin._convert_ip_adapter_attn_to_diffusers`` (``loaders/unet.py:598-690``)
    installs in every cross-attention as ``IPAdapterAttnProcessor2_0(hidden_size, cross_attention_dim,
    num_tokens)``: the text attention as before, then per adapter ``to_k_ip.0`` / ``to_v_ip.0``
    (``nn.Linear(cross_attention_dim, hidden_size, bias=False)``) on the :math:`m_{ip}` projected image tokens
    and a second SDPA of the same queries over them (:4603-4617), added to the text attention before
    ``to_out``. The processor is an ``nn.Module`` attribute of the ``Attention``, so its projections are
    ``attn2.processor.to_k_ip.0`` / ``.to_v_ip.0``; its ``__call__`` is not a ``forward``, so the SDPA counts at
    ``attn2``. :math:`\mathrm{MACs} = 2 m_{ip} d_c d_i + 2 h n m_{ip} d_h` more."""
    inner = heads * head_dim

    def projection(name: str) -> Node:
        return Node(name, children=(Node("0", ops.linear(ip_tokens, context_dim, inner, bias=False)),))
    processor = Node("processor", children=(projection("to_k_ip"), projection("to_v_ip")))
    return Node(attn2.name, attn2.cost + ops.attention(tokens, ip_tokens, heads, head_dim), attn2.children + (processor,), formula=attn2.formula)


@lru_cache(maxsize=1024)
def cross_attention_block(
    *,
    dim: int,
    heads: int,
    head_dim: int,
    tokens: Any,
    context_tokens: Any,
    context_dim: int | None,
    activation: str = "geglu",
    attention_bias: bool = False,
    ff_inner_dim: int | None = None,
    norm_affine: bool = True,
    norm_type: str = "layer_norm",
    num_embeds_ada_norm: int | None = None,
    identity_self_attention: bool = False,
    only_cross_attention: bool = False,
    ip_tokens: Any = None,
) -> Node:
    """One ``BasicTransformerBlock``. ``only_cross_attention`` (the x4 upscaler's UNet): ``attn1`` attends
    to the context too (``cross_attention_dim if only_cross_attention``, ``attention.py:877``, called with
    ``encoder_hidden_states``, :1007), and ``attn2`` still follows. ``norm_type`` as in diffusers:

    * ``layer_norm`` (UNets): ``norm1``/``norm2``/``norm3`` LayerNorms before the three parts;
    * ``ada_norm_single`` (PixArt): ``norm1`` before ``attn1``, no norm before ``attn2``,
      ``norm2`` before the MLP, modulation from a per-block ``scale_shift_table`` (6·d params);
    * ``ada_norm_zero`` (DiT): ``norm1`` is an ``AdaLayerNormZero`` with its own timestep and
      class-label embedder (``emb``), ``norm3`` before the MLP.

    ``identity_self_attention``: the perturbed row of perturbed-attention guidance, whose ``attn1``
    is the identity (:func:`~flopcalc.formulas.transformer_parts.identity_attention`).

    ``ip_tokens``: an IP-Adapter's image tokens per row (``attn2`` runs ``IPAdapterAttnProcessor2_0``,
    :func:`ip_adapter_attention`); None: no IP-Adapter.
    """
    if activation not in ("geglu", "gelu", "gelu-approximate"):
        raise ValueError(f"activation_fn {activation!r} is not supported")
    if norm_type not in ("layer_norm", "ada_norm_single", "ada_norm_zero"):
        raise ValueError(f"norm_type {norm_type!r} is not supported")
    ln = Node("norm", ops.layer_norm(tokens, dim, affine=norm_affine))
    if norm_type == "ada_norm_zero":
        emb = timestep_label_embedding("emb", dim, num_embeds_ada_norm)
        norm1 = Node("norm1", children=(emb,) + ada_layer_norm_zero("norm1", dim, tokens).children)
    else:
        norm1 = Node("norm1", ln.cost)
    if only_cross_attention:  # a cross-attention: PAG perturbs self-attention layers only (pag_utils.py)
        attn1 = cross_attention("attn1", tokens=tokens, dim=dim, context_tokens=context_tokens,
                                context_dim=context_dim, heads=heads, head_dim=head_dim, bias=attention_bias)
    elif identity_self_attention:
        attn1 = identity_attention("attn1", tokens=tokens, dim=dim, inner=heads * head_dim, bias=attention_bias)
    else:
        attn1 = attention_module("attn1", tokens=tokens, dim=dim, heads=heads, head_dim=head_dim, bias=attention_bias)
    children = [norm1, attn1]
    if context_dim is not None:
        if norm_type != "ada_norm_single":  # PixArt keeps norm2 for the MLP and attends un-normed
            children.append(Node("norm2", ln.cost))
        attn2 = cross_attention("attn2", tokens=tokens, dim=dim, context_tokens=context_tokens,
                                context_dim=context_dim, heads=heads, head_dim=head_dim, bias=attention_bias)
        children.append(attn2 if ip_tokens is None else ip_adapter_attention(attn2, tokens=tokens, heads=heads,
                                                                             head_dim=head_dim, ip_tokens=ip_tokens,
                                                                             context_dim=context_dim))
    if norm_type == "ada_norm_single":
        children += [Node("norm2", ln.cost), Node("scale_shift_table", ops.parameters(6 * dim))]
    else:
        children.append(Node("norm3", ln.cost))
    children.append(feed_forward("ff", tokens, dim, inner=ff_inner_dim, gated=activation == "geglu"))
    return Node("block", children=tuple(children), formula="cross_attention_block")
