#!/usr/bin/env python
"""Fit the activation-peak law of each measured component and write ``flopcalc/data/activation_fit.json``.

For every component in ``fixtures/activations`` and each attention path (math, fused), the measured peak of
live activation elements at batch 1 is fitted by least squares in n (latent positions of one call: latent height ×
width × frames; one latent frame's, height × width, for a call that runs one latent frame at a time,
``flopcalc.gpu_memory.activations.FRAME_BY_FRAME``; a text encoder's sequence length) as

    peak(n) = max over phases p of  c0_p + c1_p·n + c2_p·n²

where a phase is the part of the call spent in one module (cut at depth 0, 1 or 2 of the module tree), an attention
module below it apart (``measure_activations.PhasedLiveElements`` records each phase's own peak at every size): each
phase's tensors grow with n, and its scores, on the math path, with n². One quadratic through the call's peaks (the
form ``curve``) cannot follow a peak that moves from one layer to another as n grows (GLM-4's from the MLP to the
scores between 512 and 1024 tokens); the largest of the phases' quadratics, each fitted to its own peaks, does. Where
the peak moves inside one phase (one module called on the text tokens, then on the image tokens), the call's peaks
split into two runs of sizes, one quadratic each (``segments``). The form (:data:`FORMS`: the phases at one depth,
those recorded at three or more sizes or at two or more, the one curve, or two runs) is chosen per call by
leave-one-out on the points it is fitted to (:func:`select`). A call measured on a grid
of sizes and frame counts (a tiled video decode) may also take ``frames:d:k``: each phase ``c0 + c1·n + ct·t`` in n
and the latent frames t apart, for a decode whose every tile runs over all frames (LTX-Video's, Mochi's): each tile's
working set grows with t alone, the decoded tiles held until they are blended with n. A component measured
before phases were recorded (its fixtures have no ``phase_peaks``) is fitted by the curve. A call whose n its config fixes (Kandinsky 2.2's PriorTransformer: num_embeddings text
states and its additional embeddings at every image size) is measured at that n and fitted by the constant it
measured, as is an image encoder at its config's ``image_size``. A VAE encode is fitted in its input's pixels of one
frame (``flopcalc.gpu_memory.activations.positions``), the frames it encodes held fixed.

The error is leave-one-out: each size predicted by the law fitted to the others, its form chosen on those others
alone (never on the point it is scored on); the largest relative error is what ``flopcalc memory`` prints beside the
estimate. Fits are keyed by the component's class, call, the inputs it is fed beyond latent and text
(``flopcalc.gpu_memory.activations.form``) and the config's declared keys, so they apply to the measured models only.

    python validation/fit_activations.py           # write flopcalc/data/activation_fit.json
    python validation/fit_activations.py --check   # recompute, compare, write nothing
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent
FIXTURES = HERE / "fixtures" / "activations"
OUT = REPO_ROOT / "flopcalc" / "data" / "activation_fit.json"


def card_of(case: str) -> str:
    """The bundled card a manifest case measures (its root's folder name)."""
    return _case_cards()[case]


@lru_cache(maxsize=1)
def _case_cards() -> dict[str, str]:
    """Every manifest case's card, read once (the manifest is parsed per run, not per fixture)."""
    import yaml

    with open(HERE / "activation_manifest.yaml", encoding="utf-8") as fh:
        return {case: Path(c["root"]).name for case, c in yaml.safe_load(fh)["cases"].items()}


def positions(fx: dict) -> tuple[int, str]:
    """n of a fixture and the class flopcalc plans for it, from flopcalc's own plan of that call (the same n and
    class the tool looks up); a text encoder's n is its sequence length."""
    n, class_name, _, _, _ = planned(fx)
    return n, class_name


def planned(fx: dict) -> tuple[int, str, bool, tuple[str, ...], int | None]:
    """:func:`positions`, whether the plan runs the call on one latent frame, and the inputs beyond latent and text
    it is fed (``flopcalc.gpu_memory.activations.form``): its fit is keyed by both; and the latent frames the plan
    decodes (``activations.latent_frames``; None for a text encoder). A call on pixels (a VAE encode, an image
    encoder: ``activations.pixel_call`` of the card's default plan) takes n from the input measured (the card's
    plan may resize it: HunyuanVideo 1.5 I2V encodes the bucket nearest the image), one frame when it encodes one."""
    s = fx["settings"]
    return _planned(card_of(fx["case"]), fx["component"], fx["call"], s.get("seq_len"), s.get("height"),
                    s.get("width"), s.get("num_frames"), bool(s.get("vae_tiling")))


@lru_cache(maxsize=None)
def _planned(card: str, component: str, call: str, seq_len: int | None, height: int | None, width: int | None,
             num_frames: int | None, tiled: bool = False) -> tuple[int, str, bool, tuple[str, ...], int | None]:
    from flopcalc.gpu_memory.activations import form, latent_frames, per_frame, pixel_call, \
        positions as latent_positions, single_frame
    from flopcalc.flops.estimate import estimate

    default = estimate(card).component(component, call)
    if height is None:  # the class the card's plan loads (e.g. Qwen3Model from a Qwen3ForCausalLM checkpoint), and
        # the inputs it is fed (Stable Audio's DiT, a sequence model: its one timestep token)
        return seq_len, default.class_name, False, form(default.shape), None
    if pixel_call(default.shape):  # a VAE encode, an image encoder: n is the measured input's pixels of one frame
        shape = {"height": height, "width": width} | ({} if num_frames is None else {"frames": num_frames})
        return latent_positions(shape), default.class_name, single_frame(shape), (), None
    report = estimate(card, height=height, width=width, num_frames=num_frames,
                      resolution_binning=False)  # the default steps: every expert of a two-expert model runs
    comp = report.component(component, call)
    n = latent_positions(comp.shape, per_frame=per_frame(comp.class_name, call, tiled=tiled))
    return n, comp.class_name, single_frame(comp.shape), form(comp.shape), latent_frames(comp.shape)


#: The law's forms, in the order preferred among equals: the largest of one quadratic per phase (the module running
#: at depth d = 0, 1 or 2, attention apart: ``measure_activations.PhasedLiveElements``), each fitted to that phase's
#: own peaks, also where another phase holds the call's peak (``phases:d:k``: the phases recorded at k or more sizes;
#: one recorded at two is fitted by a line, which can mislead between and beyond them); or one quadratic in n through
#: the call's peaks (``curve``). Phases come first: where both follow the sizes measured (a peak still in one layer),
#: the phases also follow the peak to a layer that holds it beyond them, which one curve cannot (SDXL's UNet math
#: path: a curve through 384²-1024², held by the scores, is 18% off at 256², held outside attention). Depth 1 (a
#: transformer's blocks, a UNet's down/mid/up stacks, an encoder's layers) before 2 and 0: an order chosen on the
#: measured components (ChatGLM: 12.9% → 0.7% over depth 0 first; depth 2 first: SD3's 6% → 15%), so a preference
#: read off the same data the errors are computed on.
#: Last, ``segments``: the call's peaks split at one size into two runs of consecutive sizes (two or more each), one
#: quadratic through each run (a line through two), the peak the larger of the two (:func:`segments`): a peak that
#: moves between layers the phases cannot tell apart, one module called twice in each block (CogView4: the
#: feed-forward on the 1024 text tokens holds the fused peak up to 512², the same feed-forward on the image tokens
#: above; the depths recorded cut at whole blocks, where both are one phase); a law chosen, as the others, by
#: leave-one-out inside each fold.
FORMS = ("phases:1:3", "phases:2:3", "phases:0:3", "phases:1:2", "phases:2:2", "phases:0:2", "curve", "segments")
#: ``segments`` is chosen only where its leave-one-out error is at most this fraction's inverse of the best other
#: form's (a half): with two free runs it fits a fold's few points closely by chance, and chosen on a plain minimum it
#: took 5 of HunyuanVideo's 6 tiled-decode folds and extrapolated 10% off (2.3% without it).
SEGMENTS_MARGIN = 2.0
#: Forms for a grid of sizes and frame counts (:func:`frames_apart`), after :data:`FORMS` (chosen only where better):
#: one ``c0 + c1·n + ct·t`` per phase at depth d recorded at k or more points (t: latent frames).
FRAME_FORMS = ("frames:1:4", "frames:2:4", "frames:0:4")
#: Errors this close count as equal when forms are compared (the first is chosen).
TIE = 1e-6


@dataclass(frozen=True)
class Point:
    """One measured size of a call: n, the call's peak and its phase peaks (``{depth: {phase: peak}}``)."""

    n: int
    peak: int
    phases: dict[str, dict[str, int]] | None = None
    frames: int | None = None  # the latent frames decoded (a video call), for the ``frames`` forms


def quadratic(ns: list[int], values: list[int]) -> list[float]:
    """``[c0, c1, c2]`` by least squares; of degree one less than the distinct sizes where they are fewer than three
    (two: a line; one: the constant)."""
    degree = min(2, len(set(ns)) - 1)
    x = np.array(ns, dtype=float)
    a = np.stack([x ** k for k in range(degree + 1)], axis=1)
    coef, *_ = np.linalg.lstsq(a, np.array(values, dtype=float), rcond=None)
    return [float(c) for c in coef] + [0.0] * (2 - degree)


def fit(ns: list[int], peaks: list[int]) -> list[float]:
    """``[c0, c1, c2]``; a call whose n its config fixes (measured at that one n) is the constant ``[peak, 0, 0]``."""
    if len(set(ns)) == 1:
        return [float(np.mean(peaks)), 0.0, 0.0]
    return quadratic(ns, peaks)


def predict(coef: list[float], n: int, frames: int | None = None) -> float:
    """``c0 + c1·n + c2·n²``, plus ``ct·t`` for a phase of a ``frames`` form (``[c0, c1, c2, ct]``)."""
    return coef[0] + coef[1] * n + coef[2] * n * n + (coef[3] * frames if len(coef) > 3 else 0.0)


def envelope(phases: list[list[float]], n: float, frames: int | None = None) -> float:
    """A law's peak at n (and t latent frames): the largest of its phases."""
    return max(predict(c, n, frames) for c in phases)


def frames_apart(points: list[Point]) -> bool:
    """Whether the points vary n and the latent frames t independently (a grid of sizes and frame counts: two or
    more frame counts and two or more positions per frame), so that a law in both can be fitted."""
    frames = [p.frames for p in points]
    return None not in frames and len(set(frames)) > 1 and len({p.n // p.frames for p in points}) > 1


def linear_in_frames(ns: list[int], frames: list[int], values: list[int]) -> list[float]:
    """``[c0, c1, 0, ct]`` of ``c0 + c1·n + ct·t`` by least squares."""
    a = np.array([[1.0, n, t] for n, t in zip(ns, frames)])
    coef, *_ = np.linalg.lstsq(a, np.array(values, dtype=float), rcond=None)
    return [float(coef[0]), float(coef[1]), 0.0, float(coef[2])]


def _prune(phases: list[list[float]], lo: int, hi: int) -> list[list[float]]:
    """The phases that hold the envelope somewhere on a logarithmic grid from ``lo / 4`` to ``16 · hi`` (the others
    never decide the peak there), in order, duplicates dropped."""
    grid = np.geomspace(max(lo / 4, 1.0), 16.0 * hi, 400)
    values = np.array([c[0] + c[1] * grid + c[2] * grid * grid for c in phases])  # predict(c, n), on the whole grid
    leaders = sorted(set(int(i) for i in values.argmax(axis=0)))
    kept: list[list[float]] = []
    for i in leaders:
        if phases[i] not in kept:
            kept.append(phases[i])
    return kept


def segments(points: list[Point]) -> list[list[float]]:
    """The law of two runs of consecutive sizes: for each split of the sizes into a lower and an upper run of two or
    more each, one quadratic through each run's peaks (:func:`quadratic`: a line through two); the split whose envelope
    (the larger of the two) misses the points it is fitted to least, by the largest relative error (the first among
    equals). Fewer than four sizes: the curve."""
    ns = sorted({p.n for p in points})
    if len(ns) < 4:
        return [fit([p.n for p in points], [p.peak for p in points])]
    best: tuple[float, list[list[float]]] | None = None
    for cut in ns[2:-1]:
        runs = ([p for p in points if p.n < cut], [p for p in points if p.n >= cut])
        pieces = [quadratic([p.n for p in run], [p.peak for p in run]) for run in runs]
        miss = max(abs(envelope(pieces, p.n) - p.peak) / p.peak for p in points)
        if best is None or miss < best[0] - TIE:
            best = (miss, pieces)
    return best[1]


def fit_form(form: str, points: list[Point]) -> list[list[float]]:
    """The phases of ``form`` fitted to ``points``: ``curve`` one quadratic through the peaks; ``phases:d:k`` one
    quadratic per phase at depth d recorded at k or more sizes through that phase's peaks (at two sizes a line),
    pruned to those that can hold the peak (:func:`_prune`); where no phase was recorded at k sizes, the curve."""
    ns = [p.n for p in points]
    if form == "segments" and len(set(ns)) > 1:
        return segments(points)
    if form == "curve" or len(set(ns)) == 1:
        return [fit(ns, [p.peak for p in points])]
    kind, depth, sizes = form.split(":")
    if kind == "frames":  # one c0 + c1·n + ct·t per phase recorded at k or more points (no pruning: two variables)
        rows: dict[str, list[tuple[int, int, int]]] = {}
        for p in points:
            for phase, value in p.phases[depth].items():
                rows.setdefault(phase, []).append((p.n, p.frames, value))
        phases = [linear_in_frames(*map(list, zip(*r))) for r in rows.values() if len(r) >= int(sizes)]
        return phases or [fit(ns, [p.peak for p in points])]
    series: dict[str, tuple[list[int], list[int]]] = {}
    for p in points:
        for phase, value in p.phases[depth].items():
            series.setdefault(phase, ([], []))
            series[phase][0].append(p.n)
            series[phase][1].append(value)
    phases = [quadratic(x, y) for x, y in series.values() if len(set(x)) >= int(sizes)]
    return _prune(phases, min(ns), max(ns)) if phases else [fit(ns, [p.peak for p in points])]


def _errors(form: str, points: list[Point]) -> list[float]:
    """Each point's relative error predicted by ``form`` fitted to the others."""
    out = []
    for i, p in enumerate(points):
        rest = points[:i] + points[i + 1:]
        out.append(abs(envelope(fit_form(form, rest), p.n, p.frames) - p.peak) / p.peak)
    return out


def select(points: list[Point]) -> str:
    """The form for ``points``: the one whose leave-one-out error on these points is least (among
    equals the first in :data:`FORMS`; ``segments`` only where it beats the best other by :data:`SEGMENTS_MARGIN`,
    and not on a grid of sizes and frame counts); one quadratic where phases were not recorded at every point, or
    where too few
    points leave nothing to compare (three or fewer)."""
    grid = frames_apart(points)
    # segments splits the points by size alone: not for a grid of sizes and frame counts, where the frame forms are
    forms = [f for f in FORMS + (FRAME_FORMS if grid else ())
             if (f == "curve" or (f == "segments" and not grid)
                 or (f != "segments" and all(p.phases is not None for p in points)))]
    if len(points) <= 3 or len(forms) == 1:
        return "curve"
    scores = {f: max(_errors(f, points)) for f in forms}
    if "segments" in scores and SEGMENTS_MARGIN * scores["segments"] > min(e for f, e in scores.items()
                                                                           if f != "segments"):
        del scores["segments"]  # two runs fitted on few points interpolate anything: only where the others fail
    best = min(scores.values())
    return next(f for f in forms if f in scores and scores[f] <= best + TIE)


def law(points: list[Point]) -> dict[str, Any]:
    """The fitted law of one call and attention path: ``{"form": ..., "phases": [[c0, c1, c2], ...]}`` (``[c0, c1,
    c2, ct]`` in a ``frames`` form), the peak at n the largest phase (:func:`envelope`); the form chosen on these
    points (:func:`select`)."""
    form = "curve" if len({p.n for p in points}) == 1 else select(points)
    return {"form": form, "phases": fit_form(form, points)}


def loo_error(points: list[Point]) -> float:
    """The largest relative error of each point predicted by the law fitted to the others, its form chosen on those
    others alone (:func:`select` inside each fold: the form is never chosen on the point it is scored on); at a fixed
    n (nothing to leave out: the call never runs at another size) the spread of the measurements about their mean."""
    if len({p.n for p in points}) == 1:
        return max(abs(float(np.mean([q.peak for q in points])) - p.peak) / p.peak for p in points)
    worst = 0.0
    for i, p in enumerate(points):
        rest = points[:i] + points[i + 1:]
        worst = max(worst, abs(envelope(law(rest)["phases"], p.n, p.frames) - p.peak) / p.peak)
    return worst


def fit_key(class_name: str, call: str, config: dict, *, tiled: bool, single_frame: bool = False,
            fed: tuple[str, ...] = (), tile: int | None = None) -> str:
    sys.path.insert(0, str(REPO_ROOT))
    from flopcalc.gpu_memory.activations import fit_key as key

    return key(class_name, call, config, tiled=tiled, single_frame=single_frame, fed=fed, tile=tile)


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
                      fed=plans[0][3], tile=fixtures[0]["settings"].get("vae_tile"))
        settings = {k: v for k, v in fixtures[0]["settings"].items()  # those held fixed
                    if k not in ("height", "width", "seq_len") and all(fx["settings"].get(k) == v for fx in fixtures)}
        entry = pooled.setdefault(key, {"settings": settings})
        if entry["settings"] != settings:
            raise ValueError(f"{key}: {case}/{component} is measured with {settings}, {next(iter(entry['sources']))} "
                             f"with {entry['settings']}: one config, one set of settings")
        points = entry.setdefault(attention, {})
        sources = entry.setdefault("sources", {})  # measured_on: the card that gives the most points (the first)
        sources[f"{card_of(case)}/{component}"] = sources.get(f"{card_of(case)}/{component}", 0) + len(fixtures)
        for (n, _, _, _, frames), fx in zip(plans, fixtures):
            point = Point(n, fx["peak_elements"], fx.get("phase_peaks"), frames)
            if points.setdefault(n, point).peak != fx["peak_elements"]:
                raise ValueError(f"{key}: two peaks measured at n = {n} ({case}/{component} and another case)")
    out: dict[str, dict] = {}
    for key, entry in pooled.items():
        sources = entry["sources"]
        out[key] = {"measured_on": max(sources, key=lambda s: (sources[s], -list(sources).index(s))),
                    "settings": entry["settings"]}
        for attention in sorted(a for a in entry if a in ("fused", "math")):
            points = [entry[attention][n] for n in sorted(entry[attention])]
            out[key][attention] = {**law(points), "loo_max_rel_error": loo_error(points),
                                   "n_range": [points[0].n, points[-1].n], "points": [[p.n, p.peak] for p in points]}
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
