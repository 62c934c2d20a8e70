r"""MMDiT joint block: two streams (image, text) with their own weights, one joint attention.

Mirrors diffusers ``attention.JointTransformerBlock`` (SD3, SD3.5, SD3.5 MMDiT-X) and
``transformer_flux.FluxTransformerBlock`` (FLUX.1 double-stream block).

Symbols: :math:`d` width (= :math:`h d_h`), :math:`N` image tokens, :math:`T` text tokens.

.. math::

   \mathrm{MACs}_\text{torch} =
       \underbrace{12 d^2}_{\text{adaLN}}
     + \underbrace{4 (N + T) d^2}_{\text{QKV, out}}
     + \underbrace{2 h (N+T)^2 d_h}_{\text{attention}}
     + \underbrace{8 (N + T) d^2}_{\text{FF, mult 4}}

Derivation: each stream has an ``AdaLayerNormZero`` (6·d² on the conditioning vector), q/k/v
projections (3·d² per token), an output projection (d² per token) and a 4× GELU MLP (8·d² per
token); the attention runs once over the concatenated N + T tokens. SD3's last block is
``context_pre_only``: its text stream keeps only the q/k/v projections and an
``AdaLayerNormContinuous`` (2·d²), no ``to_add_out`` and no text MLP. MMDiT-X blocks
(``dual_attention_layers``) add a second, image-only self-attention ``attn2`` (4·N·d² + 2hN²d_h)
and modulate it from a 9·d² ``SD35AdaLayerNormZeroX``.

Chroma's ``transformer_chroma.ChromaTransformerBlock`` (``pruned``) is the FLUX block with the
adaLN linears pruned: ``ChromaAdaLayerNormZeroPruned`` keeps only the affine-free LayerNorm (the six
modulation vectors per stream come from the model's approximator), so the 12·d² term drops out.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from flopcalc.engine.cost import Node, block_kinds
from flopcalc.formulas import ops
from flopcalc.formulas.conditioning import ada_layer_norm_continuous, ada_layer_norm_zero, pruned_ada_layer_norm
from flopcalc.formulas.transformer_parts import attention_module, feed_forward, qk_norm_cost
from flopcalc.engine.gradients import Attend, Join, Layer

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds("mmdit_joint_block")

#: Which tensors a joint block's layers read and write, for the backward of a LoRA run (:mod:`flopcalc.training.lora`):
#: ``FluxTransformerBlock.forward`` (transformer_flux.py:443-497, ``FluxAttnProcessor`` :76-140) and
#: ``JointTransformerBlock.forward`` (attention.py:681-750, ``JointAttnProcessor2_0``): q/k/v of the image
#: stream ``img`` and of the text stream ``txt``, one attention over both, each stream's output projection and
#: feed-forward added to it, each through a gate (the gates and AdaLN modulations: conditioning). A ``context_pre_only`` block has no
#: ``to_add_out`` and no text feed-forward. ``norm1.linear`` / ``norm1_context.linear`` read temb only.
JOINT_BLOCK_FLOW = (
    *(Layer(f"attn.{p}", ("img",), p) for p in ("to_q", "to_k", "to_v")),
    *(Layer(f"attn.{p}", ("txt",), p) for p in ("add_q_proj", "add_k_proj", "add_v_proj")),
    Attend("attn", q=("add_q_proj", "to_q"), k=("add_k_proj", "to_k"), v=("add_v_proj", "to_v"), to="o"),
    Layer("attn.to_out.0", ("o",), "a"),
    Layer("attn.to_add_out", ("o",), "ca", optional=True),
    Join(("img", "a"), "img", gated="a"),  # hidden_states + gate_msa * attn_output
    Layer("ff.net.0.proj", ("img",), "h"),
    Layer("ff.net.2", ("h",), "f"),
    Join(("img", "f"), "img", gated="f"),
    Join(("txt", "ca"), "txt", gated="ca"),
    Layer("ff_context.net.0.proj", ("txt",), "ch", optional=True),
    Layer("ff_context.net.2", ("ch",), "cf", optional=True),
    Join(("txt", "cf"), "txt", gated="cf"),
)


def mmdit_joint_block(
    *,
    dim: int,
    heads: int,
    head_dim: int,
    image_tokens: Any,
    text_tokens: Any,
    qk_norm: str | None,
    context_pre_only: bool = False,
    dual_attention: bool = False,
    pruned: bool = False,
    pag: bool = False,
) -> Node:
    """``pag``: ``attn`` has a perturbed-attention-guidance processor (``attention_processor.py``
    ``PAGCFGJointAttnProcessor2_0`` :1664, ``PAGJointAttnProcessor2_0`` :1508). Every row runs the full
    joint attention there (the perturbed row's identity is a mask on the image-image scores, no fewer
    matmuls), but the processor applies none of ``norm_q``, ``norm_k``, ``norm_added_q``,
    ``norm_added_k``: their parameters stay, their work goes."""
    n, t = image_tokens, text_tokens
    if pruned:
        norm1, norm1_context = pruned_ada_layer_norm("norm1", dim, n), pruned_ada_layer_norm("norm1_context", dim, t)
    else:
        norm1 = ada_layer_norm_zero("norm1", dim, n, chunks=9 if dual_attention else 6)
        if context_pre_only:
            norm1_context = ada_layer_norm_continuous("norm1_context", dim, dim, t)
        else:
            norm1_context = ada_layer_norm_zero("norm1_context", dim, t)
    attn = attention_module("attn", tokens=n, dim=dim, heads=heads, head_dim=head_dim,
                            qk_norm=None if pag else qk_norm, context_tokens=t, context_dim=dim,
                            context_out=not context_pre_only)
    if pag:
        attn = replace(attn, cost=attn.cost + qk_norm_cost(qk_norm, 0, head_dim) * 2)
    children = [norm1, norm1_context, attn]
    if dual_attention:
        children.append(attention_module("attn2", tokens=n, dim=dim, heads=heads, head_dim=head_dim, qk_norm=qk_norm))
    children += [Node("norm2", ops.layer_norm(n, dim, affine=False)), feed_forward("ff", n, dim)]
    if not context_pre_only:
        children += [Node("norm2_context", ops.layer_norm(t, dim, affine=False)), feed_forward("ff_context", t, dim)]
    return Node("block", children=tuple(children), formula="mmdit_joint_block")
