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
* RESULTS.md: the error tables.

Deterministic: the same data give the same bytes (a test refits and compares).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import replace
from pathlib import Path
from typing import Iterator

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

from flopcalc.energy_laws.fit import calibrate  # noqa: E402
from flopcalc.energy_laws.mlenergy import load_model_map, read_mlenergy  # noqa: E402
from flopcalc.energy_laws.records import read_csv, write_csv  # noqa: E402

COEFFICIENTS = ROOT / "flopcalc" / "data" / "energy_coefficients.yaml"
RECORDS = HERE / "records.csv"
POINTS = ROOT / "flopcalc" / "data" / "energy_points.json"
RESULTS_MD = HERE / "RESULTS.md"
DATA_FILES = ("mlenergy_v3_text-to-image.json", "mlenergy_v3_text-to-video.json", "mlenergy_v2_diffusion.csv")


def _pct(e: dict) -> str:
    return f"{e['median_pct']:.1f} / {e['p90_pct']:.1f} / {e['max_pct']:.1f}" if e else "—"


def _laws_of(doc: dict) -> Iterator[tuple[str, dict, str, str, dict]]:
    """(calibration, its entry, law, "*" if the calibration's default, the law's errors), table order."""
    for cal, c in doc["calibrations"].items():
        for law in ("opclass", "loglog", "linear"):
            yield cal, c, law, "*" if law == c["default_law"] else "", c["laws"][law]["errors"]


def _markdown(doc: dict, mapping: dict) -> str:
    lines = ["# Energy and latency laws: leave-one-model-out validation", "",
             "Written by `validation/energy/fit_energy.py`; do not edit. Each model is held out of every fit "
             "(all its batch sizes and GPUs at once) and predicted by the law fitted on the others. "
             "Figures are absolute % errors per item, median / p90 / max, over every held-out record.", "",
             f"Default law: **{doc['default_law']}** (lowest median energy error across calibrations); each "
             "calibration's own default (marked *) is its law with the lowest sum of median energy and latency "
             "errors, and is what `flopcalc energy` uses on that GPU unless `--law` says otherwise.", "",
             "| calibration | models | records | law | energy % (median / p90 / max) | latency % (median / p90 / max) |",
             "|---|---|---|---|---|---|"]
    for cal, c, law, mark, e in _laws_of(doc):
        lines.append(f"| {cal} | {len(c['models'])} | {c['records']} | {law}{mark} | {_pct(e['energy'])} | "
                     f"{_pct(e['latency'])} |")
    lines += _intervals(doc)
    lines += _terms_tried(doc)
    lines += ["", "## Multi-GPU (sequence-parallel) overhead", "",
              "The factor f = E_N / E_1 (energy per item) and f = t_N·N / t_1 (GPU-seconds per item) against the "
              "1-GPU run of the same model and batch, fitted per GPU as ln f = c_N + d·log2 N·(ln F − 35), F the "
              "FLOPs per item: the factor at F = e³⁵ ≈ 1.6 PFLOP by N below, and d (negative: big workloads split "
              "better). Of the Ulysses × ring splits the benchmark tried for one model, N and batch, the "
              "least-energy one counts (the split a user would pick); errors leave one model out.", "",
              "| GPU | models | rows | energy factor by N; d | energy % | GPU-time factor by N; d | latency % |",
              "|---|---|---|---|---|---|---|"]
    for g, m in doc["multi_gpu"].items():
        fac = {t: ", ".join(f"{n}: ×{f:.2f}" for n, f in m[t]["factor"].items())
               + f"; d = {m[t]['per_log2_gpus_per_log_flops']:.3f}" for t in ("energy", "latency")}
        lines.append(f"| {g} | {len(m['models'])} | {m['n']} | {fac['energy']} | {_pct(m['energy']['errors'])} | "
                     f"{fac['latency']} | {_pct(m['latency']['errors'])} |")
    tr = doc["datasheet_transfer"]
    lines += ["", "## Datasheet scaling, calibrated and measured", "",
              "A GPU with no calibration gets the prediction of a calibrated one scaled by the datasheet ratio to "
              f"a fitted power: latency by (dense peak ratio)^{tr['exponent']['latency']:.3f}, energy by "
              f"(peak-per-TDP-watt ratio)^{tr['exponent']['energy']:.3f} (plain datasheet scaling would be 1). "
              "The exponents are fitted on the same models measured on two GPUs of one stack; the errors "
              "below hold one GPU pair out (the other pair's exponent, the source calibration's law).", "",
              "| from -> to | exponents used (latency, energy) | energy % | latency % |", "|---|---|---|---|"]
    for k, e in tr["pairs"].items():
        lines.append(f"| {k} | {e['latency']['exponent_used']:.3f}, {e['energy']['exponent_used']:.3f} | "
                     f"{_pct(e['energy'])} | {_pct(e['latency'])} |")
    lines.append(f"| all pairs | | {_pct(tr['errors']['energy'])} | {_pct(tr['errors']['latency'])} |")
    pl = tr["plain_datasheet_errors"]
    lines.append(f"| all pairs, plain datasheet scaling (exponent 1) | 1, 1 | {_pct(pl['energy'])} | {_pct(pl['latency'])} |")
    lines += ["", "## Independent check: published latencies", "",
              "Single-GPU latencies published by xDiT (data/public_latency.csv; not used in any fit), against the "
              "shipped default law at the published settings. Other harnesses than the calibration's: a "
              "torch.compile row measures the compiler, not the law.", ""] + _public_latency(doc)
    lines += ["", "## Models left out", "", "| model | reason |", "|---|---|"]
    for group in mapping.values():
        for model, m in group.items():
            if "left_out" in m:
                lines.append(f"| {model} | {m['left_out']} |")
    for cal, models in doc["left_out_calibrations"].items():
        lines.append(f"| {cal} ({', '.join(models)}) | fewer than 3 models on this GPU × precision × stack |")
    return "\n".join(lines) + "\n"


