r"""Qwen2.5-VL's vision tower, ``Qwen2_5_VisionTransformerPretrainedModel`` (transformers 5
``models/qwen2_5_vl/modeling_qwen2_5_vl.py:382-486``, window/segment helpers in ``vision_utils.py:42-185``).

An image of :math:`H \times W` pixels (the processor's ``smart_resize`` makes both multiples of
``patch_size · spatial_merge_size`` = 28) is cut into :math:`t \times g_h \times g_w` patches of
``temporal_patch_size × patch_size²`` pixels × ``in_channels`` (an image is repeated to
``temporal_patch_size`` frames: :math:`t = 1`), :math:`g_h = H/p`, :math:`g_w = W/p`; :math:`N = t g_h g_w`
tokens of width :math:`c` (``hidden_size``), :math:`h` heads of :math:`d = c/h`.

* ``patch_embed.proj``: a bias-free ``Conv3d``, kernel = stride = (2, 14, 14):
  :math:`N c \cdot 3 \cdot 2 \cdot 14^2` MACs.
* ``blocks`` (``Qwen2_5_VLVisionBlock``): RMSNorm, attention (``qkv`` c → 3c and ``proj`` c → c, both
  biased, 2-D rotary positions: elementwise), RMSNorm, gated MLP with biases (c → f → c):
  :math:`4 N c^2 + 3 N c f` plus the attention matmuls :math:`2 c \sum_s L_s^2` over its segments. The
  blocks whose index is in ``fullatt_block_indexes`` attend within each frame (segments of :math:`g_h g_w`
  tokens, ``cu_seqlens``); the others within windows (``cu_window_seqlens``) of at most
  :math:`w \times w` merged units, :math:`w` = ``window_size // spatial_merge_size // patch_size`` (4 for
  112 / 2 / 14), each unit :math:`m^2` patches (:math:`m` = ``spatial_merge_size``): on the merged grid
  :math:`(g_h/m) \times (g_w/m)`, windows along each side are :math:`w, w, \dots, r` with :math:`r` the
  remainder (none when it is 0: the all-padding window has length 0 and ``unique_consecutive`` drops it),
  so :math:`\sum_s L_s^2 = t\, m^4 \big(\sum_i a_i^2\big)\big(\sum_j b_j^2\big)` over the side splits
  :math:`a, b`. SDPA runs each segment separately (the non-flash path).
* ``merger`` (``Qwen2_5_VLPatchMerger``): RMSNorm(c) on :math:`N` tokens, then ``mlp.0`` (:math:`cm^2 \to cm^2`),
  GELU, ``mlp.2`` (:math:`cm^2 \to` ``out_hidden_size``) on the :math:`N/m^2` merged tokens: the image's
  tokens in the language model.
"""

from __future__ import annotations

from flopcalc.engine.cost import Cost, Node, block_kinds, module_list
from flopcalc.formulas import ops
from flopcalc.formulas.decoder_layer import gated_mlp

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds("qwen2_5_vision_block")


def window_sides(merged: int, window: int) -> list[int]:
    """How ``get_vision_window_index`` splits one side of ``merged`` merged units into windows of
    ``window`` units: full windows, then the remainder if any."""
    return [window] * (merged // window) + ([merged % window] if merged % window else [])


def segment_lengths(frames: int, grid_h: int, grid_w: int, *, merge: int, window: int | None) -> list[int]:
    """Token counts of the attention segments of one image (``frames`` × ``grid_h`` × ``grid_w``
    patches): ``window`` None: one segment per frame (``cu_seqlens``, full attention); else the
    windows of ``cu_window_seqlens``, ``window`` merged units a side."""
    if window is None:
        return [grid_h * grid_w] * frames
    rows, cols = window_sides(grid_h // merge, window), window_sides(grid_w // merge, window)
    return [a * b * merge * merge for a in rows for b in cols] * frames


def vision_block(*, tokens: int, dim: int, heads: int, d_ff: int, segments: list[int]) -> Node:
    """``Qwen2_5_VLVisionBlock`` on ``tokens`` patch tokens whose attention runs within ``segments``
    (their lengths sum to ``tokens``)."""
    head_dim = ops.exact_div(dim, heads)
    attention = sum((ops.attention(n, n, heads, head_dim) for n in segments), Cost())
    attn = (ops.linear(tokens, dim, 3 * dim) + attention + ops.linear(tokens, dim, dim)
            + Cost(elementwise=6 * tokens * dim))  # rotary: q and k, times cos and sin, plus the sum
    return Node("block", children=(
        Node("norm1", ops.rms_norm(tokens, dim)),
        Node("norm2", ops.rms_norm(tokens, dim)),
        Node("attn", attn, formula="qwen2_5_vision_attention"),
        gated_mlp("mlp", tokens, dim, d_ff, bias=True),
    ), formula="qwen2_5_vision_block")


def vision_tower(*, grids: list[tuple[int, int, int]], in_channels: int, dim: int, heads: int, d_ff: int,
                 depth: int, patch: int, temporal_patch: int, merge: int, window_size: int,
                 full_attention: frozenset[int], out_dim: int) -> Node:
    """``Qwen2_5_VisionTransformerPretrainedModel`` on the images of ``grids`` (``image_grid_thw``
    rows ``(t, g_h, g_w)``), all processed as one packed sequence; ``grids`` empty: parameters only
    (the tower is built but a text-only prompt never calls it)."""
    tokens = sum(t * h * w for t, h, w in grids)
    window = window_size // merge // patch
    full, windowed = [], []
    for t, h, w in grids:
        full += segment_lengths(t, h, w, merge=merge, window=None)
        windowed += segment_lengths(t, h, w, merge=merge, window=window)
    blocks = [vision_block(tokens=tokens, dim=dim, heads=heads, d_ff=d_ff,
                           segments=full if i in full_attention else windowed) for i in range(depth)]
    merged_dim = dim * merge * merge
    merged = ops.exact_div(tokens, merge * merge)
    merger = Node("merger", children=(
        Node("ln_q", ops.rms_norm(tokens, dim)),
        Node("mlp", children=(Node("0", ops.linear(merged, merged_dim, merged_dim)),
                              Node("1", ops.activation(merged * merged_dim)),
                              Node("2", ops.linear(merged, merged_dim, out_dim)))),
    ))
    return Node("visual", children=(
        Node("patch_embed", children=(
            Node("proj", ops.conv(in_channels, dim, temporal_patch * patch * patch, tokens, bias=False)),)),
        module_list("blocks", blocks),
        merger,
    ), formula="qwen2_5_vision_tower" if grids else "not run")
