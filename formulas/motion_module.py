r"""AnimateDiff's motion modules (diffusers ``models/unets/unet_motion_model.py``), and the frame
batch every 2-D layer of ``UNetMotionModel`` runs on.

``UNetMotionModel.forward`` (unet_motion_model.py:2010) folds the frames into the batch
(``(B, C, F, H, W) → (B·F, C, H, W)``) and repeats the time embedding per frame (``repeat_interleave``,
:1994), so every ResNet, spatial transformer and sampler runs the 2-D UNet formulas once per frame:
:func:`per_frame` multiplies a node's work (not its parameters) by the frame count.

A motion module, ``AnimateDiffTransformer3D`` (:63), on :math:`F` frames of an :math:`H \times W`
map of :math:`C` channels with :math:`h` heads (:math:`d_h = C/h`, inner width :math:`d = h d_h`)
and :math:`k` layers: a GroupNorm over ``(C, F, H, W)``, ``proj_in`` (:math:`C \to d`) on the
:math:`HWF` vectors, then :math:`k` ``BasicTransformerBlock``\ s over :math:`HW` sequences of
:math:`F` tokens each: two self-attentions (``double_self_attention``, no cross-attention
dimension: ``attn2`` attends the frames again), a GEGLU feed-forward (:math:`4d`), LayerNorms
before each, and a sinusoidal position table (a buffer, no MACs); then ``proj_out``.

.. math::

   \mathrm{MACs} = 2 HWF\,C d + k\,HW\big[\underbrace{8 F d^2 + 4 h F^2 d_h}_{\text{attn1, attn2}}
                 + \underbrace{12 F d^2}_{\text{GEGLU FF}}\big]
"""

from __future__ import annotations

from dataclasses import fields
from functools import lru_cache
from typing import Any

from flopcalc.engine.cost import WEIGHT_FIELDS, Cost, Node, block_kinds, module_list
from flopcalc.formulas import ops
from flopcalc.formulas.transformer_parts import cross_attention, feed_forward, identity_attention

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds("motion_module", "temporal_transformer", "temporal_conv")

_WORK = tuple(f.name for f in fields(Cost) if f.name not in WEIGHT_FIELDS)


def _times(cost: Cost, k: Any) -> Cost:
    """``cost`` with its work fields × ``k`` and its parameter fields unchanged."""
    return Cost(**{f.name: getattr(cost, f.name) * k if f.name in _WORK else getattr(cost, f.name)
                   for f in fields(Cost)})


def per_frame(node: Node, frames: Any) -> Node:
    """``node`` run on a batch of ``frames`` (every module's work × frames; parameters once)."""
    return Node(node.name, _times(node.cost, frames), tuple(per_frame(c, frames) for c in node.children),
                node.count, node.span, node.formula)


@lru_cache(maxsize=256)
def temporal_block(dim: int, heads: int, head_dim: int, frames: Any, identity: tuple[bool, bool] = (False, False),
                   double: bool = True) -> Node:
    """One ``BasicTransformerBlock(dim, heads, head_dim, cross_attention_dim=None,
    double_self_attention=True, attention_bias=False, activation_fn="geglu",
    positional_embeddings="sinusoidal")`` (``models/attention.py``) on one sequence of ``frames``
    tokens: ``norm1`` → ``attn1`` (self), ``norm2`` → ``attn2`` (self again), ``norm3`` → ``ff``.
    ``identity``: whether ``attn1`` / ``attn2`` take perturbed-attention guidance's identity path (the
    perturbed row of ``AnimateDiffPAGPipeline``: both are self-attentions, so ``PAGMixin`` may pick either;
    :func:`~flopcalc.formulas.transformer_parts.identity_attention`). Without ``double`` (``double_self_attention
    =False`` and no cross-attention dimension: SparseCtrl's motion modules) the block has no ``norm2`` / ``attn2``
    (attention.py:883-916): ``norm1`` → ``attn1`` → ``norm3`` → ``ff``."""
    ln = Node("norm", ops.layer_norm(frames, dim))
    # a self-attention is the cross-attention formula with the tokens as their own context
    attn = [identity_attention(name, tokens=frames, dim=dim, inner=heads * head_dim, bias=False) if perturbed else
            cross_attention(name, tokens=frames, dim=dim, context_tokens=frames, context_dim=dim, heads=heads,
                            head_dim=head_dim) for name, perturbed in zip(("attn1", "attn2"), identity)]
    second = (Node("norm2", ln.cost), attn[1]) if double else ()
    return Node("block", children=(Node("norm1", ln.cost), attn[0], *second,
                                   Node("norm3", ln.cost), feed_forward("ff", frames, dim, gated=True)),
                formula="temporal_transformer_block")


