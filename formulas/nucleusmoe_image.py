r"""NucleusMoE-Image's single-stream block: image queries attending to image and projected text keys, and a
dense SwiGLU or an expert-choice mixture of experts.

Mirrors diffusers ``models/transformers/transformer_nucleusmoe_image.py`` (0.42.1):
``NucleusMoEAttnProcessor2_0`` (:259-345), ``SwiGLUExperts`` (:362-498), ``NucleusMoELayer`` (:501-604),
``NucleusMoEImageTransformerBlock`` (:607-723).

Symbols: :math:`n` image tokens, :math:`m` text tokens of width :math:`c` (``joint_attention_dim``), width
:math:`d = h d_h`, :math:`h_{kv}` key/value heads, dense feed-forward width
:math:`f_d = \lfloor \lfloor 2 r d / 3 \rfloor / 128 \rfloor \cdot 128` (``mlp_ratio`` :math:`r`), expert width
:math:`f` (``moe_intermediate_dim``), :math:`E` experts, capacity factor :math:`\gamma`.

.. math::

   \mathrm{MACs}_\text{block} = \underbrace{4 d^2}_{\text{img\_mod}} + \underbrace{m c d}_{\text{encoder\_proj}}
     + \underbrace{2 n d^2 + 2 n d\,h_{kv} d_h + 2 m d\,h_{kv} d_h + 2 h n (n + m) d_h}_{\text{attn}}
     + \mathrm{MLP}

   \mathrm{MLP}_\text{dense} = 3 n d f_d, \qquad
   \mathrm{MLP}_\text{MoE} = \underbrace{2 n d E}_{\text{gate}} + \underbrace{3 n d f}_{\text{shared}}
     + \underbrace{3 E C d f}_{\text{routed}}, \quad C = \max(1, \lceil \gamma n / E \rceil)

Expert-choice routing (``NucleusMoELayer.forward`` :548-604): every expert takes exactly its top ``C`` tokens by
affinity (``torch.topk`` along the tokens), so each of the ``E`` experts runs its two matmuls on ``C`` rows whatever
the scores: the routed work is fixed by the shapes (``num_tokens_per_expert`` is ``torch.full(E, C)``), only which
tokens go where depends on the data. A token may be taken by many experts or none: no fixed active-parameter count
per token, so no ``idle_params`` are declared (every expert runs every step).
"""

from __future__ import annotations

import math
from typing import Any

from flopcalc.engine.cost import Cost, Node, block_kinds
from flopcalc.formulas import ops
from flopcalc.formulas.transformer_parts import feed_forward

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds("nucleusmoe_block", "nucleusmoe_expert_choice")


def dense_mlp_width(dim: int, mlp_ratio: float) -> int:
    """``int(dim * mlp_ratio * 2 / 3) // 128 * 128`` (:672)."""
    return int(dim * mlp_ratio * 2 / 3) // 128 * 128


def expert_capacity(tokens: int, experts: int, capacity_factor: float) -> int:
    """``max(1, math.ceil(self.capacity_factor * slen / self.num_experts))`` (:570): the tokens each expert takes."""
    return max(1, math.ceil(capacity_factor * tokens / experts))


