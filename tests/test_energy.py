"""Energy / latency / CO2e predictor: features from the exact counts, NNLS, leave-one-model-out,
reproducible shipped fit, predictions, warnings, CLI commands, bad input."""

from __future__ import annotations

import csv
import itertools
import json
import math
import runpy
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

import flopcalc
from flopcalc.cli.main import main
from flopcalc.energy_laws import laws
from flopcalc.energy_laws.features import padded_head_width, work_of
from flopcalc.energy_laws.fit import calibrate
from flopcalc.energy_laws.nnls import nnls
from flopcalc.energy_laws.predict import DEFAULT_GRID_G_PER_KWH, SHIPPED, EnergyError, load_coefficients
from flopcalc.energy_laws.records import COLUMNS, MeasurementError, read_csv
from flopcalc.engine.errors import FlopcalcError
from numeric_support import assert_same_numbers, assert_same_text

ROOT = Path(__file__).resolve().parents[1]
FIT_SCRIPT = ROOT / "validation" / "energy" / "fit_energy.py"
RECORDS = ROOT / "validation" / "energy" / "records.csv"


def _brute_nnls(a, b):
    best, best_x = math.inf, None
    n = a.shape[1]
    for k in range(n + 1):
        for cols in itertools.combinations(range(n), k):
            x = np.zeros(n)
            if cols:
                sol = np.linalg.lstsq(a[:, cols], b, rcond=None)[0]
                if (sol < 0).any():
                    continue
                x[list(cols)] = sol
            r = np.linalg.norm(a @ x - b)
            if r < best:
                best, best_x = r, x
    return best_x


def test_nnls_matches_an_exhaustive_search():
    rng = np.random.default_rng(7)
    for _ in range(100):
        a = rng.normal(size=(12, 4))
        b = rng.normal(size=12)
        np.testing.assert_allclose(nnls(a, b), _brute_nnls(a, b), atol=1e-9)


def test_work_is_the_estimates_exact_counts_per_item():
    for batch in (1, 4):
        report = flopcalc.estimate("sd1.5", steps=25, batch_size=batch)
        work = work_of(report)
        assert work.items == batch
        assert work.flops * batch == report.flops  # linear + attention + conv(+functional), torch convention
        assert work.total("elementwise") * batch == report.elementwise
        assert work.calls == 25 / batch  # one denoiser call per step for the whole batch (CFG batched)
        by_name = {c.component: c for c in report.components}
        for comp in work.components:
            t = by_name[comp.component].per_run
            runs = by_name[comp.component].runs
            assert comp.linear * batch == 2 * runs * t.linear
            assert comp.attention * batch == 2 * runs * t.attention
            assert comp.unfused_elementwise * batch == runs * (t.elementwise - 3 * t.scores)


def test_padded_attention_rounds_each_calls_head_width_up_to_a_flash_kernels():
    assert [padded_head_width(w) for w in (40, 64, 72, 88, 112, 128, 130, 256, 512)] == [
        64, 64, 96, 96, 128, 128, 160, 256, 512]
    dit = work_of(flopcalc.estimate("hunyuandit-v1.2"))  # 16 heads of 1408 / 16 = 88 (its tiny pooler aside)
    den = next(c for c in dit.components if c.role == "denoiser")
    assert den.attention_padded == pytest.approx(den.attention * 96 / 88, rel=1e-6)
    flux = next(c for c in work_of(flopcalc.estimate("flux-dev")).components if c.role == "denoiser")
    assert flux.attention_padded == flux.attention  # 128 wide: no padding
    sd = work_of(flopcalc.estimate("sd1.5"))  # head width 40, 80, 160 by level
    unet = next(c for c in sd.components if c.role == "denoiser")
    assert unet.attention < unet.attention_padded < unet.attention * 64 / 40


