"""The energy and latency laws and their calibration: features from the exact counts, the bounded fits, nested
leave-one-model-out (the held-out model plays no part in any choice), split-conformal intervals, the transfer to
other GPUs, the reproducible shipped fit, and energy-fit inputs that cannot fool it."""

from __future__ import annotations

import csv
import itertools
import json
import math
import runpy
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import yaml

import flopcalc
from flopcalc.cli.main import main
from flopcalc.energy_laws import fit as fitting
from flopcalc.energy_laws import laws
from flopcalc.energy_laws.features import padded_head_width, work_of
from flopcalc.energy_laws.fit import calibrate, transferred
from flopcalc.energy_laws.mlenergy import STACKS, load_model_map, read_mlenergy
from flopcalc.energy_laws.nnls import nnls
from flopcalc.energy_laws.predict import SHIPPED, EnergyError, law_errors, load_coefficients
from flopcalc.energy_laws.records import COLUMNS, MeasurementError, read_csv
from flopcalc.engine.errors import FlopcalcError
from numeric_support import assert_same_numbers, assert_same_text

ROOT = Path(__file__).resolve().parents[1]
ENERGY = ROOT / "validation" / "energy"
FIT_SCRIPT = ENERGY / "fit_energy.py"
RECORDS = ENERGY / "records.csv"


# --------------------------------------------------------------------------- the solvers


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


def test_box_least_squares_is_the_best_point_of_the_box():
    """Power fractions lie in [0, 1]: the solver's residual is no larger than any point of a fine grid of the box."""
    rng = np.random.default_rng(3)
    grid = np.array(list(itertools.product(np.linspace(0, 1, 21), repeat=3)))
    for _ in range(30):
        x = rng.uniform(0, 1, size=(15, 3))
        y = x @ rng.uniform(-0.5, 1.5, size=3) + rng.normal(scale=0.05, size=15)
        sol = np.array(laws.box_least_squares(x, y))
        assert ((sol >= -1e-12) & (sol <= 1 + 1e-12)).all()
        best = min(np.linalg.norm(x @ g - y) for g in grid)
        assert np.linalg.norm(x @ sol - y) <= best + 1e-9


# --------------------------------------------------------------------------- features


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


def test_a_pipeline_that_runs_guidance_passes_separately_makes_a_call_per_pass():
    """Wan's __call__ runs the conditional and the unconditional forward one after the other
    (pipeline_wan.py: ``self.transformer(...)`` twice per step); SD concatenates them into one batch."""
    wan = flopcalc.estimate("wan2.1", steps=10, guidance_scale=5.0)
    assert not wan.batched_passes and wan.passes == 2
    assert work_of(wan).calls == 20
    sd = flopcalc.estimate("sd1.5", steps=10)
    assert sd.batched_passes and work_of(sd).calls == 10


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


# --------------------------------------------------------------------------- validation cannot leak


def _synthetic(models: int = 5, seed: int = 0) -> list[laws.Sample]:
    """Records of a made-up GPU whose times follow the op-class law with noise per model."""
    rng = np.random.default_rng(seed)
    out = []
    for m in range(models):
        scale, bias = rng.uniform(0.5, 5), rng.normal(scale=0.05)
        for items in (1, 2, 4):
            lin, att, conv = scale * 1e14 * rng.uniform(0.5, 1.5, 3) * (m % 3 + 1)
            s = laws.Sample(f"m{m}", "gpu/bf16/x", lin, att, att * 1.1, conv, 20 / items, 5000 / items,
                            2e9 / items, 4e10, items, True, 1e6, 1e15, 1e15, 1e15, 3e12, 700, 70, peak_16bit=1e15)
            t = (lin / 0.6 + att * 1.1 / 0.4 + conv / 0.5) / 1e15 + 0.01 * s.calls + 4e10 / 3e12 * 3
            t *= math.exp(bias)
            out.append(replace(s, latency=t, energy=t * (70 + 600 * 0.9)))
    return out


