r"""Qwen-Image 2.1's single-stream block-causal transformer: diffusers 0.42.1
``models/transformers/transformer_qwenimage21.py`` (``QwenImage21Transformer2DModel``,
``QwenImage21TransformerBlock``, ``QwenImage21Attention`` with the default ``QwenImage21AttnProcessor``,
``QwenImage21SwiGLUFeedForward``, ``QwenImage21TextProjection``, ``QwenImage21AdaLayerNormContinuous``).

Symbols: :math:`d = h\,d_h` the width, :math:`T` text tokens, :math:`N` target-image latent tokens (the latent is
unpatched: one token per latent pixel), :math:`Q` the tokens a block runs on (the queries), :math:`r` the rows of
the timestep embedding (:math:`B + 1 = 2` with ``causal_condition``: the sampled timestep and :math:`t = 0`,
:1028 and :944-951; else 1), :math:`m` ``mlp_ratio``.

**Joint sequence** (forward, :922-942): ``txt_in`` projects the :math:`T` text states, the pipeline's ``img_mask``
appends :math:`N/4` image slots (each a 2×2 group of latent tokens) that ``repeat_interleave`` expands four-fold,
and ``img_in``'s :math:`N` projected latents fill them: :math:`S = T + N` tokens, text first (text-to-image).

**Attention** (``QwenImage21AttnProcessor``, :477-551): the block-causal mask ``(q >= k) or same image block`` is
run as one SDPA call per prefix segment (:510-534: a text segment ``[start, end)`` attends to keys ``[0, end)``,
its causal triangle a mask, which does not change the counted work) and one for the target image's queries over
every key (:535-545). Text-to-image has one text segment ``[0, T)``. Per block and head:

* a full forward (no cache, or ``kv_cache_mode="extract"``, the first denoising step: :980-996):
  :math:`T \cdot T + N \cdot S` query-key pairs, every projection on :math:`Q = S` tokens;
* ``kv_cache_mode="cached"`` (every later step, :969-978): the blocks run on the :math:`N` target tokens only
  (:973), their keys and values concatenated after the cached :math:`T` prefix ones (:363-366), one SDPA call
  without segments (:493-503): :math:`N \cdot S` pairs, :math:`Q = N`.

Each pair costs :math:`2 d_h` MACs (:math:`QK^\top` and :math:`AV`).

.. math::

   \mathrm{MACs}_\text{block} = 4 Q d^2 + 3 Q d \cdot m d + 2 d \cdot P, \qquad
   P = \begin{cases} T^2 + N S & \text{full} \\ N S & \text{cached} \end{cases}

   \mathrm{MACs} = N c_\text{in} d + T (c_\text{ctx} d + d^2) + r (256 d + d^2) + r \cdot 4 d^2
     + L\,\mathrm{MACs}_\text{block} + r d^2 + Q d\,c_\text{out}

(``img_in``; ``txt_in``'s ``in_layer`` and ``out_layer`` on every call, cached or not; ``timestep_embedder``;
the shared ``modulation``; the blocks; ``norm_out.linear``; ``proj_out`` on the block output, all of it: the
pipeline slices the target rows afterwards.) Every linear is bias-free. Norms (``nn.LayerNorm`` without
affine, ``RMSNorm`` on q and k, the zero-centred ``text_norm``), RoPE, gates and the SiLU / tanh-GELU
activations are elementwise.
"""

from __future__ import annotations

from typing import Any

from flopcalc.formulas import ops

from flopcalc.engine.cost import Node, block_kinds

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds("qwen_image21_block")

#: ``QwenImage21TimestepProjEmbeddings``: ``QwenImage21TemporalTimesteps(timestep_dim=256)`` feeds
#: ``TimestepEmbedding(256, d, sample_proj_bias=False)`` (transformer_qwenimage21.py:160-163).
TIMESTEP_CHANNELS = 256


def attention_pairs(text_tokens: Any, image_tokens: Any, cached: bool) -> Any:
    r"""Query-key pairs per head of one ``QwenImage21Attention`` call on a text-to-image sequence
    (transformer_qwenimage21.py:493-545): :math:`T^2 + N(T+N)` on a full forward (the text segment over its own
    keys, the target image over all), :math:`N(T+N)` on a cached one (the target queries over the cached prefix
    keys and their own)."""
    t, n = text_tokens, image_tokens
    pairs = n * (t + n)
    return pairs if cached else t * t + pairs


