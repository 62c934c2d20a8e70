r"""The storage of one converted ``nn.Linear(in, out)`` weight under each library's weight quantizer.

:math:`N = in·out`; :math:`w` the bytes of the dtype the layer loads in (2 for bf16, 4 inside a module kept in
float32); ⌈·⌉ rounds up. Measured on CPU with bitsandbytes 0.50.2, optimum-quanto 0.2.7 and torchao 0.18.0
(``validation/measure_quantized.py``: every tensor the quantized layer holds, by storage; the fixture
``validation/fixtures/quantized/layers/storage.json``; ``tests/test_quantized.py`` compares every row):

==================  ==========================================================  =============================================
``--dtype``         bytes of a converted layer                                  library, as diffusers / transformers build it
==================  ==========================================================  =============================================
``bnb-int8``        :math:`N + 4·out` (int8, a float32 ``SCB`` per row)          ``BitsAndBytesConfig(load_in_8bit=True)``,
                                                                                ``Linear8bitLt``, ``Int8Params``
``bnb-nf4``,        :math:`⌈N/2⌉ + 4B + 64`, :math:`B = ⌈N/64⌉` (two 4-bit       ``load_in_4bit=True``,
``bnb-fp4``         values a byte, a float32 absmax per 64-block, the            ``bnb_4bit_quant_type="nf4"`` / ``"fp4"``,
                    16-entry float32 code)                                      ``Linear4bit``, ``Params4bit``
``bnb-nf4-dq``,     :math:`⌈N/2⌉ + B + 4⌈B/256⌉ + 1024 + 4 + 64` (absmax as      ``bnb_4bit_use_double_quant=True``
``bnb-fp4-dq``      uint8, a float32 absmax per 256 of them, the 256-entry       (``compress_statistics``)
                    float32 code of that second state, its float32 offset)
``quanto-int8``,    :math:`N + w·out` (int8 / float8 e4m3, a scale per row in    ``QuantoConfig(weights_dtype="int8")`` /
``quanto-float8``   the loading dtype)                                          ``"float8"``, ``WeightQBytesTensor``
``quanto-int4``,    groups of :math:`g` (128 when ``in`` > 128, less 32 until    ``"int4"`` / ``"int2"``,
``quanto-int2``     it divides ``in``, at least 32; else one group per row,      ``optimum/quanto/nn/qmodule.py:120-129``;
                    :math:`G` groups): bf16 int4 with :math:`g` = 128 is         ``WeightQBitsTensor.create``
                    tinygemm's :math:`N/2 + 4N/128` (CPU, and CUDA ≥ sm80 with   (``tensor/weights/qbits.py:97-123``)
                    CUDA ≥ 12.1); else :math:`⌈G/k⌉·g` packed (:math:`k` = 2 or
                    4 values a byte) + a scale and a shift per group
                    (:math:`2w·G`); a one-row layer holds ``in`` + 2w·``in``
``torchao-int8wo``  :math:`N + 5·out` (int8, a float32 scale and an int8 zero   ``TorchAoConfig(Int8WeightOnlyConfig())``,
``torchao-int8dq``  point per row; the weight of int8 dynamic activation is     ``Int8DynamicActivationInt8WeightConfig()``
                    the same ``Int8Tensor``)                                    (``Int8Tensor``)
``torchao-int4wo``  :math:`N/2 + 4N/g` (packed, a bf16 scale and zero point     ``Int4WeightOnlyConfig(group_size=g)``, g = 128
``-g``              per group of :math:`g`) when :math:`g` divides ``in``;      by default (``int4wo``); ``Int4Tensor``
                    else the layer stays as loaded (``quant_api.py:575-579``)   (``int4_tensor.py:151-180``): *from the
                                                                                source*, its kernel (mslk) does not install
                                                                                here
``torchao-float8wo``  :math:`N + 4·out` (float8 e4m3, a float32 scale per row)  ``Float8WeightOnlyConfig()``
``torchao-float8dq``  :math:`N + 4` (float8 e4m3, one float32 scale: per-tensor  ``Float8DynamicActivationFloat8WeightConfig()``
                    by default, ``float8/inference.py:246-247``); a layer whose  (measured with its GPU check bypassed)
                    ``in`` or ``out`` is not a multiple of 16 stays as loaded
                    (``quantization/utils.py:784-793``)
==================  ==========================================================  =============================================
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

#: bitsandbytes 4-bit: elements per absmax block (``quantize_4bit(blocksize=64)``), and per block of absmax under
#: double quantization (``quantize_blockwise`` of the absmax, blocksize 256).
BNB_BLOCK = 64
BNB_NESTED_BLOCK = 256


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class QuantFormat:
    """A weight quantizer's storage. ``per_layer(d_in, d_out, width)`` is the bytes of one converted layer, or
    None where the quantizer leaves that layer as loaded. ``library``: whose skip rules apply
    (``bitsandbytes``, ``quanto``, ``torchao``, ``gguf``)."""

    name: str
    library: str
    per_layer: Callable[[int, int, int], int | None]
    layout: str
    source: str

    def stored(self, converted: list[Any]) -> list[tuple[int, int]]:
        """``(bytes, layers stored quantized)`` of each group of converted layers
        (:class:`flopcalc.gpu_memory.quantized.Linears`), a layer it leaves as loaded at its loaded bytes."""
        out = []
        for lin in converted:
            width = 4 if lin.kept else 2
            one = self.per_layer(lin.d_in, lin.d_out, width)
            out.append((lin.layers * (width * lin.d_in * lin.d_out if one is None else one),
                        0 if one is None else lin.layers))
        return out

    def bind(self, class_name: str, diffusers_class: bool) -> "QuantFormat":
        """The format as it applies to one class (GGUF formats follow the file converter's rules of the class)."""
        return self


def _bnb_4bit(d_in: int, d_out: int, width: int) -> int:
    n = d_in * d_out
    return _ceil(n, 2) + 4 * _ceil(n, BNB_BLOCK) + 64


def _bnb_4bit_double(d_in: int, d_out: int, width: int) -> int:
    n = d_in * d_out
    blocks = _ceil(n, BNB_BLOCK)
    return _ceil(n, 2) + blocks + 4 * _ceil(blocks, BNB_NESTED_BLOCK) + 4 * 256 + 4 + 64


def quanto_group(d_in: int) -> int | None:
    """optimum-quanto's group size for int4/int2 weights (``nn/qmodule.py:120-129``): None is one group per row."""
    group = 128
    if d_in <= group:
        return None
    while d_in % group != 0 and group > 32:
        group -= 32
    return group if d_in % group == 0 else None


def _quanto_bits(bits: int) -> Callable[[int, int, int], int]:
    per_byte = 8 // bits

    def stored(d_in: int, d_out: int, width: int) -> int:
        g = quanto_group(d_in)
        if bits == 4 and width == 2 and g == 128:  # TinyGemmWeightQBitsTensor: (out, in/2) uint8, (in/128, out, 2)
            return d_in * d_out // 2 + 2 * 2 * d_out * d_in // 128
        if d_out == 1:  # one row: quanto's axis-0 scale and shift come out one per element (measured)
            return d_in + 2 * width * d_in
        groups, size = (d_out * d_in // g, g) if g else (d_out, d_in)
        return _ceil(groups, per_byte) * size + 2 * width * groups

    return stored


def _torchao_int4(group: int) -> Callable[[int, int, int], int | None]:
    def stored(d_in: int, d_out: int, width: int) -> int | None:
        if d_in % group:
            return None
        return d_in * d_out // 2 + 2 * 2 * d_out * d_in // group

    return stored


#: torchao int4 weight-only group sizes ``Int4WeightOnlyConfig`` takes (``int4wo`` alone is 128, its default).
TORCHAO_INT4_GROUPS = (32, 64, 128, 256)

_BNB = "bitsandbytes 0.50.2"
FORMATS: dict[str, QuantFormat] = {f.name: f for f in (
    QuantFormat("bnb-int8", "bitsandbytes", lambda i, o, w: i * o + 4 * o, "int8 weight + float32 scale per row",
                f"{_BNB} Linear8bitLt (LLM.int8, load_in_8bit=True)"),
    QuantFormat("bnb-nf4", "bitsandbytes", _bnb_4bit,
                "4-bit packed + float32 absmax per 64 elements + 16-entry float32 code per layer",
                f"{_BNB} Linear4bit nf4, blocksize 64, no double quantization"),
    QuantFormat("bnb-fp4", "bitsandbytes", _bnb_4bit,
                "4-bit packed + float32 absmax per 64 elements + 16-entry float32 code per layer",
                f"{_BNB} Linear4bit fp4, blocksize 64, no double quantization"),
    QuantFormat("bnb-nf4-dq", "bitsandbytes", _bnb_4bit_double,
                "4-bit packed + uint8 absmax per 64 elements, float32 absmax per 256 of them, 256-entry float32 code, "
                "offset, 16-entry code per layer", f"{_BNB} Linear4bit nf4, bnb_4bit_use_double_quant=True"),
    QuantFormat("bnb-fp4-dq", "bitsandbytes", _bnb_4bit_double,
                "4-bit packed + uint8 absmax per 64 elements, float32 absmax per 256 of them, 256-entry float32 code, "
                "offset, 16-entry code per layer", f"{_BNB} Linear4bit fp4, bnb_4bit_use_double_quant=True"),
    QuantFormat("quanto-int8", "quanto", lambda i, o, w: i * o + w * o,
                "int8 weight + a scale per row in the loading dtype",
                "optimum-quanto 0.2.7 qint8 WeightQBytesTensor (QuantoConfig weights_dtype='int8')"),
    QuantFormat("quanto-float8", "quanto", lambda i, o, w: i * o + w * o,
                "float8_e4m3fn weight + a scale per row in the loading dtype",
                "optimum-quanto 0.2.7 qfloat8 WeightQBytesTensor (QuantoConfig weights_dtype='float8')"),
    QuantFormat("quanto-int4", "quanto", _quanto_bits(4),
                "4-bit packed + scale and shift per group of up to 128 (tinygemm layout for bf16 groups of 128)",
                "optimum-quanto 0.2.7 qint4 WeightQBitsTensor / TinyGemmWeightQBitsTensor (weights_dtype='int4')"),
    QuantFormat("quanto-int2", "quanto", _quanto_bits(2), "2-bit packed + scale and shift per group of up to 128",
                "optimum-quanto 0.2.7 qint2 WeightQBitsTensor (QuantoConfig weights_dtype='int2')"),
    QuantFormat("torchao-int8wo", "torchao", lambda i, o, w: i * o + 5 * o,
                "int8 weight + float32 scale + int8 zero point per row",
                "torchao 0.18.0 Int8WeightOnlyConfig (Int8Tensor)"),
    QuantFormat("torchao-int8dq", "torchao", lambda i, o, w: i * o + 5 * o,
                "int8 weight + float32 scale + int8 zero point per row (activations quantized at run time)",
                "torchao 0.18.0 Int8DynamicActivationInt8WeightConfig (Int8Tensor)"),
    *(QuantFormat(f"torchao-int4wo-{g}", "torchao", _torchao_int4(g),
                  f"4-bit packed + bf16 scale and zero point per group of {g} (layers whose width {g} does not divide "
                  "stay bf16)", f"torchao 0.18.0 Int4WeightOnlyConfig(group_size={g}) (Int4Tensor, from its source)")
      for g in TORCHAO_INT4_GROUPS),
    QuantFormat("torchao-float8wo", "torchao", lambda i, o, w: i * o + 4 * o,
                "float8_e4m3fn weight + float32 scale per row", "torchao 0.18.0 Float8WeightOnlyConfig (Float8Tensor)"),
    QuantFormat("torchao-float8dq", "torchao", lambda i, o, w: None if i % 16 or o % 16 else i * o + 4,
                "float8_e4m3fn weight + one float32 scale (per tensor; layers whose in or out is not a multiple of "
                "16 stay bf16)",
                "torchao 0.18.0 Float8DynamicActivationFloat8WeightConfig, per-tensor (Float8Tensor)"),
)}

#: Other names of the formats: the earlier ``--dtype`` names, and diffusers' own words.
ALIASES = {"int8": "bnb-int8", "nf4": "bnb-nf4", "fp4": "bnb-fp4", "fp8": "quanto-float8",
           "torchao-int4wo": "torchao-int4wo-128"}
