"""Predictions: physics on every GPU × precision × bundled card, one default stack everywhere, the calibration a
prediction uses said aloud, memory- and offload-aware, multi-GPU within what the parallel method allows, and the
command's output and errors."""

from __future__ import annotations

import csv
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

import flopcalc
from flopcalc.cli.main import main
from flopcalc.energy_laws import backbone
from flopcalc.energy_laws.predict import DEFAULT_GRID_G_PER_KWH, EnergyError, load_coefficients, predict
from flopcalc.engine.cards import list_cards
from flopcalc.engine.errors import FlopcalcError
from flopcalc.hardware.gpus import gpus

ROOT = Path(__file__).resolve().parents[1]
TEXT_ENCODER = str(ROOT / "model_cards" / "sd1.5" / "text_encoder" / "config.json")


def _precisions(g) -> list[tuple[str, bool]]:
    out = [(p, False) for p in ("bf16", "fp16", "fp8") if p in g.peak_flops]
    out.append(("fp32", False))
    if "tf32" in g.peak_flops:
        out.append(("fp32", True))
    return out


def _check_physics(r, g, where: str) -> None:
    """No point or interval end beats the GPU: latency ≥ the FLOPs at the fastest dense peak the GPU has (an
    independent floor), ≥ the bound of the dtypes run; power ≤ TDP and ≥ idle, per GPU, at every end."""
    n = r.num_gpus
    fastest = max(g.peak_flops.values())
    lo, hi = r.latency_s_interval
    elo, ehi = r.energy_j_interval
    assert lo <= r.latency_s <= hi and elo <= r.energy_j <= ehi, where
    for t in (lo, r.latency_s, hi):
        assert t * fastest * n >= r.flops_per_item * (1 - 1e-9), where
        assert t >= r.bounds.min_latency_s * (1 - 1e-12), where
    for e, t in ((elo, lo), (r.energy_j, r.latency_s), (ehi, hi)):
        assert e <= g.tdp_w * n * t * (1 + 1e-9), f"{where}: {e / t:.1f} W above TDP {g.tdp_w} W × {n}"
        assert e >= g.idle_w * n * t * (1 - 1e-9), f"{where}: below idle"
    assert all(math.isfinite(v) for v in (lo, hi, elo, ehi, r.co2e_g, *r.co2e_g_interval)), where


def test_no_prediction_breaks_physics_on_any_gpu_precision_or_card():
    doc = load_coefficients()
    checked = 0
    for card in list_cards():
        report = flopcalc.estimate(card.name)
        for g in gpus():
            for precision, tf32 in _precisions(g):
                try:
                    r = predict(report, gpu=g.key, precision=precision, tf32=tf32, coefficients=doc)
                except EnergyError as exc:
                    pytest.fail(f"{card.name} on {g.key} {precision}: {exc}")
                _check_physics(r, g, f"{card.name} on {g.key} at {precision}{' tf32' if tf32 else ''}")
                checked += 1
    assert checked > 60 * 40 * 3


@pytest.mark.parametrize("card, num_gpus", [("flux-dev", 2), ("flux-dev", 8), ("hunyuanvideo", 8),
                                            ("wan2.1", 4), ("sd3.5-large", 16)])
def test_multi_gpu_predictions_stay_physical(card, num_gpus):
    report = flopcalc.estimate(card)
    for g in gpus():
        r = predict(report, gpu=g.key, num_gpus=num_gpus)
        _check_physics(r, g, f"{card} on {num_gpus} × {g.key}")


