"""CLI commands of the GPU table and the energy predictor: ``flopcalc gpus``, ``energy``,
``energy-fit``, ``energy-plot``.

Registered from :mod:`flopcalc.cli` by :func:`add_parsers`; each parser sets ``handler``, which
the main dispatcher calls. Nothing heavy is imported at registration time.
"""

from __future__ import annotations

import argparse
import json
import sys


def add_parsers(sub: "argparse._SubParsersAction") -> None:
    g = sub.add_parser("gpus", help="the GPU table: dense tensor peaks, memory, bandwidth, TDP, sources")
    g.add_argument("--format", choices=("table", "json"), default="table")
    g.set_defaults(handler=_gpus)

    e = sub.add_parser("energy", help="energy (J, Wh), latency and CO2e per image/video on a named GPU, "
                                      "with 90%% intervals", description="MODEL and settings as for `estimate`; "
                       "the prediction applies a law fitted on public measurements (validation/energy/RESULTS.md) "
                       "to the exact per-op-class counts of the estimate.")
    _copy_estimate_options(sub.choices["estimate"], e)
    e.add_argument("--gpu", required=True, help="a GPU of `flopcalc gpus` (key or alias, e.g. h100, A100-SXM4-40GB)")
    e.add_argument("--num-gpus", type=_positive_int, default=1, help="sequence-parallel GPUs (overhead fitted on "
                                                                     "2/4/8-GPU runs)")
    e.add_argument("--precision", choices=("bf16", "fp16", "fp32", "fp8"), default="bf16")
    e.add_argument("--grid-intensity", type=float, help="gCO2e per kWh (default 480: world average 2023, Ember)")
    e.add_argument("--law", choices=("opclass", "loglog", "linear"), help="default: the calibration's default law")
    e.add_argument("--coefficients", help="a coefficients file written by `flopcalc energy-fit` (default: shipped)")
    e.add_argument("--items", type=_positive_int, default=1, help="items to generate (adds kWh and GPU-hours)")
    e.set_defaults(handler=_energy)

    f = sub.add_parser("energy-fit", help="fit the energy/latency laws on your own measurements",
                       description="FILE: a CSV with columns " + ", ".join(_columns()) + " (see flopcalc/energy_laws/"
                       "records.py), or ML.ENERGY leaderboard files (v3 task JSON, v2 table) with --model-map; "
                       "writes coefficients for `flopcalc energy --coefficients` and prints their "
                       "leave-one-model-out errors.")
    f.add_argument("file", nargs="+")
    f.add_argument("--model-map", help="ML.ENERGY files: YAML mapping each model id to the flopcalc `source` that "
                                       "counts it (and `settings`), or `left_out` (see validation/energy/models.yaml)")
    f.add_argument("--out", required=True, help="coefficients YAML to write")
    f.set_defaults(handler=_energy_fit)

    pl = sub.add_parser("energy-plot", help="measured vs predicted energy and latency of every validation record "
                                            "(log-log, per GPU, 90%% band; needs flopcalc[plot])")
    pl.add_argument("--out", required=True, help=".png or .svg")
    pl.add_argument("--law", choices=("opclass", "loglog", "linear"))
    pl.set_defaults(handler=_energy_plot)


def _positive_int(text: str) -> int:
    from flopcalc.cli import _positive_int as check

    return check(text)


def _columns() -> tuple[str, ...]:
    from flopcalc.energy_laws.records import COLUMNS

    return COLUMNS


_NOT_FOR_ENERGY = {"convention", "per_block", "depth", "help"}


def _copy_estimate_options(estimate: argparse.ArgumentParser, target: argparse.ArgumentParser) -> None:
    """Every option of `estimate` (so `energy` accepts exactly what `estimate` accepts, and keeps
    accepting what others add to it) except those that only shape the FLOP table; argparse's own
    ``parents=`` mechanism, applied to a parser that already exists."""
    for action in estimate._actions:
        if action.dest not in _NOT_FOR_ENERGY:
            target._add_action(action)
    for group in estimate._mutually_exclusive_groups:
        copy = target.add_mutually_exclusive_group(required=group.required)
        for action in group._group_actions:
            if action.dest not in _NOT_FOR_ENERGY:
                copy._group_actions.append(action)


