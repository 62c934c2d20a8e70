"""The shipped GPU table: coverage, dense peaks, idle power and links with their sources, lookup by key or
alias and which part a family alias picks, clear errors on a bad table, CLI."""

from __future__ import annotations

import copy
import json

import pytest
import yaml

from flopcalc.cli.main import main
from flopcalc.engine.errors import FlopcalcError
from flopcalc.hardware.gpus import (
    _DATA,
    DTYPES,
    GPU,
    GPUTableError,
    family,
    gpu,
    gpus,
    parse_table,
    pcie_bytes_per_s,
    resolve,
)

REQUIRED = ("a100-sxm-40gb", "a100-sxm-80gb", "a100-pcie-40gb", "a100-pcie-80gb", "h100-sxm", "h100-pcie",
            "h200-sxm", "b200", "l40s", "l4", "rtx-4090", "rtx-4060", "rtx-a6000", "rtx-a4000", "mi300x",
            # added with idle power and links
            "rtx-3090", "rtx-3090-ti", "rtx-3080", "rtx-3060", "rtx-4080", "rtx-4070", "rtx-5090", "rtx-5080",
            "rtx-6000-ada", "rtx-a5000", "a10", "a10g", "t4", "v100-sxm2-16gb", "v100-sxm2-32gb", "v100-pcie-16gb",
            "v100-pcie-32gb", "l20", "l40", "a800-sxm-80gb", "a800-pcie-80gb", "h800-sxm", "h800-pcie", "h200-nvl",
            "gh200", "mi250x", "mi325x", "h20")
NO_BF16 = {"t4", "v100-sxm2-16gb", "v100-sxm2-32gb", "v100-pcie-16gb", "v100-pcie-32gb"}  # Turing/Volta: fp16 only

# Datasheet headlines "with sparsity" (2x dense): no table entry may carry one; each is twice the table's.
SPARSE_HEADLINES = {
    ("h100-sxm", "bf16"): 1979e12, ("h100-sxm", "fp8"): 3958e12, ("h100-pcie", "bf16"): 1513e12,
    ("h800-sxm", "bf16"): 1979e12, ("h200-sxm", "fp8"): 3958e12, ("gh200", "fp8"): 3958e12,
    ("h200-nvl", "bf16"): 1671e12, ("h200-nvl", "fp8"): 3341e12, ("a100-sxm-80gb", "bf16"): 624e12,
    ("a800-sxm-80gb", "bf16"): 624e12, ("a10", "bf16"): 250e12, ("a10", "tf32"): 125e12,
    ("l40", "bf16"): 362.1e12, ("l4", "bf16"): 242e12, ("rtx-a4000", "fp16"): 153.4e12,
    ("rtx-a5000", "fp16"): 222.2e12, ("rtx-a6000", "fp16"): 309.7e12, ("rtx-6000-ada", "fp8"): 1457e12,
    ("rtx-3090", "bf16"): 142e12, ("rtx-3080", "bf16"): 119e12, ("rtx-4090", "bf16"): 330.4e12,
    ("rtx-4080", "bf16"): 194.9e12, ("rtx-5090", "bf16"): 419e12, ("rtx-5090", "int8"): 1676e12,
    ("b200", "bf16"): 4.5e15, ("mi300x", "bf16"): 2614.9e12,
}


