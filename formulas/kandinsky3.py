r"""The blocks of Kandinsky 3's UNet (diffusers ``models/unets/unet_kandinsky3.py``):
``Kandinsky3ConditionalGroupNorm``, ``Kandinsky3Block``, ``Kandinsky3ResNetBlock``,
``Kandinsky3AttentionBlock``, ``Kandinsky3AttentionPooling`` and the down / up sample blocks.

Shapes: an :math:`H \times W` map of :math:`C` channels, a time embedding of width :math:`d_t`
(``time_embedding_dim``), :math:`m` text tokens of width :math:`d_c` (``cross_attention_dim``).

* Conditional GroupNorm: GroupNorm without affine, modulated by ``Linear(d_t, 2C)`` of the time
  embedding (one vector): :math:`2 d_t C` MACs.
* ``Kandinsky3ResNetBlock`` :math:`C_i \to C_o`, hidden :math:`c = \max(C_i, C_o) // 2`: four
  ``Kandinsky3Block`` (norm, SiLU, [up], conv, [down]) with kernels 1, 3, 3, 1 —
  :math:`HW\,(C_i c + 9c^2 + 9c^2 + c C_o)` MACs at one resolution, plus
  :math:`2 d_t (C_i + 3c)` for the norms and :math:`[C_i \ne C_o] HW C_i C_o` for the 1×1
  shortcut. The up variant's second block upsamples with a 2×2 stride-2 ``ConvTranspose2d``
  (``torch``: :math:`HW \cdot 4 c^2`, at the input size; thop counts it on the output,
  :math:`4\times` that), as does its shortcut; the down variant's third block ends with a 2×2
  stride-2 ``Conv2d``, as does its shortcut.
* ``Kandinsky3AttentionBlock`` (:math:`n = HW`, :math:`m` context tokens of width :math:`d_k`;
  self-attention: :math:`m = n`, :math:`d_k = C`): diffusers ``Attention`` with
  ``out_dim = C`` (so ``inner_dim = C``, ``heads = C // head_dim``), no biases, then a 1×1-conv
  feed-forward :math:`C \to 4C \to C`:

  .. math:: \mathrm{MACs} = 2nC^2 + 2 m d_k C + 2nmC + 8nC^2 + 4 d_t C

* ``Kandinsky3AttentionPooling``: one query (the mean text token) attending over the :math:`m`
  tokens, ``Attention(d_c, d_c, out_dim=d_t)``: :math:`d_c d_t (1 + 2m) + 2 m d_t + d_t^2`.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Sequence

from flopcalc.engine.cost import Cost, Node, block_kinds, module_list
from flopcalc.formulas import ops

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds("kandinsky3_resnet_block", "kandinsky3_attention_block", "kandinsky3_attention_pooling")

#: ``Kandinsky3UNet.__init__`` fixes these (the "TODO: put into config" constants of the real class).
EXPANSION_RATIO = 4
COMPRESSION_RATIO = 2
ADD_CROSS_ATTENTION = (False, True, True, True)
ADD_SELF_ATTENTION = (False, True, True, True)
#: ``Kandinsky3ResNetBlock``'s four ``Kandinsky3Block`` kernels.
RESNET_KERNELS = (1, 3, 3, 1)


def conv_transpose2d(c_in: int, c_out: int, kernel: int, stride: int, in_h: Any, in_w: Any, *,
                     bias: bool = True, padding: int = 0) -> Cost:
    r"""``nn.ConvTranspose2d(c_in, c_out, kernel, stride, padding)`` on an ``in_h × in_w`` map.

    ``torch``: ``conv_flop_count(transposed=True)`` counts the *input* positions,
    :math:`H_i W_i C_o C_i k^2` (``conv``). thop's ``count_convNd`` counts the *output* numel
    × :math:`C_i k^2`; the excess over torch's count is kept in ``thop_extra`` so that the
    ``thop`` convention equals thop's number exactly.
    """
    out_h, out_w = (in_h - 1) * stride - 2 * padding + kernel, (in_w - 1) * stride - 2 * padding + kernel
    macs = in_h * in_w * c_out * c_in * kernel * kernel
    thop = out_h * out_w * c_out * c_in * kernel * kernel
    params = c_in * c_out * kernel * kernel + (c_out if bias else 0)
    return Cost(conv=macs, thop_extra=thop - macs, params=params, largest_module=params)


def attention_heads(inner_dim: int, head_dim: int) -> tuple[int, int]:
    """``Attention(out_dim=inner_dim, dim_head=head_dim)``: ``heads = out_dim // dim_head`` and the
    processor's ``head_dim = inner_dim // heads`` (``attention_processor.py``). The processor's
    ``view(B, -1, heads, head_dim)`` only works when they multiply back to ``inner_dim``."""
    heads = inner_dim // head_dim
    if heads == 0 or heads * (inner_dim // heads) != inner_dim:
        raise ValueError(f"attention width {inner_dim} does not split into heads of {head_dim}")
    return heads, inner_dim // heads


def attention(q_dim: int, kv_dim: int, inner_dim: int, out_dim: int, q_len: Any, kv_len: Any,
              head_dim: int) -> Node:
    r"""diffusers ``Attention(q_dim, kv_dim, dim_head=head_dim, out_dim=out_dim, out_bias=False)``
    with ``AttnProcessor2_0`` (no biases anywhere, as Kandinsky 3 builds it).

    .. math:: \mathrm{MACs} = n_q d_q D + 2 n_k d_k D + 2 n_q n_k D + n_q D d_o
    """
    heads, hd = attention_heads(inner_dim, head_dim)
    return Node(
        "attention",
        ops.attention(q_len, kv_len, heads, hd),
        children=(
            Node("to_q", ops.linear(q_len, q_dim, inner_dim, bias=False)),
            Node("to_k", ops.linear(kv_len, kv_dim, inner_dim, bias=False)),
            Node("to_v", ops.linear(kv_len, kv_dim, inner_dim, bias=False)),
            module_list("to_out", [Node("0", ops.linear(q_len, inner_dim, out_dim, bias=False))]),
        ),
        formula="kandinsky3_attention",
    )


def attention_pooling(time_dim: int, context_dim: int, head_dim: int, context_tokens: Any) -> Node:
    r"""``Kandinsky3AttentionPooling``: the mean of the text tokens (one query) attends over them,
    projected to the time-embedding width and added to the time embedding.

    .. math:: \mathrm{MACs} = d_c d_t + 2 m d_c d_t + 2 m d_t + d_t^2
    """
    return Node("add_time_condition",
                children=(attention(context_dim, context_dim, time_dim, time_dim, 1, context_tokens, head_dim),),
                formula="kandinsky3_attention_pooling")


def conditional_group_norm(name: str, channels: int, time_dim: int, spatial: Any) -> Node:
    r"""``Kandinsky3ConditionalGroupNorm``: ``GroupNorm(affine=False)`` scaled and shifted by
    ``Linear(d_t, 2C)(SiLU(t))``. :math:`\mathrm{MACs} = 2 d_t C`."""
    return Node(
        name,
        children=(
            Node("norm", ops.group_norm(channels, spatial, affine=False)),
            Node("context_mlp", ops.activation(time_dim),
                 children=(Node("1", ops.linear(1, time_dim, 2 * channels)),)),
        ),
        formula="kandinsky3_conditional_group_norm",
    )


def _block(c_in: int, c_out: int, time_dim: int, kernel: int, height: Any, width: Any,
           up_resolution: bool | None) -> tuple[Node, Any, Any]:
    """``Kandinsky3Block``: conditional norm, SiLU, [ConvTranspose 2× up], conv (``kernel``, same
    size), [2×2 stride-2 conv down]. Returns the node and its output size."""
    hw = height * width
    children = [conditional_group_norm("group_norm", c_in, time_dim, hw)]
    h, w = height, width
    act = ops.activation(c_in * hw)
    if up_resolution is True:
        children.append(Node("up_sample", conv_transpose2d(c_in, c_in, 2, 2, h, w)))
        h, w = 2 * h, 2 * w
    children.append(Node("projection", ops.conv2d(c_in, c_out, kernel, h, w)))
    if up_resolution is False:
        h, w = ops.conv_output_size(h, 2, 2), ops.conv_output_size(w, 2, 2)
        children.append(Node("down_sample", ops.conv2d(c_out, c_out, 2, h, w)))
    return Node("block", act, children=tuple(children), formula="kandinsky3_block"), h, w


@lru_cache(maxsize=1024)  # nodes are immutable; the UNet repeats the same few ResNets
def resnet_block(c_in: int, c_out: int, time_dim: int, height: Any, width: Any,
                 up_resolutions: tuple[bool | None, ...] = (None,) * 4) -> Node:
    """``Kandinsky3ResNetBlock(c_in, c_out, time_dim, compression_ratio=2, up_resolutions)``:
    four ``Kandinsky3Block`` (``resnet_blocks``) and the shortcut (``shortcut_up_sample``
    ConvTranspose when an entry is True, ``shortcut_projection`` 1×1 when the widths differ,
    ``shortcut_down_sample`` 2×2 stride-2 conv when an entry is False)."""
    hidden = max(c_in, c_out) // COMPRESSION_RATIO
    widths = [(c_in, hidden), (hidden, hidden), (hidden, hidden), (hidden, c_out)]
    blocks = []
    h, w = height, width
    for (ci, co), kernel, up in zip(widths, RESNET_KERNELS, up_resolutions):
        node, h, w = _block(ci, co, time_dim, kernel, h, w, up)
        blocks.append(node)
    children = [module_list("resnet_blocks", blocks)]
    sh, sw = height, width
    if True in up_resolutions:
        children.append(Node("shortcut_up_sample", conv_transpose2d(c_in, c_in, 2, 2, sh, sw)))
        sh, sw = 2 * sh, 2 * sw
    if c_in != c_out:
        children.append(Node("shortcut_projection", ops.conv2d(c_in, c_out, 1, sh, sw)))
    if False in up_resolutions:
        sh, sw = ops.conv_output_size(sh, 2, 2), ops.conv_output_size(sw, 2, 2)
        children.append(Node("shortcut_down_sample", ops.conv2d(c_out, c_out, 2, sh, sw)))
    return Node("resnet", children=tuple(children), formula="kandinsky3_resnet_block")


@lru_cache(maxsize=1024)
def attention_block(channels: int, time_dim: int, height: Any, width: Any, *, head_dim: int,
                    context_dim: int | None = None, context_tokens: Any = None) -> Node:
    """``Kandinsky3AttentionBlock``: conditional norm, attention (self-attention over the
    ``H·W`` pixels when ``context_dim`` is None, else cross-attention to the text), residual,
    conditional norm, 1×1-conv feed-forward ``C → 4C → C`` (no biases), residual."""
    n = height * width
    kv_dim, kv_len = (channels, n) if context_dim is None else (context_dim, context_tokens)
    hidden = EXPANSION_RATIO * channels
    return Node(
        "attention_block",
        children=(
            conditional_group_norm("in_norm", channels, time_dim, n),
            attention(channels, kv_dim, channels, channels, n, kv_len, head_dim),
            conditional_group_norm("out_norm", channels, time_dim, n),
            Node("feed_forward", children=(
                Node("0", ops.conv2d(channels, hidden, 1, height, width, bias=False)),
                Node("1", ops.activation(hidden * n)),
                Node("2", ops.conv2d(hidden, channels, 1, height, width, bias=False)),
            )),
        ),
        formula="kandinsky3_attention_block",
    )


IDENTITY = Node("identity", formula="identity")


def _attn_list(first: Node | None, per_layer: Sequence[Node | None]) -> Node:
    """``attentions``: ``[self-attention or Identity] + [cross-attention or Identity] × layers``."""
    return module_list("attentions", [n if n is not None else IDENTITY for n in (first, *per_layer)])


def down_sample_block(c_in: int, c_out: int, time_dim: int, height: Any, width: Any, *, layers: int,
                      head_dim: int, self_attention: bool, context_dim: int | None, context_tokens: Any,
                      down_sample: bool) -> tuple[Node, Any, Any]:
    """``Kandinsky3DownSampleBlock``: [self-attention on ``c_in``], then ``layers`` ×
    (``resnets_in`` → [cross-attention] → ``resnets_out``), the last ``resnets_out`` halving the
    size when ``down_sample``. Returns the node and its output size."""
    first = attention_block(c_in, time_dim, height, width, head_dim=head_dim) if self_attention else None
    ins, cross, outs = [], [], []
    h, w = height, width
    for j in range(layers):
        ins.append(resnet_block(c_in if j == 0 else c_out, c_out, time_dim, h, w))
        cross.append(attention_block(c_out, time_dim, h, w, head_dim=head_dim, context_dim=context_dim,
                                     context_tokens=context_tokens) if context_dim is not None else None)
        last_down = down_sample and j == layers - 1
        outs.append(resnet_block(c_out, c_out, time_dim, h, w, (None, None, False, None) if last_down else (None,) * 4))
    if down_sample:
        h, w = ops.conv_output_size(h, 2, 2), ops.conv_output_size(w, 2, 2)
    node = Node("down_block", children=(_attn_list(first, cross), module_list("resnets_in", ins),
                                        module_list("resnets_out", outs)), formula="kandinsky3_down_sample_block")
    return node, h, w


def up_sample_block(c_in: int, cat_dim: int, c_out: int, time_dim: int, height: Any, width: Any, *, layers: int,
                    head_dim: int, self_attention: bool, context_dim: int | None, context_tokens: Any,
                    up_sample: bool) -> tuple[Node, Any, Any]:
    """``Kandinsky3UpSampleBlock`` on the ``c_in + cat_dim`` channels of the concatenated skip:
    widths ``[(c_in+cat, c_in)] + [(c_in, c_in)]·(layers−2) + [(c_in, c_out)]`` (``layers`` ≥ 2:
    with one layer the constructor's zip drops the ``c_out`` step and the model cannot run); each step is ``resnets_in``
    (width kept; the first one doubles the size when ``up_sample``) → [cross-attention] →
    ``resnets_out``; then [self-attention on ``c_out``]. Returns the node and its output size."""
    widths = [(c_in + cat_dim, c_in)] + [(c_in, c_in)] * (layers - 2) + [(c_in, c_out)]
    ins, cross, outs = [], [], []
    h, w = height, width
    for j, (ci, co) in enumerate(widths):
        up = j == 0 and up_sample
        ins.append(resnet_block(ci, ci, time_dim, h, w, (None, True, None, None) if up else (None,) * 4))
        if up:
            h, w = 2 * h, 2 * w
        cross.append(attention_block(ci, time_dim, h, w, head_dim=head_dim, context_dim=context_dim,
                                     context_tokens=context_tokens) if context_dim is not None else None)
        outs.append(resnet_block(ci, co, time_dim, h, w))
    first = attention_block(c_out, time_dim, h, w, head_dim=head_dim) if self_attention else None
    node = Node("up_block", children=(_attn_list(first, cross), module_list("resnets_in", ins),
                                      module_list("resnets_out", outs)), formula="kandinsky3_up_sample_block")
    return node, h, w
