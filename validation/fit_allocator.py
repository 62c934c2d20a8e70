#!/usr/bin/env python
"""Fit the caching allocator's reserve law on the replays of ``validation/build_allocator_fixtures.py`` and write
``flopcalc/data/allocator_fit.json``.

Each fixture is one batch-1 call of a component: weights ``W`` (bf16, allocated first), ``Wr`` what the allocator
reserves after them, the call's live activation peak ``A``, the reserved peak ``R`` after the call. The reserve above
the live bytes, ``O = R − (W + A)``, is the weights' part ``Wr − W`` plus the call's part ``R − Wr − A``.

* ``configs``: every measured config's weights replayed exactly, in bf16 (fp16 has the same sizes) and float32.
* ``calls``: each measured call (class, call, tiled, config) on its own: ``R − Wr = factor × A`` (least squares
  through the origin over its sizes); error: leave-one-size-out.
* ``kinds`` (text encoder, denoiser, VAE decoder), for the configs nobody measured: ``Wr − W = overhead × W`` (ratio of
  sums) or ``Wr − W = constant`` (the median), and ``R − Wr = factor × A [+ constant]``. Which weights law, and
  whether the activations' constant is kept, are decided by leave-one-component-out *inside* each fold (nested: the
  held-out component never takes part in choosing or fitting), so the outer leave-one-component-out error is the
  error of the whole procedure.

Errors are relative to the true reserve, or to 64 MiB where that is smaller (a reserve of a few MiB is not judged
by its ratio), the largest over held-out calls (``*_max_rel_error``) and the median; the error of the reserved peak
``R`` itself is given beside them.

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
TERMS = ("factor", "factor+constant")
WEIGHT_TERMS = ("ratio", "constant")
MIB = 1 << 20
SIGNIFICANT = 64 * MIB


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


def _a(fx: dict) -> float:
    return float(fx["replay"]["activation_peak_bytes"])


def _call_part(fx: dict) -> float:
    """``R − Wr``: what the call adds to the reserve."""
    return float(fx["replay"]["peak_reserved_bytes"] - fx["weights"]["reserved_bytes"])


def rel(guess: float, truth: float) -> float:
    return abs(guess - truth) / max(abs(truth), SIGNIFICANT)


def weights_law(comps: list[list[dict]], terms: str = "ratio") -> tuple[float, float]:
    """``(overhead, constant)`` of ``Wr − W = overhead × W + constant``: ``ratio`` the ratio of sums (no constant),
    ``constant`` the median reserve (no ratio)."""
    if terms == "constant":
        return 0.0, float(np.median([c[0]["weights"]["reserved_bytes"] - c[0]["weights"]["bytes"] for c in comps]))
    w = sum(c[0]["weights"]["bytes"] for c in comps)
    return sum(c[0]["weights"]["reserved_bytes"] - c[0]["weights"]["bytes"] for c in comps) / w, 0.0


def _weights_error(comp: list[dict], law: tuple[float, float]) -> float:
    w = comp[0]["weights"]
    return rel(law[0] * w["bytes"] + law[1], w["reserved_bytes"] - w["bytes"])


def choose_weights_terms(comps: dict[str, list[dict]], names: list[str]) -> str:
    """The weights law (``ratio`` or ``constant``) with the smaller leave-one-component-out error (median, then max)
    on ``names``."""
    scores = {}
    for terms in WEIGHT_TERMS:
        errs = [_weights_error(comps[h], weights_law([comps[n] for n in names if n != h], terms)) for h in names]
        scores[terms] = (float(np.median(errs)), max(errs))
    return min(WEIGHT_TERMS, key=lambda t: scores[t])


def activation_law(calls: list[dict], terms: str) -> tuple[float, float]:
    """``(factor, constant)`` of ``R − Wr = factor × A [+ constant]`` by least squares."""
    a = np.array([_a(fx) for fx in calls])
    y = np.array([_call_part(fx) for fx in calls])
    if terms == "factor" or len(set(a)) < 2:
        return float(a @ y / (a @ a)) if a.any() else 1.0, 0.0
    (factor, constant), *_ = np.linalg.lstsq(np.stack([a, np.ones_like(a)], axis=1), y, rcond=None)
    return float(factor), float(constant)


def _call_error(fx: dict, factor: float, constant: float) -> float:
    """The error of the call's part of the reserve (``R − Wr − A``) predicted by a law."""
    return rel((factor - 1) * _a(fx) + constant, _call_part(fx) - _a(fx))


def choose_terms(comps: dict[str, list[dict]], names: list[str]) -> str:
    """The activation law's terms with the smaller leave-one-component-out error (median, then max) on ``names``."""
    if len(names) < 3:
        return "factor"
    scores = {}
    for terms in TERMS:
        errs = [_call_error(fx, *activation_law([f for n in names if n != held for f in comps[n]], terms))
                for held in names for fx in comps[held]]
        scores[terms] = (float(np.median(errs)), max(errs))
    return min(TERMS, key=lambda t: scores[t])