def _band(e: dict) -> str:
    h = e["interval_log_halfwidth"]
    return f"±{h:.3f} (×{math.exp(-h):.2f} – ×{math.exp(h):.2f})"


def _record_p90(e: dict) -> str:
    return f"±{e['energy']['log_ratio_p90']:.3f}, ±{e['latency']['log_ratio_p90']:.3f}"


def _intervals(doc: dict) -> list[str]:
    """The printed 90% intervals: half-width in log space of every calibration × law, multi-GPU fit
    and datasheet transfer, with how each was chosen."""
    lines = ["", "## The printed 90% intervals", "",
             "A prediction's 90% interval is ×e^−h to ×e^h. h is split-conformal over held-out *models*: each "
             "held-out model scores its largest |log(measured / predicted)| over its records (its batch sizes "
             "are correlated, so the model is the unit), and with n scores h is the ⌈(n + 1)·0.9⌉-th smallest, "
             "which covers a new model with probability ≥ 90% if it is exchangeable with the held-out ones. "
             "With n ≤ 9 that index is n itself or beyond: h is the worst held-out model's error, and the 90% "
             "holds only as far as a new model is like those (n ≤ 8 have no finite conformal quantile at all). "
             "Shown beside it, for comparison, the record-level p90 of |log ratio| the intervals used before. "
             "A GPU without calibration adds the datasheet transfer's h; several GPUs add the multi-GPU h.", "",
             "| fit | law | models | energy h | latency h | record p90 (energy, latency) | how |",
             "|---|---|---|---|---|---|---|"]
    for cal, _, law, mark, e in _laws_of(doc):
        lines.append(f"| {cal} | {law}{mark} | {e['energy']['models']} | {_band(e['energy'])} | "
                     f"{_band(e['latency'])} | {_record_p90(e)} | {e['energy']['interval_method']} |")
    for g, m in doc["multi_gpu"].items():
        e = {t: m[t]["errors"] for t in ("energy", "latency")}
        lines.append(f"| multi-GPU overhead, {g} | | {e['energy']['models']} | {_band(e['energy'])} | "
                     f"{_band(e['latency'])} | {_record_p90(e)} | {e['energy']['interval_method']} |")
    tr = doc["datasheet_transfer"]["errors"]
    lines.append(f"| datasheet transfer, all pairs | | {tr['energy']['models']} | {_band(tr['energy'])} | "
                 f"{_band(tr['latency'])} | {_record_p90(tr)} | {tr['energy']['interval_method']} |")
    return lines


