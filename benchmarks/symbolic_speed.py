"""Speed of the symbolic path (benchmark, not a test).

    python benchmarks/symbolic_speed.py [--card sd3-medium]

Prints a Markdown table: the symbolic law of a card from a fresh process (cold: imports,
sympy included), the same law warm, compiling it to numpy, and evaluating a sweep of 100,000
points (heights × widths × steps), with and without writing it as CSV; plus the import cost the
numeric path avoids by not importing sympy.
"""

from __future__ import annotations

import argparse
import io
import statistics
import subprocess
import sys
import time

COLD = """
import time
t = time.perf_counter()
from flopcalc.flops.symbolic import symbolic_estimate
law = symbolic_estimate({card!r})
law.flops
print(time.perf_counter() - t)
"""


def _cold(card: str, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        out = subprocess.run([sys.executable, "-c", COLD.format(card=card)], check=True, capture_output=True,
                             text=True)
        times.append(float(out.stdout.strip().splitlines()[-1]))
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--card", default="sd3-medium")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()

    cold = _cold(args.card, args.repeat)
    t = time.perf_counter()
    import sympy  # noqa: F401

    sympy_import = time.perf_counter() - t
    from flopcalc.flops.sweep import compile_law, run_sweep, write_columns
    from flopcalc.flops.symbolic import symbolic_estimate

    symbolic_estimate(args.card)
    t = time.perf_counter()
    law = symbolic_estimate(args.card)
    warm = time.perf_counter() - t
    t = time.perf_counter()
    compile_law(law)
    compile_s = time.perf_counter() - t
    values = {"H": list(range(256, 2048 + 1, 64)), "W": list(range(256, 2048 + 1, 64))}
    values["S"] = list(range(1, 100_000 // (len(values["H"]) * len(values["W"])) + 2))
    t = time.perf_counter()
    sweep = run_sweep(law, values)
    sweep_s = time.perf_counter() - t
    t = time.perf_counter()
    write_columns(sweep, io.StringIO())
    csv_s = time.perf_counter() - t

    print(f"card: {args.card}, python {sys.version.split()[0]}\n")
    print("| what | time |\n|---|---|")
    for what, sec in (
        ("symbolic law, fresh process (imports included), median", cold),
        ("symbolic law, warm", warm),
        ("`import sympy` (the numeric path does not pay it)", sympy_import),
        ("compile the law to numpy (`lambdify`)", compile_s),
        (f"sweep of {len(sweep):,} points (compile + evaluate)", sweep_s),
        (f"write those {len(sweep):,} rows as CSV", csv_s),
    ):
        print(f"| {what} | {sec * 1e3:,.1f} ms |")


if __name__ == "__main__":
    main()
