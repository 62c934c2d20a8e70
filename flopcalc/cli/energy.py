"""The energy commands: ``gpus``, ``energy``, ``energy-fit``, ``energy-plot``."""

from __future__ import annotations

import argparse
import json
import sys

from flopcalc.cli.common import (
    GENERATION_OPTIONS, add_family_options, add_format, add_model, add_run_options, positive_int, run_settings,
)
from flopcalc.cli.memory import add_offload_options, offload_settings


def configure_gpus(p: argparse.ArgumentParser) -> None:
    p.description = ("The GPU table: dense tensor peaks per dtype, memory, bandwidth, TDP, idle power, host and "
                     "GPU-to-GPU links; `--format json` adds every figure's source.")
    add_format(p, ("table", "json"))


def run_gpus(args: argparse.Namespace) -> int:
    from flopcalc.hardware.gpus import DTYPES, gpus

    table = gpus()
    if args.format == "json":
        sys.stdout.write(json.dumps([g.to_dict() for g in table], indent=2) + "\n")
        return 0
    head = ("key", "name", "mem GiB", "GB/s", "TDP W", "idle W", "host link", "GPU link", *(f"{d} TF" for d in DTYPES))
    rows = [head]
    for g in table:
        peaks = tuple(f"{g.peak_flops[d] / 1e12:g}" if d in g.peak_flops else "-" for d in DTYPES)
        rows.append((g.key, g.name, f"{g.memory_bytes / 2**30:g}", f"{g.memory_bandwidth / 1e9:g}", f"{g.tdp_w:g}",
                     f"{g.idle_w:g}", f"{g.host_link_label} {round(g.host_link_bytes_per_s / 1e9, 1):g}",
                     f"{g.gpu_link_label} {round(g.gpu_link_bytes_per_s / 1e9, 1):g}", *peaks))
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    for r in rows:
        print("  ".join(v.ljust(w) if i in (0, 1, 6, 7) else v.rjust(w)
                        for i, (v, w) in enumerate(zip(r, widths))).rstrip())
    print("Dense tensor-core peaks in TFLOP/s (int8: TOP/s); fp32 is the non-tensor peak; '-': no tensor path. "
          "Idle W: nvidia-smi / rocm-smi at rest. Links in GB/s per direction per GPU (GPU link 'PCIe': over the "
          "host link). Sources: `flopcalc gpus --format json`.")
    return 0


def configure_energy(p: argparse.ArgumentParser) -> None:
    p.description = ("MODEL and settings as for `estimate`; the prediction applies a law fitted on public "
                     "measurements (validation/energy/RESULTS.md) to the exact per-op-class counts of the estimate.")
    add_model(p)
    add_run_options(p, GENERATION_OPTIONS)
    add_family_options(p)
    add_format(p, ("table", "json", "csv"))
    p.add_argument("--measure", action="store_true",
                   help="as for `estimate`: count a component with no formula on the meta device")
    p.add_argument("--gpu", required=True, help="a GPU of `flopcalc gpus` (key or alias, e.g. h100, A100-SXM4-40GB)")
    p.add_argument("--num-gpus", type=positive_int, default=1,
                   help="sequence-parallel GPUs (overhead fitted on 2/4/8-GPU runs)")
    p.add_argument("--precision", choices=("bf16", "fp16", "fp32", "fp8"),
                   help="the dtype the pipeline runs in (default bf16, fp16 on a GPU without bf16); fp32 as PyTorch "
                        "runs it by default: matmuls in full fp32, convolutions in TF32; fp8: linear layers in fp8")
    p.add_argument("--tf32", action="store_true",
                   help="with --precision fp32: matmuls in TF32 too (torch.backends.cuda.matmul.allow_tf32 = True)")
    p.add_argument("--stack", help="the software stack measured (`flopcalc energy` names them; default: the first "
                                   "that runs the model's denoiser, on every GPU: xdit for a DiT, diffusers for a UNet)")
    add_offload_options(p)
    p.add_argument("--grid-intensity", type=float,
                   help="grams of CO2e per kWh of the grid (default 480: world average 2023, Ember)")
    p.add_argument("--law", choices=("opclass", "loglog", "linear"),
                   help="the energy law: opclass (time and energy per op class), loglog (the seed paper's) or linear "
                        "(E = k·FLOPs); default: the calibration's")
    p.add_argument("--coefficients", help="a coefficients file written by `flopcalc energy-fit` (default: the shipped "
                                          "ones)")
    p.add_argument("--items", type=positive_int, default=1,
                   help="images or videos to generate: adds their kWh and GPU-hours")


def run_energy(args: argparse.Namespace) -> int:
    from flopcalc.energy_laws.predict import energy
    from flopcalc.energy_laws.render import render

    result = energy(args.model, gpu=args.gpu, precision=args.precision, law=args.law, num_gpus=args.num_gpus,
                    grid_intensity=args.grid_intensity, coefficients=args.coefficients, items=args.items,
                    stack=args.stack, tf32=args.tf32, revision=args.revision, measure=args.measure,
                    **offload_settings(args), **run_settings(args))
    sys.stdout.write(render(result, args.format))
    return 0


