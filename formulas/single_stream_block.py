r"""Single-stream DiT block: image and text tokens concatenated, one set of weights, the MLP
running in parallel with the attention and fused into one output projection.

Mirrors diffusers ``transformer_flux.FluxSingleTransformerBlock``.

Symbols: :math:`L = N + T` tokens, width :math:`d = h d_h`, MLP width :math:`r d` (``mlp_ratio``
:math:`r = 4`).

.. math::

   \mathrm{MACs}_\text{torch} = \underbrace{3 d^2}_{\text{adaLN}}
     + \underbrace{3 L d^2}_{\text{QKV}} + \underbrace{L d \cdot r d}_{\text{proj\_mlp}}
     + \underbrace{2 h L^2 d_h}_{\text{attention}} + \underbrace{L (d + r d) d}_{\text{proj\_out}}

Derivation: ``AdaLayerNormZeroSingle`` gives 3 modulation vectors (3·d²); the attention is
``pre_only`` (no ``to_out``): its output is concatenated with the GELU MLP branch and one
``proj_out`` maps the (1 + r)·d features back to d.

Chroma's ``transformer_chroma.ChromaSingleTransformerBlock`` (``pruned``) is the same block with the
adaLN linear pruned (``ChromaAdaLayerNormZeroSinglePruned``: the LayerNorm alone, the modulation from
the model's approximator): the 3·d² term drops out.
"""

from __future__ import annotations

from typing import Any

from flopcalc.engine.cost import Node, block_kinds
from flopcalc.formulas import ops
from flopcalc.formulas.conditioning import ada_layer_norm_zero, pruned_ada_layer_norm
from flopcalc.formulas.transformer_parts import attention_module
from flopcalc.engine.gradients import Attend, Join, Layer

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds("single_stream_block")

#: Which tensors a single-stream block's layers read and write on the concatenated sequence ``x``, for the backward
#: of a LoRA run (:mod:`flopcalc.training.lora`): ``proj_mlp`` and q/k/v on the normed sequence, ``proj_out`` on the attention
#: output and the MLP branch, added back through a gate (conditioning). ``ChromaSingleTransformerBlock.forward``
#: (transformer_chroma.py:231-262) as it is; its model joins the streams before the first block.
SINGLE_STREAM_SEQUENCE_FLOW = (
    Layer("proj_mlp", ("x",), "m"),
    *(Layer(f"attn.{p}", ("x",), p) for p in ("to_q", "to_k", "to_v")),
    Attend("attn", q=("to_q",), k=("to_k",), v=("to_v",), to="o"),
    Layer("proj_out", ("o", "m"), "y"),  # proj_out(cat([attn_output, mlp_hidden_states]))
    Join(("x", "y"), "x", gated="y"),  # residual + gate * proj_out(...)
)

#: ``FluxSingleTransformerBlock.forward`` (transformer_flux.py:383-413): the block itself concatenates the text and
#: image streams, runs :data:`SINGLE_STREAM_SEQUENCE_FLOW` and splits them again.
SINGLE_STREAM_BLOCK_FLOW = (
    Join(("txt", "img"), "x"),  # :392 cat([encoder_hidden_states, hidden_states])
    *SINGLE_STREAM_SEQUENCE_FLOW,
    Join(("x",), "img"),
    Join(("x",), "txt"),  # :411 split back
)


def single_stream_block(*, dim: int, heads: int, head_dim: int, tokens: Any, mlp_ratio: float = 4.0,
                        qk_norm: str | None = "rms_norm", pruned: bool = False) -> Node:
    mlp = dim * int(mlp_ratio) if float(mlp_ratio).is_integer() else int(dim * mlp_ratio)
    norm = pruned_ada_layer_norm("norm", dim, tokens) if pruned else ada_layer_norm_zero("norm", dim, tokens, chunks=3)
    return Node(
        "block",
        children=(
            norm,
            Node("proj_mlp", ops.linear(tokens, dim, mlp) + ops.activation(tokens * mlp)),
            attention_module("attn", tokens=tokens, dim=dim, heads=heads, head_dim=head_dim,
                             qk_norm=qk_norm, out=False),
            Node("proj_out", ops.linear(tokens, dim + mlp, dim)),
        ),
        formula="single_stream_block",
    )
