"""Every ``nn.Linear`` weight's shape in a cost tree: the trees are assembled once more while
:data:`flopcalc.formulas.ops.LINEAR_WEIGHTS` is set, so that ``Cost.linear_weights`` holds a :class:`LayerShapes`
(a multiset of ``(in, out)`` shapes that adds and scales as the element count does) instead of an integer.

A node's own cost often sums several linears of different shapes (an MLP's up and down projections, a
grouped-query attention's projections): the element count alone cannot give the rows and widths back, and the
quantized formats' bytes depend on them (a GGUF row's blocks, torchao's and quanto's groups, bitsandbytes' nested
absmax blocks). The formulas' ``lru_cache`` s are cleared before and after the pass, so no node built in one mode is
served in the other.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Any, Iterator


class LayerShapes:
    """An immutable multiset ``{(d_in, d_out): count}`` of linear weights; ``+`` unites, ``* k`` repeats."""

    __slots__ = ("counts",)

    def __init__(self, counts: dict[tuple[int, int], int]) -> None:
        self.counts = counts

    @classmethod
    def one(cls, d_in: Any, d_out: Any) -> "LayerShapes":
        return cls({(d_in, d_out): 1})

    def __add__(self, other: Any) -> "LayerShapes":
        if isinstance(other, int) and other == 0:
            return self
        if not isinstance(other, LayerShapes):
            return NotImplemented
        out = dict(self.counts)
        for shape, n in other.counts.items():
            out[shape] = out.get(shape, 0) + n
        return LayerShapes(out)

    __radd__ = __add__

    def __mul__(self, k: Any) -> "LayerShapes":
        if not isinstance(k, int) or isinstance(k, bool):
            return NotImplemented
        return LayerShapes({shape: n * k for shape, n in self.counts.items() if n * k})

    __rmul__ = __mul__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LayerShapes) and self.counts == other.counts

    __hash__ = None  # type: ignore[assignment]

    def __bool__(self) -> bool:
        return bool(self.counts)

    def __repr__(self) -> str:
        return f"LayerShapes({self.counts})"


def _clear_formula_caches() -> None:
    for name, module in list(sys.modules.items()):
        if module is None or not name.startswith(("flopcalc.formulas", "flopcalc.engine.architectures",
                                                  "flopcalc.engine.pipelines")):
            continue
        for value in list(vars(module).values()):
            clear = getattr(value, "cache_clear", None)
            if callable(clear) and getattr(value, "__module__", None) == name:
                clear()


@contextmanager
def recording_shapes() -> Iterator[None]:
    """Within: :func:`flopcalc.formulas.ops.linear` records shapes (see the module doc)."""
    from flopcalc.formulas import ops

    _clear_formula_caches()
    token = ops.LINEAR_WEIGHTS.set(LayerShapes.one)
    try:
        yield
    finally:
        ops.LINEAR_WEIGHTS.reset(token)
        _clear_formula_caches()
