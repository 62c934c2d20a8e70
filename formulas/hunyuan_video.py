r"""HunyuanVideo transformer blocks (diffusers ``models/transformers/transformer_hunyuan_video.py``).

Symbols: width :math:`d = h d_h`, :math:`N` video tokens, :math:`T` text tokens, MLP width
:math:`m = \lfloor r d \rfloor` (``mlp_ratio`` :math:`r`).

**Dual-stream block** (``HunyuanVideoTransformerBlock``): MMDiT-like, each stream with its own
``AdaLayerNormZero`` (6·d² on the conditioning vector), q/k/v projections with per-head q/k norms
(``norm_q``/``norm_k``, ``norm_added_q``/``norm_added_k``), one joint attention over :math:`N + T`
tokens (``HunyuanVideoAttnProcessor2_0``; rotary on the video part is elementwise), ``to_out`` and
``to_add_out``, and a tanh-GELU ``FeedForward`` per stream (inner width :math:`m`):

.. math::

   \mathrm{MACs} = 12 d^2 + 4 (N + T) d^2 + 2 h (N+T)^2 d_h + 2 (N + T) d m

The token-replace variant (``HunyuanVideoTokenReplaceTransformerBlock``, image-conditioned models
with ``image_condition_type: token_replace``) runs ``norm1.linear`` twice (on ``temb`` and on the
token-replace embedding): :math:`+6 d^2`.

**Single-stream block** (``HunyuanVideoSingleTransformerBlock``): exactly FLUX's
(:func:`flopcalc.formulas.single_stream_block.single_stream_block`, measured equal):
:math:`3 d^2 + 3 L d^2 + L d m + 2 h L^2 d_h + L (d + m) d` with :math:`L = N + T`; the
token-replace variant runs ``norm.linear`` twice (:math:`+3 d^2`).

**Token refiner block** (``HunyuanVideoIndividualTokenRefinerBlock``), on the :math:`T` text tokens
only: affine ``nn.LayerNorm``, self-attention with biases and no q/k norm (``AttnProcessor2_0``; the
padding mask is dense), affine ``nn.LayerNorm``, a SiLU ``FeedForward`` (``linear-silu``, inner
width :math:`\lfloor 4 d \rfloor`: the refiner's ``mlp_ratio`` is its own default 4.0, the
transformer never passes its ``mlp_ratio``) and ``norm_out`` (``HunyuanVideoAdaNorm``: one
``Linear(d, 2d)`` on ``temb``):

.. math::

   \mathrm{MACs} = 4 T d^2 + 2 h T^2 d_h + 8 T d^2 + 2 d^2
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from flopcalc.engine.cost import Node, block_kinds, work_only
from flopcalc.formulas import ops
from flopcalc.formulas.conditioning import ada_layer_norm_zero
from flopcalc.formulas.single_stream_block import single_stream_block
from flopcalc.formulas.transformer_parts import attention_module, feed_forward
from flopcalc.engine.gradients import Attend, Join, Layer

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds(
    "hunyuan_video_token_refiner_block", "hunyuan_video_token_replace_block", "hunyuan_video_dual_stream_block",
    "hunyuan_video_token_replace_single_block",
)

#: Which tensors a ``HunyuanVideoIndividualTokenRefinerBlock`` reads and writes, for the backward of a LoRA run
#: (:mod:`flopcalc.training.lora`; transformer_hunyuan_video.py:359-379): self-attention of the refined text ``r``
#: (``AttnProcessor2_0``), its output added through a gate of ``norm_out`` (which reads temb only), then the SiLU
#: feed-forward, also gated.
REFINER_BLOCK_FLOW = (
    *(Layer(f"attn.{p}", ("r",), p) for p in ("to_q", "to_k", "to_v")),
    Attend("attn", q=("to_q",), k=("to_k",), v=("to_v",), to="o"),
    Layer("attn.to_out.0", ("o",), "a"),
    Join(("r", "a"), "r", gated="a"),  # :374 hidden_states + attn_output * gate_msa
    Layer("ff.net.0.proj", ("r",), "h"),
    Layer("ff.net.2", ("h",), "f"),
    Join(("r", "f"), "r", gated="f"),  # :377
)

#: ``HunyuanVideoTransformerBlock.forward`` (transformer_hunyuan_video.py:622-663, ``HunyuanVideoAttnProcessor2_0``
#: :55-159) in its own order: both streams' attention outputs are added (gated) before either feed-forward runs,
#: and both gated feed-forward adds come after the text feed-forward (:657-661), which matters for what
#: gradient checkpointing runs again (up to the last saved tensor).
DUAL_BLOCK_FLOW = (
    *(Layer(f"attn.{p}", ("img",), p) for p in ("to_q", "to_k", "to_v")),
    *(Layer(f"attn.{p}", ("txt",), p) for p in ("add_q_proj", "add_k_proj", "add_v_proj")),
    Attend("attn", q=("to_q", "add_q_proj"), k=("to_k", "add_k_proj"), v=("to_v", "add_v_proj"), to="o"),
    Layer("attn.to_out.0", ("o",), "a"),
    Layer("attn.to_add_out", ("o",), "ca"),
    Join(("img", "a"), "img", gated="a"),  # :647
    Join(("txt", "ca"), "txt", gated="ca"),  # :648
    Layer("ff.net.0.proj", ("img",), "h"),  # :657
    Layer("ff.net.2", ("h",), "f"),
    Layer("ff_context.net.0.proj", ("txt",), "ch"),  # :658
    Layer("ff_context.net.2", ("ch",), "cf"),
    Join(("img", "f"), "img", gated="f"),  # :660
    Join(("txt", "cf"), "txt", gated="cf"),  # :661
)

#: ``HunyuanVideoSingleTransformerBlock.forward`` (transformer_hunyuan_video.py:542-584): FLUX's single-stream
#: dataflow on ``cat([img, txt])``: ``proj_mlp`` and the attention (the processor concatenates the two halves back,
#: :63-64) read it, ``proj_out`` reads both, gated, added to the residual, split back.
SINGLE_BLOCK_FLOW = (
    Join(("img", "txt"), "x"),  # :553
    Layer("proj_mlp", ("x",), "m"),  # :559
    *(Layer(f"attn.{p}", ("x",), p) for p in ("to_q", "to_k", "to_v")),
    Attend("attn", q=("to_q",), k=("to_k",), v=("to_v",), to="o"),
    Layer("proj_out", ("o", "m"), "y"),  # :576-577
    Join(("x", "y"), "x", gated="y"),  # :577-578
    Join(("x",), "img"),
    Join(("x",), "txt"),  # :580-583
)

#: ``HunyuanVideoTokenRefiner`` builds its blocks with its own ``mlp_ratio`` default (4.0).
REFINER_MLP_RATIO = 4.0


def mlp_width(dim: int, mlp_ratio: float) -> int:
    """``int(hidden_size * mlp_ratio)``, as ``FeedForward`` and the single block compute it."""
    return int(dim * mlp_ratio)


def _linear_twice(norm: Node) -> Node:
    """A token-replace adaptive norm: its ``linear`` child runs twice (on ``temb`` and on the
    token-replace embedding), its weights (parameters, ``nn.Linear`` weights) count once."""
    def twice(part: Node) -> Node:
        return replace(part, cost=part.cost + work_only(part.cost)) if part.name == "linear" else part

    return replace(norm, children=tuple(twice(c) for c in norm.children))


def dual_stream_block(*, dim: int, heads: int, head_dim: int, video_tokens: Any, text_tokens: Any,
                      mlp_ratio: float, qk_norm: str | None, token_replace: bool = False) -> Node:
    r"""``HunyuanVideoTransformerBlock`` (``HunyuanVideoTokenReplaceTransformerBlock`` when
    ``token_replace``): :math:`12 d^2 + 4 (N+T) d^2 + 2 h (N+T)^2 d_h + 2 (N+T) d m` MACs."""
    n, t = video_tokens, text_tokens
    inner = mlp_width(dim, mlp_ratio)
    norm1 = ada_layer_norm_zero("norm1", dim, n)
    if token_replace:
        norm1 = _linear_twice(norm1)
    children = (
        norm1,
        ada_layer_norm_zero("norm1_context", dim, t),
        attention_module("attn", tokens=n, dim=dim, heads=heads, head_dim=head_dim, qk_norm=qk_norm,
                         context_tokens=t, context_dim=dim),
        Node("norm2", ops.layer_norm(n, dim, affine=False)),
        feed_forward("ff", n, dim, inner=inner),
        Node("norm2_context", ops.layer_norm(t, dim, affine=False)),
        feed_forward("ff_context", t, dim, inner=inner),
    )
    return Node("block", children=children,
                formula="hunyuan_video_token_replace_block" if token_replace else "hunyuan_video_dual_stream_block")


def single_block(*, dim: int, heads: int, head_dim: int, tokens: Any, mlp_ratio: float, qk_norm: str | None,
                 token_replace: bool = False) -> Node:
    r"""``HunyuanVideoSingleTransformerBlock``: FLUX's single-stream block on :math:`L = N + T`
    tokens; ``HunyuanVideoTokenReplaceSingleTransformerBlock`` (``token_replace``) runs
    ``norm.linear`` twice."""
    block = single_stream_block(dim=dim, heads=heads, head_dim=head_dim, tokens=tokens, mlp_ratio=mlp_ratio,
                                qk_norm=qk_norm)
    if not token_replace:
        return block
    children = tuple(_linear_twice(c) if c.name == "norm" else c for c in block.children)
    return replace(block, children=children, formula="hunyuan_video_token_replace_single_block")


def token_refiner_block(*, dim: int, heads: int, head_dim: int, tokens: Any) -> Node:
    r"""``HunyuanVideoIndividualTokenRefinerBlock`` on ``tokens`` text tokens:
    :math:`12 T d^2 + 2 h T^2 d_h + 2 d^2` MACs (q, k, v, out: 4Td²; SiLU MLP of width 4d: 8Td²;
    ``norm_out``: 2d²)."""
    inner = mlp_width(dim, REFINER_MLP_RATIO)
    return Node("block", children=(
        Node("norm1", ops.layer_norm(tokens, dim)),
        attention_module("attn", tokens=tokens, dim=dim, heads=heads, head_dim=head_dim),
        Node("norm2", ops.layer_norm(tokens, dim)),
        feed_forward("ff", tokens, dim, inner=inner),
        Node("norm_out", children=(Node("linear", ops.activation(dim) + ops.linear(1, dim, 2 * dim)),)),
    ), formula="hunyuan_video_token_refiner_block")
