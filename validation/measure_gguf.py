"""The bytes diffusers holds for a transformer loaded from a GGUF file laid out as city96's tools write them.

For each llama-quantize file type, a GGUF file of a small FLUX.1 transformer (FLUX.1-dev's widths, which diffusers'
converter hard-codes, ``loaders/single_file_utils.py`` ``inner_dim = 3072``; one double and one single block) and of
two small Wan 2.1 transformers (widths a multiple of 256, and 384: K-type rows fall back to F16) is written in the
original key names (BFL's; Wan's, the inverse of ``convert_wan_transformer_to_diffusers``'s renaming, checked by
running it) with the tensor types city96's pipeline gives them, ported here from the sources:

* ``ComfyUI-GGUF tools/convert.py:246-285``: BF16 for 2-D tensors of a bf16 checkpoint; F32 for 1-D tensors and
  tensors of at most 1024 elements;
* ``convert.py:263-266`` and ``tools/fix_5d_tensors.py``: a 5-D tensor (Wan's ``patch_embedding``) is added back as
  F32; ``keys_hiprec`` (Wan's ``.modulation``) stay F32;
* llama.cpp b3962 ``llama_model_quantize_internal`` with ``tools/lcpp.patch``: quantize tensors whose name ends in
  ``weight``, 2-D (``lcpp.patch:426-429``), not under the architecture's skipped names (FLUX's ``txt_in.``,
  ``img_in.``, ``time_in.``, ``vector_in.``, ``guidance_in.``, ``final_layer.``, ``lcpp.patch:329-337``; Wan's
  ``modulation.``, ``patch_embedding.``, ``text_embedding.``, ``time_projection.``, ``time_embedding.``,
  ``img_emb.``, ``head.``, ``:389-398``), to the file type's default type or ``img_tensor_get_type``'s mixture
  (``lcpp.patch:155-225``: FLUX's fused ``attn.qkv``; Wan's ``.v.weight``, the first 2 / 4 of them under Q3_K_M /
  Q4_K_S, and ``.ffn.2.weight``), F16 where a K-type row is not a multiple of 256 (``lcpp.patch:227-253``).

Quantized tensors hold random bytes of their type's size (gguf-py's ``GGML_QUANT_SIZES``; nothing dequantizes them
on load). The file is then loaded with diffusers' own loader,
``FluxTransformer2DModel.from_single_file(file, config=..., quantization_config=GGUFQuantizationConfig(
compute_dtype=torch.bfloat16), torch_dtype=torch.bfloat16)``, and every parameter and buffer of the loaded module is
summed (``GGUFParameter``: its raw bytes). Needs ``gguf`` (the ``quantizers`` extra).

Run ``python validation/measure_gguf.py``: writes ``validation/fixtures/quantized/gguf/flux.json`` and
``wan.json``. This module never imports ``flopcalc``.
"""

from __future__ import annotations

import json
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch

OUT = Path(__file__).parent / "fixtures" / "quantized" / "gguf"
#: FLUX.1-dev's transformer config, with one double and one single block.
CONFIG = {"_class_name": "FluxTransformer2DModel", "attention_head_dim": 128, "guidance_embeds": True,
          "in_channels": 64, "joint_attention_dim": 4096, "num_attention_heads": 24, "num_layers": 1,
          "num_single_layers": 1, "patch_size": 1, "pooled_projection_dim": 768}
#: llama-quantize file type → default GGML type (llama.cpp ``switch (ftype)``).
FILE_TYPES = {"q8_0": "Q8_0", "q6_k": "Q6_K", "q5_k_m": "Q5_K", "q5_k_s": "Q5_K", "q5_1": "Q5_1", "q5_0": "Q5_0",
              "q4_k_m": "Q4_K", "q4_k_s": "Q4_K", "q4_1": "Q4_1", "q4_0": "Q4_0", "q3_k_l": "Q3_K",
              "q3_k_m": "Q3_K", "q3_k_s": "Q3_K", "q2_k": "Q2_K", "bf16": "BF16"}
SKIP = {"flux": ("txt_in.", "img_in.", "time_in.", "vector_in.", "guidance_in.", "final_layer."),
        "wan": ("modulation.", "patch_embedding.", "text_embedding.", "time_projection.", "time_embedding.",
                "img_emb.", "head.")}
HIPREC = {"flux": (), "wan": (".modulation",)}
QKV = {"q3_k_m": "Q4_K", "q3_k_l": "Q4_K", "q4_k_m": "Q5_K", "q5_k_m": "Q6_K"}
TO_V = {"q2_k": "Q3_K", "q3_k_l": "Q5_K", "q4_k_m": "Q6_K", "q5_k_m": "Q6_K"}
TO_V_FIRST = {"q3_k_m": (2, "Q5_K", "Q4_K"), "q4_k_s": (4, "Q5_K", "Q4_K")}
FFN_DOWN = {"q3_k_m": "Q4_K", "q3_k_l": "Q5_K", "q4_k_s": "Q5_K", "q4_k_m": "Q6_K", "q5_k_m": "Q6_K", "q4_0": "Q4_1",
            "q5_0": "Q5_1"}
