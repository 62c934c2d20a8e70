"""The bytes a weight quantizer really stores for one ``nn.Linear`` weight, measured on CPU with the libraries.

For each layer shape of :data:`SHAPES` (odd element counts, counts that are not a multiple of 64, widths quanto's
and torchao's groups do and do not divide) an ``nn.Linear`` in the dtype it loads in is quantized by the library's
own module, exactly as the diffusers / transformers quantizers build them, and every distinct tensor the weight then
holds is summed (by storage; tensor subclasses are unflattened to their inner tensors): parameters, buffers, and the
tensors of bitsandbytes' ``QuantState`` (absmax, code, offset, nested state) or ``Int8Params.SCB``. The bias (left
in the loading dtype) is not part of the weight's storage.

* ``bnb-int8``: ``bnb.nn.Linear8bitLt(has_fp16_weights=False)`` with ``Int8Params`` (``load_in_8bit=True``);
* ``bnb-nf4`` / ``bnb-fp4`` (``-dq``): ``bnb.nn.Linear4bit(quant_type=..., compress_statistics=...)`` with
  ``Params4bit`` (``load_in_4bit=True``, ``bnb_4bit_use_double_quant``);
* ``quanto-*``: ``optimum.quanto.quantize(weights=qint8/qint4/qint2/qfloat8)`` then ``freeze``
  (diffusers ``QuantoConfig(weights_dtype=...)``);
* ``torchao-*``: ``torchao.quantization.quantize_`` with ``Int8WeightOnlyConfig()``,
  ``Int8DynamicActivationInt8WeightConfig()``, ``Float8WeightOnlyConfig()``,
  ``Float8DynamicActivationFloat8WeightConfig()`` (its GPU-capability check, ``_check_hardware_support``, bypassed:
  the weight it stores is built the same on any device), as diffusers' ``TorchAoConfig`` calls it
  (``quantizers/torchao/torchao_quantizer.py:403``). torchao's int4 weight-only needs the ``mslk`` kernels, which do
  not install here: its layout is taken from ``Int4Tensor``'s source (``flopcalc/gpu_memory/quant_formats.py``).

Run ``python validation/measure_quantized.py`` (needs ``bitsandbytes``, ``optimum-quanto`` and ``torchao``, the
``quantizers`` extra): writes ``validation/fixtures/quantized/layers/storage.json``. This module never imports
``flopcalc``.
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path
from typing import Any

import torch
from torch import nn

#: (in_features, out_features): square and wide layers, odd element counts, counts not a multiple of 64, widths
#: that quanto's groups (128, 96, 64, 32) do and do not divide (tinygemm, which bf16 groups of 128 use, needs
#: out a multiple of 16 on CPU).
SHAPES = ((128, 96), (200, 33), (3, 7), (64, 1), (3072, 64), (257, 129), (352, 5), (288, 7), (320, 9), (129, 3),
          (4096, 48))
#: The loading dtypes measured: bf16, and float32 (a layer inside a module kept in float32).
DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}
FORMATS = ("bnb-int8", "bnb-nf4", "bnb-fp4", "bnb-nf4-dq", "bnb-fp4-dq", "quanto-int8", "quanto-float8",
           "quanto-int4", "quanto-int2", "torchao-int8wo", "torchao-int8dq", "torchao-float8wo", "torchao-float8dq")
OUT = Path(__file__).parent / "fixtures" / "quantized" / "layers" / "storage.json"  # */*.json are FLOP fixtures


def _inner(t: Any) -> list[torch.Tensor]:
    """The plain tensors a (possibly subclassed) tensor holds."""
    if hasattr(t, "__tensor_flatten__") and type(t) is not nn.Parameter and not type(t).__module__.startswith(
            "bitsandbytes"):
        names, _ = t.__tensor_flatten__()
        return [x for n in names for x in _inner(getattr(t, n))]
    return [t]


def stored_bytes(layer: nn.Module) -> int:
    """Bytes of every distinct tensor the quantized layer's weight holds, its bias excluded."""
    seen: dict[int, int] = {}

    def add(t: Any) -> None:
        if isinstance(t, torch.Tensor):
            for x in _inner(t):
                x = x.data if isinstance(x, nn.Parameter) else x
                seen[x.untyped_storage().data_ptr()] = x.numel() * x.element_size()

    weight = layer.weight
    add(weight.data if type(weight).__module__.startswith("bitsandbytes") else weight)
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
    if fmt.startswith("quanto-"):
        from optimum.quanto import freeze, qfloat8, qint2, qint4, qint8
        from optimum.quanto import quantize as quanto_quantize

        model = nn.Sequential(dense)
        quanto_quantize(model, weights={"int8": qint8, "float8": qfloat8, "int4": qint4, "int2": qint2}[fmt[7:]])
        freeze(model)
        return model[0]
    if fmt.startswith("torchao-"):
        import torchao.quantization.quant_api as api

        config = {"int8wo": api.Int8WeightOnlyConfig, "int8dq": api.Int8DynamicActivationInt8WeightConfig,
                  "float8wo": api.Float8WeightOnlyConfig,
                  "float8dq": api.Float8DynamicActivationFloat8WeightConfig}[fmt[8:]]()
        check, api._check_hardware_support = api._check_hardware_support, lambda *a, **k: None
        try:
            model = nn.Sequential(dense)
            api.quantize_(model, config)
        finally:
            api._check_hardware_support = check
        return model[0]
    import bitsandbytes as bnb

    if fmt == "bnb-int8":
        layer = bnb.nn.Linear8bitLt(d_in, d_out, True, has_fp16_weights=False)
        layer.weight = bnb.nn.Int8Params(dense.weight.data, requires_grad=False, has_fp16_weights=False)
    else:
        kind, double = fmt[4:7], fmt.endswith("-dq")
        layer = bnb.nn.Linear4bit(d_in, d_out, True, dtype, quant_type=kind, compress_statistics=double)
        layer.weight = bnb.nn.Params4bit(dense.weight.data, requires_grad=False, quant_type=kind,
                                         compress_statistics=double)
    layer.bias = dense.bias
    return layer.to("cpu")  # Params4bit / Int8Params quantize on the move to a device


def measure() -> dict[str, Any]:
    import bitsandbytes
    import optimum.quanto
    import torchao

    warnings.filterwarnings("ignore")
    rows = []
    for fmt in FORMATS:
        for dtype in DTYPES:
            for d_in, d_out in SHAPES:
                rows.append({"format": fmt, "dtype": dtype, "in": d_in, "out": d_out,
                             "bytes": stored_bytes(quantize(fmt, d_in, d_out, DTYPES[dtype]))})
    return {"versions": {"torch": torch.__version__, "bitsandbytes": bitsandbytes.__version__,
                         "optimum-quanto": optimum.quanto.__version__, "torchao": torchao.__version__},
            "layers": rows}


if __name__ == "__main__":
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(measure(), indent=1) + "\n")
    sys.stdout.write(f"wrote {OUT}\n")
