r"""Conditioning pieces of DiT denoisers: timestep / pooled-text MLPs and adaptive layer norms.

They act on one conditioning vector per sample (``temb``), so their linear MACs equal their
weight count: :math:`d_\text{in} d_\text{out}` per layer, independent of resolution. The
adaptive norms also normalise the ``tokens × dim`` stream without an affine.
"""

from __future__ import annotations

from typing import Any

from flopcalc.engine.cost import Node
from flopcalc.formulas import ops


def mlp_embedder(name: str, d_in: int, d_hidden: int, d_out: int | None = None, *, tokens: Any = 1,
                 bias: bool = True) -> Node:
    r"""Two linears with an activation between, on ``tokens`` vectors (one conditioning vector
    by default): diffusers ``TimestepEmbedding`` (``embeddings.py``: ``linear_1``, ``act``,
    ``linear_2``; ``bias=False`` for ``sample_proj_bias=False``, as FLUX.2 builds it) and
    ``PixArtAlphaTextProjection`` (on every caption token).

    .. math:: \mathrm{MACs} = n\,(d_\text{in} d_h + d_h d_\text{out})
    """
    d_out = d_hidden if d_out is None else d_out
    return Node(
        name,
        children=(
            Node("linear_1", ops.linear(tokens, d_in, d_hidden, bias=bias) + ops.activation(tokens * d_hidden)),
            Node("linear_2", ops.linear(tokens, d_hidden, d_out, bias=bias)),
        ),
        formula="mlp_embedder",
    )


def ada_layer_norm_zero(name: str, dim: int, tokens: Any, chunks: int = 6, *, bias: bool = True,
                        fp32_norm: bool = False) -> Node:
    r"""``AdaLayerNormZero`` (``chunks=6``), ``AdaLayerNormZeroSingle`` (3) and
    ``SD35AdaLayerNormZeroX`` (9) from diffusers ``normalization.py``:
    ``linear(silu(temb))`` to ``chunks·dim`` modulation values, and a LayerNorm without affine.
    ``bias=False`` and ``fp32_norm`` (``norm_type="fp32_layer_norm"``: an ``FP32LayerNorm``, a subclass
    thop does not hook) as AuraFlow builds it.

    .. math:: \mathrm{MACs} = \text{chunks}\cdot d^2
    """
    return Node(
        name,
        children=(
            Node("linear", ops.activation(dim) + ops.linear(1, dim, chunks * dim, bias=bias)),
            Node("norm", ops.layer_norm(tokens, dim, affine=False, thop_rule=not fp32_norm)),
        ),
        formula="ada_layer_norm_zero",
    )


def ada_layer_norm_continuous(name: str, dim: int, cond_dim: int, tokens: Any, *, bias: bool = True) -> Node:
    r"""``AdaLayerNormContinuous(dim, cond_dim, elementwise_affine=False)``: scale and shift
    from ``linear(silu(cond))`` and a LayerNorm without affine (``normalization.py``); ``bias=False``
    as FLUX.2's ``norm_out``.

    .. math:: \mathrm{MACs} = 2\,d\,d_c
    """
    return Node(
        name,
        children=(
            Node("linear", ops.activation(cond_dim) + ops.linear(1, cond_dim, 2 * dim, bias=bias)),
            Node("norm", ops.layer_norm(tokens, dim, affine=False)),
        ),
        formula="ada_layer_norm_continuous",
    )


def pruned_ada_layer_norm(name: str, dim: int, tokens: Any) -> Node:
    r"""Chroma's pruned adaptive norms (``transformer_chroma.py``: ``ChromaAdaLayerNormZeroPruned``,
    ``ChromaAdaLayerNormZeroSinglePruned``, ``ChromaAdaLayerNormContinuousPruned`` with
    ``elementwise_affine=False``): the modulation vectors come precomputed from the model's
    approximator, so only the affine-free LayerNorm ``norm`` is left.

    .. math:: \mathrm{MACs} = 0
    """
    return Node(name, children=(Node("norm", ops.layer_norm(tokens, dim, affine=False)),),
                formula="pruned_ada_layer_norm")