def test_leave_one_model_out_never_trains_on_the_held_out_model(monkeypatch):
    seen = []
    real = laws.FIT["linear"]

    def spy(samples, target):
        seen.append({s.label for s in samples})
        return real(samples, target)

    monkeypatch.setitem(laws.FIT, "linear", spy)
    samples = [laws.Sample(f"m{i}", "cal", 1e12 * (i + 1) * b, 0, 0, 1, True, 1, 1e15, 700, 10.0 * (i + 1), 1.0, b)
               for i in range(4) for b in (1, 2, 4)]
    held = laws.leave_one_model_out("linear", samples)
    assert len(held) == len(samples)
    fits = iter(seen)
    for label in sorted({s.label for s in samples}):
        for _ in laws.TARGETS:
            assert label not in next(fits)


def test_shipped_fit_is_reproduced(tmp_path):
    """Every output of fit_energy.py as shipped: the same structure and text, floats to a relative 1e-9 (OpenBLAS
    picks its kernels per CPU, so another machine's least squares may differ in the last bits)."""
    script = runpy.run_path(str(FIT_SCRIPT))
    outputs = script["build"](tmp_path / "records.csv")
    for path, text in outputs.items():
        shipped = path.read_text(encoding="utf-8")
        where = f"{path} differs: rerun validation/energy/fit_energy.py"
        if path.suffix == ".yaml":
            assert_same_numbers(yaml.safe_load(text), yaml.safe_load(shipped), where)
        elif path.suffix == ".json":
            assert_same_numbers(json.loads(text), json.loads(shipped), where)
        else:
            assert_same_text(text, shipped, where)


def test_shipped_calibrations_and_their_errors():
    doc = load_coefficients()
    cals = doc["calibrations"]
    assert {"h100-sxm/bf16/mlenergy-v3", "b200/bf16/mlenergy-v3"} <= set(cals)
    for key in ("h100-sxm/bf16/mlenergy-v3", "b200/bf16/mlenergy-v3"):
        errors = cals[key]["laws"]["opclass"]["errors"]
        assert len(cals[key]["models"]) >= 8
        assert errors["energy"]["median_pct"] <= 10 and errors["latency"]["median_pct"] <= 10  # issue 10's target
        assert errors["energy"]["max_pct"] <= 35 and errors["latency"]["max_pct"] <= 35
    for c in cals.values():
        assert all(v >= 0 for t in ("energy", "latency") for v in c["laws"]["opclass"]["coefficients"][t].values())


