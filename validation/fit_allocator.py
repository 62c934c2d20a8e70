#!/usr/bin/env python
"""Fit the caching allocator's reserve law on the replays of ``validation/build_allocator_fixtures.py`` and write
``flopcalc/data/allocator_fit.json``.

Each fixture is one batch-1 call of a component (weights W in bf16, allocated first; live activation peak A; the
allocator's reserved peak R after both; Wr the reserve after the weights alone). The reserve above the live bytes,
``O = R − (W + A)``, splits into the weights' part ``Wr − W`` and the call's ``R − Wr − A``. Per component kind
(``text_encoder``, ``denoiser``, ``vae_decoder``):

    Wr − W        = overhead × W                         (ratio of sums over the kind's components)
    R − Wr        = factor × A + constant                (least squares over the kind's calls)

The error is leave-one-component-out: each component's calls predicted by the law fitted on the other components of
its kind; reported as the relative error of the predicted O (``loco_max_rel_error``: the largest over calls whose O
is at least 64 MiB, smaller ones are listed by absolute error), and of the reserved peak R. Where the weights'
overhead of a config is known exactly (every measured config: the same replay of its own tensors,
``configs`` below, keyed by the class and ``flopcalc.gpu_memory.activations.config_key``), only the call's part is
predicted: ``loco_max_rel_error_weights_exact``.

    python validation/fit_allocator.py           # write flopcalc/data/allocator_fit.json
    python validation/fit_allocator.py --check   # recompute, compare, write nothing
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent
sys.path.insert(0, str(REPO_ROOT))
FIXTURES = HERE / "fixtures" / "allocator"
OUT = REPO_ROOT / "flopcalc" / "data" / "allocator_fit.json"
KINDS = ("text_encoder", "denoiser", "vae_decoder")
MIB = 1 << 20
SIGNIFICANT = 64 * MIB  # calls with a smaller reserve are judged by absolute error


def kind_of(fx: dict) -> str:
    """A decode is a VAE decoder's call; a call measured at sequence lengths a text encoder's; the rest denoisers'."""
    if fx["call"] == "decode":
        return "vae_decoder"
    return "text_encoder" if "seq_len" in fx["settings"] else "denoiser"


def config_of(fx: dict) -> dict:
    import yaml

    with open(HERE / "activation_manifest.yaml", encoding="utf-8") as fh:
        root = yaml.safe_load(fh)["cases"][fx["case"]]["root"]
    return json.loads((REPO_ROOT / root / fx["component"] / "config.json").read_text(encoding="utf-8"))


def load() -> dict[str, list[dict]]:
    """Fixtures by component (``case/component/call``), each with its kind."""
    out: dict[str, list[dict]] = defaultdict(list)
    for path in sorted(FIXTURES.glob("*/*.json")):
        fx = json.loads(path.read_text(encoding="utf-8"))
        fx["kind"] = kind_of(fx)
        out[f"{fx['case']}/{fx['component']}/{fx['call']}"].append(fx)
    return out


def weights_law(comps: list[list[dict]]) -> float:
    w = sum(c[0]["weights"]["bytes"] for c in comps)
    return sum(c[0]["weights"]["reserved_bytes"] - c[0]["weights"]["bytes"] for c in comps) / w


def activation_law(calls: list[dict]) -> tuple[float, float]:
    """``(factor, constant)`` of ``R − Wr = factor × A + constant`` by least squares."""
    a = np.array([fx["replay"]["activation_peak_bytes"] for fx in calls], dtype=float)
    y = np.array([fx["replay"]["peak_reserved_bytes"] - fx["weights"]["reserved_bytes"] for fx in calls], dtype=float)
    if len(set(a)) < 2:
        return float(y.sum() / a.sum()) if a.sum() else 1.0, 0.0
    (factor, constant), *_ = np.linalg.lstsq(np.stack([a, np.ones_like(a)], axis=1), y, rcond=None)
    return float(factor), float(constant)


def predict(fx: dict, overhead: float | None, factor: float, constant: float) -> float:
    """The predicted reserve above the live bytes (``overhead`` None: the weights' own, exact)."""
    w = fx["weights"]
    weights_part = w["reserved_bytes"] - w["bytes"] if overhead is None else overhead * w["bytes"]
    return max(0.0, weights_part + (factor - 1) * fx["replay"]["activation_peak_bytes"] + constant)