@lru_cache(maxsize=256)
def temporal_transformer(channels: int, heads: int, head_dim: int, height: Any, width: Any, frames: Any, *,
                         layers: int, formula: str = "temporal_transformer",
                         identity: tuple[tuple[bool, bool], ...] = (), double: bool = True) -> Node:
    """``TransformerTemporalModel(heads, head_dim, in_channels=channels, num_layers=layers)``
    (``models/transformers/transformer_temporal.py``, ModelScope's and I2VGen-XL's temporal attentions) on
    ``frames`` frames of ``height × width``: ``AnimateDiffTransformer3D``'s computation without its position
    table (its ``cross_attention_dim`` is unused: ``double_self_attention`` makes ``attn2`` a self-attention
    and the blocks pass no encoder states). ``identity``: per transformer block, whether its ``attn1`` / ``attn2``
    take the identity path (:func:`temporal_block`; none when empty); ``double``: ``double_self_attention``."""
    inner = heads * head_dim
    hw = height * width
    vectors = hw * frames
    blocks = [per_frame(temporal_block(inner, heads, head_dim, frames, identity[k] if identity else (False, False),
                                       double), hw) for k in range(layers)]
    return Node("temporal_transformer", children=(
        Node("norm", ops.group_norm(channels, vectors)),
        Node("proj_in", ops.linear(vectors, channels, inner)),
        module_list("transformer_blocks", blocks),
        Node("proj_out", ops.linear(vectors, inner, channels)),
    ), formula=formula)


def motion_module(channels: int, heads: int, height: Any, width: Any, frames: Any, *, layers: int,
                  identity: tuple[tuple[bool, bool], ...] = (), double: bool = True) -> Node:
    """``AnimateDiffTransformer3D(num_attention_heads=heads, attention_head_dim=channels // heads,
    in_channels=channels, num_layers=layers, double_self_attention=double)`` on ``frames`` frames of
    ``height × width`` (``identity``: the blocks' perturbed-attention identity paths, :func:`temporal_transformer`)."""
    return temporal_transformer(channels, heads, channels // heads, height, width, frames, layers=layers,
                                formula="motion_module", identity=identity, double=double)


@lru_cache(maxsize=256)
def temporal_conv_layer(channels: int, height: Any, width: Any, frames: Any) -> Node:
    r"""``TemporalConvLayer(channels, channels)`` (``models/resnet.py``, ModelScope's ``temp_convs``): four
    ``GroupNorm → SiLU → Conv3d(C, C, (3, 1, 1), padding (1, 0, 0))`` over the ``(C, F, H, W)`` video, so
    :math:`\mathrm{MACs} = 4 \cdot 3 C^2 F H W`."""
    n = frames * height * width
    norm = Node("0", ops.group_norm(channels, n) + ops.activation(channels * n))
    conv = ops.conv(channels, channels, 3, n)
    # nn.Sequential(GroupNorm, SiLU, Conv3d) for conv1; (GroupNorm, SiLU, Dropout, Conv3d) for conv2-4
    return Node("temp_conv", children=tuple(Node(f"conv{i}", children=(norm, Node("2" if i == 1 else "3", conv)))
                                            for i in range(1, 5)), formula="temporal_conv")