def test_the_peaks_each_precision_runs_at_follow_pytorchs_defaults():
    from flopcalc.hardware.gpus import gpu

    h100 = gpu("h100-sxm")
    p = backbone.peaks(h100, "fp32")  # matmuls on the CUDA cores, cuDNN convolutions in TF32
    assert p.dtypes == ("fp32", "fp32", "tf32")
    assert backbone.peaks(h100, "fp32", tf32=True).dtypes == ("tf32", "tf32", "tf32")
    assert backbone.peaks(h100, "fp8").dtypes == ("fp8", "bf16", "bf16")
    assert flopcalc.energy("sd1.5", gpu="t4").precision == "fp16"  # no bf16 on a T4
    with pytest.raises(FlopcalcError, match="no TF32"):
        backbone.peaks(gpu("v100-sxm2-32gb"), "fp32", tf32=True)
    with pytest.raises(FlopcalcError, match="no fp8 peak"):
        backbone.peaks(gpu("a100-sxm-40gb"), "fp8")
    slow = flopcalc.energy("sdxl", gpu="a100", precision="fp32")
    fast = flopcalc.energy("sdxl", gpu="a100", precision="fp32", tf32=True)
    assert fast.latency_s < slow.latency_s


def test_one_gpu_family_one_story():
    """Two precisions with the same peak give the same time on one stack; sibling parts differ by their specs
    alone (the same default stack on each); a bigger power budget or peak is never slower."""
    report = flopcalc.estimate("flux-dev")
    t = lambda gpu, precision="bf16", **kw: predict(report, gpu=gpu, precision=precision, **kw)  # noqa: E731
    assert t("h100-sxm").latency_s == t("h100-sxm", "fp16").latency_s
    assert t("h100-sxm").stack == t("a100-sxm-40gb").stack == t("a100-sxm-80gb").stack == t("rtx4090").stack
    assert t("a100-sxm-80gb").latency_s <= t("a100-sxm-40gb").latency_s  # same peak and TDP, more bandwidth
    assert t("a100-pcie-40gb").latency_s > t("a100-sxm-40gb").latency_s  # 250 W against 400 W
    assert t("b200", "fp32").latency_s < t("h100-sxm", "fp32").latency_s
    assert t("h100-sxm", "fp8").latency_s <= t("h100-sxm").latency_s
    assert t("h100-sxm", "fp32").latency_s > t("h100-sxm").latency_s
    sd = flopcalc.estimate("sdxl")
    assert predict(sd, gpu="h100-sxm", stack="diffusers").latency_s == predict(sd, gpu="h100-sxm").latency_s


def test_the_stack_is_said_and_chosen():
    r = flopcalc.energy("flux-dev", gpu="h100-sxm", steps=28)
    assert r.stack == "xdit" and "xDiT" in r.stack_description
    d = flopcalc.energy("flux-dev", gpu="h100-sxm", steps=28, stack="diffusers")
    assert d.stack == "diffusers" and d.calibration == "h100-sxm/fp16/diffusers"
    assert flopcalc.energy("sd1.5", gpu="h100-sxm").stack == "diffusers"  # xDiT runs no UNet
    with pytest.raises(EnergyError, match="runs transformer denoisers, not a unet"):
        flopcalc.energy("sd1.5", gpu="h100-sxm", stack="xdit")
    with pytest.raises(EnergyError, match="--stack 'compiled'"):
        flopcalc.energy("sd1.5", gpu="h100-sxm", stack="compiled")


def test_an_alias_says_which_part_it_picked():
    r = flopcalc.energy("flux-dev", gpu="a100")
    assert r.gpu == "a100-sxm-40gb"
    assert any(w.startswith("alias a100 → NVIDIA A100") and "other parts" in w for w in r.warnings)
    assert not any(w.startswith(("alias", "key")) for w in flopcalc.energy("flux-dev", gpu="a100-sxm-40gb").warnings)


def test_uncalibrated_gpus_are_transferred_said_and_wider():
    cal = flopcalc.energy("sd3.5-large", gpu="h100-sxm", steps=28)
    other = flopcalc.energy("sd3.5-large", gpu="l40s", steps=28)
    assert any("has no xdit calibration" in w for w in other.warnings)
    assert any(w.startswith("transferred: leave-one-GPU-out error") for w in other.warnings)
    width = lambda r: r.latency_s_interval[1] / r.latency_s_interval[0]  # noqa: E731
    assert width(other) > width(cal)
    with pytest.raises(EnergyError, match="does not move"):
        flopcalc.energy("sd3.5-large", gpu="l40s", steps=28, law="loglog")