#: Variants of the op-class law tried under the same leave-one-model-out validation: name, the
#: columns of its time design (× TDP for energy; see flopcalc/energy_laws/laws.py), kept or not.
#: L, A, Ã, C: linear, attention, padded-attention, conv FLOPs ÷ peak; n: denoiser calls per item;
#: R, M, M*: weight, unfused-elementwise, all-elementwise (softmax included) bytes ÷ bandwidth;
#: S: attention scores ÷ peak (softmax work); K: modules run per item (kernel launches).
TERM_VARIANTS = (
    ("before: L, A, C, n, R", ("L", "A", "C", "n", "R")),
    ("+ M* (all elementwise, softmax included)", ("L", "A", "C", "n", "R", "M*")),
    ("+ S (attention scores)", ("L", "A", "C", "n", "R", "S")),
    ("+ K (modules run)", ("L", "A", "C", "n", "R", "K")),
    ("+ M (elementwise outside attention)", ("L", "A", "C", "n", "R", "M")),
    ("A → Ã (head width padded)", ("L", "Ã", "C", "n", "R")),
    ("kept: L, Ã, C, n, R, M", ("L", "Ã", "C", "n", "R", "M")),
    ("kept + K", ("L", "Ã", "C", "n", "R", "M", "K")),
    ("kept + S", ("L", "Ã", "C", "n", "R", "M", "S")),
)


def _modules_run(report) -> float:
    """Leaf modules run per item (a proxy for kernel launches): the denoiser's per call × calls per
    item, every other component's once per batch."""
    from flopcalc.energy_laws.features import work_of

    work = work_of(report)
    calls = {c.component: c.calls for c in work.components}

    def leaves(node) -> int:
        return node.count * (sum(leaves(c) for c in node.children) if node.children else 1)

    return sum(leaves(c.tree) * (calls[c.component] if c.role == "denoiser" else 1 / work.items)
               for c in report.components)


def _term_columns(records) -> list[tuple[str, str, dict[str, float], float, float, float]]:
    """(label, calibration, columns, TDP, energy, latency) of every single-GPU record of a fitted calibration."""
    from flopcalc.energy_laws.fit import BYTES_PER_PARAMETER, samples_of
    from flopcalc.energy_laws.records import estimate_record
    from flopcalc.hardware.gpus import gpu

    samples, works = samples_of(records)
    out = []
    for i, (r, s) in enumerate(zip(records, samples)):
        w, g = works[i], gpu(r.gpu)
        per_byte = BYTES_PER_PARAMETER[r.precision] / g.memory_bandwidth
        cols = {"L": s.linear / s.peak, "A": s.attention / s.peak, "Ã": s.attention_padded / s.peak,
                "C": s.conv / s.peak, "n": s.calls, "R": s.weight_time, "M": s.elementwise_time,
                "M*": w.total("elementwise") * per_byte, "S": w.total("scores") / s.peak,
                "K": _modules_run(estimate_record(r))}
        out.append((s.label, s.calibration, cols, s.tdp, s.energy, s.latency))
    return out


