"""The two peaks: the caching-allocator replay (PyTorch's rules), the fitted reserve, the cuBLAS workspaces, the CUDA
context per architecture, and ``flopcalc memory``'s ``peak_allocated_bytes`` / ``peak_bytes`` in every format."""

from __future__ import annotations

import copy
import csv
import io
import json
from dataclasses import replace
from pathlib import Path

import pytest

from flopcalc.cli.main import main
from flopcalc.engine.errors import FlopcalcError
from flopcalc.gpu_memory.allocator import KINDS, Reserve, fit, reserve, workspace_bytes, workspace_sizes
from flopcalc.gpu_memory.caching_allocator import CachingAllocator, allocation_size, replay, reserved_for, round_size
from flopcalc.gpu_memory.estimate import memory
from flopcalc.hardware.gpus import GPUTableError, gpu, gpus, parse_table

REPO = Path(__file__).resolve().parents[1]
MIB = 1 << 20


# --- the allocator's rules (c10/cuda/CUDACachingAllocator.cpp, c10/core/AllocatorConfig.h) ---------------------------

def test_rounding_and_segment_sizes():
    assert [round_size(n) for n in (1, 512, 513, 1000)] == [512, 512, 1024, 1024]
    assert allocation_size(MIB) == 2 * MIB  # the small pool's 2 MiB segments take requests up to 1 MiB
    assert allocation_size(MIB + 512) == allocation_size(10 * MIB - 512) == 20 * MIB
    assert allocation_size(10 * MIB) == 10 * MIB and allocation_size(10 * MIB + 512) == 12 * MIB


def test_small_requests_pack_into_one_two_mib_segment():
    a = CachingAllocator()
    blocks = [a.malloc(100_000) for _ in range(20)]  # 100,352 B each after rounding: 20 fit in 2 MiB
    assert a.reserved == 2 * MIB and a.segments == 1
    assert a.allocated == 20 * round_size(100_000) and a.requested == 20 * 100_000
    a.malloc(100_000)
    assert a.segments == 2
    for b in blocks:
        a.free(b)
    assert a.allocated == round_size(100_000) and a.reserved == 4 * MIB  # segments are kept


def test_large_pool_split_best_fit_and_no_coalescing_across_segments():
    a = CachingAllocator()
    x = a.malloc(3 * MIB)  # a 20 MiB segment, split: 17 MiB cached
    assert a.reserved == 20 * MIB and a.allocated == 3 * MIB
    y = a.malloc(12 * MIB)  # best fit: the 17 MiB remainder, split again (5 MiB > 1 MiB left)
    assert a.reserved == 20 * MIB
    z = a.malloc(15 * MIB)  # nothing cached fits: its own segment, rounded to 2 MiB
    assert a.reserved == 36 * MIB
    for b in (x, y, z):
        a.free(b)  # x, y and the 5 MiB rest merge back into one 20 MiB block; z stays its own
    big = a.malloc(30 * MIB)  # 20 + 16 MiB free, but in two segments: a new segment
    assert a.reserved == 66 * MIB and a.allocated == 30 * MIB
    a.free(big)
    assert sorted(size for size, _ in a._pools[False]) == [16 * MIB, 20 * MIB, 30 * MIB]


def test_a_remainder_of_one_mib_or_less_is_not_split_off_in_the_large_pool():
    a = CachingAllocator()
    a.malloc(19 * MIB)  # its own segment, rounded up to 20 MiB: the 1 MiB rest is not split off
    assert a.reserved == 20 * MIB and a.allocated == 20 * MIB  # the 1 MiB rest stays in the block
    b = CachingAllocator()
    b.malloc(int(8.5 * MIB))  # a 20 MiB segment, 11.5 MiB split off
    assert b.allocated == int(8.5 * MIB)


