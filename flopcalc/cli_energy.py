"""CLI commands of the GPU table and the energy predictor (``flopcalc gpus``; more join here).

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