def fit_kind(comps: dict[str, list[dict]], names: list[str]) -> dict:
    terms, wterms = choose_terms(comps, names), choose_weights_terms(comps, names)
    factor, constant = activation_law([fx for n in names for fx in comps[n]], terms)
    overhead, wconstant = weights_law([comps[n] for n in names], wterms)
    w_err, a_err, peak_err, chosen = [], [], [], defaultdict(int)
    for held in names:  # outer leave-one-component-out; terms chosen inside on the rest
        rest = [n for n in names if n != held]
        t, wt = choose_terms(comps, rest), choose_weights_terms(comps, rest)
        chosen[f"{wt}, {t}"] += 1
        o, oc = weights_law([comps[n] for n in rest], wt)
        f, c = activation_law([fx for n in rest for fx in comps[n]], t)
        w = comps[held][0]["weights"]
        w_err.append(_weights_error(comps[held], (o, oc)))
        for fx in comps[held]:
            a_err.append(_call_error(fx, f, c))
            guess = w["bytes"] * (1 + o) + oc + f * _a(fx) + c
            peak_err.append(abs(guess - fx["replay"]["peak_reserved_bytes"]) / fx["replay"]["peak_reserved_bytes"])
    return {"weights_terms": wterms, "weights_overhead": overhead, "weights_constant_bytes": round(wconstant),
            "terms": terms, "activation_factor": factor,
            "activation_constant_bytes": round(constant), "components": len(names),
            "calls": sum(len(comps[n]) for n in names), "terms_chosen_in_folds": dict(sorted(chosen.items())),
            "weights_loco_max_rel_error": max(w_err), "weights_loco_median_rel_error": float(np.median(w_err)),
            "activation_loco_max_rel_error": max(a_err), "activation_loco_median_rel_error": float(np.median(a_err)),
            "reserved_peak_loco_max_rel_error": max(peak_err),
            "reserved_peak_loco_median_rel_error": float(np.median(peak_err))}


def fit_call(fxs: list[dict]) -> dict:
    """One measured call's own factor and its leave-one-size-out errors."""
    errs, peak_errs = [], []
    for i, fx in enumerate(fxs):
        rest = fxs[:i] + fxs[i + 1:] or fxs
        f, _ = activation_law(rest, "factor")
        errs.append(_call_error(fx, f, 0.0))
        truth = fx["replay"]["peak_reserved_bytes"]
        peak_errs.append(abs(fx["weights"]["reserved_bytes"] + f * _a(fx) - truth) / truth)
    return {"activation_factor": activation_law(fxs, "factor")[0], "sizes": len(fxs),
            "loo_max_rel_error": max(errs), "loo_max_reserved_peak_rel_error": max(peak_errs),
            "measured_on": sorted({f"{fx['case']}/{fx['component']}" for fx in fxs})}


def build() -> dict:
    from flopcalc.gpu_memory.activations import config_key

    comps = load()
    by_kind: dict[str, list[str]] = defaultdict(list)
    for name, fxs in comps.items():
        by_kind[fxs[0]["kind"]].append(name)
    out: dict = {"source": "validation/fit_allocator.py on validation/fixtures/allocator (validation/"
                           "build_allocator_fixtures.py: weights in bf16 then one batch-1 call, fused attention, "
                           "replayed through flopcalc/gpu_memory/caching_allocator.py)",
                 "significant_bytes": SIGNIFICANT, "kinds": {}, "configs": {}, "calls": {}}
    for kind in KINDS:
        if not by_kind[kind]:
            raise ValueError(f"no fixture of kind {kind}")
        out["kinds"][kind] = fit_kind(comps, sorted(by_kind[kind]))
    calls: dict[str, list[dict]] = defaultdict(list)
    for name, fxs in sorted(comps.items()):
        fx = fxs[0]
        key = config_key(config_of(fx))
        w = fx["weights"]
        entry = {"weights_bytes": w["bytes"], "weights_reserved_bytes": w["reserved_bytes"],
                 "fp32_weights_bytes": w["fp32_bytes"], "fp32_weights_reserved_bytes": w["fp32_reserved_bytes"],
                 "measured_on": f"{fx['case']}/{fx['component']}"}
        old = out["configs"].setdefault(f"{fx['class_name']}:{key}", entry)
        if (old["weights_bytes"], old["weights_reserved_bytes"]) != (w["bytes"], w["reserved_bytes"]):
            raise ValueError(f"{key}: two weight replays disagree ({old['measured_on']}, {name})")
        for f in fxs:
            tiled = ":tiled" if f["settings"].get("vae_tiling") else ""
            calls[f"{f['class_name']}.{f['call']}{tiled}:{key}"].append(f)
    out["calls"] = {k: fit_call(v) for k, v in sorted(calls.items())}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    text = json.dumps(build(), indent=2, sort_keys=True) + "\n"
    fitted = json.loads(text)
    for kind, k in fitted["kinds"].items():
        print(f"{kind:13s} {k['components']:3d} components {k['calls']:4d} calls  weights +{100 * k['weights_overhead']:.2f}% {k['weights_constant_bytes'] / MIB:+.1f} MiB"
              f" (LOCO max {100 * k['weights_loco_max_rel_error']:.0f}%)  activations x{k['activation_factor']:.3f}"
              f" {k['activation_constant_bytes'] / MIB:+.1f} MiB [{k['terms']}; folds {k['terms_chosen_in_folds']}]"
              f" (LOCO median {100 * k['activation_loco_median_rel_error']:.0f}% max "
              f"{100 * k['activation_loco_max_rel_error']:.0f}%)  reserved peak LOCO median "
              f"{100 * k['reserved_peak_loco_median_rel_error']:.2f}% max {100 * k['reserved_peak_loco_max_rel_error']:.1f}%")
    worst = max(fitted["calls"].items(), key=lambda kv: kv[1]["loo_max_reserved_peak_rel_error"])
    errs = [c["loo_max_rel_error"] for c in fitted["calls"].values()]
    print(f"{len(errs)} measured calls: leave-one-size-out reserve error median {100 * np.median(errs):.0f}% max "
          f"{100 * max(errs):.0f}%; reserved peak worst {100 * worst[1]['loo_max_reserved_peak_rel_error']:.1f}% "
          f"({worst[0]})")
    if args.check:
        return 0 if OUT.exists() and OUT.read_text(encoding="utf-8") == text else 1
    OUT.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
