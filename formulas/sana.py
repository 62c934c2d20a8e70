r"""SANA's linear DiT (diffusers ``models/transformers/sana_transformer.py``) and the parts it shares
with the DC-AE: ReLU linear attention and the GLU Mix-FFN (``GLUMBConv``).

**Linear attention** (``attention_processor.py`` ``SanaLinearAttnProcessor2_0``, and
``SanaMultiscaleLinearAttention.apply_linear_attention``). Per head, with :math:`d` the head width
and :math:`n` tokens, ``value`` is padded with a row of ones (the normaliser), then two
``torch.matmul`` calls run in this order:

.. math::

   S = [V; \mathbf{1}]\,\mathrm{ReLU}(K)^\top \;(d{+}1 \times n \cdot n \times d), \qquad
   O = S\,\mathrm{ReLU}(Q) \;(d{+}1 \times d \cdot d \times n)

so :math:`\mathrm{MACs} = 2\,h\,n\,d\,(d+1)`: linear in :math:`n`. The last row of :math:`O` is the
normaliser :math:`\sum_j \mathrm{ReLU}(k_j)^\top \mathrm{ReLU}(q)` that the other rows are divided by.
torch counts both matmuls (``aten.bmm``); thop has no module to hook. flopcalc books them as
``attention``: they are this block's token mixing, the place QKᵀ and A·V take in softmax attention.

**Self-attention** (``attn1``) on :math:`N` tokens of width :math:`D = h d`:
:math:`\mathrm{MACs} = 4 N D^2 + 2 h N d (d+1)` (q, k, v, out projections; linear attention).

**Cross-attention** (``attn2``, ``SanaAttnProcessor2_0``: SDPA) from :math:`N` image tokens to the
:math:`T` caption tokens, :math:`h_c` heads of :math:`d_c`, :math:`D_c = h_c d_c`:
:math:`\mathrm{MACs} = 2 N D D_c + 2 T D D_c + 2 h_c N T d_c`.

**Mix-FFN** (``GLUMBConv``) on an :math:`H \times W` map of :math:`C` channels, hidden
:math:`F = \lfloor r C \rfloor` (``int(expand_ratio * in_channels)``): a 1×1 conv to :math:`2F`, a
depthwise 3×3 conv on the :math:`2F` channels, a SiLU gate halving them, a 1×1 conv to
:math:`C_o`: :math:`\mathrm{MACs} = HW\,(2FC + 18F + F C_o)`.

**Block** (``SanaTransformerBlock``), :math:`N = HW`:

.. math:: \mathrm{MACs} = 4ND^2 + 2hNd(d{+}1) + 2ND D_c + 2TDD_c + 2h_cNTd_c + N(3FD + 18F)
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from flopcalc.engine.cost import Cost, Node, block_kinds
from flopcalc.formulas import ops
from flopcalc.formulas.transformer_parts import cross_attention, identity_attention

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds("sana_transformer_block")

#: Elementwise ops per (token, channel) of linear attention: ReLU on q and k, the divide.
LINEAR_ATTENTION_ELEMENTWISE = 3


def linear_attention(tokens: Any, heads: int, head_dim: int) -> Cost:
    r"""ReLU linear attention of ``heads`` heads of ``head_dim`` over ``tokens`` tokens:
    :math:`\mathrm{MACs} = 2 h n d (d + 1)` (``[V;1]·Kᵀ`` then ``·Q``; see the module doc)."""
    return Cost(attention=2 * heads * tokens * head_dim * (head_dim + 1),
                elementwise=LINEAR_ATTENTION_ELEMENTWISE * tokens * heads * head_dim)


def quadratic_relu_attention(tokens: Any, heads: int, head_dim: int) -> Cost:
    r"""``SanaMultiscaleLinearAttention.apply_quadratic_attention`` (used when the map has no more
    positions than ``head_dim``): ``Kᵀ·Q`` then ``V·S``, :math:`\mathrm{MACs} = 2 h d n^2`."""
    return Cost(attention=2 * heads * head_dim * tokens * tokens,
                elementwise=LINEAR_ATTENTION_ELEMENTWISE * tokens * heads * head_dim)


def across_heads_norm(kind: str | None, tokens: Any, inner: int) -> Cost:
    """One of ``norm_q`` / ``norm_k`` of a SANA attention over ``tokens`` projections of width
    ``inner``. SANA's processors normalise the whole projection, so only the across-heads norms
    run (``Attention``: ``rms_norm_across_heads`` → ``RMSNorm(inner)``, ``layer_norm_across_heads``
    → ``nn.LayerNorm(inner)``, both affine); ``None`` is no norm."""
    if kind is None:
        return Cost()
    if kind == "rms_norm_across_heads":
        return ops.rms_norm(tokens, inner)
    if kind == "layer_norm_across_heads":
        return ops.layer_norm(tokens, inner)
    raise ValueError(f"qk_norm {kind!r}: SANA's attention processors apply norm_q/norm_k to all heads at once; "
                     "only 'rms_norm_across_heads' and 'layer_norm_across_heads' run")


def sana_linear_self_attention(name: str, *, tokens: Any, dim: int, heads: int, head_dim: int, bias: bool,
                               qk_norm: str | None = None, out_bias: bool = True, pag: str | None = None) -> Node:
    r"""``attn1``: ``Attention(query_dim=D, heads=h, dim_head=d, bias=attention_bias)`` with
    ``SanaLinearAttnProcessor2_0``. :math:`\mathrm{MACs} = 4 N D h d + 2 h N d (d+1)`.

    ``pag``: the layer has a perturbed-attention-guidance processor (``attention_processor.py``
    ``PAGCFGSanaLinearAttnProcessor2_0`` :5393, ``PAGIdentitySanaLinearAttnProcessor2_0`` :5448), which
    applies no ``norm_q`` / ``norm_k``: ``"original"`` rows run the linear attention without them,
    the ``"identity"`` row only ``to_v`` and ``to_out``."""
    inner = heads * head_dim
    if pag == "identity":
        return identity_attention(name, tokens=tokens, dim=dim, inner=inner, bias=bias, out_bias=out_bias,
                                  idle=across_heads_norm(qk_norm, 0, inner) * 2)
    cost = (ops.linear(tokens, dim, inner, bias=bias) * 3
            + across_heads_norm(qk_norm, 0 if pag == "original" else tokens, inner) * 2
            + linear_attention(tokens, heads, head_dim)
            + ops.linear(tokens, inner, dim, bias=out_bias))
    return Node(name, cost, formula="sana_linear_attention")


def glu_hidden(expand_ratio: float, channels: Any) -> Any:
    """``int(expand_ratio * in_channels)``, GLUMBConv's hidden width; on a symbolic width the ratio
    must be integral (the product then needs no flooring)."""
    if isinstance(channels, int):
        return int(expand_ratio * channels)
    if float(expand_ratio).is_integer():
        return int(expand_ratio) * channels
    raise ValueError(f"expand_ratio {expand_ratio} on a symbolic width: int() of the product has no closed form")


def glumb_conv(name: str, *, in_channels: int, out_channels: int, expand_ratio: float, height: Any, width: Any,
               rms_norm: bool = False) -> Node:
    r"""``GLUMBConv`` (sana_transformer.py): ``conv_inverted`` 1×1 :math:`C \to 2F` (bias),
    SiLU, ``conv_depth`` 3×3 depthwise on :math:`2F` (bias), ``hidden · silu(gate)``,
    ``conv_point`` 1×1 :math:`F \to C_o` (no bias), then (DC-AE only) ``RMSNorm(C_o)`` with a bias.
    :math:`F` = ``int(expand_ratio * in_channels)``; :math:`\mathrm{MACs} = HW(2FC + 18F + FC_o)`."""
    hidden = glu_hidden(expand_ratio, in_channels)
    area = height * width
    children = [
        Node("conv_inverted", ops.conv2d(in_channels, 2 * hidden, 1, height, width) + ops.activation(2 * hidden * area)),
        Node("conv_depth", ops.conv2d(2 * hidden, 2 * hidden, 3, height, width, groups=2 * hidden)
             + ops.activation(hidden * area)),
        Node("conv_point", ops.conv2d(hidden, out_channels, 1, height, width, bias=False)),
    ]
    if rms_norm:
        children.append(Node("norm", ops.rms_norm(area, out_channels) + ops.parameters(out_channels)))
    return Node(name, children=tuple(children), formula="glumb_conv")


def sana_transformer_block(*, dim: int, heads: int, head_dim: int, cross_heads: int, cross_head_dim: int,
                           cross_attention_dim: int, height: Any, width: Any, text_tokens: Any,
                           attention_bias: bool, norm_affine: bool, mlp_ratio: float,
                           qk_norm: str | None = None, pag: str | None = None) -> Node:
    r"""``SanaTransformerBlock``: ``norm1`` (LayerNorm, no affine) and the adaLN-single modulation,
    ``attn1`` (linear self-attention), ``attn2`` (cross-attention to the caption, no norm before
    it, biased projections), ``norm2`` (LayerNorm, affine per ``norm_elementwise_affine``),
    ``ff`` (``GLUMBConv`` on the :math:`H \times W` token map, no norm, no residual inside), and
    the ``scale_shift_table`` (6·D). Closed form in the module doc. ``pag``: ``attn1``'s
    perturbed-attention-guidance row kind (:func:`sana_linear_self_attention`), None without PAG."""
    tokens = height * width
    cross_inner = cross_heads * cross_head_dim
    attn2 = cross_attention("attn2", tokens=tokens, dim=dim, context_tokens=text_tokens,
                            context_dim=cross_attention_dim, heads=cross_heads, head_dim=cross_head_dim, bias=True)
    if qk_norm is not None:  # norm_q on the image queries, norm_k on the caption keys
        norms = across_heads_norm(qk_norm, tokens, cross_inner) + across_heads_norm(qk_norm, text_tokens, cross_inner)
        attn2 = replace(attn2, cost=attn2.cost + norms)
    children = (
        Node("norm1", ops.layer_norm(tokens, dim, affine=False)),
        sana_linear_self_attention("attn1", tokens=tokens, dim=dim, heads=heads, head_dim=head_dim,
                                   bias=attention_bias, qk_norm=qk_norm, pag=pag),
        attn2,
        Node("norm2", ops.layer_norm(tokens, dim, affine=norm_affine)),
        glumb_conv("ff", in_channels=dim, out_channels=dim, expand_ratio=mlp_ratio, height=height, width=width),
        Node("scale_shift_table", ops.parameters(6 * dim)),
    )
    return Node("block", children=children, formula="sana_transformer_block")