def test_replay_and_its_refusals():
    alloc = replay([(1, 5 * MIB), (2, 5 * MIB), (1, 0), (3, 4 * MIB), (2, 0), (3, 0)])
    assert alloc.reserved == 20 * MIB and alloc.peak_requested == 10 * MIB and alloc.requested == 0
    assert reserved_for([12 * MIB, 100]) == 14 * MIB
    with pytest.raises(ValueError, match="allocated twice"):
        replay([(1, 10), (1, 10)])
    with pytest.raises(KeyError):
        replay([(1, 0)])


# --- workspaces and the CUDA context ---------------------------------------------------------------------------------

def test_cublas_workspaces_as_pytorch_sets_them():
    """CublasHandlePool.cpp: ``:4096:2:16:8`` (8 MiB + 128 KiB) unless sm90, 32 MiB on Hopper; cuBLASLt 1 MiB;
    ROCm 32 MiB (128 MiB on gfx94x) and 76 MiB of hipBLASLt."""
    assert workspace_sizes(gpu("rtx-4090")) == (8 * MIB + 128 * 1024, MIB)
    assert workspace_bytes(gpu("rtx-4090")) == 22 * MIB  # a 20 MiB segment and a 2 MiB one
    assert workspace_sizes(gpu("h100-sxm")) == (32 * MIB, MIB) and workspace_bytes(gpu("h200-sxm")) == 34 * MIB
    assert workspace_sizes(gpu("b200"))[0] == 8 * MIB + 128 * 1024  # sm100 is not the sm90 case
    assert workspace_bytes(gpu("mi300x")) == (128 + 76) * MIB and workspace_bytes(gpu("mi250x")) == (32 + 76) * MIB
    assert workspace_bytes(None) == 0


def test_every_gpu_has_an_architecture_and_a_cited_context():
    for g in gpus():
        assert g.architecture and g.context_bytes > 0 and g.context_source.strip(), g.key
    assert gpu("rtx-3090").context_bytes == 256 * MIB and "InvokeAI#9413" in gpu("a100").context_source
    assert gpu("h100").to_dict()["architecture"] == "hopper"


def _doc() -> dict:
    import yaml

    return yaml.safe_load((REPO / "flopcalc" / "data" / "gpus.yaml").read_text(encoding="utf-8"))


@pytest.mark.parametrize("edit, message", [
    (lambda d: next(e for e in d["gpus"] if e["key"] == "t4").pop("architecture"), "t4 lacks 'architecture'"),
    (lambda d: next(e for e in d["gpus"] if e["key"] == "t4").update(architecture="kepler"),
     "t4 has architecture 'kepler'"),
    (lambda d: d["architectures"]["turing"].update(context_mib=0), "architecture turing has context_mib = 0"),
    (lambda d: d["architectures"]["turing"].pop("context_mib"), "architecture turing lacks 'context_mib'"),
    (lambda d: d["architectures"]["turing"].pop("context_source"), "architecture turing lacks 'context_source'"),
    (lambda d: d.pop("architectures"), "no 'architectures' mapping"),
])
def test_a_missing_or_bad_architecture_figure_names_the_gpu_or_architecture_and_key(edit, message):
    doc = copy.deepcopy(_doc())
    edit(doc)
    with pytest.raises(GPUTableError, match=message):
        parse_table(doc)


# --- the reserve ----------------------------------------------------------------------------------------------------

def test_reserve_terms_add_up():
    r = reserve(10 * 2**30, gpu=gpu("h100-sxm"), activation_bytes=2**30, kind="vae_decoder")
    assert isinstance(r, Reserve) and r.allocator_bytes > 0 and r.workspace_bytes == 34 * MIB
    assert r.reserved_peak_bytes == r.allocated_peak_bytes + r.allocator_bytes + r.workspace_bytes
    assert r.peak_bytes == r.reserved_peak_bytes + gpu("h100-sxm").context_bytes
    law = fit()["kinds"]["vae_decoder"]
    parts = [(round(law["weights_overhead"] * 9 * 2**30 + law["weights_constant_bytes"]),
              law["weights_loco_max_rel_error"]),
             (round((law["activation_factor"] - 1) * 2**30 + law["activation_constant_bytes"]),
              law["activation_loco_max_rel_error"])]
    assert r.allocator_bytes == sum(p for p, _ in parts)
    sig = fit()["significant_bytes"]
    assert r.error == pytest.approx(sum(max(p, sig) * e for p, e in parts) / (r.allocator_bytes + r.workspace_bytes))
    assert r.note == ""
    bare = reserve(10 * 2**30, gpu=None, activation_bytes=2**30, kind="vae_decoder")
    assert bare.context_bytes == bare.workspace_bytes == 0 and "no GPU named" in bare.note
    assert bare.allocator_bytes == r.allocator_bytes
    assert "training" in reserve(2**30, gpu=None, training=True).note