#: Wan 2.1 transformers: widths a multiple of 256 (the to_v counter meets 6 tensors), and 384 (K-type fallback).
WAN_CONFIGS = (
    {"_class_name": "WanTransformer3DModel", "added_kv_proj_dim": None, "attention_head_dim": 128,
     "cross_attn_norm": True, "eps": 1e-06, "ffn_dim": 1024, "freq_dim": 256, "image_dim": None, "in_channels": 16,
     "num_attention_heads": 4, "num_layers": 3, "out_channels": 16, "patch_size": [1, 2, 2],
     "qk_norm": "rms_norm_across_heads", "rope_max_seq_len": 1024, "text_dim": 4096},
    {"_class_name": "WanTransformer3DModel", "added_kv_proj_dim": None, "attention_head_dim": 32,
     "cross_attn_norm": True, "eps": 1e-06, "ffn_dim": 768, "freq_dim": 256, "image_dim": None, "in_channels": 16,
     "num_attention_heads": 12, "num_layers": 2, "out_channels": 16, "patch_size": [1, 2, 2],
     "qk_norm": "rms_norm_across_heads", "rope_max_seq_len": 1024, "text_dim": 4096},
)
#: diffusers' Wan names → the original checkpoint's (the inverse of convert_wan_transformer_to_diffusers, in order).
WAN_ORIGINAL = (("condition_embedder.time_embedder.linear_1", "time_embedding.0"),
                ("condition_embedder.time_embedder.linear_2", "time_embedding.2"),
                ("condition_embedder.text_embedder.linear_1", "text_embedding.0"),
                ("condition_embedder.text_embedder.linear_2", "text_embedding.2"),
                ("condition_embedder.time_proj", "time_projection.1"), ("attn2", "cross_attn"), ("attn1", "self_attn"),
                (".to_out.0.", ".o."), (".to_q.", ".q."), (".to_k.", ".k."), (".to_v.", ".v."),
                ("ffn.net.0.proj", "ffn.0"), ("ffn.net.2", "ffn.2"), ("proj_out", "head.head"),
                ("norm2", "norm__swap"), ("norm3", "norm2"), ("norm__swap", "norm3"))


