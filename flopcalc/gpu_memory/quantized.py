r"""Weight-only quantized storage: the bytes of a component loaded with a diffusers / transformers quantizer.

A quantizer converts a component's ``nn.Linear`` layers (all but the ones its skip rules keep) and leaves
every other parameter (biases, norms, embeddings, convolutions, skipped layers) and every buffer as
``from_pretrained(..., torch_dtype=torch.bfloat16)`` loads them (:mod:`flopcalc.gpu_memory.weights`). For the converted
layers the cost trees carry, per component, the weights' elements :math:`N`, output rows :math:`R`,
64-element blocks :math:`B`, bytes packed two 4-bit values a byte :math:`P` and layer count :math:`L`
(:class:`flopcalc.engine.cost.Cost`, recorded by ``ops.linear``). A layer's bias stays in bf16.

=========  ==========================================================  =====================================
format     storage of the converted layers (bytes)                     source
=========  ==========================================================  =====================================
``int8``   :math:`N + 4R`: int8 weight, one float32 scale (``SCB``)     bitsandbytes LLM.int8, ``Linear8bitLt``
           per output row                                              (``BitsAndBytesConfig(load_in_8bit=True)``)
``nf4``    :math:`P + 4B + 64L`: packed 4-bit weight, one float32      bitsandbytes ``Linear4bit``
           absmax per 64-element block, the 16-entry float32 NF4 code  (``load_in_4bit=True,
           table each layer's ``QuantState`` holds                     bnb_4bit_quant_type="nf4"``, no
                                                                       double quantization: the default)
``fp8``    :math:`N + wR`: float8 e4m3 weight, one scale per output    optimum-quanto ``qfloat8``
           row in the dtype the weight loads in (:math:`w` = 2, or 4   (diffusers ``QuantoConfig(
           for a layer quanto converts inside a module kept in
           float32: diffusers' quanto skips only layers so named)
                                                                       weights_dtype="float8")``)
=========  ==========================================================  =====================================

Which layers convert (measured against the libraries' own rules on every bundled component,
``tests/test_quantized.py``):

* bitsandbytes in diffusers (``quantizers/bitsandbytes/bnb_quantizer.py:262-288``, ``utils.py:58-63``): every
  ``nn.Linear`` except under a module of the class's ``_keep_in_fp32_modules``;
* quanto in diffusers (``quantizers/quanto/utils.py:24-30``): every ``nn.Linear`` whose own name is not in
  ``_keep_in_fp32_modules`` (the children of a kept module do convert);
* both in transformers (``quantizers/base.py:39-65, 259-278``): every ``nn.Linear`` not under the
  ``_keep_in_fp32_modules`` nor a key of ``get_keys_to_not_convert`` (tied weights, the module of the last
  parameter, the output embeddings), which each text-encoder family declares as ``not_quantized``
  (:func:`flopcalc.gpu_memory.weights.loading_rules`).

Storage measured with bitsandbytes 0.50.2 and optimum-quanto 0.2.7 on CPU (``validation/measure_quantized.py``).
Not counted: double quantization (``bnb_4bit_use_double_quant``), FP4, torchao and GGUF layouts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from flopcalc.engine.cost import Cost, Node, total_of

#: bf16: the dtype the layers that stay unquantized load in (``torch_dtype=torch.bfloat16``).
REST_DTYPE = "bf16"


@dataclass(frozen=True)
class QuantFormat:
    name: str
    library: str  # whose skip rules apply to diffusers classes: "bitsandbytes" or "quanto"
    storage: Callable[[Cost, int], int]  # bytes of converted weights (their Linear fields; the bytes an element
    # of the dtype they load in: 2, or 4 in a module kept in float32)
    layout: str
    source: str


FORMATS = {
    "int8": QuantFormat("int8", "bitsandbytes", lambda c, width: c.linear_weights + 4 * c.linear_rows,
                        "int8 weight + float32 scale per output row",
                        "bitsandbytes Linear8bitLt (LLM.int8), bitsandbytes/nn/modules.py Int8Params"),
    "nf4": QuantFormat("nf4", "bitsandbytes", lambda c, width: c.linear_packed + 4 * c.linear_blocks
                       + 64 * c.linear_layers,
                       "4-bit packed weight + float32 absmax per 64 elements + 16-entry float32 code per layer",
                       "bitsandbytes Linear4bit nf4, blocksize 64, no double quantization (functional.quantize_4bit)"),
    "fp8": QuantFormat("fp8", "quanto", lambda c, width: c.linear_weights + width * c.linear_rows,
                       "float8_e4m3fn weight + a scale per output row in the dtype the weight loads in",
                       "optimum-quanto qfloat8 WeightQBytesTensor (diffusers QuantoConfig weights_dtype='float8')"),
}


def converted_linears(tree: Node, skip: tuple[str, ...], keep: tuple[str, ...], *,
                      own_name_only: bool) -> tuple[Cost, Cost]:
    """The cost fields of the tree's ``nn.Linear`` weights a quantizer converts: those not under a node named in
    ``skip`` (``own_name_only``: not themselves named in ``skip``, diffusers' quanto rule), split into those that
    load in bf16 and those under a module of ``keep`` (float32). Only the ``linear_*`` fields mean anything."""
    parts: tuple[list[Cost], list[Cost]] = ([], [])

    def visit(node: Node, k: int, skipped: bool, kept: bool) -> None:
        k *= node.count
        named = node.name in skip
        kept = kept or node.name in keep
        if not (skipped or named):
            parts[kept].append(node.cost * k)
        for child in node.children:
            visit(child, k, skipped or (named and not own_name_only), kept)

    visit(tree, 1, False, False)
    return total_of(parts[0]), total_of(parts[1])


def quantized_bytes(fmt: str, converted: tuple[Cost, Cost], rest_bytes: int) -> dict[str, Any]:
    """The component's bytes: ``rest_bytes`` (loaded in bf16, kept modules in float32) less the converted weights'
    loaded bytes, plus their storage in ``fmt``."""
    plain, kept = converted
    storage = FORMATS[fmt].storage(plain, 2) + FORMATS[fmt].storage(kept, 4)
    loaded = 2 * plain.linear_weights + 4 * kept.linear_weights
    return {"quantized_params": plain.linear_weights + kept.linear_weights,
            "quantized_layers": plain.linear_layers + kept.linear_layers, "bytes": rest_bytes - loaded + storage}