def test_reserve_of_replayed_tensors_is_exact_and_the_laws_come_from_the_fit():
    sizes = [12 * MIB + 1, 3 * MIB, 100]
    r = reserve(sum(sizes), gpu=None, tensors=sizes)
    assert r.allocator_bytes == reserved_for(sizes) - sum(sizes) and r.error == 0.0
    law = fit()["kinds"]["denoiser"]
    r = reserve(10 * 2**30, gpu=None, kind="denoiser")
    assert r.allocator_bytes == round(law["weights_overhead"] * 10 * 2**30 + law["weights_constant_bytes"])
    assert set(fit()["kinds"]) == set(KINDS)
    assert all(e["weights_reserved_bytes"] >= e["weights_bytes"] for e in fit()["configs"].values())


@pytest.mark.parametrize("kwargs, match", [
    (dict(allocated_peak_bytes=10, activation_bytes=20), "do not fit"),
    (dict(allocated_peak_bytes=100, activation_bytes=10, weights={"denoiser": 50}), "not the 90 B"),
    (dict(allocated_peak_bytes=100, kind="unet"), "choose one of text_encoder, denoiser, vae_decoder"),
])
def test_reserve_refusals(kwargs, match):
    with pytest.raises(FlopcalcError, match=match):
        reserve(gpu=None, **kwargs)


# --- flopcalc memory ------------------------------------------------------------------------------------------------

def test_two_peaks_and_the_fit_decided_by_peak_bytes():
    est = memory("flux-dev", gpu="h100-sxm")
    r = est.reserve
    assert est.peak_allocated_bytes == est.weights_bytes + max(a.bytes("fused") for a in est.activations)
    assert est.peak_bytes == r.peak_bytes > r.reserved_peak_bytes > est.peak_allocated_bytes
    assert r.context_bytes == gpu("h100-sxm").context_bytes and est.peak_at in ("vae.decode", "transformer.forward")
    assert est.headroom_bytes == gpu("h100-sxm").memory_bytes - est.peak_bytes
    # live tensors that fit, a reserve that does not: the fit follows peak_bytes
    tight = replace(est, gpu_memory_bytes=est.peak_allocated_bytes + 1)
    assert tight.fits is False and tight.headroom_bytes < 0
    # every measured config's weights are replayed exactly (bf16 and fp16 share sizes; fp32 its own)
    assert set(est.weights_reserved) == {c.component for c in est.components}
    assert memory("flux-dev", dtype="fp32").weights_reserved["transformer"] != est.weights_reserved["transformer"]
    assert memory("flux-dev", dtype="nf4").weights_reserved == {}  # quantized storage: the kind's law


def test_offload_modes_take_their_own_peak():
    none, model = memory("sd1.5", gpu="rtx-4090"), memory("sd1.5", gpu="rtx-4090", offload="model")
    seq = memory("sd1.5", gpu="rtx-4090", offload="sequential")
    for est in (none, model, seq):
        assert est.peak_bytes > est.peak_allocated_bytes
    assert seq.peak_bytes < model.peak_bytes < none.peak_bytes


