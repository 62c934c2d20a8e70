r"""Quantized storage: the bytes of a component loaded with a weight quantizer of diffusers / transformers.

A quantizer converts a component's ``nn.Linear`` weights (all but the ones its skip rules keep) and leaves every
other parameter (biases, norms, embeddings, convolutions, skipped layers) and every buffer as
``from_pretrained(..., torch_dtype=torch.bfloat16)`` loads them (:mod:`flopcalc.gpu_memory.weights`). The layouts,
per converted ``Linear(in, out)`` with :math:`N = in·out` elements, loaded in a dtype of :math:`w` bytes (2; 4
inside a module kept in float32), are in :data:`FORMATS` (:mod:`flopcalc.gpu_memory.quant_formats`: bitsandbytes,
optimum-quanto, torchao) and :mod:`flopcalc.gpu_memory.gguf` (GGUF files as diffusers loads them); each one's
source and the measurement that checks it are named there.

Which layers convert (measured against the libraries' own rules on every bundled component,
``tests/test_weights.py``):

* bitsandbytes and torchao in diffusers (``quantizers/bitsandbytes/bnb_quantizer.py:262-288``, ``utils.py:58-63``;
  ``quantizers/torchao/torchao_quantizer.py:351-359, 447``): every ``nn.Linear`` except under a module of the
  class's ``_keep_in_fp32_modules``;
* quanto in diffusers (``quantizers/quanto/utils.py:24-30``): every ``nn.Linear`` whose own name is not in
  ``_keep_in_fp32_modules`` (the children of a kept module do convert);
* GGUF in diffusers: the layers the file stores quantized (the converter's rules, :mod:`flopcalc.gpu_memory.gguf`),
  except under ``_keep_in_fp32_modules`` (dequantized on load, ``quantizers/gguf/gguf_quantizer.py:124-139``);
* every quantizer in transformers (``quantizers/base.py:39-65, 259-278``): every ``nn.Linear`` not under the
  ``_keep_in_fp32_modules`` nor a key of ``get_keys_to_not_convert`` (tied weights, the module of the last
  parameter, the output embeddings), which each text-encoder family declares as ``not_quantized``
  (:func:`flopcalc.engine.loading.loading_rules`); bitsandbytes converts ``type(m) is nn.Linear`` only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flopcalc.engine.cost import Node
from flopcalc.engine.errors import FlopcalcError
from flopcalc.gpu_memory.quant_formats import FORMATS as LIBRARY_FORMATS, ALIASES, QuantFormat

#: bf16: the dtype the layers that stay unquantized load in (``torch_dtype=torch.bfloat16``).
REST_DTYPE = "bf16"


def _all_formats() -> dict[str, QuantFormat]:
    from flopcalc.gpu_memory.gguf import FORMATS as GGUF_FORMATS

    return {**LIBRARY_FORMATS, **GGUF_FORMATS}


#: Every quantized ``--dtype`` by its canonical name.
FORMATS: dict[str, QuantFormat] = _all_formats()


def canonical(name: str) -> str | None:
    """The canonical name of a quantized format (case-insensitive; ``int8``, ``nf4`` and ``fp8`` are the earlier
    names of ``bnb-int8``, ``bnb-nf4`` and ``quanto-float8``), or None."""
    key = name.strip().lower() if isinstance(name, str) else ""
    key = ALIASES.get(key, key)
    return key if key in FORMATS else None


def refuse_unknown(name: str, floating: tuple[str, ...]) -> FlopcalcError:
    """One line naming the formats, by library, for a ``--dtype`` that is none of them."""
    libraries: dict[str, list[str]] = {}
    for f in FORMATS.values():
        libraries.setdefault(f.library, []).append(f.name)
    gguf = libraries.pop("gguf", [])

    def compact(names: list[str]) -> str:  # bnb-int8/nf4/…: the library's prefix once
        prefix = names[0].split("-")[0] + "-"
        return prefix + "/".join(n.removeprefix(prefix) for n in names)

    listed = ", ".join(compact(names) for names in libraries.values())
    shown = name if isinstance(name, str) and len(name) <= 40 else f"{str(name)[:40]}…"
    return FlopcalcError(f"dtype {shown!r}: choose {', '.join(floating)}, {listed}, or gguf-<type> "
                         f"({len(gguf)} types: docs/memory.md#quantization)")


@dataclass(frozen=True)
class Linears:
    """``layers`` converted ``nn.Linear(d_in, d_out)`` weights at one place of the cost tree (``path``, dotted from
    the component's root, a stack of equal blocks by its span, ``0-18``); ``kept``: under a module kept in
    float32."""

    path: str
    layers: int
    d_in: int
    d_out: int
    kept: bool

    @property
    def elements(self) -> int:
        return self.layers * self.d_in * self.d_out


def converted_linears(tree: Node, skip: tuple[str, ...], keep: tuple[str, ...], *,
                      own_name_only: bool) -> list[Linears]:
    """The ``nn.Linear`` weights a quantizer converts in a tree assembled under
    :func:`flopcalc.gpu_memory.layer_shapes.recording_shapes` (each node's ``linear_weights`` the shapes of its
    weights): those not under a node named in ``skip`` (``own_name_only``: not themselves named in ``skip``,
    diffusers' quanto rule), each marked ``kept`` when under a module of ``keep`` (float32)."""
    out: list[Linears] = []

    def visit(node: Node, path: str, k: int, skipped: bool, kept: bool) -> None:
        k *= node.count
        named = node.name in skip
        kept = kept or node.name in keep
        shapes = node.cost.linear_weights
        if not (skipped or named) and shapes:
            for (d_in, d_out), n in shapes.counts.items():
                out.append(Linears(path, n * k, d_in, d_out, kept))
        for child in node.children:
            visit(child, f"{path}.{child.name}" if path else child.name, k, skipped or (named and not own_name_only),
                  kept)

    visit(tree, "", 1, False, False)
    return out


def quantized_bytes(fmt: QuantFormat, converted: list[Linears], rest_bytes: int) -> dict[str, Any]:
    """The component's bytes: ``rest_bytes`` (every parameter loaded in bf16, kept modules in float32) less the
    converted weights' loaded bytes, plus their storage in ``fmt``; the elements and layers it stores quantized
    (a layer the format leaves as loaded, torchao int4 on a width its group does not divide, counts in neither)."""
    total, params, layers = rest_bytes, 0, 0
    for lin, (stored, quantized) in zip(converted, fmt.stored(converted)):
        total += stored - (4 if lin.kept else 2) * lin.elements
        params += quantized * lin.d_in * lin.d_out
        layers += quantized
    return {"quantized_params": params, "quantized_layers": layers, "bytes": total}
