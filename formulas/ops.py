r"""Op-level formulas: one small pure function per operation, from shapes to a :class:`Cost`.

Every function counts one forward at batch size 1. Shapes are token counts (``tokens``) or
spatial sizes; all arguments may be ints or sympy symbols.

MACs (multiply-accumulates) follow ``torch.utils.flop_counter`` exactly:

* ``linear``: :math:`\mathrm{MACs} = n\,d_\text{in}\,d_\text{out}` (``aten.mm``/``addmm``: the
  bias add is not a MAC). Parameters :math:`d_\text{in} d_\text{out} + d_\text{out}[\text{bias}]`.
* ``conv2d``: :math:`\mathrm{MACs} = H_o W_o\,C_o\,(C_i/g)\,k_h k_w`
  (``conv_flop_count``: output elements × input channels per group × kernel area).
* ``attention``: :math:`\mathrm{MACs} = h\,L_q L_k\,(d_{qk} + d_v)`: the two batched matmuls
  QKᵀ and A·V that ``scaled_dot_product_attention`` decomposes into (``sdpa_flop_count``).

thop 0.1.1 counts the same MACs for exact ``nn.Linear`` / ``nn.Conv2d`` modules
(``count_linear``: in_features × output numel; ``calculate_conv2d_flops``), nothing for
functional attention, and ``2·numel`` (``4·numel`` with an affine) for an ``nn.LayerNorm``
module (``count_normalization``). GroupNorm, RMSNorm and activations have no thop rule.

Elementwise work is flopcalc's own estimate, never mixed into MACs; its per-element weights are
the constants below (norms as fvcore counts them, one op per activated or upsampled element,
three per softmax score). Residual adds and modulations are not included.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any, Callable

from flopcalc.engine.cost import Cost

#: While set (only by :func:`flopcalc.gpu_memory.layer_shapes.recording_shapes`, never on the FLOP path),
#: :func:`linear` puts ``LINEAR_WEIGHTS(d_in, d_out)`` in ``Cost.linear_weights`` instead of ``d_in·d_out``: a value
#: that adds and scales like the element count and keeps each weight's shape, which the quantized-storage
#: formulas need (a row's bytes depend on its width) and an element count cannot give back.
LINEAR_WEIGHTS: ContextVar[Callable[[Any, Any], Any] | None] = ContextVar("LINEAR_WEIGHTS", default=None)

#: Elements per block of a Linear weight in :attr:`Cost.linear_blocks` (bitsandbytes 4-bit's default
#: ``blocksize=64``, ``bitsandbytes/nn/modules.py`` ``Params4bit``).
LINEAR_BLOCK = 64
#: Elementwise ops per element (the fvcore convention for norms: 4, plus 1 for the affine).
NORM_OPS = 4
NORM_AFFINE_OPS = 5
#: One op per element for an activation (SiLU, GELU, QuickGELU) and for nearest upsampling.
ACTIVATION_OPS = 1
UPSAMPLE_OPS = 1
#: exp, sum and divide per score for a softmax.
SOFTMAX_OPS = 3


def exact_div(a: Any, b: int) -> Any:
    """``a / b`` where the caller guarantees divisibility: an int for ints (checked), a
    rational expression for symbols."""
    if isinstance(a, int):
        q, r = divmod(a, b)
        if r:
            from flopcalc.engine.errors import ResolutionError

            raise ResolutionError(f"a size of {a} does not split into whole steps of {b} (a patch, stride or "
                                  f"compression factor of the config): use a size that is a multiple of {b}")
        return q
    return a / b


def linear(tokens: Any, d_in: int, d_out: int, *, bias: bool = True, thop_hooked: bool = True,
           nn_linear: bool = True) -> Cost:
    """``nn.Linear(d_in, d_out)`` applied to ``tokens`` vectors. ``thop_hooked`` is False for
    ``F.linear`` calls and ``nn.Linear`` subclasses, which thop (exact-type hooks) misses. ``nn_linear`` is False
    for a module of its own that calls ``F.linear`` on its parameters (no ``nn.Linear``: weight quantizers leave it
    as it is, so it records no linear-weight fields)."""
    macs = tokens * d_in * d_out
    params = d_in * d_out + (d_out if bias else 0)
    if not nn_linear:
        return Cost(functional=macs, params=params, largest_module=params)
    record = LINEAR_WEIGHTS.get()
    weights = {"linear_weights": d_in * d_out if record is None else record(d_in, d_out), "linear_rows": d_out,
               "linear_blocks": -(-d_in * d_out // LINEAR_BLOCK), "linear_packed": -(-d_in * d_out // 2),
               "linear_layers": 1, "largest_module": params}
    return Cost(linear=macs, params=params, **weights) if thop_hooked else Cost(functional=macs, params=params,
                                                                                **weights)


def matmul(m: Any, k: Any, n: Any, *, batch: Any = 1) -> Cost:
    """A functional ``batch × (m×k)·(k×n)`` matmul (``torch.matmul``/``bmm``/``einsum``) that is
    not attention: torch counts it, thop does not."""
    return Cost(functional=batch * m * k * n)


def conv(c_in: int, c_out: int, kernel_volume: int, out_positions: Any, *, groups: int = 1, bias: bool = True,
         thop_hooked: bool = True) -> Cost:
    """Any N-d convolution: ``out_positions`` output positions (e.g. T·H·W) × ``c_out`` ×
    ``c_in/groups`` × ``kernel_volume`` MACs. ``thop_hooked`` is False for subclassed conv types
    (e.g. causal ``Conv3d`` subclasses), which thop counts as 0."""
    per_out = (c_in // groups) * kernel_volume
    macs = out_positions * c_out * per_out
    params = c_out * per_out + (c_out if bias else 0)
    if thop_hooked:
        return Cost(conv=macs, params=params, largest_module=params)
    return Cost(functional=macs, params=params, largest_module=params)


def conv2d(
    c_in: int,
    c_out: int,
    kernel: int | tuple[int, int],
    out_h: Any,
    out_w: Any,
    *,
    groups: int = 1,
    bias: bool = True,
) -> Cost:
    """``nn.Conv2d(c_in, c_out, kernel, groups=groups)`` producing an ``out_h × out_w`` map."""
    kh, kw = (kernel, kernel) if isinstance(kernel, int) else kernel
    return conv(c_in, c_out, kh * kw, out_h * out_w, groups=groups, bias=bias)


def conv_output_size(size: Any, kernel: int, stride: int = 1, padding: int = 0) -> Any:
    """Spatial output size of a convolution: ``(size + 2·padding − kernel) // stride + 1``."""
    if stride == 1:
        return size + 2 * padding - kernel + 1
    if isinstance(size, int):
        return (size + 2 * padding - kernel) // stride + 1
    # Symbolic: exact when the variable part of ``size`` divides by ``stride`` (the sizes a
    # symbolic law is stated for); the constant part keeps the real floor.
    const, variable = size.as_coeff_Add()
    return variable / stride + (int(const) + 2 * padding - kernel) // stride + 1