def test_nested_validation_never_lets_the_held_out_model_choose_or_fit():
    """Nested: a held-out model's prediction is the same whatever its own measurements say (its terms are chosen
    and fitted on the other models only); the plain figure too (terms fixed beforehand)."""
    samples = _synthetic()
    terms = laws.TERM_SETS[5]
    base = fitting.validate_opclass(samples, terms)["held_out"]
    poisoned = [replace(s, latency=s.latency * 50, energy=s.energy * 0.01) if s.label == "m2" else s
                for s in samples]
    again = fitting.validate_opclass(poisoned, terms)["held_out"]
    for (s, p), (s2, p2) in zip(base, again):
        assert s.label == s2.label
        if s.label == "m2":
            assert p == p2, "the held-out model's own measurements moved its prediction"
        else:
            assert p != p2  # the poisoned model is in these folds' training data
    chosen = []
    real = fitting.choose_terms

    def spy(train):
        chosen.append(frozenset(s.label for s in train))
        return real(train)

    fitting.choose_terms, saved = spy, fitting.choose_terms
    try:
        fitting.validate_opclass(samples, terms)
    finally:
        fitting.choose_terms = saved
    labels = {s.label for s in samples}
    assert sorted(len(labels - c) for c in chosen) == [1] * len(labels)  # each fold chooses without its model
    assert {next(iter(labels - c)) for c in chosen} == labels


def test_term_choice_and_fitted_coefficients_stay_physical():
    samples = _synthetic(seed=4)
    terms = fitting.choose_terms(samples)
    assert terms in laws.TERM_SETS
    fit = laws.fit_opclass(samples, terms)
    assert all(fit.time[k] >= 1 for k in laws.COMPUTE)  # no op class faster than its dense peak
    assert all(fit.time[k] >= 0 for k in laws.OPTIONAL_TERMS)
    assert all(0 <= fit.power[g] <= 1 for g in laws.POWER_GROUPS)  # between idle and TDP
    for s in samples:
        assert fit.latency(s) >= s.min_latency
        assert s.idle <= fit.mean_power(s) <= s.tdp


def test_conformal_half_width_is_the_rank_of_n_plus_one():
    assert laws.conformal_halfwidth([float(i) for i in range(1, 20)])[0] == 18.0  # n = 19: the 18th
    assert laws.conformal_halfwidth([3.0, 1.0, 2.0])[0] == 3.0  # too few for a quantile: the worst
    assert laws.conformal_halfwidth([float(i) for i in range(1, 11)])[0] == 10.0  # n = 10: the 10th


# --------------------------------------------------------------------------- the shipped fit


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


def test_shipped_calibrations_report_plain_and_nested_errors():
    doc = load_coefficients()
    cals = doc["calibrations"]
    assert set(doc["stacks"]) == {"xdit", "diffusers"}
    assert {c["stack"] for c in cals.values()} == {"xdit", "diffusers"}
    for key, c in cals.items():
        assert len(c["models"]) >= 8 and c["records"] >= len(c["models"])
        errors = c["opclass"]["errors"]
        for target in laws.TARGETS:
            plain, nested = errors["plain"][target], errors["nested"][target]
            assert plain["models"] == nested["models"] == len(c["models"])
            assert nested["median_pct"] <= 15, (key, target)  # the honest figure the intervals come from
            assert nested["interval_log_halfwidth"] >= nested["log_ratio_p90"] > 0
        assert law_errors(c) is errors["nested"]
        fit = laws.OpClassFit.from_dict(c["opclass"])
        assert all(fit.time[k] >= 1 for k in laws.COMPUTE) and all(0 <= v <= 1 for v in fit.power.values())
    tr = doc["transfer"]
    assert 0 <= tr["gamma"] <= 2 and set(tr["held_out_gpu"]) == set(cals)
    assert tr["errors"]["latency"]["models"] >= 10


