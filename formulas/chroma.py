r"""Chroma's approximator: the network that replaces FLUX's per-block modulation MLPs.

Mirrors diffusers ``transformer_chroma.ChromaApproximator`` (fed by
``ChromaCombinedTimestepTextProjEmbeddings``, which is parameter-free: sinusoidal timestep and
guidance projections concatenated with a fixed ``mod_proj`` table).

Symbols: :math:`M` modulation vectors (``3 S + 12 D + 2`` for :math:`D` double- and :math:`S`
single-stream blocks: every block's shift/scale/gate vectors and the output norm's two), input width
:math:`c` (``approximator_num_channels``), hidden width :math:`e` (``approximator_hidden_dim``),
:math:`k` residual layers (``approximator_layers``), model width :math:`d`.

.. math::

   \mathrm{MACs}_\text{torch} = M \left( c e + 2 k e^2 + e d \right)

Derivation: ``in_proj`` (c → e), then ``k`` residual ``PixArtAlphaTextProjection`` MLPs (e → e →
e, SiLU) each after an ``nn.RMSNorm``, then ``out_proj`` (e → d), all on the :math:`M` vectors of
one sample: unlike FLUX's adaLN linears (one vector per block), this work is per modulation vector
but still independent of the resolution and the text length.
"""

from __future__ import annotations

from typing import Any

from flopcalc.engine.cost import Node, block_kinds, module_list
from flopcalc.formulas import ops
from flopcalc.formulas.conditioning import mlp_embedder

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds("chroma_approximator")


def chroma_approximator(name: str, *, vectors: Any, in_dim: int, hidden_dim: int, out_dim: int,
                        layers: int) -> Node:
    """``ChromaApproximator(in_dim, out_dim, hidden_dim, n_layers)`` on ``vectors`` input vectors:
    ``in_proj``, ``layers`` × (``norms.i``, ``layers.i``), ``out_proj``."""
    return Node(
        name,
        children=(
            Node("in_proj", ops.linear(vectors, in_dim, hidden_dim)),
            module_list("layers", [mlp_embedder("layer", hidden_dim, hidden_dim, tokens=vectors)] * layers),
            module_list("norms", [Node("norm", ops.rms_norm(vectors, hidden_dim))] * layers),
            Node("out_proj", ops.linear(vectors, hidden_dim, out_dim)),
        ),
        formula="chroma_approximator",
    )
