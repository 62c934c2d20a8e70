"""How many times its forward the backward of an attention costs, as torch's FLOP counter counts it."""

from __future__ import annotations

from fractions import Fraction

#: torch's FLOP registry counts the backward of the fused SDPA kernels
#: (``aten._scaled_dot_product_efficient_attention_backward`` / ``_flash_attention_backward``)
#: as 2.5 × their forward: the kernel recomputes the score matrix (torch/utils/flop_counter.py,
#: ``sdpa_backward_flop_count``). The meta device's math path counts 2 ×.
FUSED_ATTENTION_BACKWARD = Fraction(5, 2)
MATH_ATTENTION_BACKWARD = 2