def _doc() -> dict:
    with _DATA.open(encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def test_table_covers_the_required_gpus_each_with_every_field_and_a_source_for_each():
    keys = [g.key for g in gpus()]
    assert set(REQUIRED) <= set(keys) and len(keys) == len(set(keys))
    for g in gpus():
        assert isinstance(g, GPU) and g.sources and all(s.strip() for s in g.sources)
        assert g.memory_bytes > 0 and g.memory_bandwidth > 0 and g.tdp_w > 0
        assert set(g.peak_flops) <= set(DTYPES) and {"fp32", "fp16"} <= set(g.peak_flops), g.key
        assert ("bf16" in g.peak_flops) == (g.key not in NO_BF16), g.key
        assert 0 < g.idle_w < g.tdp_w / 2, g.key  # at rest a board draws a small part of its TDP
        assert len(g.idle_source) > 20 and any(ch.isdigit() for ch in g.idle_source), g.key
        for link in (g.host_link, g.gpu_link):
            assert link["kind"] and len(link["source"]) > 10, g.key
        assert g.host_link_bytes_per_s > 0 and g.gpu_link_bytes_per_s > 0, g.key
        assert g.to_dict()["idle_w"] == g.idle_w


def test_peaks_are_dense_and_consistent():
    for g in gpus():
        p = g.peak_flops
        if "bf16" in p:
            assert p["bf16"] == p["fp16"], g.key  # same tensor rate for both 16-bit formats
        assert p["fp32"] < p["fp16"], g.key  # the non-tensor fp32 peak is the slowest
        if "fp8" in p:
            assert p["fp8"] == pytest.approx(2 * p["bf16"], rel=2e-2), g.key  # L40S datasheet: 362.05 vs 733
        if "tf32" in p:
            assert p["tf32"] <= p["fp16"] / 2 * 1.02, g.key  # TF32 at most half the 16-bit rate (L40S: 183 vs 362.05)
    # the dense figure is half of each datasheet's "with sparsity" headline, cited in the table
    assert gpu("h100-sxm").peak_flops["bf16"] == pytest.approx(1979e12 / 2, rel=1e-3)
    assert gpu("l40s").peak_flops["bf16"] == 362.05e12  # the L40S datasheet prints the dense figure itself
    assert gpu("rtx-a4000").peak_flops["fp16"] == pytest.approx(153.4e12 / 2)
    assert gpu("b200").peak_flops["bf16"] == pytest.approx(4.5e15 / 2)
    for (key, dtype), sparse in SPARSE_HEADLINES.items():
        dense = gpu(key).peak_flops[dtype]
        assert dense != pytest.approx(sparse, rel=1e-3), (key, dtype)
        assert dense == pytest.approx(sparse / 2, rel=2e-3), (key, dtype)
    # GeForce parts at FP32 accumulate (half the FP16-accumulate rate); professional parts at full rate
    assert gpu("rtx-3090").peak_flops["bf16"] == 71e12 and gpu("rtx-a5000").peak_flops["bf16"] == 111.1e12


def test_pcie_arithmetic_follows_the_specification():
    # one direction: GT/s per lane x lanes x 128/130 / 8
    assert pcie_bytes_per_s(3, 16) == pytest.approx(8e9 * 16 * 128 / 130 / 8)
    assert pcie_bytes_per_s(4, 16) == pytest.approx(31.508e9, rel=1e-4)
    assert pcie_bytes_per_s(5, 16) == pytest.approx(63.015e9, rel=1e-4)
    assert pcie_bytes_per_s(4, 8) == pcie_bytes_per_s(3, 16)
    for bad in ((6, 16), (4, 3)):
        with pytest.raises(ValueError):
            pcie_bytes_per_s(*bad)
    assert gpu("h100-sxm").host_link_bytes_per_s == pcie_bytes_per_s(5, 16)
    assert gpu("rtx-4060").host_link_bytes_per_s == pcie_bytes_per_s(4, 8)  # AD107: eight lanes
    assert gpu("t4").host_link_bytes_per_s == pcie_bytes_per_s(3, 16)
    assert gpu("l4").gpu_link_bytes_per_s == gpu("l4").host_link_bytes_per_s  # no NVLink: peers over PCIe


def test_gpu_links_are_per_direction_halves_of_the_vendor_totals():
    assert gpu("h100-sxm").gpu_link_bytes_per_s == 450e9  # NVLink 4: 900 GB/s total
    assert gpu("h800-sxm").gpu_link_bytes_per_s == 200e9 and gpu("a800-sxm-80gb").gpu_link_bytes_per_s == 200e9
    assert gpu("a100-sxm-40gb").gpu_link_bytes_per_s == 300e9 and gpu("b200").gpu_link_bytes_per_s == 900e9
    assert gpu("rtx-3090").gpu_link["kind"] == "nvlink-bridge" and gpu("rtx-3090").gpu_link_bytes_per_s == 56.25e9
    assert gpu("rtx-4090").gpu_link["kind"] == "pcie" and gpu("mi300x").gpu_link_bytes_per_s == 448e9
    assert gpu("gh200").host_link["kind"] == "nvlink-c2c" and gpu("gh200").host_link_bytes_per_s == 450e9


def test_lookup_is_case_and_punctuation_insensitive_and_knows_the_benchmark_names():
    assert gpu("H100 80GB HBM3").key == "h100-sxm"  # ML.ENERGY v2
    assert gpu("A100-SXM4-40GB").key == "a100-sxm-40gb"  # ML.ENERGY v2
    assert gpu("H100").key == "h100-sxm" and gpu("B200").key == "b200"  # ML.ENERGY v3
    assert gpu("RTX 4090") is gpu("rtx-4090") is gpu("Rtx_4090")
    assert gpu("h100-sxm").memory_bytes == 80 * 2**30
    # nvidia-smi / rocm-smi names and the short names users type
    assert gpu("NVIDIA GeForce RTX 3090").key == gpu("3090").key == gpu("rtx3090").key == "rtx-3090"
    assert gpu("RTX 3090 Ti").key == "rtx-3090-ti" and gpu("Tesla T4").key == "t4"
    assert gpu("Tesla V100-SXM2-32GB").key == "v100-sxm2-32gb" and gpu("NVIDIA A10G").key == "a10g"
    assert gpu("NVIDIA RTX 6000 Ada Generation").key == "rtx-6000-ada" and gpu("AMD Instinct MI250X").key == "mi250x"


def test_resolve_says_which_part_a_family_alias_picks():
    r = resolve("a100")
    g, how = r  # unpacks as (GPU, how)
    assert g.key == "a100-sxm-40gb" and g is gpu("a100")
    assert how == ("alias a100 → NVIDIA A100 SXM4 40GB (SXM4 40GB; other parts: a100-sxm-80gb, a100-pcie-40gb, "
                   "a100-pcie-80gb)")
    for alias, picked in (("h100", "h100-sxm"), ("v100", "v100-sxm2-16gb"), ("a800", "a800-sxm-80gb"),
                          ("h800", "h800-sxm"), ("h200", "h200-sxm")):
        got = resolve(alias)
        others = [p.key for p in family(alias) if p.key != picked]
        assert got.gpu.key == picked and others and all(o in got.how for o in others), alias
    assert resolve("h100-pcie").how == "key h100-pcie → NVIDIA H100 PCIe 80GB"
    assert resolve("NVIDIA H100 PCIe").how == "alias NVIDIA H100 PCIe → NVIDIA H100 PCIe 80GB"
    assert "other parts" not in resolve("A100-SXM4-80GB").how  # names one part exactly
    with pytest.raises(FlopcalcError, match="unknown GPU"):
        resolve("h1000x")


def test_unknown_gpu_names_close_matches():
    with pytest.raises(FlopcalcError, match="did you mean.*h100-sxm"):
        gpu("h10")
    with pytest.raises(FlopcalcError, match="unknown GPU"):
        gpu("zzzz")


def test_every_label_names_one_gpu():
    seen: dict[str, str] = {}
    for g in gpus():
        for label in (g.key, g.name, *g.aliases):
            assert gpu(label) is g
            norm = "".join(ch for ch in label.lower() if ch.isalnum())
            assert seen.setdefault(norm, g.key) == g.key, label
    # the family names are aliases of exactly one part each
    for fam in {g.family for g in gpus() if g.family}:
        assert sum(fam in g.aliases for g in family(fam)) == 1, fam


@pytest.mark.parametrize("edit, message", [
    (lambda e: e.pop("idle_w"), "t4 lacks 'idle_w'"),
    (lambda e: e.update(idle_w=0), "t4 has idle_w = 0"),
    (lambda e: e.update(idle_w=-3), "t4 has idle_w = -3"),
    (lambda e: e.update(idle_w=500), "t4 has idle_w 500 >= tdp_w 70"),
    (lambda e: e.pop("idle_source"), "t4 lacks 'idle_source'"),
    (lambda e: e.update(tdp_w="70 W"), "t4 has tdp_w = '70 W'"),
    (lambda e: e.pop("host_link"), "t4 lacks 'host_link'"),
    (lambda e: e["host_link"].pop("source"), "t4 host_link lacks 'source'"),
    (lambda e: e["host_link"].update(generation=7), "t4 host_link: PCIe generation 7"),
    (lambda e: e["host_link"].update(lanes=0), "t4 host_link has lanes = 0"),
    (lambda e: e["host_link"].update(kind="usb"), "t4 host_link has kind 'usb'"),
    (lambda e: e.update(gpu_link={"kind": "nvlink", "generation": 2, "source": "x"}), "t4 gpu_link lacks 'total_gb_s'"),
    (lambda e: e.update(gpu_link={"kind": "nvlink", "generation": 2, "total_gb_s": float("nan"), "source": "x"}),
     "t4 gpu_link has total_gb_s = nan"),
    (lambda e: e["peak_tflops"].update(fp16=0), "t4 peak_tflops has fp16 = 0"),
    (lambda e: e.pop("memory_bandwidth_gb_s"), "t4 lacks 'memory_bandwidth_gb_s'"),
])
def test_a_missing_or_non_positive_figure_is_an_error_naming_the_gpu_and_key(edit, message):
    doc = copy.deepcopy(_doc())
    edit(next(e for e in doc["gpus"] if e["key"] == "t4"))
    with pytest.raises(GPUTableError, match=message.replace("(", r"\(").replace("[", r"\[")):
        parse_table(doc)
    assert len(parse_table(_doc())) == len(gpus())


def test_cli_gpus_table_and_json(capsys):
    assert main(["gpus"]) == 0
    out = capsys.readouterr().out
    assert all(k in out for k in REQUIRED)
    head = out.splitlines()[0]
    assert all(col in head for col in ("idle W", "host link", "GPU link", "bf16 TF"))
    row = next(line for line in out.splitlines() if line.startswith("h100-sxm "))
    assert "PCIe5 x16 63" in row and "NVLink4 450" in row and " 70 " in row
    t4 = next(line for line in out.splitlines() if line.startswith("t4 "))
    assert "PCIe3 x16 15.8" in t4 and " - " in t4  # no bf16 tensor path
    assert main(["gpus", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {d["key"] for d in data} == {g.key for g in gpus()}
    assert data[0]["peak_flops"]["bf16"] == gpus()[0].peak_flops["bf16"]
    for d in data:
        assert {"idle_w", "idle_source", "host_link", "gpu_link", "host_link_bytes_per_s", "gpu_link_bytes_per_s",
                "family", "variant", "sources"} <= set(d)
        assert d["host_link"]["source"] and d["gpu_link"]["source"]
    assert next(d for d in data if d["key"] == "h100-sxm")["gpu_link_bytes_per_s"] == 450e9