def qwen_image21_block(*, dim: int, heads: int, head_dim: int, mlp_ratio: int, text_tokens: Any,
                       image_tokens: Any, cached: bool) -> Node:
    r"""One ``QwenImage21TransformerBlock`` (transformer_qwenimage21.py:587-652): ``img_norm1`` (LayerNorm without
    affine), ``attn`` (bias-free ``to_q`` / ``to_k`` / ``to_v`` d → hd_h, per-head ``norm_q`` / ``norm_k``
    RMSNorms, :func:`attention_pairs` · 2 d_h MACs per head, ``to_out.0`` hd_h → d), ``img_norm2`` and
    ``img_mlp`` (``QwenImage21SwiGLUFeedForward``: ``gate_layer`` and ``proj`` d → m·d, ``out`` m·d → d), on the
    :math:`Q` query tokens (:math:`T + N`, or :math:`N` when ``cached``). The block holds no modulation of its
    own: it slices the model's shared ``modulation``.

    .. math:: \mathrm{MACs} = 4 Q d^2 + 3 Q\,m d^2 + 2 h d_h P
    """
    q = image_tokens if cached else text_tokens + image_tokens
    inner = heads * head_dim
    hidden = dim * mlp_ratio
    attn = Node(
        "attn",
        ops.attention(attention_pairs(text_tokens, image_tokens, cached), 1, heads, head_dim),
        children=(
            Node("to_q", ops.linear(q, dim, inner, bias=False)),
            Node("to_k", ops.linear(q, dim, inner, bias=False)),
            Node("to_v", ops.linear(q, dim, inner, bias=False)),
            Node("to_out", children=(Node("0", ops.linear(q, inner, dim, bias=False)),)),
            Node("norm_q", ops.rms_norm(q * heads, head_dim)),
            Node("norm_k", ops.rms_norm(q * heads, head_dim)),
        ),
        formula="attention",
    )
    mlp = Node(
        "img_mlp",
        ops.activation(q * hidden),
        children=(
            Node("proj", ops.linear(q, dim, hidden, bias=False)),
            Node("out", ops.linear(q, hidden, dim, bias=False)),
            Node("gate_layer", ops.linear(q, dim, hidden, bias=False)),
        ),
        formula="swiglu_feed_forward",
    )
    return Node(
        "block",
        children=(
            Node("img_norm1", ops.layer_norm(q, dim, affine=False)),
            attn,
            Node("img_norm2", ops.layer_norm(q, dim, affine=False)),
            mlp,
        ),
        formula="qwen_image21_block",
    )


def text_projection(context_dim: int, dim: int, tokens: Any) -> Node:
    r"""``QwenImage21TextProjection`` (transformer_qwenimage21.py:188-200): the zero-centred ``text_norm``
    (an RMSNorm with ``c_ctx`` weights), ``in_layer`` (c_ctx → d), tanh GELU, ``out_layer`` (d → d), bias-free,
    on every text token: :math:`\mathrm{MACs} = T (c_\text{ctx} d + d^2)`. The zero-centred norm is a module of
    its own (no thop rule)."""
    return Node(
        "txt_in",
        ops.activation(tokens * dim),
        children=(
            Node("text_norm", ops.rms_norm(tokens, context_dim)),
            Node("in_layer", ops.linear(tokens, context_dim, dim, bias=False)),
            Node("out_layer", ops.linear(tokens, dim, dim, bias=False)),
        ),
        formula="qwen_image21_text_projection",
    )


def norm_out(dim: int, rows: int, tokens: Any) -> Node:
    r"""``QwenImage21AdaLayerNormContinuous(d, d)`` (transformer_qwenimage21.py:215-235): a scale only,
    ``linear`` (d → d, bias-free) on the :math:`r` rows of ``silu(temb)``, and a LayerNorm without affine (nor
    bias) on the :math:`Q` tokens: :math:`\mathrm{MACs} = r d^2`."""
    return Node(
        "norm_out",
        children=(
            Node("linear", ops.activation(rows * dim) + ops.linear(rows, dim, dim, bias=False)),
            Node("norm", ops.layer_norm(tokens, dim, affine=False)),
        ),
        formula="qwen_image21_norm_out",
    )
