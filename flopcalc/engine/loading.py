"""How each class loads with ``from_pretrained``, declared by its family beside the assemblers: the modules kept
in float32 (diffusers' and transformers' ``_keep_in_fp32_modules``), the buffers the real module creates, and
the ``nn.Linear`` layers a quantizer leaves alone (:func:`loading_rules`). The bytes are computed from these
declarations in :mod:`flopcalc.gpu_memory.weights`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from flopcalc.engine.config import Config
from flopcalc.engine.registry import registered

#: Bytes per element of the dtypes weights load in.
DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}
#: Bytes per element of the dtypes a buffer can be created in.
BUFFER_BYTES = {"float32": 4, "float64": 8, "int64": 8, "bfloat16": 2, "float16": 2}


@dataclass(frozen=True)
class Buffer:
    """One buffer of the real module: ``dtype`` ``"loaded"`` for a persistent floating buffer (loaded in
    the weights' dtype, or float32 in a kept module), else the dtype it is created with."""

    name: str
    numel: int
    dtype: str

    def nbytes(self, weights_dtype: str, keep_fp32: bool = False) -> int:
        if self.dtype == "loaded":
            return self.numel * (4 if keep_fp32 else DTYPE_BYTES[weights_dtype])
        return self.numel * BUFFER_BYTES[self.dtype]


def rotary_buffers(prefix: str, dim: int) -> tuple[Buffer, Buffer]:
    """transformers' rotary embedding: float32 ``inv_freq`` and ``original_inv_freq`` of
    ``len(range(0, dim, 2))`` frequencies each (non-persistent)."""
    n = (dim + 1) // 2
    return Buffer(f"{prefix}.inv_freq", n, "float32"), Buffer(f"{prefix}.original_inv_freq", n, "float32")


@dataclass(frozen=True)
class LoadingRules:
    class_name: str
    keep_in_fp32: tuple[str, ...]
    keep_in_fp32_dtypes: tuple[str, ...]
    buffers: Callable[[Config], tuple[Buffer, ...]] | None
    source: str
    not_quantized: tuple[str, ...] = ()
    not_bnb_quantized: tuple[str, ...] = ()


_RULES: dict[str, LoadingRules] = {}


def loading_rules(class_name: str, *, keep_in_fp32: tuple[str, ...] = (), keep_in_fp32_dtypes: tuple[str, ...] = (
        "fp32", "bf16", "fp16"), buffers: Callable[[Config], tuple[Buffer, ...]] | None = None,
        source: str, not_quantized: tuple[str, ...] = (), not_bnb_quantized: tuple[str, ...] = ()) -> LoadingRules:
    """Declare how ``class_name`` loads (called once, in the family's architecture module). ``not_quantized``: the
    ``nn.Linear`` modules transformers' ``get_keys_to_not_convert`` keeps out of a quantizer (tied weights, the
    module of the last parameter, the output embeddings; ``transformers/quantizers/base.py:39``).
    ``not_bnb_quantized``: ``nn.Linear`` subclasses of a transformers class (``nn.MultiheadAttention``'s ``out_proj``),
    which transformers' bitsandbytes integration leaves (it converts ``type(m) is nn.Linear`` only,
    ``integrations/bitsandbytes.py:189``) and quanto converts."""
    if class_name in _RULES:
        raise RuntimeError(f"loading rules of {class_name} declared twice")
    rules = LoadingRules(class_name, tuple(keep_in_fp32), tuple(keep_in_fp32_dtypes), buffers, source,
                         tuple(not_quantized), tuple(not_bnb_quantized))
    _RULES[class_name] = rules
    return rules


def rules_of(class_name: str) -> LoadingRules:
    registered()  # imports every architecture module, which declares its rules
    return _RULES.get(class_name, LoadingRules(class_name, (), (), None, ""))