def _terms_tried(doc: dict) -> list[str]:
    """Each variant of TERM_VARIANTS fitted (NNLS on relative error, per calibration) and validated
    leave-one-model-out exactly as the shipped law."""
    import numpy as np

    from flopcalc.energy_laws.laws import error_summary
    from flopcalc.energy_laws.nnls import nnls
    from flopcalc.energy_laws.records import read_csv

    cals = list(doc["calibrations"])
    records = [replace(r, base=HERE) for r in read_csv(RECORDS) if r.num_gpus == 1 and r.calibration in cals]
    rows = _term_columns(records)
    lines = ["", "## Terms tried", "",
             "Variants of the op-class law, each validated leave-one-model-out like the shipped one (energy and "
             "latency, median / max %). L, A, C: linear, attention, conv FLOPs at the peak; Ã: attention at the "
             "head widths FlashAttention-2 runs (multiples of 32); n: denoiser calls per item; R: weight bytes, "
             "M: bytes of the elementwise ops outside attention kernels, M*: of all elementwise ops (softmax "
             "included), each ÷ bandwidth; S: attention scores at the peak (softmax work); K: modules run per "
             "item (kernel launches).", "",
             "| variant | " + " | ".join(cals) + " |", "|---|" + "---|" * len(cals)]
    for name, terms in TERM_VARIANTS:
        cells = []
        for cal in cals:
            own = [r for r in rows if r[1] == cal]
            held: dict[str, list] = {"energy": [], "latency": []}
            for label in sorted({r[0] for r in own}):
                train = [r for r in own if r[0] != label]
                for target, j in (("energy", 4), ("latency", 5)):
                    x = np.array([[r[2][k] * (r[3] if target == "energy" else 1) for k in terms] for r in train])
                    y = np.array([r[j] for r in train])
                    coef = nnls(x / y[:, None], np.ones(len(y)))
                    held[target] += [(r[0], r[j], float(np.array([r[2][k] * (r[3] if target == "energy" else 1)
                                                            for k in terms]) @ coef)) for r in own if r[0] == label]
            e = {t: error_summary(held[t]) for t in held}
            cells.append(f"{e['energy']['median_pct']:.1f} / {e['energy']['max_pct']:.1f}; "
                         f"{e['latency']['median_pct']:.1f} / {e['latency']['max_pct']:.1f}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def _public_latency(doc: dict) -> list[str]:
    """Published single-GPU latencies (data/public_latency.csv) against the shipped law's prediction:
    an independent check (another harness, settings the calibration did not run)."""
    import ast
    import csv

    from flopcalc.flops.estimate import estimate
    from flopcalc.energy_laws.predict import predict
    from flopcalc.engine.errors import FlopcalcError

    cards = {"black-forest-labs/FLUX.1-dev": ("flux-dev", {"height": 1024, "width": 1024}),
             "tencent/HunyuanVideo": ("hunyuanvideo", {"vae_tiling": True})}
    lines = ["| model | GPU | stack | settings | published s | predicted s [90%] | error |", "|---|---|---|---|---|---|---|"]
    with (HERE / "data" / "public_latency.csv").open(newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            card, fixed = cards[row["model"]]
            settings = {**fixed, **ast.literal_eval(row["settings"])}
            try:
                r = predict(estimate(card, **settings), gpu=row["gpu"], coefficients=doc)
            except FlopcalcError as exc:
                lines.append(f"| {card} | {row['gpu']} | {row['stack']} | {row['note']} | {row['seconds_per_item']} | "
                             f"not predicted: {str(exc).split(';')[0]} | |")
                continue
            got = float(row["seconds_per_item"])
            lo, hi = r.latency_s_interval
            lines.append(f"| {card} | {r.gpu} | {row['stack']} | {row['note']} | {got:g} | {r.latency_s:.1f} "
                         f"[{lo:.1f}, {hi:.1f}] | {100 * (r.latency_s / got - 1):+.0f}% |")
    return lines


def build(records_csv: Path = RECORDS) -> dict[Path, str]:
    """Every output's text; ``records_csv`` is written first and the fit reads it back, exactly as
    ``flopcalc energy-fit`` would (relative model paths resolve against this folder)."""
    mapping = yaml.safe_load((HERE / "models.yaml").read_text(encoding="utf-8"))
    model_map = load_model_map(HERE / "models.yaml")
    records = [r for name in DATA_FILES for r in read_mlenergy(HERE / "data" / name, model_map, HERE)]
    write_csv(records, records_csv)
    records = [replace(r, base=HERE) for r in read_csv(records_csv)]
    doc, points = calibrate(records)
    doc = {"source": "validation/energy/fit_energy.py on validation/energy/records.csv "
                     "(ML.ENERGY leaderboard v3 and v2, see validation/energy/data/README.md)", **doc}
    return {
        RECORDS: records_csv.read_text(encoding="utf-8"),
        COEFFICIENTS: yaml.safe_dump(doc, sort_keys=False, width=120),
        POINTS: json.dumps(points, indent=0) + "\n",
        RESULTS_MD: _markdown(doc, mapping),
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