def test_interval_is_split_conformal_over_held_out_models():
    """Recomputed from energy_points.json alone: per calibration, law and target, each held-out model's
    largest |log(measured / predicted)|, and of n such scores the ⌈(n + 1)·0.9⌉-th smallest (the
    largest when that index passes n); the printed interval is the prediction × e^±h."""
    doc = load_coefficients()
    points = json.loads((ROOT / "flopcalc" / "data" / "energy_points.json").read_text(encoding="utf-8"))
    checked = 0
    for cal, c in doc["calibrations"].items():
        for law in laws.LAWS:
            for target, key in (("energy", "energy_j"), ("latency", "latency_s")):
                worst: dict[str, float] = {}
                for p in points:
                    if p["calibration"] == cal and p["law"] == law:
                        r = abs(math.log(p[key] / p[key + "_predicted"]))
                        worst[p["label"]] = max(worst.get(p["label"], 0.0), r)
                scores = sorted(worst.values())
                k = min(-(-(len(scores) + 1) * 9 // 10), len(scores))  # integer ceil((n + 1)·0.9)
                e = c["laws"][law]["errors"][target]
                assert e["models"] == len(scores) == len(c["models"])
                assert e["interval_log_halfwidth"] == pytest.approx(scores[k - 1], rel=1e-12)
                assert e["interval_log_halfwidth"] >= e["log_ratio_p90"]
                checked += 1
    assert checked == 6 * len(doc["calibrations"])
    assert laws.conformal_halfwidth([float(i) for i in range(1, 20)])[0] == 18.0  # n = 19: the 18th
    assert laws.conformal_halfwidth([3.0, 1.0, 2.0])[0] == 3.0
    r = flopcalc.energy("flux-dev", gpu="h100", steps=28)
    h = doc["calibrations"][r.calibration]["laws"][r.law]["errors"]
    for target, (lo, hi), mid in (("energy", r.energy_j_interval, r.energy_j),
                                  ("latency", r.latency_s_interval, r.latency_s)):
        assert hi / mid == pytest.approx(math.exp(h[target]["interval_log_halfwidth"]), rel=1e-12)
        assert lo / mid == pytest.approx(math.exp(-h[target]["interval_log_halfwidth"]), rel=1e-12)


def test_energy_api_prediction_and_dict():
    r = flopcalc.energy("flux-dev", gpu="H100 80GB HBM3", steps=28)
    assert r.calibration == "h100-sxm/bf16/mlenergy-v3" and r.law == "opclass" and not r.warnings
    p = r.to_dict()["prediction"]
    for key in ("energy_j", "energy_j_interval", "latency_s", "latency_s_interval", "co2e_g", "law", "calibration",
                "warnings"):
        assert key in p
    lo, hi = p["energy_j_interval"]
    assert lo < p["energy_j"] < hi
    assert p["co2e_g"] == pytest.approx(p["energy_j"] / 3.6e6 * DEFAULT_GRID_G_PER_KWH)
    assert sum(c.energy_j for c in r.components) == pytest.approx(r.energy_j)  # op-class law is a sum
    assert sum(c.latency_s for c in r.components) == pytest.approx(r.latency_s)
    with pytest.raises(AttributeError):
        r.energy_j = 0  # frozen
    more = flopcalc.energy("flux-dev", gpu="h100", steps=56)
    assert more.energy_j > 1.9 * r.energy_j  # the denoiser dominates: twice the steps, about twice the energy


def test_uncalibrated_gpu_is_flagged_and_its_interval_wider():
    cal = flopcalc.energy("sd3.5-large", gpu="h100", steps=28)
    other = flopcalc.energy("sd3.5-large", gpu="l40s", steps=28)
    assert any("has no calibration" in w and "datasheet ratio" in w for w in other.warnings)
    assert other.calibration == "h100-sxm/bf16/mlenergy-v3"  # the calibrated peak closest to the L40S's
    width = lambda r: r.energy_j_interval[1] / r.energy_j_interval[0]  # noqa: E731
    assert width(other) > width(cal)
    beta = load_coefficients()["datasheet_transfer"]["exponent"]
    assert other.latency_s == pytest.approx(cal.latency_s * (989.4 / 362.05) ** beta["latency"])
    assert other.energy_j == pytest.approx(cal.energy_j * ((989.4 / 700) / (362.05 / 350)) ** beta["energy"])
    assert flopcalc.energy("sd3.5-large", gpu="l40s", steps=28, law="loglog").law == "loglog"


def test_extrapolation_precision_and_multi_gpu_warnings():
    small = flopcalc.energy("sd1.5", gpu="h100", steps=25, height=256, width=256)
    assert any(w.startswith("extrapolating: flops per item") for w in small.warnings)
    assert any(w.startswith("extrapolating: elementwise vs flop time") for w in small.warnings)  # narrow, small
    half = flopcalc.energy("flux-dev", gpu="h100", precision="fp16", steps=28)
    assert half.calibration.startswith("h100-sxm/fp16") or any("fp16" in w for w in half.warnings)
    fp8 = flopcalc.energy("flux-dev", gpu="h100", precision="fp8", steps=28)
    assert any("unvalidated" in w for w in fp8.warnings)
    with pytest.raises(EnergyError, match="no fp8 tensor peak"):
        flopcalc.energy("flux-dev", gpu="a100", precision="fp8")
    one = flopcalc.energy("wan2.1", gpu="h100", vae_tiling=True)
    four = flopcalc.energy("wan2.1", gpu="h100", vae_tiling=True, num_gpus=4)
    assert four.energy_j > one.energy_j and four.latency_s < one.latency_s
    assert any("sequence-parallel" in w for w in four.warnings)


def test_bad_coefficients_and_grid(tmp_path):
    with pytest.raises(EnergyError, match="cannot read coefficients"):
        flopcalc.energy("sd1.5", gpu="h100", coefficients=str(tmp_path / "none.yaml"))
    bad = tmp_path / "bad.yaml"
    bad.write_text("calibrations: {}\n")
    with pytest.raises(EnergyError, match="no calibrations"):
        flopcalc.energy("sd1.5", gpu="h100", coefficients=str(bad))
    with pytest.raises(EnergyError, match="grid intensity"):
        flopcalc.energy("sd1.5", gpu="h100", grid_intensity=float("nan"))
    with pytest.raises(EnergyError, match="unknown law"):
        flopcalc.energy("sd1.5", gpu="h100", law="magic")
    old = yaml.safe_load(SHIPPED.read_text(encoding="utf-8"))  # a file fitted before the elementwise term
    for cal in old["calibrations"].values():
        for t in ("energy", "latency"):
            del cal["laws"]["opclass"]["coefficients"][t]["elementwise"]
    stale = tmp_path / "stale.yaml"
    stale.write_text(yaml.safe_dump(old))
    with pytest.raises(EnergyError, match="malformed.*energy-fit"):
        flopcalc.energy("sd1.5", gpu="h100", coefficients=str(stale))


def test_cli_energy_formats(capsys):
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
    assert "90% interval" in out and "CO2e" in out and "transformer" in out
    assert main(["energy", "flux-dev", "--gpu", "nope"]) == 2
    assert "unknown GPU" in capsys.readouterr().err


def test_energy_accepts_the_estimate_options(capsys):
    assert main(["energy", "cogvideox-2b", "--gpu", "b200", "--num-frames", "49", "--vae-tiling",
                 "--guidance-scale", "6", "--batch-size", "2", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["items_per_batch"] == 2
    with pytest.raises(SystemExit):
        main(["energy", "sd1.5", "--gpu", "h100", "--per-block"])  # only shapes the FLOP table


def test_energy_fit_round_trip_and_refusals(tmp_path, capsys):
    out = tmp_path / "c.yaml"
    assert main(["energy-fit", str(RECORDS), "--out", str(out)]) == 0
    mine = yaml.safe_load(out.read_text())
    shipped = yaml.safe_load(SHIPPED.read_text())
    mine.pop("source"), shipped.pop("source")
    assert_same_numbers(mine, shipped)
    assert "leave-one-model-out" in capsys.readouterr().out
    assert main(["energy", "sd1.5", "--gpu", "h100", "--coefficients", str(out)]) == 0
    # too thin: two models only
    thin = tmp_path / "thin.csv"
    with RECORDS.open() as src, thin.open("w") as dst:
        rows = list(csv.DictReader(src))
        w = csv.DictWriter(dst, fieldnames=COLUMNS)
        w.writeheader()
        keep = sorted({r["label"] for r in rows if r["gpu"] == "h100-sxm"})[:2]
        w.writerows(r for r in rows if r["label"] in keep and r["num_gpus"] == "1")
    with pytest.raises(MeasurementError, match="too thin to fit"):
        calibrate(read_csv(thin))
    assert main(["energy-fit", str(thin), "--out", str(tmp_path / "x.yaml")]) == 2
    assert "too thin" in capsys.readouterr().err
    broken = tmp_path / "broken.csv"
    broken.write_text("model,gpu,energy_j,latency_s\nsd1.5,h100,-3,1\n")
    with pytest.raises(MeasurementError, match="line 2: energy_j must be positive"):
        read_csv(broken)
    (tmp_path / "nocols.csv").write_text("a,b\n1,2\n")
    with pytest.raises(FlopcalcError, match="missing column"):
        read_csv(tmp_path / "nocols.csv")


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


def test_energy_fit_reads_mlenergy_files_with_a_model_map(tmp_path, capsys):
    data = ROOT / "validation" / "energy"
    out = tmp_path / "c.yaml"
    assert main(["energy-fit", str(data / "data" / "mlenergy_v3_text-to-image.json"), "--model-map",
                 str(data / "models.yaml"), "--out", str(out)]) == 0
    doc = yaml.safe_load(out.read_text())
    assert set(doc["calibrations"]) == {"h100-sxm/bf16/mlenergy-v3", "b200/bf16/mlenergy-v3"}
    assert main(["energy-fit", str(data / "data" / "mlenergy_v2_diffusion.csv"), "--out", str(out)]) == 2
    assert "--model-map" in capsys.readouterr().err
    partial = tmp_path / "map.yaml"
    partial.write_text("black-forest-labs/FLUX.1-dev: {source: flux-dev}\n")
    assert main(["energy-fit", str(data / "data" / "mlenergy_v3_text-to-image.json"), "--model-map", str(partial),
                 "--out", str(out)]) == 2
    assert "is not in the model map" in capsys.readouterr().err


def test_docs_error_table_is_the_fit_scripts():
    results = (ROOT / "validation" / "energy" / "RESULTS.md").read_text(encoding="utf-8")
    docs = (ROOT / "docs" / "energy.md").read_text(encoding="utf-8")
    rows = [line for line in results.splitlines() if "/mlenergy-" in line and line.count("|") == 7]
    assert len(rows) == 12
    for line in rows:
        assert line in docs, f"docs/energy.md lacks {line!r}: copy the table from validation/energy/RESULTS.md"


@pytest.mark.parametrize("argv, message", [
    (["energy", "no-such-model", "--gpu", "h100"], "error"),
    (["energy", "sd1.5", "--gpu", "h100", "--grid-intensity", "-1"], "grid intensity"),
    (["energy", "sd1.5", "--gpu", "a100", "--precision", "fp8"], "no fp8 tensor peak"),
    (["energy", "sd1.5", "--gpu", "h100", "--coefficients", str(ROOT / "README.md")], "not YAML"),
    (["energy", "sd1.5", "--gpu", "h100", "--coefficients", str(ROOT / "flopcalc" / "data" / "gpus.yaml")],
     "no calibrations"),
    (["energy", str(ROOT / "model_cards" / "sd1.5" / "text_encoder" / "config.json"), "--gpu", "h100", "--law",
      "loglog"], "needs an output size"),
    (["energy-fit", "/nonexistent.csv", "--out", "/tmp/x.yaml"], "no such file"),
    (["energy-fit", str(ROOT / "README.md"), "--out", "/tmp/x.yaml"], "not a records CSV"),
])
def test_energy_cli_errors_are_one_line(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("flopcalc: error:") and message in err and err.count("\n") == 1


def test_energy_of_a_bare_text_encoder_config():
    r = flopcalc.energy(str(ROOT / "model_cards" / "sd1.5" / "text_encoder" / "config.json"), gpu="h100")
    assert r.energy_j > 0 and any("extrapolating" in w for w in r.warnings)


def test_gpu_counts_are_bounded():
    with pytest.raises(FlopcalcError, match="budget of 1048576 GPUs"):
        flopcalc.energy("sd1.5", gpu="h100", num_gpus=10**11)
    with pytest.raises(FlopcalcError, match="--num-gpus must be a positive integer"):
        flopcalc.energy("sd1.5", gpu="h100", num_gpus=0)


def test_the_counts_notes_travel_with_the_prediction(capsys):
    """What the count could not include (HiDream's CLIPs: no config.json) is said beside the energy it feeds."""
    result = flopcalc.energy("hidream-i1-full", gpu="h100-sxm")
    assert result.count_notes == flopcalc.estimate("hidream-i1-full").notes
    assert sum("config.json is not there; not counted" in n for n in result.count_notes) == 2
    assert result.to_dict()["count_notes"] == list(result.count_notes)
    assert main(["energy", "hidream-i1-full", "--gpu", "h100-sxm"]) == 0
    assert "note: text_encoder (CLIPTextModelWithProjection): listed in model_index.json" in capsys.readouterr().out
