"""Speed of a warm energy prediction against a warm ``estimate`` (benchmark, not a test).

    python benchmarks/energy_speed.py [--card flux-dev] [--gpu h100] [--repeat 200]

Prints a Markdown table: warm ``estimate()``, warm ``predict()`` on its report, and warm
``flopcalc.energy()`` (estimate + predict). Target (issue 10): energy < 2 ms warm.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

from speed import _median_seconds  # noqa: E402  (benchmarks/speed.py)


def _median_ms(fn, repeat: int) -> float:
    return 1000 * _median_seconds(fn, repeat)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--card", default="flux-dev")
    p.add_argument("--gpu", default="h100")
    p.add_argument("--repeat", type=int, default=200)
    args = p.parse_args()

    import flopcalc
    from flopcalc.energy_laws.predict import predict

    report = flopcalc.estimate(args.card)
    flopcalc.energy(args.card, gpu=args.gpu)  # warm: coefficients and GPU table loaded once
    rows = [("warm estimate()", _median_ms(lambda: flopcalc.estimate(args.card), args.repeat)),
            ("warm predict(report)", _median_ms(lambda: predict(report, gpu=args.gpu), args.repeat)),
            ("warm flopcalc.energy()", _median_ms(lambda: flopcalc.energy(args.card, gpu=args.gpu), args.repeat))]
    print(f"| {args.card} on {args.gpu} | median ms |\n|---|---|")
    for name, ms in rows:
        print(f"| {name} | {ms:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
