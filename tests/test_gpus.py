"""The shipped GPU table: coverage, lookup by key or alias, clear errors, CLI."""

from __future__ import annotations

import json

import pytest

from flopcalc.cli.main import main
from flopcalc.engine.errors import FlopcalcError
from flopcalc.hardware.gpus import DTYPES, GPU, gpu, gpus

REQUIRED = ("a100-sxm-40gb", "a100-sxm-80gb", "a100-pcie-40gb", "a100-pcie-80gb", "h100-sxm", "h100-pcie",
            "h200-sxm", "b200", "l40s", "l4", "rtx-4090", "rtx-4060", "rtx-a6000", "rtx-a4000", "mi300x")


def test_table_covers_the_required_gpus_each_with_sources():
    keys = {g.key for g in gpus()}
    assert set(REQUIRED) <= keys
    for g in gpus():
        assert isinstance(g, GPU) and g.sources and all(s.strip() for s in g.sources)
        assert g.memory_bytes > 0 and g.memory_bandwidth > 0 and g.tdp_w > 0
        assert set(g.peak_flops) <= set(DTYPES) and {"fp32", "bf16", "fp16"} <= set(g.peak_flops)


def test_peaks_are_dense_and_consistent():
    for g in gpus():
        p = g.peak_flops
        assert p["bf16"] == p["fp16"], g.key  # same tensor rate for both 16-bit formats
        assert p["fp32"] < p["bf16"], g.key  # the non-tensor fp32 peak is the slowest
        if "fp8" in p:
            assert p["fp8"] == pytest.approx(2 * p["bf16"], rel=2e-2), g.key  # L40S datasheet: 362.05 vs 733
    # the dense figure is half of each datasheet's "with sparsity" headline, cited in the table
    assert gpu("h100-sxm").peak_flops["bf16"] == pytest.approx(1979e12 / 2, rel=1e-3)
    assert gpu("l40s").peak_flops["bf16"] == 362.05e12  # the L40S datasheet prints the dense figure itself
    assert gpu("rtx-a4000").peak_flops["fp16"] == pytest.approx(153.4e12 / 2)
    assert gpu("b200").peak_flops["bf16"] == pytest.approx(4.5e15 / 2)


def test_lookup_is_case_and_punctuation_insensitive_and_knows_the_benchmark_names():
    assert gpu("H100 80GB HBM3").key == "h100-sxm"  # ML.ENERGY v2
    assert gpu("A100-SXM4-40GB").key == "a100-sxm-40gb"  # ML.ENERGY v2
    assert gpu("H100").key == "h100-sxm" and gpu("B200").key == "b200"  # ML.ENERGY v3
    assert gpu("RTX 4090") is gpu("rtx-4090") is gpu("Rtx_4090")
    assert gpu("h100-sxm").memory_bytes == 80 * 2**30


def test_unknown_gpu_names_close_matches():
    with pytest.raises(FlopcalcError, match="did you mean.*h100-sxm"):
        gpu("h10")
    with pytest.raises(FlopcalcError, match="unknown GPU"):
        gpu("zzzz")


def test_every_label_names_one_gpu():
    seen: dict[str, str] = {}
    for g in gpus():
        for label in (g.key, *g.aliases):
            assert gpu(label) is g
            assert seen.setdefault(label.lower(), g.key) == g.key


def test_cli_gpus_table_and_json(capsys):
    assert main(["gpus"]) == 0
    out = capsys.readouterr().out
    assert all(k in out for k in REQUIRED)
    assert main(["gpus", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {d["key"] for d in data} == {g.key for g in gpus()}
    assert data[0]["peak_flops"]["bf16"] == gpus()[0].peak_flops["bf16"]
