#!/usr/bin/env python
"""Fit the activation-peak law of each measured component and write ``flopcalc/data/activation_fit.json``.

For every component in ``fixtures/activations`` and each attention path (math, fused), the measured peak of
live activation elements at batch 1 is fitted by least squares as

    peak(n) = c0 + c1·n + c2·n²,   n = latent positions of one call (latent height × width × frames),
                                   or a text encoder's sequence length,

the form of a network whose widest tensors grow with n and whose attention scores grow with n² (c2 ≈ 0 on the
fused path). On the math path, where the peak moves from the widest non-attention layer (the fused path's peak,
measured equal at the smaller sizes) to the attention's scores (above it at the larger sizes), the law is the larger
of two such quadratics, each fitted to its own sizes (:func:`law`). A call whose n its config fixes (Kandinsky 2.2's PriorTransformer: num_embeddings text states and
its additional embeddings at every image size) is measured at that n and fitted by the constant it measured. The error is leave-one-out: each size predicted by the fit of the others; the largest relative
error is what ``flopcalc memory`` prints beside the estimate. Fits are keyed by the component's class, call,
the inputs it is fed beyond latent and text (``flopcalc.gpu_memory.activations.form``) and the config's declared keys, so
they apply to the measured models only.

    python validation/fit_activations.py           # write flopcalc/data/activation_fit.json
    python validation/fit_activations.py --check   # recompute, compare, write nothing
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from functools import lru_cache
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent
FIXTURES = HERE / "fixtures" / "activations"
OUT = REPO_ROOT / "flopcalc" / "data" / "activation_fit.json"


def card_of(case: str) -> str:
    """The bundled card a manifest case measures (its root's folder name)."""
    import yaml

    with open(HERE / "activation_manifest.yaml", encoding="utf-8") as fh:
        return Path(yaml.safe_load(fh)["cases"][case]["root"]).name


def positions(fx: dict) -> tuple[int, str]:
    """n of a fixture and the class flopcalc plans for it, from flopcalc's own plan of that call (the same n and
    class the tool looks up); a text encoder's n is its sequence length."""
    n, class_name, _, _ = planned(fx)
    return n, class_name


def planned(fx: dict) -> tuple[int, str, bool, tuple[str, ...]]:
    """:func:`positions`, whether the plan runs the call on one latent frame, and the inputs beyond latent and text
    it is fed (``flopcalc.gpu_memory.activations.form``): its fit is keyed by both."""
    s = fx["settings"]
    return _planned(card_of(fx["case"]), fx["component"], fx["call"], s.get("seq_len"), s.get("height"),
                    s.get("width"), s.get("num_frames"))


@lru_cache(maxsize=None)
def _planned(card: str, component: str, call: str, seq_len: int | None, height: int | None, width: int | None,
             num_frames: int | None) -> tuple[int, str, bool, tuple[str, ...]]:
    from flopcalc.gpu_memory.activations import form, positions as latent_positions, single_frame
    from flopcalc.flops.estimate import estimate

    if height is None:  # the class the card's plan loads (e.g. Qwen3Model from a Qwen3ForCausalLM checkpoint)
        return seq_len, estimate(card).component(component, call).class_name, False, ()
    report = estimate(card, height=height, width=width, num_frames=num_frames,
                      resolution_binning=False)  # the default steps: every expert of a two-expert model runs
    comp = report.component(component, call)
    return latent_positions(comp.shape), comp.class_name, single_frame(comp.shape), form(comp.shape)


def fit(ns: list[int], peaks: list[int]) -> list[float]:
    """``[c0, c1, c2]``; a call whose n its config fixes (measured at that one n) is the constant ``[peak, 0, 0]``."""
    if len(set(ns)) == 1:
        return [float(np.mean(peaks)), 0.0, 0.0]
    x = np.array(ns, dtype=float)
    a = np.stack([np.ones_like(x), x, x * x], axis=1)
    coef, *_ = np.linalg.lstsq(a, np.array(peaks, dtype=float), rcond=None)
    return [float(c) for c in coef]


def predict(coef: list[float], n: int) -> float:
    return coef[0] + coef[1] * n + coef[2] * n * n


def law(ns: list[int], peaks: list[int], fused: list[int] | None = None) -> dict[str, list[float]]:
    """The fitted law of one call and attention path: ``{"coef": [c0, c1, c2]}``. On the math path (``fused``: the
    fused path's peaks at the same n), when at one or more sizes the peak equals the fused one (no score matrix is
    live at the peak: the widest non-attention layer holds it) and at three or more it exceeds it (the scores and
    their softmax do), the peak is the larger of two phases: ``{"coef": <the fused peaks' law>, "attention_coef":
    <the law of the exceeding peaks>}`` (a single quadratic cannot follow the peak moving from one to the other)."""
    if fused is not None:
        over = [i for i in range(len(ns)) if peaks[i] > fused[i]]
        if len({ns[i] for i in over}) >= 3 and any(peaks[i] == fused[i] for i in range(len(ns))) and \
                all(peaks[i] >= fused[i] for i in range(len(ns))):
            return {"coef": fit(ns, fused), "attention_coef": fit([ns[i] for i in over], [peaks[i] for i in over])}
    return {"coef": fit(ns, peaks)}


def evaluate(model: dict[str, list[float]], n: int) -> float:
    """A law's peak at n: the larger of its phases."""
    return max(predict(model[k], n) for k in ("coef", "attention_coef") if k in model)


def loo_error(ns: list[int], peaks: list[int], fused: list[int] | None = None) -> float:
    """The largest relative error of each point predicted by the law fitted (:func:`law`) to the others; at a fixed
    n (nothing to leave out: the call never runs at another size) the spread of the measurements about their mean."""
    if len(set(ns)) == 1:
        return max(abs(float(np.mean(peaks)) - p) / p for p in peaks)
    worst = 0.0
    for i in range(len(ns)):
        rest = [j for j in range(len(ns)) if j != i]
        model = law([ns[j] for j in rest], [peaks[j] for j in rest], None if fused is None else [fused[j] for j in rest])
        worst = max(worst, abs(evaluate(model, ns[i]) - peaks[i]) / peaks[i])
    return worst


def fit_key(class_name: str, call: str, config: dict, *, tiled: bool, single_frame: bool = False,
            fed: tuple[str, ...] = ()) -> str:
    sys.path.insert(0, str(REPO_ROOT))
    from flopcalc.gpu_memory.activations import fit_key as key

    return key(class_name, call, config, tiled=tiled, single_frame=single_frame, fed=fed)


def build() -> dict:
    """One law per fit key and attention path. Cases measuring one config (cards that share it, or a case adding
    sizes to another's) pool their points; they must agree on the settings and on the peak at a shared n."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for path in sorted(FIXTURES.glob("*/*.json")):
        fx = json.loads(path.read_text(encoding="utf-8"))
        groups[(fx["case"], fx["component"], fx["call"], fx["attention"])].append(fx)
    pooled: dict[str, dict] = {}
    for (case, component, call, attention), fixtures in sorted(groups.items()):
        plans = [planned(fx) for fx in fixtures]
        folder = REPO_ROOT / "model_cards" / card_of(case) / component
        key = fit_key(plans[0][1], call, json.loads((folder / "config.json").read_text(encoding="utf-8")),
                      tiled=bool(fixtures[0]["settings"].get("vae_tiling")), single_frame=plans[0][2],
                      fed=plans[0][3])
        settings = {k: v for k, v in fixtures[0]["settings"].items()  # those held fixed
                    if k not in ("height", "width", "seq_len") and all(fx["settings"].get(k) == v for fx in fixtures)}
        entry = pooled.setdefault(key, {"settings": settings})
        if entry["settings"] != settings:
            raise ValueError(f"{key}: {case}/{component} is measured with {settings}, {next(iter(entry['sources']))} "
                             f"with {entry['settings']}: one config, one set of settings")
        points = entry.setdefault(attention, {})
        sources = entry.setdefault("sources", {})  # measured_on: the card that gives the most points (the first)
        sources[f"{card_of(case)}/{component}"] = sources.get(f"{card_of(case)}/{component}", 0) + len(fixtures)
        for (n, _, _, _), fx in zip(plans, fixtures):
            if points.setdefault(n, fx["peak_elements"]) != fx["peak_elements"]:
                raise ValueError(f"{key}: two peaks measured at n = {n} ({case}/{component} and another case)")
    out: dict[str, dict] = {}
    for key, entry in pooled.items():
        sources = entry["sources"]
        out[key] = {"measured_on": max(sources, key=lambda s: (sources[s], -list(sources).index(s))),
                    "settings": entry["settings"]}
        for attention in sorted(a for a in entry if a in ("fused", "math")):  # fused first: the math law uses it
            ns = sorted(entry[attention])
            peaks = [entry[attention][n] for n in ns]
            fused = [entry["fused"][n] for n in ns] if attention == "math" and sorted(entry.get("fused", ())) == ns \
                else None
            out[key][attention] = {**law(ns, peaks, fused), "loo_max_rel_error": loo_error(ns, peaks, fused),
                                   "n_range": [ns[0], ns[-1]], "points": [[n, p] for n, p in zip(ns, peaks)]}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    text = json.dumps(build(), indent=2, sort_keys=True) + "\n"
    for key, entry in json.loads(text).items():
        print(f"{key[:60]:60s}  math LOO {100 * entry['math']['loo_max_rel_error']:5.1f}%  "
              f"fused LOO {100 * entry['fused']['loo_max_rel_error']:5.1f}%")
    if args.check:
        return 0 if OUT.exists() and OUT.read_text(encoding="utf-8") == text else 1
    OUT.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
