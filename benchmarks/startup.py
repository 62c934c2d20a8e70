"""Start-up of the command line against the bare interpreter (a benchmark, not a test).

    python benchmarks/startup.py [--card flux-dev] [--repeat 15] [--keep DIR]

As a user meets it: a fresh virtual environment (no system site-packages), a regular ``pip install`` of this
checkout (bytecode compiled at install), every run under ``env -i PATH=/usr/bin:/bin``, the discovery index
warm (two runs first). ``python -c pass`` of the same interpreter and ``flopcalc estimate CARD --format json``
are run alternately, so both see the same machine load; medians of ``--repeat`` runs of each, wall time and
CPU time (user + system of the child). Where valgrind is installed, the instructions each executes
(callgrind), which do not depend on the machine's load, and their ratio too.
"""

from __future__ import annotations

import argparse
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ENV = {"PATH": "/usr/bin:/bin"}


def _timed(cmd: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds of one run of ``cmd``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(cmd, env=ENV, stdout=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _instructions(cmd: list[str]) -> int | None:
    if shutil.which("valgrind") is None:
        return None
    res = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *cmd], env=ENV,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    match = re.search(r"Collected : (\d+)", res.stderr)
    return int(match.group(1)) if match else None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--card", default="flux-dev")
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--keep", help="build the environment in DIR and leave it there")
    args = ap.parse_args()

    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="flopcalc-startup-"))
    try:
        venv = root / "venv"
        if not (venv / "bin" / "flopcalc").exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
            subprocess.run([str(venv / "bin" / "pip"), "install", "-q", str(REPO)], check=True)
        python, cli = str(venv / "bin" / "python"), str(venv / "bin" / "flopcalc")
        bare_cmd, cli_cmd = [python, "-c", "pass"], [cli, "estimate", args.card, "--format", "json"]
        for _ in range(2):  # the discovery index built and cached, as after a user's first run
            _timed(cli_cmd)
        bare, run = [], []
        for _ in range(args.repeat):
            bare.append(_timed(bare_cmd))
            run.append(_timed(cli_cmd))
        rows = [("what", "bare interpreter", f"flopcalc estimate {args.card} --format json", "ratio")]
        for i, what in enumerate(("wall, median", "CPU, median")):
            b = statistics.median(x[i] for x in bare) * 1e3
            c = statistics.median(x[i] for x in run) * 1e3
            rows.append((what, f"{b:.1f} ms", f"{c:.1f} ms", f"{c / b:.2f}×"))
        ib, ic = _instructions(bare_cmd), _instructions(cli_cmd)
        if ib and ic:
            rows.append(("instructions (callgrind)", f"{ib / 1e6:.1f} M", f"{ic / 1e6:.1f} M", f"{ic / ib:.2f}×"))
        print(f"| {' | '.join(rows[0])} |\n|{'---|' * len(rows[0])}")
        for r in rows[1:]:
            print(f"| {' | '.join(r)} |")
        print(f"\n{args.repeat} runs of each, alternated; {sys.version.split()[0]}; "
              f"{subprocess.run(['nproc'], capture_output=True, text=True).stdout.strip()} cores")
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
