r"""CogVideoX transformer blocks (diffusers ``models/transformers/cogvideox_transformer_3d.py``:
``CogVideoXBlock``; ``normalization.py``: ``CogVideoXLayerNormZero``, ``AdaLayerNorm``;
``embeddings.py``: ``CogVideoXPatchEmbed``).

A video of :math:`T` latent frames of :math:`h \times w` becomes :math:`N = T' (h/p)(w/p)` video
tokens (:math:`T' = T`, or :math:`T / p_t` for CogVideoX 1.5's ``patch_size_t``); the :math:`L`
T5 tokens are projected to the same width :math:`d` and the two streams run *one* joint
sequence of :math:`S = N + L` tokens through every block (an "expert" adaptive norm per stream,
shared weights everywhere else):

.. math::

   \mathrm{MACs}_\text{block} = \underbrace{2 \cdot 6 d_t d}_{\text{norm1, norm2}}
       + \underbrace{4 S d^2}_{\text{q, k, v, out}} + \underbrace{2 h S^2 d_h}_{\text{QK}^\top,\ \text{AV}}
       + \underbrace{2 S d f}_{\text{ff}}

with :math:`d_t` = ``time_embed_dim``, :math:`f` the feed-forward width (:math:`4d`; doubled in
the up-projection for the gated activations).
"""

from __future__ import annotations

from typing import Any

from flopcalc.engine.cost import Node, block_kinds
from flopcalc.formulas import ops
from flopcalc.formulas.transformer_parts import attention_module, feed_forward

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds("cogvideox_block")

#: ``FeedForward(activation_fn=...)`` (``attention.py``): ``net.0.proj`` of ``geglu`` (``GEGLU``) and
#: ``swiglu`` (``SwiGLU``) projects to 2f (value and gate); the others (``GELU``, ``ApproximateGELU``,
#: ``LinearActivation``) to f. The feed-forward width is f = 4d (``inner_dim`` is not passed).
GATED_ACTIVATIONS = ("geglu", "swiglu")
ACTIVATIONS = ("gelu", "gelu-approximate", "geglu", "geglu-approximate", "swiglu", "linear-silu")


def layer_norm_zero(name: str, *, dim: int, cond_dim: int, video_tokens: Any, text_tokens: Any,
                    affine: bool = True) -> Node:
    r"""``CogVideoXLayerNormZero(cond_dim, dim)``: ``linear(silu(temb))`` to 6·d modulation values
    (shift, scale, gate for each stream), and *one* ``nn.LayerNorm(d)`` applied to the video and to
    the text stream (parameters once, thop's rule on both calls).

    .. math:: \mathrm{MACs} = 6\,d_t\,d
    """
    return Node(name, children=(
        Node("linear", ops.activation(cond_dim) + ops.linear(1, cond_dim, 6 * dim)),
        Node("norm", ops.layer_norm(video_tokens + text_tokens, dim, affine=affine)),
    ), formula="cogvideox_layer_norm_zero")


def cogvideox_block(*, dim: int, heads: int, head_dim: int, cond_dim: int, video_tokens: Any, text_tokens: Any,
                    activation: str = "gelu-approximate", attention_bias: bool = True,
                    norm_affine: bool = True) -> Node:
    r"""``CogVideoXBlock``: ``norm1`` (expert adaptive LayerNorm), ``attn1`` (self-attention over the
    concatenated text + video sequence, per-head LayerNorm q/k norms, ``CogVideoXAttnProcessor2_0``),
    ``norm2``, ``ff`` on the concatenated sequence. Closed form: see the module docstring.
    """
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation_fn {activation!r} is not one of {', '.join(ACTIVATIONS)}")
    seq = video_tokens + text_tokens
    norm = {"dim": dim, "cond_dim": cond_dim, "video_tokens": video_tokens, "text_tokens": text_tokens,
            "affine": norm_affine}
    return Node("block", children=(
        layer_norm_zero("norm1", **norm),
        attention_module("attn1", tokens=seq, dim=dim, heads=heads, head_dim=head_dim, qk_norm="layer_norm",
                         bias=attention_bias),
        layer_norm_zero("norm2", **norm),
        feed_forward("ff", seq, dim, gated=activation in GATED_ACTIVATIONS),
    ), formula="cogvideox_block")


def patch_embed(*, in_channels: int, dim: int, text_dim: int, patch: int, patch_t: int | None, frames: Any,
                grid_h: Any, grid_w: Any, text_tokens: Any, bias: bool = True) -> Node:
    r"""``CogVideoXPatchEmbed``: ``text_proj`` (``nn.Linear(text_dim, d)`` on the L text tokens) and
    ``proj``: CogVideoX 1.0, an ``nn.Conv2d(C, d, p, stride=p)`` on every latent frame; CogVideoX 1.5
    (``patch_size_t``), an ``nn.Linear(C p² p_t, d)`` (always with bias) on the
    :math:`(T/p_t)(h/p)(w/p)` space-time patches. The sincos or learned positional table is added
    (no MACs); rotary models have none.

    .. math:: \mathrm{MACs} = L\,d_\text{text}\,d + N\,C\,p^2 p_t\,d
    """
    if patch_t is None:
        proj = ops.conv(in_channels, dim, patch * patch, frames * grid_h * grid_w, bias=bias)
    else:
        proj = ops.linear(ops.exact_div(frames, patch_t) * grid_h * grid_w, in_channels * patch * patch * patch_t, dim)
    return Node("patch_embed", children=(
        Node("proj", proj),
        Node("text_proj", ops.linear(text_tokens, text_dim, dim)),
    ), formula="cogvideox_patch_embed")


def ada_layer_norm_out(name: str, *, dim: int, cond_dim: int, tokens: Any, affine: bool = True) -> Node:
    r"""``AdaLayerNorm(cond_dim, output_dim=2d, chunk_dim=1)`` (``norm_out``): shift and scale from
    ``linear(silu(temb))``, an ``nn.LayerNorm(d)`` (affine per ``norm_elementwise_affine``) on the
    video tokens. :math:`\mathrm{MACs} = 2\,d_t\,d`."""
    return Node(name, children=(
        Node("linear", ops.activation(cond_dim) + ops.linear(1, cond_dim, 2 * dim)),
        Node("norm", ops.layer_norm(tokens, dim, affine=affine)),
    ), formula="ada_layer_norm")
