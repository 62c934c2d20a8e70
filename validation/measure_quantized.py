"""The bytes a weight quantizer really stores for one ``nn.Linear`` weight, measured on CPU with the libraries.

For each layer shape of :data:`SHAPES` (odd element counts and counts that are not a multiple of 64 included)
an ``nn.Linear`` in the dtype it loads in is quantized by the library's own module, exactly as the diffusers /
transformers quantizers build them, and every distinct tensor the layer then holds is summed (by storage
pointer): parameters, buffers, and the tensors of bitsandbytes' ``QuantState`` (absmax, code, offset, nested
state) or ``Int8Params.SCB``. The bias (left in the loading dtype) is not part of the weight's storage.

* ``int8``: ``bnb.nn.Linear8bitLt(has_fp16_weights=False)`` with ``Int8Params`` (``load_in_8bit=True``);
* ``nf4``: ``bnb.nn.Linear4bit(quant_type="nf4", compress_statistics=False)`` with ``Params4bit``
  (``load_in_4bit=True, bnb_4bit_quant_type="nf4"``, no double quantization);
* ``fp8``: ``optimum.quanto.quantize(weights=qfloat8)`` then ``freeze`` (diffusers ``QuantoConfig("float8")``).

Run ``python validation/measure_quantized.py`` (needs ``bitsandbytes`` and ``optimum-quanto``): writes
``validation/fixtures/quantized/layers/storage.json``. This module never imports ``flopcalc``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import torch
from torch import nn

#: (in_features, out_features): square and wide layers, odd element counts, counts not a multiple of 64.
SHAPES = ((128, 96), (200, 33), (3, 7), (64, 1), (3072, 64), (257, 129))
#: The loading dtypes measured: bf16, and float32 (a layer inside a module kept in float32).
DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}
OUT = Path(__file__).parent / "fixtures" / "quantized" / "layers" / "storage.json"  # */*.json are FLOP fixtures


def stored_bytes(layer: nn.Module) -> int:
    """Bytes of every distinct tensor the quantized layer holds, its bias excluded."""
    seen: dict[int, int] = {}

    def add(t: Any) -> None:
        if isinstance(t, torch.Tensor):
            seen[t.untyped_storage().data_ptr()] = t.numel() * t.element_size()

    weight = layer.weight
    for name in ("_data", "_scale", "_shift"):  # quanto's WeightQBytesTensor
        add(getattr(weight, name, None))
    if not hasattr(weight, "_data"):
        add(weight.data)
    add(getattr(weight, "SCB", None))
    state = getattr(weight, "quant_state", None)
    if state is not None:
        for t in (state.absmax, state.code, state.offset):
            add(t)
        if state.state2 is not None:
            add(state.state2.absmax)
            add(state.state2.code)
    return sum(seen.values())


def quantize(fmt: str, d_in: int, d_out: int, dtype: torch.dtype) -> nn.Module:
    torch.manual_seed(0)
    dense = nn.Linear(d_in, d_out).to(dtype)
    if fmt == "fp8":
        from optimum.quanto import freeze, qfloat8
        from optimum.quanto import quantize as quanto_quantize

        model = nn.Sequential(dense)
        quanto_quantize(model, weights=qfloat8)
        freeze(model)
        return model[0]
    import bitsandbytes as bnb

    if fmt == "int8":
        layer = bnb.nn.Linear8bitLt(d_in, d_out, True, has_fp16_weights=False)
        layer.weight = bnb.nn.Int8Params(dense.weight.data, requires_grad=False, has_fp16_weights=False)
    else:
        layer = bnb.nn.Linear4bit(d_in, d_out, True, dtype, quant_type="nf4", compress_statistics=False)
        layer.weight = bnb.nn.Params4bit(dense.weight.data, requires_grad=False, quant_type="nf4",
                                         compress_statistics=False)
    layer.bias = dense.bias
    return layer.to("cpu")  # Params4bit / Int8Params quantize on the move to a device


def measure() -> dict[str, Any]:
    import bitsandbytes
    import optimum.quanto

    rows = []
    for fmt in ("int8", "nf4", "fp8"):
        for dtype in DTYPES:
            for d_in, d_out in SHAPES:
                rows.append({"format": fmt, "dtype": dtype, "in": d_in, "out": d_out,
                             "bytes": stored_bytes(quantize(fmt, d_in, d_out, DTYPES[dtype]))})
    return {"versions": {"torch": torch.__version__, "bitsandbytes": bitsandbytes.__version__,
                         "optimum-quanto": optimum.quanto.__version__}, "layers": rows}


if __name__ == "__main__":
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(measure(), indent=1) + "\n")
    sys.stdout.write(f"wrote {OUT}\n")