def attention(q_len: Any, kv_len: Any, heads: int, head_dim: int, v_head_dim: int | None = None) -> Cost:
    """Scaled dot-product attention of ``heads`` heads: QKᵀ, softmax, A·V (no projections);
    ``scores`` = heads × q_len × kv_len (the softmax's elements)."""
    dv = head_dim if v_head_dim is None else v_head_dim
    scores = heads * q_len * kv_len
    return Cost(attention=scores * (head_dim + dv), elementwise=SOFTMAX_OPS * scores, scores=scores)


def layer_norm(tokens: Any, dim: int, *, affine: bool = True, bias: bool = True, thop_rule: bool = True) -> Cost:
    """``nn.LayerNorm(dim)`` over ``tokens`` vectors. ``thop_rule`` is False for subclasses
    (e.g. ``FP32LayerNorm``), which thop matches by exact type and so counts as 0."""
    numel = tokens * dim
    return Cost(
        thop_extra=(4 if affine else 2) * numel if thop_rule else 0,
        elementwise=(NORM_AFFINE_OPS if affine else NORM_OPS) * numel,
        params=(dim * (2 if bias else 1)) if affine else 0,
        largest_module=(dim * (2 if bias else 1)) if affine else 0,
    )


def rms_norm(tokens: Any, dim: int, *, affine: bool = True) -> Cost:
    """RMSNorm (``nn.RMSNorm``, diffusers ``RMSNorm``, ``T5LayerNorm``): no thop rule."""
    numel = tokens * dim
    return Cost(elementwise=(NORM_AFFINE_OPS if affine else NORM_OPS) * numel, params=dim if affine else 0,
                largest_module=dim if affine else 0)


def group_norm(channels: int, spatial: Any, *, affine: bool = True) -> Cost:
    """``nn.GroupNorm(groups, channels)`` over a ``channels × spatial`` map: no thop rule."""
    numel = channels * spatial
    return Cost(elementwise=(NORM_AFFINE_OPS if affine else NORM_OPS) * numel, params=2 * channels if affine else 0,
                largest_module=2 * channels if affine else 0)


def activation(numel: Any) -> Cost:
    """A pointwise activation (SiLU, GELU, QuickGELU) over ``numel`` elements."""
    return Cost(elementwise=ACTIVATION_OPS * numel)


def upsample_nearest(out_numel: Any) -> Cost:
    """Nearest-neighbour upsampling (``F.interpolate``) producing ``out_numel`` elements."""
    return Cost(elementwise=UPSAMPLE_OPS * out_numel)


def embedding(num: int, dim: int) -> Cost:
    """``nn.Embedding(num, dim)``: a lookup, parameters only."""
    return Cost(params=num * dim, largest_module=num * dim)


def parameters(count: int) -> Cost:
    """Bare parameters (a positional table, a learned scale) that do no counted work."""
    return Cost(params=count, largest_module=count)
