r"""FLUX.2 transformer blocks: bias-free, SwiGLU MLPs, modulation shared by all blocks.

Mirrors diffusers ``transformer_flux2.py`` (0.42.1): ``Flux2TransformerBlock`` (double stream),
``Flux2SingleTransformerBlock`` with ``Flux2ParallelSelfAttention`` (single stream) and
``Flux2Modulation``.

Symbols: width :math:`d = h d_h`, MLP width :math:`f = \lfloor r d \rfloor` (``mlp_ratio`` :math:`r`,
3 in every released config), :math:`N` image and :math:`T` text tokens, :math:`L = N + T`.

.. math::

   \mathrm{MACs}_\text{double} = \underbrace{4 (N + T) d^2}_{\text{QKV, out}}
     + \underbrace{2 h (N + T)^2 d_h}_{\text{attention}}
     + \underbrace{3 (N + T) d f}_{\text{SwiGLU FF}}

   \mathrm{MACs}_\text{single} = \underbrace{L d (3 d + 2 f)}_{\text{to\_qkv\_mlp\_proj}}
     + \underbrace{2 h L^2 d_h}_{\text{attention}} + \underbrace{L (d + f) d}_{\text{to\_out}}

   \mathrm{MACs}_\text{modulation} = 6 d^2 + 6 d^2 + 3 d^2 \quad\text{(once per forward, not per block)}

Derivation: unlike FLUX.1, no block owns an adaLN linear: the model computes
``double_stream_modulation_img`` / ``_txt`` (d → 6d each) and ``single_stream_modulation`` (d → 3d)
once from the timestep(+guidance) embedding and every block reads them. The double block's
``Flux2FeedForward`` is ``linear_in`` (d → 2f), ``Flux2SwiGLU`` (silu of one half times the other)
and ``linear_out`` (f → d), per stream. The single block fuses q/k/v with the MLP's input
(``to_qkv_mlp_proj``: d → 3d + 2f) and the attention output with the MLP's output (``to_out``:
d + f → d). All linears are bias-free; the norms are affine-free LayerNorms, the q/k norms affine
``nn.RMSNorm(d_h)``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from flopcalc.engine.cost import Cost, Node, block_kinds
from flopcalc.formulas import ops
from flopcalc.formulas.mmdit_joint_block import JOINT_BLOCK_FLOW
from flopcalc.formulas.transformer_parts import attention_module, qk_norm_cost
from flopcalc.engine.gradients import Attend, Join, Layer

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds("flux2_double_block", "flux2_single_block")

_FF_NAMES = {"ff.net.0.proj": "ff.linear_in", "ff.net.2": "ff.linear_out",
             "ff_context.net.0.proj": "ff_context.linear_in", "ff_context.net.2": "ff_context.linear_out"}

#: Which tensors a double-stream block's layers read and write, for the backward of a LoRA run
#: (:mod:`flopcalc.training.lora`): ``Flux2TransformerBlock.forward`` (transformer_flux2.py:911-968, ``Flux2AttnProcessor``
#: :335-395) is FLUX.1's joint block (:data:`~flopcalc.formulas.mmdit_joint_block.JOINT_BLOCK_FLOW`: gated residual
#: adds, one attention over both streams) with ``Flux2FeedForward``'s ``linear_in`` / ``linear_out``.
FLUX2_DOUBLE_BLOCK_FLOW = tuple(replace(step, path=_FF_NAMES[step.path]) if isinstance(step, Layer)
                                and step.path in _FF_NAMES else step for step in JOINT_BLOCK_FLOW)

#: ``Flux2SingleTransformerBlock.forward`` (:837-873) on the concatenated sequence ``x`` (the model joins the two
#: streams before the first single block, :1372): ``to_qkv_mlp_proj`` gives q, k, v and the SwiGLU input,
#: ``to_out`` reads the attention output and the SwiGLU branch, added back through ``mod_gate`` (conditioning).
FLUX2_SINGLE_BLOCK_FLOW = (
    Layer("attn.to_qkv_mlp_proj", ("x",), "p"),
    Attend("attn", q=("p",), k=("p",), v=("p",), to="o"),
    Layer("attn.to_out", ("o", "p"), "y"),  # to_out(cat([attn_output, swiglu(mlp_hidden_states)]))
    Join(("x", "y"), "x", gated="y"),  # hidden_states + mod_gate * attn_output
)


def mlp_width(dim: int, mlp_ratio: float) -> int:
    """``int(dim * mlp_ratio)`` as ``Flux2FeedForward`` and ``Flux2ParallelSelfAttention`` take it."""
    return int(dim * mlp_ratio)


def flux2_modulation(name: str, dim: int, sets: int) -> Node:
    """``Flux2Modulation(dim, mod_param_sets=sets, bias=False)``: ``linear(silu(temb))`` to
    ``3·sets·dim`` values, on the one conditioning vector. :math:`\\mathrm{MACs} = 3 s d^2`."""
    return Node(name, children=(Node("linear", ops.activation(dim) + ops.linear(1, dim, 3 * sets * dim, bias=False)),),
                formula="flux2_modulation")


def kv_attention(*, queries: Any, keys: Any, heads: int, head_dim: int, self_attending: Any = 0) -> Cost:
    r"""``_flux2_kv_causal_attention`` (transformer_flux2.py:113-170), FLUX.2 [klein]'s attention with cached
    reference keys and values: the text and latent ``queries`` attend to ``keys`` (text, reference and latent), and
    on the forward that fills the cache (``"extract"``) the ``self_attending`` reference tokens attend to themselves
    only, a second SDPA call: :math:`2 h d_h (q k + r^2)` MACs."""
    cost = ops.attention(queries, keys, heads, head_dim)
    if self_attending:
        cost = cost + ops.attention(self_attending, self_attending, heads, head_dim)
    return cost


def flux2_double_block(*, dim: int, heads: int, head_dim: int, image_tokens: Any, text_tokens: Any,
                       mlp_ratio: float, attention: Cost | None = None) -> Node:
    """``Flux2TransformerBlock``: affine-free ``norm1``/``norm1_context``, the joint ``Flux2Attention``
    (q/k/v and ``add_{q,k,v}_proj``, RMS q/k norms, ``to_out.0`` and ``to_add_out``, no biases),
    ``norm2``/``norm2_context`` and a SwiGLU ``Flux2FeedForward`` per stream. ``attention``: the scaled-dot-product
    part when it is not full self-attention over the ``image_tokens + text_tokens`` (:func:`kv_attention`)."""
    n, t = image_tokens, text_tokens
    f = mlp_width(dim, mlp_ratio)
    attn = attention_module("attn", tokens=n, dim=dim, heads=heads, head_dim=head_dim, qk_norm="rms_norm",
                            context_tokens=t, context_dim=dim, bias=False, context_bias=False, out_bias=False)
    if attention is not None:  # Flux2KVAttnProcessor (:398-494): the same projections and q/k norms
        attn = replace(attn, cost=qk_norm_cost("rms_norm", n * heads, head_dim)
                       + qk_norm_cost("rms_norm", t * heads, head_dim) + attention)
    return Node(
        "block",
        children=(
            Node("norm1", ops.layer_norm(n, dim, affine=False)),
            Node("norm1_context", ops.layer_norm(t, dim, affine=False)),
            attn,
            Node("norm2", ops.layer_norm(n, dim, affine=False)),
            flux2_feed_forward("ff", n, dim, f),
            Node("norm2_context", ops.layer_norm(t, dim, affine=False)),
            flux2_feed_forward("ff_context", t, dim, f),
        ),
        formula="flux2_double_block",
    )


def flux2_feed_forward(name: str, tokens: Any, dim: int, inner: int) -> Node:
    r"""``Flux2FeedForward`` (transformer_flux2.py:301-324): ``linear_in`` (d → 2f), ``Flux2SwiGLU`` (its two
    pointwise ops counted on the module), ``linear_out`` (f → d), bias-free, with the real module's child names
    (the LoRA targets ``ff.linear_in`` / ``ff.linear_out``). :math:`\mathrm{MACs} = 3 n d f`."""
    return Node(name, ops.activation(tokens * inner) * 2,
                (Node("linear_in", ops.linear(tokens, dim, 2 * inner, bias=False)),
                 Node("linear_out", ops.linear(tokens, inner, dim, bias=False))), formula="feed_forward")


def flux2_single_block(*, dim: int, heads: int, head_dim: int, tokens: Any, mlp_ratio: float,
                       attention: Cost | None = None) -> Node:
    """``Flux2SingleTransformerBlock``: an affine-free ``norm`` and ``Flux2ParallelSelfAttention``
    (fused ``to_qkv_mlp_proj``, RMS q/k norms, attention over all ``tokens``, SwiGLU, fused ``to_out``).
    ``attention``: the scaled-dot-product part when it is not full self-attention over ``tokens``
    (``Flux2KVParallelSelfAttnProcessor``, :633-720: :func:`kv_attention`)."""
    inner = heads * head_dim
    f = mlp_width(dim, mlp_ratio)
    # Flux2ParallelSelfAttnProcessor (:572-631): the q/k norms, the attention and the SwiGLU on the module; the
    # fused projections are its children, named as in the real module (the LoRA targets).
    attn = Node("attn", qk_norm_cost("rms_norm", tokens * heads, head_dim)
                + (ops.attention(tokens, tokens, heads, head_dim) if attention is None else attention)
                + ops.activation(tokens * f) * 2,
                (Node("to_qkv_mlp_proj", ops.linear(tokens, dim, 3 * inner + 2 * f, bias=False)),
                 Node("to_out", ops.linear(tokens, inner + f, dim, bias=False))), formula="attention")
    return Node(
        "block",
        children=(
            Node("norm", ops.layer_norm(tokens, dim, affine=False)),
            attn,
        ),
        formula="flux2_single_block",
    )