def _estimate_kwargs(args: argparse.Namespace) -> dict:
    import inspect

    from flopcalc.api import estimate

    names = set(inspect.signature(estimate).parameters) - {"model", "convention"}
    return {k: getattr(args, k) for k in names if hasattr(args, k)}


def _energy(args: argparse.Namespace) -> int:
    from flopcalc.api import estimate
    from flopcalc.energy_laws.predict import predict
    from flopcalc.energy_laws.render import render

    report = estimate(args.model, **_estimate_kwargs(args))
    result = predict(report, gpu=args.gpu, precision=args.precision, law=args.law, num_gpus=args.num_gpus,
                     grid_intensity=args.grid_intensity, coefficients=args.coefficients, items=args.items)
    sys.stdout.write(render(result, args.format))
    return 0


def _energy_fit(args: argparse.Namespace) -> int:
    import yaml

    from flopcalc.energy_laws.fit import calibrate
    from flopcalc.energy_laws.predict import EnergyError
    from flopcalc.energy_laws.records import read_csv

    from pathlib import Path

    from flopcalc.energy_laws.mlenergy import load_model_map, read_mlenergy
    from flopcalc.energy_laws.records import MeasurementError, is_records_csv

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
    doc, _ = calibrate(records)
    doc = {"source": f"flopcalc energy-fit {' '.join(args.file)}", **doc}
    try:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write(yaml.safe_dump(doc, sort_keys=False, width=120))
    except OSError as exc:
        raise EnergyError(f"cannot write {args.out}: {exc.strerror or exc}") from None
    print(f"wrote {args.out} (default law {doc['default_law']}); leave-one-model-out abs % error, median / max:")
    for cal, c in doc["calibrations"].items():
        for law, v in c["laws"].items():
            e, t = v["errors"]["energy"], v["errors"]["latency"]
            print(f"  {cal:<36} {law:<8} energy {e['median_pct']:5.1f} / {e['max_pct']:5.1f}   "
                  f"latency {t['median_pct']:5.1f} / {t['max_pct']:5.1f}   ({len(c['models'])} models, {e['n']} records)")
    for cal, models in doc["left_out_calibrations"].items():
        print(f"  {cal}: left out, fewer than 3 models ({', '.join(models)})")
    return 0


def _energy_plot(args: argparse.Namespace) -> int:
    from flopcalc.energy_laws.plot import load_points, measured_vs_predicted
    from flopcalc.energy_laws.predict import load_coefficients
    from flopcalc.output import check_writable, write_file
    from flopcalc.plots import SUFFIXES, figure_bytes

    check_writable(args.out, "--out", SUFFIXES)
    fig = measured_vs_predicted(load_coefficients(), load_points(), law=args.law)
    write_file(args.out, figure_bytes(fig, args.out), "--out", SUFFIXES)
    print(f"wrote {args.out}")
    return 0


def _gpus(args: argparse.Namespace) -> int:
    from flopcalc.gpus import DTYPES, gpus

    table = gpus()
    if args.format == "json":
        sys.stdout.write(json.dumps([g.to_dict() for g in table], indent=2) + "\n")
        return 0
    head = ("key", "name", "mem GiB", "GB/s", "TDP W", *(f"{d} TF" for d in DTYPES))
    rows = [head]
    for g in table:
        peaks = tuple(f"{g.peak_flops[d] / 1e12:g}" if d in g.peak_flops else "-" for d in DTYPES)
        rows.append((g.key, g.name, f"{g.memory_bytes / 2**30:g}", f"{g.memory_bandwidth / 1e9:g}", f"{g.tdp_w:g}", *peaks))
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    for r in rows:
        print("  ".join(v.ljust(w) if i < 2 else v.rjust(w) for i, (v, w) in enumerate(zip(r, widths))).rstrip())
    print("Dense tensor-core peaks in TFLOP/s (int8: TOP/s); fp32 is the non-tensor peak. "
          "Sources: `flopcalc gpus --format json`.")
    return 0