def configure_energy_fit(p: argparse.ArgumentParser) -> None:
    from flopcalc.energy_laws.records import COLUMNS

    p.description = ("FILE: a CSV with columns " + ", ".join(COLUMNS) + " (see flopcalc/energy_laws/records.py), or "
                     "ML.ENERGY leaderboard files (v3 task JSON, v2 table) with --model-map; writes coefficients for "
                     "`flopcalc energy --coefficients` and prints their leave-one-model-out errors.")
    p.add_argument("file", nargs="+", metavar="FILE", help="measurement files: records CSVs or ML.ENERGY result files")
    p.add_argument("--model-map", help="ML.ENERGY files: YAML mapping each model id to the flopcalc `source` that "
                                       "counts it (and `settings`), or `left_out` (see validation/energy/models.yaml)")
    p.add_argument("--out", required=True, help="the coefficients YAML to write")


def run_energy_fit(args: argparse.Namespace) -> int:
    from pathlib import Path

    import yaml

    from flopcalc.energy_laws.fit import calibrate
    from flopcalc.energy_laws.laws import LAWS
    from flopcalc.energy_laws.predict import law_errors
    from flopcalc.energy_laws.mlenergy import STACKS, load_model_map, read_mlenergy
    from flopcalc.energy_laws.records import MeasurementError, is_records_csv, read_csv
    from flopcalc.render.output import check_writable, write_file

    check_writable(args.out, "--out")
    records = []
    for name in args.file:
        if not Path(name).is_file():
            raise MeasurementError(f"cannot read {name}: no such file")
        if is_records_csv(name):
            records += read_csv(name)
        elif args.model_map is None:
            raise MeasurementError(f"{name}: not a records CSV; for ML.ENERGY files pass --model-map")
        else:
            records += read_mlenergy(name, load_model_map(args.model_map), Path(args.model_map).parent)
    doc, _ = calibrate(records, stacks=STACKS)
    doc = {"source": f"flopcalc energy-fit {' '.join(args.file)}", **doc}
    write_file(args.out, yaml.safe_dump(doc, sort_keys=False, width=120), "--out")
    print(f"wrote {args.out}; leave-one-model-out abs % error, median / max (opclass: nested, its terms chosen "
          "inside each fold):")
    for cal, c in doc["calibrations"].items():
        for law in LAWS:
            e, t = law_errors(c, law)["energy"], law_errors(c, law)["latency"]
            print(f"  {cal:<36} {law:<8} energy {e['median_pct']:5.1f} / {e['max_pct']:5.1f}   "
                  f"latency {t['median_pct']:5.1f} / {t['max_pct']:5.1f}   ({len(c['models'])} models, {e['n']} records)")
    for cal, models in doc["left_out_calibrations"].items():
        print(f"  {cal}: left out, fewer than 3 models ({', '.join(models)})")
    return 0


def configure_energy_plot(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", required=True, help="the figure to write: a .png or .svg file")
    p.add_argument("--law", choices=("opclass", "loglog", "linear"),
                   help="the law whose predictions are plotted (default: opclass)")


def run_energy_plot(args: argparse.Namespace) -> int:
    from flopcalc.energy_laws.plot import load_points, measured_vs_predicted
    from flopcalc.energy_laws.predict import load_coefficients
    from flopcalc.render.figures import SUFFIXES, figure_bytes
    from flopcalc.render.output import check_writable, write_file

    check_writable(args.out, "--out", SUFFIXES)
    fig = measured_vs_predicted(load_coefficients(), load_points(), law=args.law)
    write_file(args.out, figure_bytes(fig, args.out), "--out", SUFFIXES)
    print(f"wrote {args.out}")
    return 0


def _counts(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected positive GPU counts like 2,4,8, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive GPU counts like 2,4,8, got {text!r}")
    return values


def configure_parallel(p: argparse.ArgumentParser) -> None:
    p.description = ("Every xDiT layout (CFG × Ulysses × ring × PipeFusion) the model allows on each GPU count, with "
                     "weights and activations per GPU, whether it fits, what one GPU sends per step and the predicted "
                     "latency (method: flopcalc/energy_laws/parallel_plan.py).")
    add_model(p)
    add_run_options(p, GENERATION_OPTIONS)
    p.add_argument("--gpu", required=True, help="a GPU of `flopcalc gpus`")
    p.add_argument("--num-gpus", type=_counts, default=(2, 4, 8), metavar="N[,N…]",
                   help="GPU counts to plan, comma-separated (default 2,4,8)")
    p.add_argument("--precision", choices=("bf16", "fp16", "fp32", "fp8"),
                   help="the dtype the pipeline runs in (default bf16, fp16 on a GPU without bf16)")
    add_format(p, ("table", "json"))
    add_family_options(p)


def run_parallel(args: argparse.Namespace) -> int:
    from flopcalc.energy_laws.parallel_plan import plan, render_plan

    result = plan(args.model, gpu=args.gpu, num_gpus=args.num_gpus, precision=args.precision,
                  revision=args.revision, **run_settings(args))
    sys.stdout.write(render_plan(result, args.format))
    return 0

