"""Fit the energy / latency laws on the measurements in data/ and validate them leave-one-model-out.

    python validation/energy/fit_energy.py            # rewrites the outputs below
    python validation/energy/fit_energy.py --check    # exits 1 if any output would change

Reads data/ (ML.ENERGY v3 and v2, copied from ../shared/energy with data/README.md) and models.yaml
(which flopcalc card or config folder each model is, at which settings it ran); writes

* records.csv: every mapped record, one row per (model, GPU, batch, GPU count), in the format of
  ``flopcalc energy-fit`` (so ``flopcalc energy-fit validation/energy/records.csv`` refits the same);
* flopcalc/data/energy_coefficients.yaml: the shipped coefficients, fitted ranges, errors;
* flopcalc/data/energy_points.json: every record's held-out (leave-one-model-out) prediction under
  every law (the measured-vs-predicted plot of ``flopcalc energy-plot`` and the HTML report);
* RESULTS.md: the error tables (plain and nested leave-one-model-out, leave-one-GPU-out transfer, the batch trend,
  multi-GPU, the independent check against published latencies).

Deterministic: the same data give the same bytes (a test refits and compares).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import replace
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from flopcalc.energy_laws.fit import calibrate  # noqa: E402
from flopcalc.energy_laws.mlenergy import STACKS, load_model_map, read_mlenergy  # noqa: E402
from flopcalc.energy_laws.records import read_csv, write_csv  # noqa: E402

import public_latency  # noqa: E402  (beside this script)

COEFFICIENTS = ROOT / "flopcalc" / "data" / "energy_coefficients.yaml"
RECORDS = HERE / "records.csv"
POINTS = ROOT / "flopcalc" / "data" / "energy_points.json"
RESULTS_MD = HERE / "RESULTS.md"
DATA_FILES = ("mlenergy_v3_text-to-image.json", "mlenergy_v3_text-to-video.json", "mlenergy_v2_diffusion.csv")


def _pct(e: dict) -> str:
    return f"{e['median_pct']:.1f} / {e['p90_pct']:.1f} / {e['max_pct']:.1f}" if e else "—"


def _band(e: dict) -> str:
    h = e["interval_log_halfwidth"]
    return f"±{h:.3f} (×{math.exp(-h):.2f} – ×{math.exp(h):.2f})"


def _markdown(doc: dict, mapping: dict, records: list, points: list[dict]) -> str:
    lines = ["# Energy and latency laws: validation", "",
             "Written by `validation/energy/fit_energy.py`; do not edit. Figures are absolute % errors per item, "
             "median / p90 / max, over every held-out record. A model (all its batch sizes and GPUs) is held out of "
             "every fit at once and predicted by the law fitted on the others.", "",
             "## Software stacks", "",
             "| stack | what it ran | denoisers it runs |", "|---|---|---|"]
    for name, s in doc["stacks"].items():
        lines.append(f"| {name} | {s['description']} | {', '.join(s['denoisers'])} |")
    lines += ["", "A prediction uses the first stack of this table that runs its denoiser, on every GPU alike (`--stack` "
              "chooses another); bf16 and fp16 have the same tensor peak, so on one stack they give the same time.", "",
              "## The op-class law per calibration", "",
              "Plain: the terms chosen on all the models, the held-out model left out of the fit only. Nested: the "
              "terms chosen again inside every fold, on the remaining models alone (the held-out model plays no part in "
              "any choice): the honest figure, and the one the printed 90% intervals come from.", "",
              "| calibration | models | records | terms chosen | energy % plain | energy % nested | latency % plain | "
              "latency % nested | 90% interval (nested): energy, latency |",
              "|---|---|---|---|---|---|---|---|---|"]
    for cal, c in doc["calibrations"].items():
        o, e = c["opclass"], c["opclass"]["errors"]
        terms = ", ".join(["L", "Ã" if o["terms"]["padded_attention"] else "A", "C", *o["terms"]["optional"]])
        lines.append(f"| {cal} | {len(c['models'])} | {c['records']} | {terms} | {_pct(e['plain']['energy'])} | "
                     f"{_pct(e['nested']['energy'])} | {_pct(e['plain']['latency'])} | {_pct(e['nested']['latency'])} | "
                     f"{_band(e['nested']['energy'])}, {_band(e['nested']['latency'])} |")
    lines += ["", "Fitted coefficients (time: compute terms are inverse efficiencies, ≥ 1; per_call s per denoiser "
              "call; launches s per module run; weights and elementwise × their bytes ÷ bandwidth; small_batch × the "
              "compute time ÷ items. Power: fraction of TDP − idle drawn during each group's time):", "",
              "| calibration | efficiency linear / attention / conv | per_call s | launches µs | weights | elementwise | "
              "small_batch | power compute / launch / memory |", "|---|---|---|---|---|---|---|---|"]
    for cal, c in doc["calibrations"].items():
        tm, pw = c["opclass"]["time"], c["opclass"]["power"]
        lines.append(f"| {cal} | {1 / tm['linear']:.2f} / {1 / tm['attention']:.2f} / {1 / tm['conv']:.2f} | "
                     f"{tm['per_call']:.4f} | {1e6 * tm['launches']:.2f} | {tm['weights']:.2f} | {tm['elementwise']:.2f} | "
                     f"{tm['small_batch']:.3f} | {pw['compute']:.2f} / {pw['launch']:.2f} / {pw['memory']:.2f} |")
    lines += _batch_trend(doc, records, points)
    lines += ["", "## Baselines", "",
              "The seed paper's law (`loglog`: log E linear in log FLOPs, CFG, log pixels and a per-calibration offset) "
              "and `E = k·F` (`linear`), plain leave-one-model-out, for comparison (`--law` selects them):", "",
              "| calibration | law | energy % | latency % |", "|---|---|---|---|"]
    for cal, c in doc["calibrations"].items():
        for law in ("loglog", "linear"):
            e = c[law]["errors"]
            lines.append(f"| {cal} | {law} | {_pct(e['energy'])} | {_pct(e['latency'])} |")
    tr = doc["transfer"]
    lines += ["", "## GPUs without a calibration: the transfer, leave one GPU out", "",
              f"A compute term's inverse efficiency moves to another GPU of the stack as a(g) = a(ref)·(π_g / π_ref)^γ "
              f"(π: dense 16-bit peak per TDP watt), never below 1 (an op class whose dtype changes, fp8 or fp32, moves by "
              f"its dtype's peak ratio the same way, capped so that a faster dtype keeps the measured fraction of its "
              f"peak); γ = {tr['gamma']:.3f}, fitted on "
              f"{', '.join(tr['pairs_fitted']) or 'no pair (γ = 1: a GPU held at its power limit)'}. Each calibrated "
              "GPU held out: γ from the other pairs only, its calibrations predicted from its stack's other GPU.", "",
              "| held out | predicted from | γ used | energy % | latency % |", "|---|---|---|---|---|"]
    for k, v in tr["held_out_gpu"].items():
        lines.append(f"| {k} | {', '.join(v['from'])} | {v['gamma']:.3f} | {_pct(v['errors']['energy'])} | "
                     f"{_pct(v['errors']['latency'])} |")
    if tr.get("errors"):
        lines.append(f"| all | | | {_pct(tr['errors']['energy'])} | {_pct(tr['errors']['latency'])} |")
        lines += ["", f"A transferred prediction's interval adds {_band(tr['errors']['energy'])} (energy) and "
                  f"{_band(tr['errors']['latency'])} (latency), split-conformal over these held-out models."]
    lines += ["", "## Multi-GPU (sequence-parallel) overhead", "",
              "The factor f = E_N / E_1 (energy per item) and f = t_N·N / t_1 (GPU-seconds per item) against the "
              "1-GPU run of the same model and batch, fitted per GPU as ln f = c_N + d·log2 N·(ln F − 35), F the "
              "FLOPs per item: the factor at F = e³⁵ ≈ 1.6 PFLOP by N below, and d (negative: big workloads split "
              "better). Of the Ulysses × ring splits the benchmark tried for one model, N and batch, the "
              "least-energy one counts (the split a user would pick); errors leave one model out. Beyond the "
              "measured N the interval widens by log2(N / 8).", "",
              "| GPU | models | rows | energy factor by N; d | energy % | GPU-time factor by N; d | latency % |",
              "|---|---|---|---|---|---|---|"]
    for g, m in doc["multi_gpu"].items():
        fac = {t: ", ".join(f"{n}: ×{f:.2f}" for n, f in m[t]["factor"].items())
               + f"; d = {m[t]['per_log2_gpus_per_log_flops']:.3f}" for t in ("energy", "latency")}
        lines.append(f"| {g} | {len(m['models'])} | {m['n']} | {fac['energy']} | {_pct(m['energy']['errors'])} | "
                     f"{fac['latency']} | {_pct(m['latency']['errors'])} |")
    lines += ["", "## Independent check: published latencies", "",
              "Single-GPU latencies published by others (data/public_latency.csv: every row cites its source and "
              "the quoted cell; public_latency.py; used in no fit), against the shipped law at the published "
              "settings and precision. A denoising-loop row (converted from iterations per second) is compared with "
              "the prediction's denoiser share; a compiled, distilled, offloaded or quantised row is listed apart "
              "(not what the eager law describes) and left out of the summary.", ""] + public_latency.section(doc)
    lines += ["", "## Models left out", "", "| model | reason |", "|---|---|"]
    for group in mapping.values():
        for model, m in group.items():
            if "left_out" in m:
                lines.append(f"| {model} | {m['left_out']} |")
    for cal, models in doc["left_out_calibrations"].items():
        lines.append(f"| {cal} ({', '.join(models)}) | fewer than 3 models on this GPU × precision × stack |")
    return "\n".join(lines) + "\n"


def _batch_trend(doc: dict, records: list, points: list[dict]) -> list[str]:
    """The nested held-out error by batch size (from the held-out points ``calibrate`` returns): whether the law drifts
    with the batch (it carries a per-call, a per-module and a small-batch term for that)."""
    import numpy as np

    lines = ["", "## The error against the batch size", "",
             "Median signed latency error (%, nested held-out predictions) by batch size; a trend would show here.",
             ""]
    batches = sorted({r.batch_size for r in records})
    lines += ["| calibration | " + " | ".join(f"batch {b}" for b in batches) + " |", "|---" * (len(batches) + 1) + "|"]
    for cal in doc["calibrations"]:
        cells = []
        for b in batches:
            errs = [100 * (p["latency_s_predicted"] / p["latency_s"] - 1) for p in points
                    if p["calibration"] == cal and p["batch_size"] == b]
            cells.append(f"{np.median(errs):+.1f}" if errs else "")
        lines.append(f"| {cal} | " + " | ".join(cells) + " |")
    return lines


def build(records_csv: Path = RECORDS) -> dict[Path, str]:
    """Every output's text; ``records_csv`` is written first and the fit reads it back, exactly as
    ``flopcalc energy-fit`` would (relative model paths resolve against this folder)."""
    mapping = yaml.safe_load((HERE / "models.yaml").read_text(encoding="utf-8"))
    model_map = load_model_map(HERE / "models.yaml")
    records = [r for name in DATA_FILES for r in read_mlenergy(HERE / "data" / name, model_map, HERE)]
    write_csv(records, records_csv)
    records = [replace(r, base=HERE) for r in read_csv(records_csv)]
    doc, points = calibrate(records, stacks=STACKS)
    doc = {"source": "validation/energy/fit_energy.py on validation/energy/records.csv "
                     "(ML.ENERGY leaderboard v3 and v2, see validation/energy/data/README.md)", **doc}
    return {
        RECORDS: records_csv.read_text(encoding="utf-8"),
        COEFFICIENTS: yaml.safe_dump(doc, sort_keys=False, width=120),
        POINTS: json.dumps(points, indent=0, allow_nan=False) + "\n",
        RESULTS_MD: _markdown(doc, mapping, records, points),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="exit 1 if an output would change")
    args = p.parse_args()
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        outputs = build(Path(tmp) / "records.csv")
    changed = []
    for path, text in outputs.items():
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            changed.append(path)
            if not args.check:
                path.write_text(text, encoding="utf-8")
    for path in changed:
        print(f"{'would change' if args.check else 'wrote'} {path.relative_to(ROOT)}")
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
