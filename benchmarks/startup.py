"""Start-up of the command line against the bare interpreter (a benchmark, not a test).

    python benchmarks/startup.py [--card flux-dev] [--repeat 15] [--keep DIR]

As a user meets it: a fresh virtual environment (no system site-packages), a regular ``pip install`` of this
checkout (bytecode compiled at install), every run under ``env -i PATH=/usr/bin:/bin``, the discovery index
warm (two runs first). ``python -c pass`` of the same interpreter and ``flopcalc estimate CARD --format json``
are run alternately, so both see the same machine load; medians of ``--repeat`` runs of each, wall time and
CPU time (user + system of the child). Where valgrind is installed, the instructions each executes
(callgrind), which do not depend on the machine's load, and their ratio too. Two floors are measured beside it:
importing argparse, json and dataclasses (what a CLI built on argparse with frozen dataclasses for its results
imports before any of its own code), and importing every standard-library module the command ends up with.
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


def _stdlib_of(cmd: list[str]) -> list[str]:
    """The standard-library modules ``cmd`` (a flopcalc command) has imported when it ends, beyond those the bare
    interpreter imports (top-level names, private ones left out)."""
    probe = ("import sys, runpy; sys.argv = {argv!r}; before = set(sys.modules)\n"
             "try:\n    runpy.run_path(sys.argv[0], run_name='__main__')\nexcept SystemExit:\n    pass\n"
             "names = {{m.split('.')[0] for m in set(sys.modules) - before}}\n"
             "print(' '.join(sorted(n for n in names if n in sys.stdlib_module_names and not n.startswith('_'))))")
    python = str(Path(cmd[0]).with_name("python"))
    out = subprocess.run([python, "-c", probe.format(argv=cmd)], env=ENV, capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()[-1].split()  # the command's own output comes first


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
        floors = {  # what the standard library alone costs, before any flopcalc code runs
            "argparse + json + dataclasses": [python, "-c", "import argparse, json, dataclasses"],
            "every stdlib module the command imports": [python, "-c", f"import {','.join(_stdlib_of(cli_cmd))}"],
        }
        for _ in range(2):  # the discovery index built and cached, as after a user's first run
            _timed(cli_cmd)
        commands = {"bare": bare_cmd, "cli": cli_cmd, **floors}
        runs: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
        for _ in range(args.repeat):
            for name, cmd in commands.items():
                runs[name].append(_timed(cmd))
        rows = [("what", "bare interpreter", f"flopcalc estimate {args.card} --format json", "ratio")]
        ib = _instructions(bare_cmd)
        for name in ("cli", *floors):
            if name != "cli":
                rows.append((f"*floor: {name}*", "", "", ""))
            for i, what in enumerate(("wall, median", "CPU, median")):
                b = statistics.median(x[i] for x in runs["bare"]) * 1e3
                c = statistics.median(x[i] for x in runs[name]) * 1e3
                rows.append((what, f"{b:.1f} ms", f"{c:.1f} ms", f"{c / b:.2f}×"))
            ic = _instructions(commands[name])
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
