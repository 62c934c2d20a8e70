"""Quantized weight storage: the layouts against the bytes bitsandbytes, optimum-quanto and torchao really store (the
fixture written by ``validation/measure_quantized.py``, and live when the libraries are installed), GGUF's block
sizes against gguf-py's; which layers convert is checked per bundled component in ``test_weights.py``."""

from __future__ import annotations

import json

import pytest

from live_support import REPO

from flopcalc.engine.errors import FlopcalcError
from flopcalc.gpu_memory.gguf import GGML_TYPES
from flopcalc.gpu_memory.quant_formats import FORMATS as LIBRARY_FORMATS
from flopcalc.gpu_memory.quantized import FORMATS, Linears, canonical
from flopcalc.gpu_memory.weights import component_weights

WIDTH = {"bf16": 2, "fp32": 4}
FIXTURE = REPO / "validation" / "fixtures" / "quantized" / "layers" / "storage.json"
#: Formats whose layout comes from the library's source, not a measurement here (torchao int4 needs mslk kernels).
FROM_SOURCE = {f"torchao-int4wo-{g}" for g in (32, 64, 128, 256)}


def _ours(row):
    lin = Linears("x", 1, row["in"], row["out"], row["dtype"] == "fp32")
    return LIBRARY_FORMATS[row["format"]].stored([lin])[0][0]


def test_layouts_equal_the_measured_storage():
    rows = json.loads(FIXTURE.read_text())["layers"]
    assert {r["format"] for r in rows} == set(LIBRARY_FORMATS) - FROM_SOURCE
    for row in rows:
        assert _ours(row) == row["bytes"], row


def test_layouts_equal_the_libraries_live():
    pytest.importorskip("bitsandbytes")
    pytest.importorskip("optimum.quanto")
    pytest.importorskip("torchao")
    import sys

    sys.path.insert(0, str(REPO / "validation"))
    from measure_quantized import measure

    for row in measure()["layers"]:
        assert _ours(row) == row["bytes"], row


def test_gguf_blocks_equal_gguf_py():
    gguf = pytest.importorskip("gguf")
    for name, sizes in GGML_TYPES.items():
        assert gguf.constants.GGML_QUANT_SIZES[getattr(gguf.GGMLQuantizationType, name)] == sizes, name


def test_torchao_int4_leaves_layers_its_group_does_not_divide():
    fmt = LIBRARY_FORMATS["torchao-int4wo-128"]
    assert fmt.stored([Linears("x", 3, 200, 33, False)]) == [(3 * 2 * 200 * 33, 0)]
    assert fmt.stored([Linears("x", 1, 256, 8, False)]) == [(256 * 8 // 2 + 4 * 8 * 2, 1)]


def test_quantized_component_is_smaller_and_keeps_the_rest():
    cfg = json.loads((REPO / "model_cards" / "flux-dev" / "transformer" / "config.json").read_text())
    bf16 = component_weights(cfg, component="transformer", dtype="bf16")
    for name, fmt in FORMATS.items():
        if name in ("gguf-f16", "gguf-bf16"):
            continue
        q = component_weights(cfg, component="transformer", dtype=name)
        assert q.params == bf16.params and q.buffer_bytes == bf16.buffer_bytes
        assert q.bytes < bf16.bytes, name
        if fmt.library != "gguf" and not name.startswith("torchao-int4wo"):
            assert q.quantized_params == bf16.linear_params, name  # diffusers' Flux keeps no module in float32
    assert component_weights(cfg, component="transformer", dtype="gguf-bf16").bytes == bf16.bytes


def test_names_are_case_insensitive_and_the_earlier_names_still_work():
    assert canonical("NF4") == "bnb-nf4" and canonical("fp8") == "quanto-float8" and canonical("int8") == "bnb-int8"
    assert canonical("GGUF-Q4_K_M") == "gguf-q4_k_m" and canonical("torchao-int4wo") == "torchao-int4wo-128"
    assert canonical("q4_k_m") is None and canonical("int3") is None


@pytest.mark.parametrize("bad", ["int4", "gguf-q4_k_x", "torchao-int4wo-100", "x" * 5000, ""])
def test_unknown_formats_are_refused_in_one_line(bad):
    cfg = json.loads((REPO / "model_cards" / "flux-dev" / "transformer" / "config.json").read_text())
    with pytest.raises(FlopcalcError) as e:
        component_weights(cfg, component="transformer", dtype=bad)
    assert "\n" not in str(e.value) and "bnb-int8/nf4" in str(e.value) and len(str(e.value)) <= 280


def test_gguf_refuses_a_class_whose_file_layout_is_unknown():
    t5 = json.loads((REPO / "model_cards" / "flux-dev" / "text_encoder_2" / "config.json").read_text())
    with pytest.raises(FlopcalcError, match="dequantizes GGUF"):
        component_weights(t5, component="text_encoder_2", dtype="gguf-q8_0")