def test_extrapolation_widens_the_interval():
    inside = flopcalc.energy("sd1.5", gpu="h100-sxm")
    small = flopcalc.energy("sd1.5", gpu="h100-sxm", height=128, width=128)
    assert any(w.startswith("extrapolating: flops per item") for w in small.warnings)
    width = lambda r: math.log(r.energy_j_interval[1] / r.energy_j_interval[0])  # noqa: E731
    assert width(small) > width(inside)


def test_energy_knows_whether_the_run_fits_and_what_offload_costs():
    big = flopcalc.energy("flux2-dev", gpu="rtx4060")
    assert big.fits is False
    assert any("does not fit" in w for w in big.warnings)
    mem = flopcalc.memory("flux2-dev", gpu="rtx4060", offload="sequential")
    moved = flopcalc.energy("flux2-dev", gpu="rtx4060", offload="sequential")
    from flopcalc.hardware.gpus import gpu

    g = gpu("rtx4060")
    assert moved.fits is mem.fits
    assert moved.offload_s == pytest.approx(mem.transfer_bytes_per_item / g.host_link_bytes_per_s)
    assert moved.offload_s > 0 and moved.latency_s >= big.latency_s + moved.offload_s * 0.999
    fits = flopcalc.energy("flux-dev", gpu="h100-sxm")
    assert fits.fits is True and fits.offload_s == 0


def test_multi_gpu_takes_only_the_degrees_the_model_allows():
    one = flopcalc.energy("wan2.1", gpu="h100-sxm", vae_tiling=True)
    four = flopcalc.energy("wan2.1", gpu="h100-sxm", vae_tiling=True, num_gpus=4)
    assert four.energy_j > one.energy_j and four.latency_s < one.latency_s
    assert any("sequence-parallel" in w for w in four.warnings)
    many = flopcalc.energy("flux-dev", gpu="h100-sxm", num_gpus=48)
    assert any("beyond the measured" in w for w in many.warnings)
    with pytest.raises(FlopcalcError, match="attention heads"):
        flopcalc.energy("flux-dev", gpu="h100-sxm", num_gpus=7)
    with pytest.raises(FlopcalcError, match="budget of 1048576 GPUs"):
        flopcalc.energy("sd1.5", gpu="h100", num_gpus=10**11)
    with pytest.raises(FlopcalcError, match="--num-gpus must be a positive integer"):
        flopcalc.energy("sd1.5", gpu="h100", num_gpus=0)


def test_the_prediction_document_keeps_its_fields_and_adds_stack_bounds_fits():
    r = flopcalc.energy("flux-dev", gpu="H100 SXM5 80GB", steps=28)
    p = r.to_dict()["prediction"]
    for key in ("energy_j", "energy_j_interval", "latency_s", "latency_s_interval", "co2e_g", "law", "calibration",
                "stack", "bounds", "fits", "warnings"):
        assert key in p, key
    assert set(p["bounds"]) >= {"min_latency_s", "max_power_w"}
    lo, hi = p["energy_j_interval"]
    assert lo < p["energy_j"] < hi
    assert p["co2e_g"] == pytest.approx(p["energy_j"] / 3.6e6 * DEFAULT_GRID_G_PER_KWH)
    assert sum(c.energy_j for c in r.components) == pytest.approx(r.energy_j)
    assert sum(c.latency_s for c in r.components) == pytest.approx(r.latency_s)
    with pytest.raises(AttributeError):
        r.energy_j = 0  # frozen
    more = flopcalc.energy("flux-dev", gpu="h100-sxm", steps=56)
    assert more.energy_j > 1.9 * r.energy_j  # the denoiser dominates: twice the steps, about twice the energy


