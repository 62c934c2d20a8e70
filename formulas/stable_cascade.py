r"""The blocks of Stable Cascade: ``StableCascadeUNet`` (diffusers
``models/unets/unet_stable_cascade.py``), the stage C prior and the stage B decoder alike, and the
``PaellaVQModel`` decoder (``pipelines/deprecated/wuerstchen/modeling_paella_vq_model.py``).

Shapes: an :math:`h \times w` map (:math:`n = hw` positions) of :math:`c` channels.

* ``SDCascadeResBlock(c, c_skip, k)`` (unet_stable_cascade.py:58): depthwise :math:`k\times k`
  conv, ``SDCascadeLayerNorm``, then ``channelwise`` on every position: ``Linear(c + c_skip, 4c)``,
  GELU, ``GlobalResponseNorm`` (no matmul), ``Linear(4c, c)``:
  :math:`\mathrm{MACs} = n c k^2 + n (c + c_s) 4c + 4 n c^2`.
* ``SDCascadeTimestepBlock(c, d_t, conds)`` (:40): ``mapper`` and one ``mapper_<cond>`` per
  timestep-conditioning type, each ``Linear(d_t, 2c)`` on one vector: :math:`2 d_t c (1 + |conds|)`.
* ``SDCascadeAttnBlock(c, d_c, heads)`` (:93): ``kv_mapper`` (SiLU, ``Linear(d_c, c)``) on the
  :math:`m` conditioning tokens, ``SDCascadeLayerNorm``, diffusers ``Attention(query_dim=c,
  heads, dim_head=c // heads, bias=True)``: queries from the :math:`n` positions, keys and values
  from the :math:`n + m` vectors ``[norm(x); kv]`` under ``self_attn`` (else the :math:`m`):
  :math:`\mathrm{MACs} = m d_c c + 2 n c D + 2 L c D + 2 h n L d_h` with :math:`D = h d_h`,
  :math:`L = n + m` (or :math:`m`).
* ``MixingResidualBlock(c, 4c)`` (modeling_paella_vq_model.py:27): two ``nn.LayerNorm`` (no
  affine), a depthwise 3×3 conv after replication padding, ``Linear(c, 4c)``, GELU,
  ``Linear(4c, c)``: :math:`9 n c + 8 n c^2`.

A module the forward calls :math:`R` times (a level's blocks run ``repeat_mappers`` times) keeps
its parameters once and its work :math:`R` times (:func:`called`), as ``FlopCounterMode`` sums a
module's calls.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Sequence

from flopcalc.engine.cost import WEIGHT_FIELDS, Cost, Node, block_kinds, module_list
from flopcalc.formulas import ops
from flopcalc.formulas.kandinsky3 import conv_transpose2d

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds("sd_cascade_res_block", "sd_cascade_timestep_block", "sd_cascade_attn_block",
                          "mixing_residual_block")

RES_BLOCK = "SDCascadeResBlock"
TIMESTEP_BLOCK = "SDCascadeTimestepBlock"
ATTN_BLOCK = "SDCascadeAttnBlock"
BLOCK_TYPES = (RES_BLOCK, TIMESTEP_BLOCK, ATTN_BLOCK)
#: thop's ``calculate_upsample``: 11 ops per output element of a bilinear ``nn.Upsample``.
THOP_BILINEAR_OPS = 11


def called(node: Node, times: Any) -> Node:
    """``node`` called ``times`` times in one forward: its work (and its children's) ``times``
    over, its weights once."""
    if isinstance(times, int) and times == 1:
        return node
    cost = replace(node.cost * times, **{f: getattr(node.cost, f) for f in WEIGHT_FIELDS})
    return replace(node, cost=cost, children=tuple(called(c, times) for c in node.children))


def cascade_layer_norm(channels: int, positions: Any) -> Cost:
    """``SDCascadeLayerNorm`` (an ``nn.LayerNorm`` subclass, no affine, over the channels): no
    MACs, and thop (exact-type hooks) does not count it."""
    return ops.layer_norm(positions, channels, affine=False, thop_rule=False)


def bilinear(out_numel: Any) -> Cost:
    """``nn.Upsample(mode="bilinear")``: torch counts nothing; thop counts 11 per output element."""
    return Cost(thop_extra=THOP_BILINEAR_OPS * out_numel, elementwise=ops.UPSAMPLE_OPS * out_numel)


def res_block(name: str, c: int, c_skip: int, kernel: int, h: Any, w: Any) -> Node:
    """``SDCascadeResBlock(c, c_skip, kernel_size)`` at ``h × w`` (``channelwise.0/2/4``: the two
    linears and the ``GlobalResponseNorm``, whose gamma and beta are ``4c`` each)."""
    n = h * w
    hidden = 4 * c
    channelwise = Node("channelwise", children=(
        Node("0", ops.linear(n, c + c_skip, hidden)),
        Node("1", ops.activation(n * hidden)),
        Node("2", Cost(elementwise=ops.NORM_OPS * n * hidden, params=2 * hidden)),
        Node("4", ops.linear(n, hidden, c)),
    ))
    return Node(name, children=(
        Node("depthwise", ops.conv2d(c, c, kernel, h, w, groups=c)),
        Node("norm", cascade_layer_norm(c, n)),
        channelwise,
    ), formula="sd_cascade_res_block")


def timestep_block(name: str, c: int, embed_dim: int, conds: Sequence[str]) -> Node:
    """``SDCascadeTimestepBlock(c, embed_dim, conds)``: ``mapper`` and ``mapper_<cond>``, each
    ``Linear(embed_dim, 2c)`` on one vector."""
    mappers = [Node(m, ops.linear(1, embed_dim, 2 * c)) for m in ("mapper", *(f"mapper_{k}" for k in conds))]
    return Node(name, children=tuple(mappers), formula="sd_cascade_timestep_block")


def attn_block(name: str, c: int, cond_dim: int, heads: int, self_attn: bool, h: Any, w: Any,
               cond_tokens: Any) -> Node:
    """``SDCascadeAttnBlock(c, cond_dim, heads, self_attn)`` at ``h × w`` with ``cond_tokens``
    conditioning vectors: ``Attention(query_dim=c, heads, dim_head=c // heads, bias=True)``
    (``inner = heads · (c // heads)``, ``AttnProcessor2_0`` on the flattened map)."""
    n = h * w
    head_dim = c // heads
    inner = heads * head_dim
    kv_len = n + cond_tokens if self_attn else cond_tokens
    attention = Node("attention", ops.attention(n, kv_len, heads, head_dim), children=(
        Node("to_q", ops.linear(n, c, inner)),
        Node("to_k", ops.linear(kv_len, c, inner)),
        Node("to_v", ops.linear(kv_len, c, inner)),
        module_list("to_out", [Node("0", ops.linear(n, inner, c))]),
    ), formula="attention")
    return Node(name, children=(
        Node("norm", cascade_layer_norm(c, n)),
        attention,
        Node("kv_mapper", children=(Node("0", ops.activation(cond_tokens * cond_dim)),
                                    Node("1", ops.linear(cond_tokens, cond_dim, c)))),
    ), formula="sd_cascade_attn_block")


def mapper(name: str, c_in: int, c: int, h: Any, w: Any) -> Node:
    """The ``effnet_mapper`` / ``pixels_mapper`` ``Sequential``: 1×1 conv ``c_in → 4c``, GELU, 1×1
    conv ``4c → c``, ``SDCascadeLayerNorm`` at ``h × w``."""
    n = h * w
    return Node(name, children=(
        Node("0", ops.conv2d(c_in, 4 * c, 1, h, w)),
        Node("1", ops.activation(4 * c * n)),
        Node("2", ops.conv2d(4 * c, c, 1, h, w)),
        Node("3", cascade_layer_norm(c, n)),
    ))


def mixing_residual_block(name: str, c: int, h: Any, w: Any) -> Node:
    """Paella's ``MixingResidualBlock(c, 4c)`` at ``h × w`` (``gammas``: 6 parameters)."""
    n = h * w
    hidden = 4 * c
    return Node(name, ops.parameters(6), children=(
        Node("norm1", ops.layer_norm(n, c, affine=False)),
        Node("depthwise", children=(Node("1", ops.conv2d(c, c, 3, h, w, groups=c)),)),
        Node("norm2", ops.layer_norm(n, c, affine=False)),
        Node("channelwise", children=(
            Node("0", ops.linear(n, c, hidden)),
            Node("1", ops.activation(n * hidden)),
            Node("2", ops.linear(n, hidden, c)),
        )),
    ), formula="mixing_residual_block")


def paella_levels(embed_dim: int, levels: int) -> list[int]:
    """``c_levels = [embed_dim // 2**i for i in reversed(range(levels))]`` (modeling_paella_vq_model.py:90)."""
    return [embed_dim // 2**i for i in reversed(range(levels))]


def paella_decoder(*, latent_channels: int, out_channels: int, embed_dim: int, levels: int,
                   bottleneck_blocks: int, scale: int, h: Any, w: Any) -> tuple[Node, Node]:
    """``PaellaVQModel.decode``'s ``up_blocks`` (a 1×1 conv to the deepest width, ``bottleneck_blocks``
    mixing blocks there, then per shallower level a 4×4 stride-2 ``ConvTranspose2d`` (padding 1, so
    twice the size) and one mixing block) and ``out_block`` (1×1 conv to ``out·scale²`` channels,
    ``PixelShuffle(scale)``), on an ``h × w`` latent (modeling_paella_vq_model.py:114-129)."""
    c = paella_levels(embed_dim, levels)
    items = [Node("0", children=(Node("0", ops.conv2d(latent_channels, c[-1], 1, h, w)),))]
    for i in range(levels):
        width = c[levels - 1 - i]
        for _ in range(bottleneck_blocks if i == 0 else 1):
            items.append(mixing_residual_block(str(len(items)), width, h, w))
        if i < levels - 1:
            items.append(Node(str(len(items)), conv_transpose2d(width, c[levels - 2 - i], 4, 2, h, w, padding=1)))
            h, w = 2 * h, 2 * w
    out = Node("out_block", children=(Node("0", ops.conv2d(c[0], out_channels * scale**2, 1, h, w)),))
    return module_list("up_blocks", items), out


def paella_encoder(*, in_channels: int, latent_channels: int, embed_dim: int, levels: int, scale: int,
                   height: Any, width: Any) -> tuple[Node, Node]:
    """``PaellaVQModel.encode``: ``in_block`` (``PixelUnshuffle(scale)``, 1×1 conv) and ``down_blocks``
    (per level: [a 4×4 stride-2 conv, padding 1], a mixing block; then a bias-free 1×1 conv to
    ``latent_channels`` and ``BatchNorm2d``, which neither counter counts) (modeling_paella_vq_model.py:92-108)."""
    c = paella_levels(embed_dim, levels)
    h, w = ops.exact_div(height, scale), ops.exact_div(width, scale)
    in_block = Node("in_block", children=(Node("1", ops.conv2d(in_channels * scale**2, c[0], 1, h, w)),))
    items = []
    for i in range(levels):
        if i > 0:
            h, w = ops.conv_output_size(h, 4, 2, 1), ops.conv_output_size(w, 4, 2, 1)
            items.append(Node(str(len(items)), ops.conv2d(c[i - 1], c[i], 4, h, w)))
        items.append(mixing_residual_block(str(len(items)), c[i], h, w))
    n = h * w
    items.append(Node(str(len(items)), children=(
        Node("0", ops.conv2d(c[-1], latent_channels, 1, h, w, bias=False)),
        Node("1", Cost(thop_extra=4 * latent_channels * n, elementwise=ops.NORM_AFFINE_OPS * latent_channels * n,
                       params=2 * latent_channels)),
    )))
    return in_block, module_list("down_blocks", items)
