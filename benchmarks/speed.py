"""Speed of flopcalc against measuring the real modules (benchmark, not a test).

    python benchmarks/speed.py [--card flux-dev] [--repeat 10]

Prints a Markdown table: CLI wall time on a card, beside the wall time of ``python -c pass``
(interleaved, so both see the same machine load) and their ratio; warm ``estimate()``; measuring the same
pipeline (every component flopcalc counts, same shapes) with the harness in validation/ on the
meta device, in process (imports excluded) and as a fresh process; and the ratios.
The harness part needs the ``[validate]`` extra (torch, diffusers, transformers).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

_HARNESS = r"""
import json, sys, time
t0 = time.perf_counter()
sys.path.insert(0, {validation!r})
import measure
t1 = time.perf_counter()
for run in json.loads({runs!r}):
    measure.measure_component(run["dir"], settings=run["settings"], call=run["call"], with_thop=False)
t2 = time.perf_counter()
print(json.dumps({{"imports": t1 - t0, "measure": t2 - t1}}))
"""


def _median_seconds(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _harness_runs(card: str) -> list[dict]:
    """The runs flopcalc plans for ``card`` at its defaults, as harness settings."""
    import flopcalc
    from flopcalc.engine.sources import resolve

    folder = Path(resolve(card).location)
    report = flopcalc.estimate(card)
    s = report.settings
    runs = []
    for c in report.components:
        settings = {k: v for k, v in c.shape.items() if k in ("seq_len", "text_len")}
        if c.role != "text_encoder":
            settings.update(height=s.height, width=s.width)
        runs.append({"dir": str(folder / c.component), "settings": settings, "call": c.call})
    return runs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--card", default="flux-dev")
    ap.add_argument("--repeat", type=int, default=10)
    args = ap.parse_args()

    import flopcalc

    exe = shutil.which("flopcalc")
    cli = [exe] if exe else [sys.executable, "-m", "flopcalc"]
    # As a user runs it: bytecode cached (pip compiles it at install; PYTHONDONTWRITEBYTECODE=1 would
    # make every run compile every module) and the discovery index warm.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([*cli, "estimate", args.card], check=True, capture_output=True, env=env)
    bare, cli_times = [], []
    for _ in range(args.repeat):  # interleaved: both see the same load
        bare.append(_median_seconds(lambda: subprocess.run([sys.executable, "-c", "pass"], check=True, env=env), 1))
        cli_times.append(_median_seconds(lambda: subprocess.run([*cli, "estimate", args.card], check=True,
                                                                capture_output=True, env=env), 1))
    bare_s, cli_s = statistics.median(bare), statistics.median(cli_times)
    flopcalc.estimate(args.card)
    warm_s = _median_seconds(lambda: flopcalc.estimate(args.card), 200 * args.repeat)

    code = _HARNESS.format(validation=str(REPO / "validation"), runs=json.dumps(_harness_runs(args.card)))
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    fresh_s = time.perf_counter() - t
    inproc = json.loads(out.stdout.strip().splitlines()[-1])

    rows = [
        ("`python -c pass`, wall (median)", bare_s),
        ("`flopcalc estimate` CLI, wall (median)", cli_s),
        ("`flopcalc.estimate()` warm (median)", warm_s),
        ("harness, in process (imports excluded)", inproc["measure"]),
        ("harness, fresh process", fresh_s),
    ]
    print(f"card: {args.card} at its defaults ({flopcalc.estimate(args.card).settings.height}² etc.), "
          f"python {sys.version.split()[0]}\n")
    print("| what | time |\n|---|---|")
    for what, sec in rows:
        print(f"| {what} | {sec * 1e3:,.2f} ms |")
    print(f"| ratio: CLI / `python -c pass` | {cli_s / bare_s:,.1f}× |")
    print(f"| ratio: harness in process / warm estimate | {inproc['measure'] / warm_s:,.0f}× |")
    print(f"| ratio: harness fresh process / CLI | {fresh_s / cli_s:,.0f}× |")


if __name__ == "__main__":
    main()