def test_cli_formats(capsys):
    assert main(["energy", "flux-dev", "--gpu", "h100", "--steps", "28", "--format", "json", "--items", "10",
                 "--grid-intensity", "100"]) == 0
    d = json.loads(capsys.readouterr().out)
    p = d["prediction"]
    assert p["co2e_g"] == pytest.approx(p["energy_j"] / 3.6e6 * 100) and p["items"] == 10
    assert p["gpu_hours"] == pytest.approx(10 * p["latency_s"] / 3600)
    assert main(["energy", "flux-dev", "--gpu", "h100", "--steps", "28", "--format", "csv"]) == 0
    rows = list(csv.DictReader(capsys.readouterr().out.splitlines()))
    assert rows[-1]["component"] == "total" and float(rows[-1]["energy_j"]) == pytest.approx(p["energy_j"])
    assert main(["energy", "flux-dev", "--gpu", "h100", "--steps", "28"]) == 0
    out = capsys.readouterr().out
    for words in ("90% interval", "CO2e", "transformer", "stack xdit", "physics: latency ≥", "fits on the GPU",
                  "nested leave-one-model-out", "alias h100 → NVIDIA H100 SXM5 80GB"):
        assert words in out, words


def test_energy_plot(tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "e.png"
    assert main(["energy-plot", "--out", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["energy-plot", "--out", str(tmp_path / "e.txt")]) == 2
    assert main(["energy-plot", "--out", str(tmp_path / "missing" / "e.png")]) == 2


def test_energy_numeric_path_imports_neither_sympy_nor_hub():
    code = ("import sys, flopcalc; flopcalc.energy('flux-dev', gpu='h100');"
            "print(sorted(m for m in ('sympy', 'huggingface_hub') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip() == "[]", proc.stderr


@pytest.mark.parametrize("argv, message", [
    (["energy", "no-such-model", "--gpu", "h100"], "error"),
    (["energy", "sd1.5", "--gpu", "nope"], "unknown GPU"),
    (["energy", "sd1.5", "--gpu", "h100", "--grid-intensity", "-1"], "grid intensity"),
    (["energy", "sd1.5", "--gpu", "a100", "--precision", "fp8"], "no fp8 peak"),
    (["energy", "sd1.5", "--gpu", "v100", "--precision", "fp32", "--tf32"], "no TF32"),
    (["energy", "sd1.5", "--gpu", "h100", "--coefficients", str(ROOT / "README.md")], "not YAML"),
    (["energy", "sd1.5", "--gpu", "h100", "--coefficients", str(ROOT / "flopcalc" / "data" / "gpus.yaml")],
     "no calibrations"),
    (["energy", TEXT_ENCODER, "--gpu", "h100", "--law", "loglog"], "needs an output size"),
    (["energy", "sd1.5", "--gpu", "h100", "--width", "-5"], "expected a positive integer"),
    (["energy", "flux-dev", "--gpu", "h100", "--num-gpus", "7"], "attention heads"),
    (["energy", "sd1.5", "--gpu", "h100", "--offload", "model", "--measure"], "--offload or --block-swap with --measure"),
    (["energy-fit", "/nonexistent.csv", "--out", "/tmp/x.yaml"], "no such file"),
    (["energy-fit", str(ROOT / "README.md"), "--out", "/tmp/x.yaml"], "not a records CSV"),
])
def test_energy_cli_errors_are_one_line(argv, message, capsys):
    with pytest.raises(SystemExit) if message.startswith("expected") else _nothing():
        assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err
    if not message.startswith("expected"):
        assert err.startswith("flopcalc: error:") and err.count("\n") == 1


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_energy_of_a_bare_text_encoder_config():
    r = flopcalc.energy(TEXT_ENCODER, gpu="h100")
    assert r.energy_j > 0 and any("extrapolating" in w for w in r.warnings)


def test_the_counts_notes_travel_with_the_prediction(capsys):
    """What the count could not include (HiDream's CLIPs: no config.json) is said beside the energy it feeds."""
    result = flopcalc.energy("hidream-i1-full", gpu="h100-sxm")
    assert result.count_notes == flopcalc.estimate("hidream-i1-full").notes
    assert sum("config.json is not there; not counted" in n for n in result.count_notes) == 2
    assert result.to_dict()["count_notes"] == list(result.count_notes)
    assert main(["energy", "hidream-i1-full", "--gpu", "h100-sxm"]) == 0
    assert "note: text_encoder (CLIPTextModelWithProjection): listed in model_index.json" in capsys.readouterr().out