def bfl_shapes(c: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """The original FLUX checkpoint's tensors (the keys diffusers' converter pops)."""
    d = c["num_attention_heads"] * c["attention_head_dim"]
    hd, mlp = c["attention_head_dim"], 4 * d
    s: dict[str, tuple[int, ...]] = {}

    def linear(name: str, d_in: int, d_out: int) -> None:
        s[f"{name}.weight"], s[f"{name}.bias"] = (d_out, d_in), (d_out,)

    linear("img_in", c["in_channels"], d)
    linear("txt_in", c["joint_attention_dim"], d)
    for emb, d_in in (("time_in", 256), ("vector_in", c["pooled_projection_dim"]), ("guidance_in", 256)):
        linear(f"{emb}.in_layer", d_in, d)
        linear(f"{emb}.out_layer", d, d)
    for i in range(c["num_layers"]):
        for side in ("img", "txt"):
            p = f"double_blocks.{i}.{side}"
            linear(f"{p}_mod.lin", d, 6 * d)
            linear(f"{p}_attn.qkv", d, 3 * d)
            s[f"{p}_attn.norm.query_norm.scale"] = s[f"{p}_attn.norm.key_norm.scale"] = (hd,)
            linear(f"{p}_attn.proj", d, d)
            linear(f"{p}_mlp.0", d, mlp)
            linear(f"{p}_mlp.2", mlp, d)
    for i in range(c["num_single_layers"]):
        p = f"single_blocks.{i}"
        linear(f"{p}.linear1", d, 3 * d + mlp)
        linear(f"{p}.linear2", d + mlp, d)
        s[f"{p}.norm.query_norm.scale"] = s[f"{p}.norm.key_norm.scale"] = (hd,)
        linear(f"{p}.modulation.lin", d, 3 * d)
    linear("final_layer.linear", d, c["patch_size"] ** 2 * c["in_channels"])
    linear("final_layer.adaLN_modulation.1", d, 2 * d)
    return s


def wan_shapes(c: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """The original Wan checkpoint's tensors: the diffusers module's, renamed back; diffusers' own converter must
    give the module's names again."""
    from diffusers import WanTransformer3DModel
    from diffusers.loaders.single_file_utils import convert_wan_transformer_to_diffusers

    with torch.device("meta"):
        model = WanTransformer3DModel.from_config(c)
    shapes = {}
    for name, t in model.state_dict().items():
        original = name
        for new, old in WAN_ORIGINAL:
            original = original.replace(new, old)
        if original == "scale_shift_table":
            original = "head.modulation"
        original = original.replace(".scale_shift_table", ".modulation")
        shapes[original] = tuple(t.shape)
    back = convert_wan_transformer_to_diffusers({k: torch.empty(0) for k in shapes})
    assert set(back) == set(model.state_dict()), sorted(set(back) ^ set(model.state_dict()))
    return shapes


def tensor_type(arch: str, name: str, shape: tuple[int, ...], file_type: str, to_v_seen: int) -> str:
    """The GGML type city96's pipeline gives one tensor of a bf16 checkpoint."""
    n = int(np.prod(shape))
    if len(shape) == 1 or n <= 1024 or len(shape) > 4 or any(k in name for k in HIPREC[arch]):
        return "F32"
    quantize = name.endswith("weight") and len(shape) == 2 and not any(k in name for k in SKIP[arch])
    if not quantize or file_type == "bf16":
        return "BF16"
    ggml = FILE_TYPES[file_type]
    if "attn.qkv.weight" in name:
        ggml = QKV.get(file_type, ggml)
    elif ".v.weight" in name:
        ggml = TO_V.get(file_type, ggml)
        if file_type in TO_V_FIRST:
            first, upgraded, otherwise = TO_V_FIRST[file_type]
            ggml = upgraded if to_v_seen < first else otherwise
    elif ".ffn.2.weight" in name:
        ggml = FFN_DOWN.get(file_type, ggml)
    if ggml.endswith("_K") and shape[-1] % 256:
        ggml = "F16"
    return ggml


def write_gguf(path: Path, arch: str, shapes: dict[str, tuple[int, ...]], file_type: str) -> dict[str, str]:
    import gguf

    writer = gguf.GGUFWriter(path=None, arch=arch)
    types = {}
    rng = np.random.default_rng(0)
    to_v = 0
    for name, shape in shapes.items():  # in order, as llama-quantize meets them
        ggml = tensor_type(arch, name, shape, file_type, to_v)
        to_v += ".v.weight" in name
        types[name] = ggml
        qtype = getattr(gguf.GGMLQuantizationType, ggml)
        if ggml == "F32":
            writer.add_tensor(name, np.zeros(shape, dtype=np.float32))
        elif ggml == "F16":
            writer.add_tensor(name, np.zeros(shape, dtype=np.float16))
        else:
            block, size = gguf.GGML_QUANT_SIZES[qtype]
            raw = rng.integers(0, 256, size=(*shape[:-1], shape[-1] // block * size), dtype=np.uint8)
            if ggml == "BF16":
                raw[..., 1::2] &= 0x3F  # small finite bf16 values (nothing dequantizes them, but keep them sane)
            writer.add_tensor(name, raw, raw_dtype=qtype)
    writer.write_header_to_file(path=str(path))
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return types


def loaded_bytes(model: torch.nn.Module) -> int:
    total = 0
    for t in [*model.parameters(), *model.buffers()]:
        data = t.as_tensor() if hasattr(t, "as_tensor") else t
        total += data.numel() * data.element_size()
    return total


def measure_class(cls: Any, arch: str, config: dict[str, Any], shapes: dict[str, tuple[int, ...]]) -> list[Any]:
    from diffusers import GGUFQuantizationConfig

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "transformer"
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(config))
        for file_type in FILE_TYPES:
            path = Path(tmp) / f"{arch}-{file_type}.gguf"
            types = write_gguf(path, arch, shapes, file_type)
            model = cls.from_single_file(
                str(path), config=tmp, subfolder="transformer", torch_dtype=torch.bfloat16,
                quantization_config=GGUFQuantizationConfig(compute_dtype=torch.bfloat16))
            counts: dict[str, int] = {}
            for t in types.values():
                counts[t] = counts.get(t, 0) + 1
            rows.append({"file_type": file_type, "bytes": loaded_bytes(model), "tensor_types": counts})
            path.unlink()
            del model
    return rows


def versions() -> dict[str, str]:
    import diffusers
    import gguf

    return {"torch": torch.__version__, "diffusers": diffusers.__version__,
            "gguf": getattr(gguf, "__version__", "0.19.0")}


def measure() -> dict[str, Any]:
    from diffusers import FluxTransformer2DModel

    warnings.filterwarnings("ignore")
    return {"versions": versions(), "config": CONFIG,
            "files": measure_class(FluxTransformer2DModel, "flux", CONFIG, bfl_shapes(CONFIG))}


def measure_wan() -> dict[str, Any]:
    from diffusers import WanTransformer3DModel

    warnings.filterwarnings("ignore")
    cases = [{"config": c, "files": measure_class(WanTransformer3DModel, "wan", c, wan_shapes(c))}
             for c in WAN_CONFIGS]
    return {"versions": versions(), "cases": cases}


if __name__ == "__main__":
    OUT.mkdir(parents=True, exist_ok=True)
    only = sys.argv[1:] or ["flux", "wan"]
    if "flux" in only:
        (OUT / "flux.json").write_text(json.dumps(measure(), indent=1) + "\n")
    if "wan" in only:
        (OUT / "wan.json").write_text(json.dumps(measure_wan(), indent=1) + "\n")
    sys.stdout.write(f"wrote {', '.join(only)} under {OUT}\n")