def test_every_format_gives_both_peaks_and_says_which_the_fit_uses(capsys):
    est = memory("flux-dev", gpu="rtx-4090", offload="model")
    assert main(["memory", "flux-dev", "--gpu", "rtx-4090", "--offload", "model", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out == json.loads(json.dumps(est.to_dict()))
    assert out["peak_bytes"] == est.peak_bytes and out["peak_allocated_bytes"] == est.peak_allocated_bytes
    assert out["reserve"]["peak_bytes"] == est.peak_bytes and out["reserve"]["at"] == est.peak_at
    assert out["gpu"]["fit_uses"].startswith("peak_bytes") and out["gpu"]["fits"] is est.fits
    assert main(["memory", "flux-dev", "--format", "csv"]) == 0
    total = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))[-1]
    bare = memory("flux-dev")
    assert total["component"] == "total" and int(total["peak_bytes"]) == bare.peak_bytes
    assert int(total["peak_allocated_bytes"]) == bare.peak_allocated_bytes
    assert main(["memory", "flux-dev", "--gpu", "rtx-4090", "--offload", "model"]) == 0
    text = capsys.readouterr().out
    assert "(peak_allocated_bytes)" in text and "peak reserved + CUDA context" in text and "by peak_bytes" in text
    from flopcalc.gpu_memory.html import section

    assert "reserved by PyTorch's caching allocator" in section("flux-dev", height=512, width=512)


def test_the_fit_file_is_what_the_fit_script_writes_from_the_fixtures():
    """Terms chosen inside each fold; every kind's error stated; every measured call has its own law."""
    for kind, law in fit()["kinds"].items():
        assert law["terms"] in ("factor", "factor+constant") and law["weights_terms"] in ("ratio", "constant")
        assert sum(law["terms_chosen_in_folds"].values()) == law["components"], kind
        assert 0 < law["reserved_peak_loco_median_rel_error"] <= law["reserved_peak_loco_max_rel_error"]
    fixtures = list((REPO / "validation/fixtures/allocator").glob("*/*.json"))
    assert sum(c["sizes"] for c in fit()["calls"].values()) == len(fixtures)
    assert sum(k["calls"] for k in fit()["kinds"].values()) == len(fixtures)


@pytest.mark.parametrize("path", sorted((REPO / "validation/fixtures/allocator_pipelines").glob("*.json")),
                         ids=lambda p: p.stem)
def test_composed_reserve_against_one_allocator_replaying_the_whole_pipeline(path):
    """``memory`` composes each component's replayed weights and the peak call's law; one allocator that replays the
    whole generation (validation/replay_pipelines.py) reads within 2% of it (measured: -1.9% to +0.5%)."""
    fx = json.loads(path.read_text())
    est = memory(fx["card"], height=fx["height"], width=fx["width"], dtype=fx["dtype"])
    assert est.peak_allocated_bytes == fx["peak_live_bytes"]
    assert est.reserve.reserved_peak_bytes == pytest.approx(fx["peak_reserved_bytes"], rel=0.02)


# --- the fixtures are what the script writes --------------------------------------------------------------------------

def test_a_fixture_is_the_replay_of_a_fresh_recording():
    pytest.importorskip("diffusers")
    import sys

    sys.path.insert(0, str(REPO / "validation"))
    from build_allocator_fixtures import DTYPE, simulate
    from measure_allocations import prepare, record_events

    fixture = json.loads((REPO / "validation/fixtures/allocator/sd1.5/vae-decode-256x256.json").read_text())
    model, weights, keys, fp32 = prepare(REPO / "model_cards/sd1.5/vae", DTYPE)
    events, elements, _ = record_events(model, keys, {"height": 256, "width": 256}, call="decode", dtype=DTYPE)
    assert simulate(weights, events, fp32, elements) == {"weights": fixture["weights"], "replay": fixture["replay"]}
    activations = json.loads((REPO / "validation/fixtures/activations/sd1.5/vae-decode-fused-256x256.json").read_text())
    assert fixture["replay"]["activation_peak_elements"] == activations["peak_elements"]  # LiveElements' count
