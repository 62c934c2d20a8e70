"""Quantized weight storage: the layouts against the bytes bitsandbytes and optimum-quanto really store (the
fixture written by ``validation/measure_quantized.py``, and live when the libraries are installed); which layers
convert is checked per bundled component in ``test_weights.py``."""

from __future__ import annotations

import json

import pytest

from live_support import REPO

from flopcalc.formulas import ops
from flopcalc.gpu_memory.quantized import FORMATS
from flopcalc.gpu_memory.weights import component_weights

WIDTH = {"bf16": 2, "fp32": 4}
FIXTURE = REPO / "validation" / "fixtures" / "quantized" / "layers" / "storage.json"


def _ours(row):
    return FORMATS[row["format"]].storage(ops.linear(0, row["in"], row["out"]), WIDTH[row["dtype"]])


def test_layouts_equal_the_measured_storage():
    rows = json.loads(FIXTURE.read_text())["layers"]
    assert {r["format"] for r in rows} == set(FORMATS)
    for row in rows:
        assert _ours(row) == row["bytes"], row


def test_layouts_equal_the_libraries_live():
    pytest.importorskip("bitsandbytes")
    pytest.importorskip("optimum.quanto")
    import sys

    sys.path.insert(0, str(REPO / "validation"))
    from measure_quantized import measure

    for row in measure()["layers"]:
        assert _ours(row) == row["bytes"], row


def test_quantized_component_is_smaller_and_keeps_the_rest():
    cfg = json.loads((REPO / "model_cards" / "flux-dev" / "transformer" / "config.json").read_text())
    bf16 = component_weights(cfg, component="transformer", dtype="bf16")
    for fmt in FORMATS:
        q = component_weights(cfg, component="transformer", dtype=fmt)
        assert q.quantized_params == bf16.linear_params  # diffusers' Flux keeps no module in float32
        assert q.params == bf16.params and q.buffer_bytes == bf16.buffer_bytes
        assert q.bytes < bf16.bytes