def test_interval_is_split_conformal_over_nested_held_out_models():
    """Recomputed from energy_points.json alone: per calibration and target, each held-out model's largest
    |log(measured / predicted)|, and of n such scores the ⌈(n + 1)·0.9⌉-th smallest (the largest when that index
    passes n); a prediction inside the fitted range prints the point × e^±h."""
    doc = load_coefficients()
    points = json.loads((ROOT / "flopcalc" / "data" / "energy_points.json").read_text(encoding="utf-8"))
    assert {p["law"] for p in points} == {"opclass"}
    for cal, c in doc["calibrations"].items():
        for target, key in (("energy", "energy_j"), ("latency", "latency_s")):
            worst: dict[str, float] = {}
            for p in points:
                if p["calibration"] == cal:
                    r = abs(math.log(p[key] / p[key + "_predicted"]))
                    worst[p["label"]] = max(worst.get(p["label"], 0.0), r)
            scores = sorted(worst.values())
            k = min(-(-(len(scores) + 1) * 9 // 10), len(scores))  # integer ceil((n + 1)·0.9)
            e = law_errors(c)[target]
            assert e["models"] == len(scores) == len(c["models"])
            assert e["interval_log_halfwidth"] == pytest.approx(scores[k - 1], rel=1e-12)
    r = flopcalc.energy("flux-dev", gpu="h100-sxm", steps=28)
    assert not [w for w in r.warnings if "extrapolating" in w or "held" in w]
    h = law_errors(doc["calibrations"][r.calibration])
    for target, (lo, hi), mid in (("energy", r.energy_j_interval, r.energy_j),
                                  ("latency", r.latency_s_interval, r.latency_s)):
        assert hi / mid == pytest.approx(math.exp(h[target]["interval_log_halfwidth"]), rel=1e-12)
        assert lo / mid == pytest.approx(math.exp(-h[target]["interval_log_halfwidth"]), rel=1e-12)


def test_transfer_keeps_efficiencies_physical_and_a_faster_dtype_never_slower():
    doc = load_coefficients()
    cal = doc["calibrations"]["h100-sxm/bf16/xdit"]
    fit = laws.OpClassFit.from_dict(cal["opclass"])
    work = work_of(flopcalc.estimate("flux-dev"))
    ref = fitting.sample_of(work, "h100-sxm", "bf16", "x")
    gamma = doc["transfer"]["gamma"]
    for gpu, precision in (("l4", "bf16"), ("rtx4060", "bf16"), ("h100-sxm", "fp8"), ("h100-sxm", "fp32"),
                           ("b200", "fp32"), ("mi300x", "bf16")):
        target = fitting.sample_of(work, gpu, precision, "x")
        moved = transferred(fit, ref, target, gamma)
        assert all(moved.time[k] >= 1 for k in laws.COMPUTE), (gpu, precision)
        assert moved.latency(target) >= target.min_latency
        assert {k: moved.time[k] for k in laws.OPTIONAL_TERMS} == {k: fit.time[k] for k in laws.OPTIONAL_TERMS}
    fp8 = fitting.sample_of(work, "h100-sxm", "fp8", "x")
    assert transferred(fit, ref, fp8, gamma).latency(fp8) <= fit.latency(ref)
    assert transferred(fit, ref, ref, gamma) == fit


# --------------------------------------------------------------------------- energy-fit inputs


def _write_records(path: Path, rows: list[dict]) -> Path:
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows(rows)
    return path


def _shipped_rows() -> list[dict]:
    with RECORDS.open(newline="") as fh:
        return list(csv.DictReader(fh))


def test_models_are_counted_by_what_is_counted_not_by_the_free_text_label(tmp_path):
    rows = [r for r in _shipped_rows() if r["gpu"] == "h100-sxm" and r["num_gpus"] == "1"
            and r["model"] == "flux-dev"][:3]
    relabelled = [{**r, "label": f"my model {i}"} for i, r in enumerate(rows)]
    with pytest.raises(MeasurementError, match="too thin to fit"):
        calibrate(read_csv(_write_records(tmp_path / "three-labels.csv", relabelled)))


@pytest.mark.parametrize("column, value, message", [
    ("energy_j", "-3", "energy_j must be positive"),
    ("energy_j", "lots", "energy_j must be a positive number"),
    ("energy_j", "nan", "energy_j must be positive and finite"),
    ("energy_j", "1e400", "energy_j must be positive and finite"),
    ("latency_s", "", "latency_s must be a positive number"),
    ("precision", "int3", "precision must be one of"),
    ("batch_size", "0", "batch_size must be positive"),
    ("gpu", "a toaster", "unknown GPU"),
    ("width", "-512", "width must be positive"),
])
def test_every_malformed_record_is_one_line_naming_file_and_line(tmp_path, capsys, column, value, message):
    rows = _shipped_rows()[:4]
    rows[2] = {**rows[2], column: value}
    path = _write_records(tmp_path / "bad.csv", rows)
    with pytest.raises(MeasurementError, match=message) as info:
        read_csv(path)
    assert str(info.value).startswith(f"{path}:4: ")
    assert main(["energy-fit", str(path), "--out", str(tmp_path / "c.yaml")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{path}:4" in err


def _v3_with(tmp_path: Path, **changes) -> Path:
    doc = json.loads((ENERGY / "data" / "mlenergy_v3_text-to-image.json").read_text(encoding="utf-8"))
    doc["configurations"] = doc["configurations"][:3]
    for key, value in changes.items():
        if value is None:
            del doc["configurations"][1][key]
        else:
            doc["configurations"][1][key] = value
    path = tmp_path / "v3.json"
    path.write_text(json.dumps(doc, indent=1), encoding="utf-8")
    return path


@pytest.mark.parametrize("changes, message", [
    ({"energy_per_image_joules": -1.0}, "energy_per_image_joules must be positive"),
    ({"energy_per_image_joules": "high"}, "energy_per_image_joules must be a positive number"),
    ({"energy_per_image_joules": float("nan")}, "energy_per_image_joules must be positive and finite"),
    ({"batch_latency_s": None}, "batch_latency_s must be a positive number"),
    ({"weight_precision": "int4"}, "precision must be one of"),
    ({"batch_size": 0}, "batch_size must be positive"),
])
def test_every_malformed_mlenergy_record_is_one_line_naming_file_and_line(tmp_path, changes, message):
    path = _v3_with(tmp_path, **changes)
    opening = [i for i, text in enumerate(path.read_text().splitlines(), start=1) if text.strip() == "{"]
    second = opening[2]  # the document's brace, then one per configuration: the changed one is the second
    with pytest.raises(MeasurementError, match=message) as info:
        read_mlenergy(path, load_model_map(ENERGY / "models.yaml"), ENERGY)
    assert str(info.value).startswith(f"{path}:{second}: "), str(info.value)


def _coefficients_with(tmp_path: Path, edit) -> str:
    doc = yaml.safe_load(SHIPPED.read_text(encoding="utf-8"))
    edit(doc)
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return str(path)


def _set_time(value):
    def edit(doc):
        next(iter(doc["calibrations"].values()))["opclass"]["time"]["linear"] = value
    return edit


@pytest.mark.parametrize("edit, message", [
    (_set_time(1e308), "time coefficient linear must be a finite number in"),
    (_set_time(float("nan")), "time coefficient linear"),
    (_set_time(0.5), "time coefficient linear"),  # faster than the dense peak
    (lambda d: next(iter(d["calibrations"].values()))["opclass"]["power"].update(compute=1.5), "power fraction"),
    (lambda d: next(iter(d["calibrations"].values()))["opclass"]["errors"]["nested"]["energy"].update(
        interval_log_halfwidth=-1.0), "half-width"),
    (lambda d: d["transfer"].update(gamma=float("inf")), "transfer exponent"),
    (lambda d: next(iter(d["calibrations"].values())).pop("opclass"), "malformed"),
    (lambda d: next(iter(d["calibrations"].values())).update(stack="nowhere"), "not among the stacks"),
])
def test_coefficients_that_would_break_a_prediction_are_one_line(tmp_path, capsys, edit, message):
    path = _coefficients_with(tmp_path, edit)
    with pytest.raises(EnergyError, match=message):
        load_coefficients(path)
    assert main(["energy", "sd1.5", "--gpu", "h100", "--coefficients", path, "--format", "json"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "energy-fit" in err


def test_energy_fit_cli_writes_what_calibrate_does_and_refuses_thin_data(tmp_path, capsys):
    keep = {"flux-dev", "sd3.5-large", "hunyuandit-v1.2"}
    rows = [r for r in _shipped_rows() if r["model"] in keep and r["gpu"] == "h100-sxm"]
    small = _write_records(tmp_path / "small.csv", rows)
    out = tmp_path / "c.yaml"
    assert main(["energy-fit", str(small), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "nested" in printed and "h100-sxm/bf16/xdit" in printed
    mine = yaml.safe_load(out.read_text())
    expected, _ = calibrate(read_csv(small), stacks=STACKS)
    mine.pop("source")
    assert_same_numbers(mine, yaml.safe_load(yaml.safe_dump(expected, sort_keys=False)))
    assert main(["energy", "flux-dev", "--gpu", "h100", "--coefficients", str(out), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["prediction"]["calibration"] == "h100-sxm/bf16/xdit"
    thin = _write_records(tmp_path / "thin.csv", [r for r in rows if r["model"] != "flux-dev"])
    assert main(["energy-fit", str(thin), "--out", str(tmp_path / "x.yaml")]) == 2
    assert "too thin" in capsys.readouterr().err
    (tmp_path / "nocols.csv").write_text("a,b\n1,2\n")
    with pytest.raises(FlopcalcError, match="missing column"):
        read_csv(tmp_path / "nocols.csv")


def test_energy_fit_reads_mlenergy_files_with_a_model_map(tmp_path, capsys):
    data = ENERGY / "data"
    out = tmp_path / "c.yaml"
    assert main(["energy-fit", str(data / "mlenergy_v3_text-to-image.json"), "--model-map",
                 str(ENERGY / "models.yaml"), "--out", str(out)]) == 0
    doc = yaml.safe_load(out.read_text())
    assert set(doc["calibrations"]) == {"h100-sxm/bf16/xdit", "b200/bf16/xdit"}
    assert doc["stacks"]["xdit"]["denoisers"] == ["transformer"]
    assert main(["energy-fit", str(data / "mlenergy_v2_diffusion.csv"), "--out", str(out)]) == 2
    assert "--model-map" in capsys.readouterr().err
    partial = tmp_path / "map.yaml"
    partial.write_text("black-forest-labs/FLUX.1-dev: {source: flux-dev}\n")
    assert main(["energy-fit", str(data / "mlenergy_v3_text-to-image.json"), "--model-map", str(partial),
                 "--out", str(out)]) == 2
    assert "is not in the model map" in capsys.readouterr().err


def test_docs_quote_the_fit_scripts_tables():
    results = (ENERGY / "RESULTS.md").read_text(encoding="utf-8")
    docs = (ROOT / "docs" / "energy.md").read_text(encoding="utf-8")
    cal_rows = [line for line in results.splitlines()
                if line.startswith("| ") and any(f"| {k} | " in line for k in load_coefficients()["calibrations"])]
    assert len(cal_rows) >= 4 * 3  # the op-class table, the coefficients, the transfer
    for line in cal_rows:
        assert line in docs, f"docs/energy.md lacks {line!r}: copy the tables from validation/energy/RESULTS.md"
