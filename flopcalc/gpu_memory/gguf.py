r"""GGUF files of a diffusers denoiser, as city96's ComfyUI-GGUF tools write them and diffusers loads them.

**The file.** ComfyUI-GGUF's ``tools/convert.py`` writes the original checkpoint (BFL / Stability / Wan key names)
as an F16/BF16 GGUF, keeping in F32 every 1-D tensor and every tensor of at most 1024 elements (``convert.py:273-285``);
llama.cpp's ``llama-quantize`` (tag b3962 with ``tools/lcpp.patch``) then quantizes the 2-D tensors whose name ends in
``weight`` (``lcpp.patch:426-429``; llama.cpp ``llama_model_quantize_internal``), except each architecture's
embedders and final layer (``lcpp.patch:327-425``), to the file type's default GGML type (llama.cpp's
``switch (ftype)``: ``Q4_K_M`` and ``Q4_K_S`` → ``Q4_K``, ``Q5_K_M``/``Q5_K_S`` → ``Q5_K``, ``Q3_K_*`` → ``Q3_K``,
``Q2_K`` → ``Q2_K``, the others their own type), with the mixtures of ``img_tensor_get_type`` (``lcpp.patch:129-255``;
the ``to_v`` counter runs in file order, which matters only where those tensors differ in shape: not in FLUX or Wan):

========  ====================================  ===================================  =================================
file      ``to_v`` / ``.v.`` attention values   fused ``attn.qkv``                   ``ffn_down`` / ``.ffn.2`` / ``.ff.net.2``
========  ====================================  ===================================  =================================
Q2_K      Q3_K
Q3_K_M    Q5_K for the first 2, then Q4_K       Q4_K                                 Q4_K
Q3_K_L    Q5_K                                  Q4_K                                 Q5_K
Q4_K_S    Q5_K for the first 4                                                       Q5_K
Q4_K_M    Q6_K                                  Q5_K                                 Q6_K
Q5_K_M    Q6_K                                  Q6_K                                 Q6_K
Q4_0                                                                                 Q4_1
Q5_0                                                                                 Q5_1
========  ====================================  ===================================  =================================

A K-type tensor whose row (``in``) is not a multiple of 256 falls back to F16 (``lcpp.patch:227-253``).

**Loading.** diffusers' ``from_single_file(..., quantization_config=GGUFQuantizationConfig(compute_dtype=bf16),
torch_dtype=torch.bfloat16)`` keeps every quantized (and BF16) tensor as its raw bytes in a ``GGUFParameter``
(``models/model_loading_utils.py:734-747``; a fused ``qkv`` split by rows keeps its bytes), and casts the F32/F16
tensors to bf16 as any load does; a tensor under ``_keep_in_fp32_modules`` is dequantized to float32
(``quantizers/gguf/gguf_quantizer.py:124-139``). So a converted ``Linear(in, out)`` of type T holds
``out · in / block(T) · bytes(T)``, and every other tensor what a bf16 load holds.

**Block sizes and bytes** (ggml ``ggml-common.h`` ``block_q*`` structs; gguf-py 0.19.0 ``constants.py:4232``
``GGML_QUANT_SIZES``, checked live in ``tests/test_quantized.py``): :data:`GGML_TYPES`.

Classes with their file rules: :data:`FILES` (the diffusers module names of the original tensors the patch names).
Measured: ``validation/measure_gguf.py`` writes FLUX and Wan files of every type in the original key names and loads
them with diffusers (fixtures ``validation/fixtures/quantized/gguf/``); flopcalc equals the loaded bytes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from flopcalc.engine.errors import FlopcalcError

#: GGML type → (elements per block, bytes per block).
GGML_TYPES = {
    "Q8_0": (32, 34), "Q6_K": (256, 210), "Q5_K": (256, 176), "Q4_K": (256, 144), "Q3_K": (256, 110),
    "Q2_K": (256, 84), "Q5_0": (32, 22), "Q5_1": (32, 24), "Q4_0": (32, 18), "Q4_1": (32, 20),
    "F16": (1, 2), "BF16": (1, 2),
}
K_TYPES = ("Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K")
#: llama-quantize file type → its default GGML type.
FILE_TYPES = {
    "q8_0": "Q8_0", "q6_k": "Q6_K", "q5_k_m": "Q5_K", "q5_k_s": "Q5_K", "q5_1": "Q5_1", "q5_0": "Q5_0",
    "q4_k_m": "Q4_K", "q4_k_s": "Q4_K", "q4_1": "Q4_1", "q4_0": "Q4_0", "q3_k_l": "Q3_K", "q3_k_m": "Q3_K",
    "q3_k_s": "Q3_K", "q2_k": "Q2_K", "f16": "F16", "bf16": "BF16",
}
#: ``img_tensor_get_type``'s mixtures: (file type, role) → type; ``to_v_first``: the first n ``to_v`` tensors only.
MIXTURE = {
    ("q2_k", "to_v"): "Q3_K", ("q3_k_l", "to_v"): "Q5_K", ("q4_k_m", "to_v"): "Q6_K", ("q5_k_m", "to_v"): "Q6_K",
    ("q3_k_m", "qkv"): "Q4_K", ("q3_k_l", "qkv"): "Q4_K", ("q4_k_m", "qkv"): "Q5_K", ("q5_k_m", "qkv"): "Q6_K",
    ("q3_k_m", "ffn_down"): "Q4_K", ("q3_k_l", "ffn_down"): "Q5_K", ("q4_k_s", "ffn_down"): "Q5_K",
    ("q4_k_m", "ffn_down"): "Q6_K", ("q5_k_m", "ffn_down"): "Q6_K", ("q4_0", "ffn_down"): "Q4_1",
    ("q5_0", "ffn_down"): "Q5_1",
}
#: (file type) → (n, type, otherwise): the first n ``to_v`` tensors get ``type`` (``qs.i_attention_wv < n``).
TO_V_FIRST = {"q3_k_m": (2, "Q5_K", "Q4_K"), "q4_k_s": (4, "Q5_K", None)}
#: Tensors of at most this many elements stay F32 in the file (``convert.py:10, 279-281``).
SMALL = 1024


def _pattern(text: str, subtree: bool) -> re.Pattern[str]:
    """A dotted module path pattern: ``#`` a block index or a span of them (``0``, ``0-18``), ``[qkv]`` one of those
    letters; ``subtree``: the module or anything under it."""
    body = re.escape(text).replace("\\#", r"\d+(?:-\d+)?").replace("\\[qkv\\]", "[qkv]")
    return re.compile(body + (r"(?:\..*)?" if subtree else ""))


@dataclass(frozen=True)
class GGUFFile:
    """How the converter and the patched quantizer treat one architecture, in diffusers' module paths
    (``#`` a block index): ``high_precision`` never quantized (with everything under it); ``roles`` the tensors a
    mixture rule names."""

    arch: str
    high_precision: tuple[str, ...]
    roles: dict[str, tuple[str, ...]] = field(default_factory=dict)
    source: str = ""

    def role(self, path: str) -> str | None:
        return next((r for r, pats in self.roles.items()
                     if any(_pattern(p, False).fullmatch(path) for p in pats)), None)

    def kept(self, path: str) -> bool:
        return any(_pattern(p, True).fullmatch(path) for p in self.high_precision)


_FLUX = GGUFFile(
    "flux",
    # txt_in, img_in, time_in, vector_in, guidance_in, final_layer (lcpp.patch:329-337), as diffusers names them
    # (loaders/single_file_utils.py convert_flux_transformer_checkpoint_to_diffusers)
    ("context_embedder", "x_embedder", "time_text_embed", "norm_out", "proj_out"),
    # double_blocks.N.{img,txt}_attn.qkv: "attn.qkv.weight" (lcpp.patch:179-192); FLUX's other names match no rule
    {"qkv": ("transformer_blocks.#.attn.to_[qkv]", "transformer_blocks.#.attn.add_[qkv]_proj")},
    "ComfyUI-GGUF tools/convert.py ModelFlux + lcpp.patch LLM_ARCH_FLUX",
)
_WAN = GGUFFile(
    "wan",
    # modulation, patch_embedding, text_embedding, time_projection, time_embedding, img_emb, head
    # (lcpp.patch:389-398), as diffusers names them (single_file_utils.py convert_wan_transformer_to_diffusers)
    ("condition_embedder", "patch_embedding", "proj_out", "scale_shift_table", "blocks.#.scale_shift_table"),
    # blocks.N.{self,cross}_attn.v: ".v.weight" (lcpp.patch:155-178); blocks.N.ffn.2: ".ffn.2.weight" (:193-224)
    {"to_v": ("blocks.#.attn1.to_v", "blocks.#.attn2.to_v"), "ffn_down": ("blocks.#.ffn.net.2",)},
    "ComfyUI-GGUF tools/convert.py ModelWan + lcpp.patch LLM_ARCH_WAN",
)

#: diffusers class → its GGUF file rules.
FILES = {"FluxTransformer2DModel": _FLUX, "WanTransformer3DModel": _WAN}


def _row_bytes(ggml_type: str, d_in: int) -> int | None:
    block, size = GGML_TYPES[ggml_type]
    if d_in % block:
        return None
    return d_in // block * size


@dataclass(frozen=True)
class GGUFFormat:
    """A GGUF file type (``gguf-q4_k_m``, …); :meth:`bind` gives its storage for one class."""

    name: str
    file_type: str
    library: str = "gguf"
    file: GGUFFile | None = None

    @property
    def layout(self) -> str:
        default = FILE_TYPES[self.file_type]
        block, size = GGML_TYPES[default]
        return (f"{default} blocks of {block} elements in {size} bytes ({8 * size / block:.4g} bits a weight), "
                "with the file's mixtures; embedders, final layer, 1-D and small tensors as loaded in bf16")

    @property
    def source(self) -> str:
        return ("ComfyUI-GGUF tools/convert.py + llama-quantize b3962 with tools/lcpp.patch, loaded by diffusers' "
                "GGUFQuantizationConfig; block sizes from ggml-common.h / gguf-py GGML_QUANT_SIZES")

    def bind(self, class_name: str, diffusers_class: bool) -> "GGUFFormat":
        file = FILES.get(class_name)
        if file is None or not diffusers_class:
            known = ", ".join(sorted(FILES))
            raise FlopcalcError(f"{self.name}: no GGUF file layout known for {class_name} (city96's converter rules "
                                f"are modelled for {known}; transformers dequantizes GGUF text encoders on load)")
        return GGUFFormat(self.name, self.file_type, file=file)

    def layer_type(self, path: str, d_in: int, d_out: int, to_v_seen: int) -> str | None:
        """The GGML type one converted layer has in the file, or None where it stays as loaded."""
        assert self.file is not None
        if self.file.kept(path) or d_in * d_out <= SMALL:
            return None
        role = self.file.role(path)
        ggml = MIXTURE.get((self.file_type, role), FILE_TYPES[self.file_type])
        if role == "to_v" and self.file_type in TO_V_FIRST:
            n, first, otherwise = TO_V_FIRST[self.file_type]
            ggml = first if to_v_seen < n else (otherwise or ggml)
        if ggml in K_TYPES and d_in % 256:
            ggml = "F16"  # lcpp.patch:227-253
        return None if ggml in ("F16", "BF16") else ggml

    def stored(self, converted: list[Any]) -> list[tuple[int, int]]:
        assert self.file is not None, "bind the format to a class first"
        out, to_v = [], 0
        for lin in converted:
            width = 4 if lin.kept else 2
            total = quantized = 0
            for _ in range(lin.layers if self.file.role(lin.path) == "to_v" else 1):
                k = 1 if self.file.role(lin.path) == "to_v" else lin.layers
                ggml = None if lin.kept else self.layer_type(lin.path, lin.d_in, lin.d_out, to_v)
                row = None if ggml is None else _row_bytes(ggml, lin.d_in)
                total += k * (width * lin.d_in * lin.d_out if row is None else lin.d_out * row)
                quantized += 0 if row is None else k
                to_v += k if self.file.role(lin.path) == "to_v" else 0
            out.append((total, quantized))
        return out


FORMATS = {f"gguf-{t}": GGUFFormat(f"gguf-{t}", t) for t in FILE_TYPES}