def nucleus_attention(name: str, *, tokens: Any, text_tokens: Any, dim: int, heads: int, head_dim: int,
                      kv_heads: int) -> Node:
    """``Attention(query_dim=d, heads, kv_heads, dim_head, added_kv_proj_dim=d, added_proj_bias=False, out_dim=d,
    out_bias=False, bias=False, qk_norm="rms_norm", context_pre_only=None)`` with ``NucleusMoEAttnProcessor2_0``
    (:259-345): ``to_q`` (d → h·d_h) and ``to_k``/``to_v`` (d → h_kv·d_h) on the image tokens, ``add_k_proj``/
    ``add_v_proj`` (d → h_kv·d_h) on the projected text, RMSNorms ``norm_q`` (image query heads), ``norm_k`` (image key
    heads), ``norm_added_k`` (text key heads; ``norm_added_q`` is built, never called), keys and values repeated to
    ``h`` heads (no work), SDPA of the image queries over image + text keys, ``to_out.0``."""
    inner, inner_kv = heads * head_dim, kv_heads * head_dim
    cost = (ops.rms_norm(tokens * heads, head_dim) + ops.rms_norm(tokens * kv_heads, head_dim)
            + ops.rms_norm(text_tokens * kv_heads, head_dim) + ops.rms_norm(0, head_dim)
            + ops.attention(tokens, tokens + text_tokens, heads, head_dim))
    return Node(name, cost, (
        Node("to_q", ops.linear(tokens, dim, inner, bias=False)),
        Node("to_k", ops.linear(tokens, dim, inner_kv, bias=False)),
        Node("to_v", ops.linear(tokens, dim, inner_kv, bias=False)),
        Node("add_k_proj", ops.linear(text_tokens, dim, inner_kv, bias=False)),
        Node("add_v_proj", ops.linear(text_tokens, dim, inner_kv, bias=False)),
        Node("to_out", children=(Node("0", ops.linear(tokens, inner, dim, bias=False)),)),
    ), formula="attention")


def expert_choice_moe(name: str, *, tokens: Any, dim: int, experts: int, width: int, capacity: int) -> Node:
    """``NucleusMoELayer`` on ``tokens`` tokens (:501-604): ``gate`` (bias-free, 2d → E on the timestep embedding
    joined to the unmodulated tokens; softmax or sigmoid), ``experts`` (``SwiGLUExperts``, packed weights
    ``gate_up_proj`` E × d × 2f and ``down_proj`` E × f × d, each expert's two ``torch.matmul`` on its ``capacity``
    rows: :math:`3 E C d f`), ``shared_expert`` (``FeedForward(activation_fn="swiglu", bias=False)``: ``net.0.proj``
    d → 2f, ``net.2`` f → d, on every token)."""
    rows = experts * capacity
    routed = (ops.matmul(rows, dim, 2 * width) + ops.matmul(rows, width, dim) + ops.parameters(3 * experts * dim * width)
              + ops.activation(rows * width) * 2 + Cost(elementwise=rows * dim))  # SiLU·up, the gating product
    return Node(name, children=(
        Node("gate", ops.linear(tokens, 2 * dim, experts, bias=False)
             + Cost(elementwise=ops.SOFTMAX_OPS * tokens * experts)),
        Node("experts", routed, formula="routed_experts"),
        feed_forward("shared_expert", tokens, dim, inner=width, gated=True, bias=False),
    ), formula="nucleusmoe_expert_choice")


def nucleus_block(*, tokens: Any, text_tokens: Any, dim: int, heads: int, head_dim: int, kv_heads: int,
                  text_dim: int, mlp: Node) -> Node:
    """One ``NucleusMoEImageTransformerBlock`` (:607-723) on ``tokens`` image tokens: ``img_mod`` (SiLU, d → 4d on the
    timestep embedding), ``encoder_proj`` (c → d with bias on the text), ``pre_attn_norm`` / ``pre_mlp_norm``
    (LayerNorms without affine or bias), ``attn`` (:func:`nucleus_attention`), and ``mlp`` as ``img_mlp``."""
    norm = ops.layer_norm(tokens, dim, affine=False)
    return Node("block", children=(
        Node("img_mod", ops.activation(dim), (Node("1", ops.linear(1, dim, 4 * dim)),)),
        Node("encoder_proj", ops.linear(text_tokens, text_dim, dim)),
        Node("pre_attn_norm", norm),
        nucleus_attention("attn", tokens=tokens, text_tokens=text_tokens, dim=dim, heads=heads, head_dim=head_dim,
                          kv_heads=kv_heads),
        Node("pre_mlp_norm", norm),
        mlp,
    ), formula="nucleusmoe_block")


def dense_mlp(tokens: Any, dim: int, mlp_ratio: float) -> Node:
    """The dense ``img_mlp``: ``FeedForward(dim, inner_dim=f_d, activation_fn="swiglu", bias=False)``."""
    return feed_forward("img_mlp", tokens, dim, inner=dense_mlp_width(dim, mlp_ratio), gated=True, bias=False)