def actual(fx: dict) -> int:
    return fx["replay"]["peak_reserved_bytes"] - fx["replay"]["peak_live_bytes"]


def build() -> dict:
    comps = load()
    by_kind: dict[str, list[str]] = defaultdict(list)
    for name, fxs in comps.items():
        by_kind[fxs[0]["kind"]].append(name)
    out: dict = {"source": "validation/fit_allocator.py on validation/fixtures/allocator (validation/"
                           "build_allocator_fixtures.py: weights in bf16 then one batch-1 call, fused attention, "
                           "replayed through flopcalc/gpu_memory/caching_allocator.py)",
                 "significant_bytes": SIGNIFICANT, "kinds": {}, "configs": {}}
    for kind in KINDS:
        names = sorted(by_kind[kind])
        if not names:
            raise ValueError(f"no fixture of kind {kind}")
        calls = [fx for n in names for fx in comps[n]]
        overhead = weights_law([comps[n] for n in names])
        factor, constant = activation_law(calls)
        rel, rel_exact, peak_rel, small_abs = [], [], [], []
        for held in names:
            rest = [n for n in names if n != held] or names
            o = weights_law([comps[n] for n in rest])
            f, c = activation_law([fx for n in rest for fx in comps[n]])
            for fx in comps[held]:
                truth = actual(fx)
                guess, guess_exact = predict(fx, o, f, c), predict(fx, None, f, c)
                peak_rel.append(abs(guess - truth) / fx["replay"]["peak_reserved_bytes"])
                if truth >= SIGNIFICANT:
                    rel.append(abs(guess - truth) / truth)
                    rel_exact.append(abs(guess_exact - truth) / truth)
                else:
                    small_abs.append(abs(guess_exact - truth))
        out["kinds"][kind] = {
            "weights_overhead": overhead, "activation_factor": factor, "activation_constant_bytes": constant,
            "components": len(names), "calls": len(calls),
            "loco_max_rel_error": max(rel, default=0.0), "loco_median_rel_error": float(np.median(rel)) if rel else 0.0,
            "loco_max_rel_error_weights_exact": max(rel_exact, default=0.0),
            "loco_median_rel_error_weights_exact": float(np.median(rel_exact)) if rel_exact else 0.0,
            "loco_max_reserved_peak_rel_error": max(peak_rel), "loco_median_reserved_peak_rel_error":
                float(np.median(peak_rel)),
            "loco_max_abs_error_small_bytes": int(max(small_abs, default=0)),
        }
    from flopcalc.gpu_memory.activations import config_key

    for name, fxs in sorted(comps.items()):
        fx = fxs[0]
        key = f"{fx['class_name']}:{config_key(config_of(fx))}"
        w = fx["weights"]
        entry = {"weights_bytes": w["bytes"], "weights_reserved_bytes": w["reserved_bytes"], "dtype": fx["dtype"],
                 "measured_on": f"{fx['case']}/{fx['component']}"}
        old = out["configs"].setdefault(key, entry)
        if (old["weights_bytes"], old["weights_reserved_bytes"]) != (w["bytes"], w["reserved_bytes"]):
            raise ValueError(f"{key}: two weight replays disagree ({old['measured_on']}, {name})")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    text = json.dumps(build(), indent=2, sort_keys=True) + "\n"
    for kind, k in json.loads(text)["kinds"].items():
        print(f"{kind:13s} {k['components']:3d} components {k['calls']:4d} calls  weights +{100 * k['weights_overhead']:.2f}%"
              f"  activations x{k['activation_factor']:.3f} {k['activation_constant_bytes'] / MIB:+.1f} MiB  "
              f"LOCO reserve above live: median {100 * k['loco_median_rel_error']:.1f}% max "
              f"{100 * k['loco_max_rel_error']:.1f}% (weights exact: {100 * k['loco_median_rel_error_weights_exact']:.1f}% / "
              f"{100 * k['loco_max_rel_error_weights_exact']:.1f}%); reserved peak: median "
              f"{100 * k['loco_median_reserved_peak_rel_error']:.2f}% max {100 * k['loco_max_reserved_peak_rel_error']:.2f}%")
    if args.check:
        return 0 if OUT.exists() and OUT.read_text(encoding="utf-8") == text else 1
    OUT.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
