#!/usr/bin/env python
"""Fit the activation laws of a training step and write ``flopcalc/data/training_memory_fit.json``.

For every case of ``fixtures/training_memory`` and each mode (trainable, checkpointing, master dtype, attention),
the measured bytes at batch 1 are fitted by least squares in the denoiser's latent positions ``n`` (what flopcalc's
own plan of the training sample gives at that size, :func:`flopcalc.gpu_memory.activations.positions`):

    saved(n), forward_peak(n), backward_peak(n), step_peak(n)
        = c0 + c1·n            (fused attention: every saved tensor grows with n)
        = c0 + c1·n + c2·n²    (math attention: the score matrices)

With three sizes the error is leave-one-size-out (each size predicted by the line through the other two: the
largest relative error is what ``flopcalc train`` prints); with two the line passes through both and no error is
stated; a quadratic through three points is exact and its error not stated either. Laws are keyed by the
denoiser's class, ``train``, the inputs it is fed and its config's declared keys
(:func:`flopcalc.gpu_memory.activations.fit_key`), so they apply to the measured configs only. A case that measures
a config another case already fitted (``hunyuanvideo-33f``: HunyuanVideo at 33 frames instead of 129) is a check:
its points are predicted by the other case's laws and the errors reported (``--report``), not pooled.

    python validation/fit_training_memory.py            # write flopcalc/data/training_memory_fit.json
    python validation/fit_training_memory.py --check    # recompute, compare, write nothing
    python validation/fit_training_memory.py --report   # print every fit and check with its errors
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from functools import lru_cache
from pathlib import Path

import numpy as np
import yaml

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent
FIXTURES = HERE / "fixtures" / "training_memory"
MANIFEST = HERE / "training_memory_manifest.yaml"
OUT = REPO_ROOT / "flopcalc" / "data" / "training_memory_fit.json"
QUANTITIES = {"saved": "saved_bytes", "forward_peak": "forward_peak_bytes", "backward_peak": "backward_peak_bytes",
              "step_peak": "step_peak_bytes"}


@lru_cache(maxsize=1)
def manifest() -> dict:
    with open(MANIFEST, encoding="utf-8") as fh:
        return yaml.safe_load(fh)["cases"]


@lru_cache(maxsize=None)
def planned(case: str, height: int, width: int, num_frames: int | None) -> tuple[int, str, str]:
    """``(n, fit key, card)`` of a training sample of the case's card at that size, from flopcalc's own plan."""
    sys.path.insert(0, str(REPO_ROOT))
    import flopcalc
    from flopcalc.gpu_memory.activations import positions
    from flopcalc.training.memory_inputs import law_key

    card = Path(manifest()[case]["root"]).name
    from flopcalc.flops.estimate import estimate

    kwargs = {"num_frames": num_frames} if num_frames else {}
    est = flopcalc.train(card, height=height, width=width, frozen_encoders="cached", **kwargs)
    report = estimate(card, height=height, width=width, steps=1, strength=1.0, resolution_binning=False, **kwargs) \
        if _has_strength(card) else estimate(card, height=height, width=width, steps=1, resolution_binning=False,
                                             **kwargs)
    den = next(c for c in report.components if c.role == "denoiser")
    assert den.class_name == est.trained.class_name
    return positions(den.shape), law_key(report, den), card


def _has_strength(card: str) -> bool:
    from flopcalc.engine.errors import OptionError
    from flopcalc.flops.estimate import estimate

    try:
        estimate(card, steps=1, strength=1.0)
        return True
    except OptionError:
        return False


def fit(ns: list[int], values: list[int], degree: int) -> list[float]:
    x = np.array(ns, dtype=float)
    a = np.stack([x ** i for i in range(degree + 1)], axis=1)
    coef, *_ = np.linalg.lstsq(a, np.array(values, dtype=float), rcond=None)
    return [float(c) for c in coef]


def predict(coef: list[float], n: int) -> float:
    return sum(c * n ** i for i, c in enumerate(coef))


def loo(ns: list[int], values: list[int], degree: int) -> float | None:
    """The largest relative error of each size predicted from the others; None with no size to spare."""
    if len(set(ns)) <= degree + 1:
        return None
    worst = 0.0
    for i in range(len(ns)):
        rest = [j for j in range(len(ns)) if j != i]
        c = fit([ns[j] for j in rest], [values[j] for j in rest], degree)
        worst = max(worst, abs(predict(c, ns[i]) - values[i]) / values[i])
    return worst


def mode_of(fx: dict) -> str:
    return (f"{fx['trainable']}:{'ckpt' if fx['checkpointing'] else 'nockpt'}:{fx['master']}:{fx['attention']}")


def load() -> dict[str, list[dict]]:
    by_case: dict[str, list[dict]] = defaultdict(list)
    for path in sorted(FIXTURES.glob("*/*.json")):
        by_case[path.parent.name].append(json.loads(path.read_text(encoding="utf-8")))
    return by_case


def build() -> tuple[dict, list[dict]]:
    """The laws per fit key, and the held-out checks of cases repeating a fitted config."""
    laws: dict[str, dict] = {}
    checks: list[dict] = []
    for case in manifest():
        fixtures = load().get(case, [])
        if not fixtures:
            continue
        groups: dict[str, list[dict]] = defaultdict(list)
        key = None
        for fx in fixtures:
            s = fx["settings"]
            n, key, card = planned(case, s["height"], s["width"], s.get("num_frames"))
            fx["_n"] = n
            groups[mode_of(fx)].append(fx)
        if key in laws:  # a second case of one config: predicted, not pooled
            entry = laws[key]
            for mode, fxs in groups.items():
                if mode not in entry["modes"]:
                    continue
                for fx in fxs:
                    for q, field in QUANTITIES.items():
                        got = predict(entry["modes"][mode][q]["coef"], fx["_n"])
                        checks.append({"case": case, "mode": mode, "quantity": q, "n": fx["_n"],
                                       "measured": fx[field], "predicted": round(got),
                                       "rel_error": abs(got - fx[field]) / fx[field]})
            continue
        first = fixtures[0]
        entry = {"measured_on": f"{case}/{first['component']}", "class_name": first["class_name"],
                 "settings": {k: v for k, v in first["settings"].items() if k not in ("height", "width")
                              and not k.startswith("reference_")},
                 "lora": first.get("lora") or next((f["lora"] for f in fixtures if f.get("lora")), None),
                 "modes": {}}
        for mode, fxs in sorted(groups.items()):
            fxs = sorted(fxs, key=lambda f: f["_n"])
            ns = [f["_n"] for f in fxs]
            degree = 2 if mode.endswith(":math") and len(set(ns)) >= 3 else 1
            if len(set(ns)) < 2:
                continue
            m = {"n_range": [min(ns), max(ns)],
                 "points": [[n, *(f[field] for field in QUANTITIES.values()), f["grad_allocated_bytes"]]
                            for n, f in zip(ns, fxs)]}
            for q, field in QUANTITIES.items():
                vals = [f[field] for f in fxs]
                m[q] = {"coef": fit(ns, vals, degree), "loo_max_rel_error": loo(ns, vals, degree)}
            entry["modes"][mode] = m
        laws[key] = entry
    return laws, checks


def render(laws: dict) -> str:
    return json.dumps(laws, indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="recompute and compare with the shipped file")
    ap.add_argument("--report", action="store_true", help="print every law's errors and the held-out checks")
    args = ap.parse_args(argv)
    laws, checks = build()
    text = render(laws)
    if args.report:
        for key, entry in laws.items():
            for mode, m in entry["modes"].items():
                errs = {q: m[q]["loo_max_rel_error"] for q in QUANTITIES}
                print(f"{entry['measured_on']:40s} {mode:28s} n {m['n_range']} " +
                      " ".join(f"{q} {'-' if e is None else f'{100 * e:.2f}%'}" for q, e in errs.items()))
        for c in checks:
            print(f"check {c['case']} {c['mode']} {c['quantity']} n={c['n']}: measured {c['measured']:,} predicted "
                  f"{c['predicted']:,} ({100 * c['rel_error']:.2f}%)")
    if args.check:
        same = OUT.exists() and OUT.read_text(encoding="utf-8") == text
        print("same" if same else f"DIFFERS: {OUT}")
        return 0 if same else 1
    if not args.report:
        OUT.write_text(text, encoding="utf-8")
        print(f"wrote {OUT} ({len(laws)} configs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
