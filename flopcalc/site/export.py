"""Everything the static site shows, as one JSON document: every bundled card with its FLOP law, the laws of the
energy features and memory pieces, the training law, and the settings where each law is checked to be exact; the
GPU table; the energy coefficients and the constants the page's ports of the predictors read.

**How a card is exported** (:func:`card_data`). Its law is the symbolic law (:func:`flopcalc.flops.symbolic.
symbolic_estimate`) at the card's defaults, and at the other guidance branches the pipeline takes (classifier-free
guidance off or on, true CFG with a negative prompt: the *variants*); each law holds for the settings that take the
same branches of the plan. Which settings those are is found by checking, not assumed (:func:`_domain`): the page
lets a visitor set a size only on the grid step where the law equals the numeric estimate at odd multiples of the
step (smaller steps fail where a downsampling does not divide), and every other setting only within the range
checked; at every point checked the FLOPs of every component must equal ``estimate``'s exactly, the energy
features ``work_of``'s to 1e-12, and (at the defaults and one point with every symbol moved) the memory pieces
``memory``'s and the training law ``train``'s. A law, feature or piece that fails anywhere is left out, and the page
says so and shows the CLI command instead of a number. A card with no law (``flopcalc symbolic`` refuses it) is
listed with its reason and its commands.

Exporting every card takes a minute on one core: :func:`export` runs cards in parallel processes and keeps each
card's entry in the user's cache folder (as the discovery index does: ``FLOPCALC_CACHE_DIR``, ``""`` turns it off),
keyed by a fingerprint of the package's code, data and cards.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from flopcalc.engine.errors import FlopcalcError
from flopcalc.engine.version import __version__

#: Symbol → the keyword of ``flopcalc.estimate`` it stands for, and the CLI flag.
SETTING_OF = {"H": "height", "W": "width", "S": "steps", "B": "batch_size", "L": "max_sequence_length",
              "F": "num_frames", "R": "reference_images"}
FLAG_OF = {"height": "--height", "width": "--width", "steps": "--steps", "batch_size": "--batch-size",
           "max_sequence_length": "--max-sequence-length", "num_frames": "--num-frames",
           "reference_images": "--reference-images", "guidance_scale": "--guidance-scale",
           "true_cfg_scale": "--true-cfg-scale", "negative_prompt": "--negative-prompt",
           "resolution_binning": "--no-resolution-binning"}
#: Grid steps tried for a height or width, smallest first.
SIZE_STEPS = (8, 16, 32, 64, 128, 256)
#: Frame-count steps tried, smallest first.
FRAME_STEPS = (1, 2, 4, 6, 8, 12, 16, 24, 32)
#: The largest image side the page offers.
MAX_SIDE = 4096
#: Guidance scales whose branch is checked (the page's rule "CFG when guidance > 1" holds where these agree).
GUIDANCE_PROBES = (1.0, 1.5, 3.5, 7.5)
#: The scale of the true-CFG variant (``--true-cfg-scale 4 --negative-prompt``, diffusers' FLUX default).
TRUE_CFG_SCALE = 4.0
FEATURE_TOLERANCE = 1e-12
_FORMAT = 2


# --------------------------------------------------------------------------- checks against the numeric path


def _kwargs(settings: Mapping[str, Any], point: Mapping[str, int]) -> dict[str, Any]:
    """``flopcalc.estimate`` keywords of a variant's settings at a point (symbol values)."""
    return {**settings, **{SETTING_OF[k]: v for k, v in point.items() if k in SETTING_OF}}


class _Variant:
    """One guidance branch of a card: its symbolic report, and its laws compiled once (on first use)."""

    def __init__(self, card: str, key: str, label: str, settings: dict[str, Any]):
        from flopcalc.flops.symbolic import symbolic_estimate

        self.card, self.key, self.label, self.settings = card, key, label, settings
        self.sym = symbolic_estimate(card, **settings)
        self.rep = {**self.sym.representative(), "P": self.sym.passes}
        self._rows: list | None = None
        self._features: dict | None = None
        self._memory: list | None = None

    def values(self, point: Mapping[str, int]) -> dict[str, int]:
        return {**self.rep, **point}

    @property
    def rows(self) -> list[dict[str, Any]]:
        """Report rows: label, component, call, class, role, and their FLOPs as a law."""
        if self._rows is None:
            from flopcalc.site.features import rows
            from flopcalc.site.laws import compile_law

            self._rows = []
            for row in rows(self.sym):
                c = row.first
                flops = sum((2 * r.runs * r.per_run.macs(r.convention) for r in row.runs), 0)
                self._rows.append({"label": c.component + (f".{c.call}" if c.call != "forward" else ""),
                                   "component": c.component, "call": c.call, "class_name": c.class_name,
                                   "role": c.role, "flops": compile_law(flops)})
        return self._rows

    def features(self, params: Mapping[str, int]) -> dict[str, Any]:
        if self._features is None:
            from flopcalc.site.features import FEATURES, component_features
            from flopcalc.site.laws import compile_law

            self._features = {name: {"role": f["role"], **{k: compile_law(f[k]) for k in FEATURES}}
                              for name, f in component_features(self.sym, params).items()}
        return self._features

    def memory_rows(self) -> list[dict[str, Any]]:
        if self._memory is None:
            from flopcalc.site.features import memory_rows
            from flopcalc.site.laws import compile_law

            self._memory = [{**r, **{k: compile_law(r[k]) for k in ("runs", "batch", "n") if k in r}}
                            for r in memory_rows(self.sym)]
        return self._memory

    def check_flops(self, point: Mapping[str, int], energy: bool = True) -> tuple[bool, bool, Any]:
        """(FLOPs exact, energy features exact, the numeric report) at ``point``."""
        from flopcalc.energy_laws.features import work_of
        from flopcalc.flops.estimate import estimate
        from flopcalc.site.features import FEATURES
        from flopcalc.site.laws import evaluate

        try:
            report = estimate(self.card, **_kwargs(self.settings, point))
        except FlopcalcError:
            return False, False, None
        values = self.values(point)
        if report.passes != values["P"] or len(report.components) != len(self.rows):
            return False, False, report
        for c, row in zip(report.components, self.rows):
            if (c.component, c.call) != (row["component"], row["call"]) or evaluate(row["flops"], values) != c.flops:
                return False, False, report
        if not energy:
            return True, False, report
        try:
            laws = self.features({c.component: c.params for c in report.components})
        except FlopcalcError:
            return True, False, report
        work = work_of(report)
        items = report.settings.batch_size * report.settings.num_images_per_prompt
        if [c.component for c in work.components] != list(laws):
            return True, False, report
        for c in work.components:
            for k in FEATURES:
                mine, theirs = float(evaluate(laws[c.component][k], values)) / items, float(getattr(c, k))
                if abs(mine - theirs) > FEATURE_TOLERANCE * max(abs(theirs), 1.0):
                    return True, False, report
        return True, True, report

    def check_memory(self, point: Mapping[str, int], running: Sequence[str]) -> bool:
        """The memory pieces at ``point`` equal :func:`flopcalc.gpu_memory.estimate.memory`'s (the components that
        run, the forwards of each, the activation peak of each call in elements and its batch)."""
        from flopcalc.gpu_memory.activations import peak_elements
        from flopcalc.gpu_memory.estimate import memory
        from flopcalc.site.laws import evaluate

        try:
            est = memory(self.card, **_kwargs(self.settings, point))
        except FlopcalcError:
            return False
        values = self.values(point)
        if [c.component for c in est.running] != list(running):
            return False
        forwards: dict[str, int] = {}
        acts = []
        for row in self.memory_rows():
            runs, batch = int(evaluate(row["runs"], values)), int(evaluate(row["batch"], values))
            forwards[row["component"]] = forwards.get(row["component"], 0) + max(1, runs // batch)
            fit = row.get("fit")
            if fit is not None:
                n = int(evaluate(row["n"], values))
                acts.append((row["component"], row["call"], batch,
                             peak_elements(fit["fused"], n), peak_elements(fit["math"], n) if "math" in fit else None))
        theirs = [(a.component, a.call, a.batch, a.fused.elements, a.math.elements if a.math else None)
                  for a in est.activations]
        unestimated = tuple(dict.fromkeys(f"{r['component']}.{r['call']}" for r in self.memory_rows()
                                          if r.get("fit") is None))  # the page's verdict: fits, not, or not known
        laws = {f"{r['component']}.{r['call']}": tuple(r["law"]) for r in self.memory_rows() if "law" in r}
        return (dict(est.forwards) == forwards and theirs == acts and est.unestimated == unestimated
                and dict(est.call_laws) == laws)


# --------------------------------------------------------------------------- where the laws hold


def _nearby_odd_multiples(rep: int, step: int) -> list[int]:
    """Two odd multiples of ``step`` around ``rep`` (where a step that is too small shows)."""
    k = rep // step
    below = k - 1 if k % 2 == 0 else k - 2
    return [step * max(below, 1), step * (below + 2 if below + 2 != k else below + 4)]


def _domain(v: _Variant) -> tuple[dict[str, Any], list[dict[str, int]]]:
    """Per symbol of the law, the values the page offers (each checked; see the module docstring), and the points
    checked."""
    rep = v.rep
    symbols = [s for s in v.sym.symbols if s != "P"]
    checked: list[dict[str, int]] = [{}]
    cache: dict[tuple, bool] = {}

    def ok(point: dict[str, int]) -> bool:
        key = tuple(sorted(point.items()))
        if key not in cache:
            cache[key] = v.check_flops(point)[0]
            if cache[key]:
                checked.append(point)
        return cache[key]

    domain: dict[str, Any] = {}
    for s in symbols:
        r = rep[s]
        if s in ("H", "W"):
            tried = SIZE_STEPS if s == "H" or "H" not in domain else (domain["H"]["step"], *SIZE_STEPS)
            step = next((m for m in dict.fromkeys(tried)
                         if m > 1 and r % m == 0 and all(ok({s: x}) for x in _nearby_odd_multiples(r, m))), None)
            if step is None:
                domain[s] = {"lo": r, "hi": r, "step": 1}
                continue
            lo = max(step, step * round(r / 4 / step))
            hi = max(r, min(MAX_SIDE, step * round(2 * r / step)))
            domain[s] = {"lo": lo if ok({s: lo}) else r, "hi": hi if ok({s: hi}) else r, "step": step}
        elif s == "F":
            step = next((m for m in FRAME_STEPS if all(ok({s: x}) for x in (r - m, r + m) if x >= 1)), None)
            if step is None:
                domain[s] = {"lo": r, "hi": r, "step": 1}
                continue
            lo = r - step * ((r - max(1, r // 4)) // step)
            hi = r + step * (r // step)
            domain[s] = {"lo": lo if ok({s: lo}) else r, "hi": hi if ok({s: hi}) else r, "step": step}
        else:
            below = {"S": [1, 2], "B": [], "L": [max(1, r // 4)], "R": [1]}[s]
            above = {"S": [4 * r], "B": [2, 8], "L": [2 * r], "R": [r + 2]}[s]
            lo = r
            for x in sorted({x for x in below if x < r}, reverse=True):
                if not ok({s: x}):
                    break
                lo = x
            hi = r
            for x in sorted({x for x in above if x > r}):
                if not ok({s: x}):
                    break
                hi = x
            domain[s] = {"lo": lo, "hi": hi, "step": 1}
    return domain, checked


def _joint_point(domain: Mapping[str, Any], rep: Mapping[str, int]) -> dict[str, int]:
    """One point with every symbol of the domain moved off its default (within the domain)."""
    point = {}
    for s, d in domain.items():
        r, step = rep[s], d["step"]
        up = r + step if s not in ("H", "W") else r + 2 * step
        down = r - step if s not in ("H", "W") else r - 2 * step
        pick = up if up <= d["hi"] else down if down >= d["lo"] else r
        if s == "W":  # a non-square size when the height moved up
            pick = down if down >= d["lo"] else pick
        point[s] = pick
    return {k: x for k, x in point.items() if x != rep[k]}


# --------------------------------------------------------------------------- one card


def _variants(card: str) -> list[_Variant]:
    """The card's guidance branches: its defaults, then CFG toggled, then true CFG with a negative prompt (where the
    pipeline takes ``true_cfg_scale``), each kept where it changes the passes per step."""
    from flopcalc.engine.pipelines.base import pipeline_options

    first = _Variant(card, "default", "as the pipeline defaults", {"resolution_binning": False})
    out = [first]
    alt: list[tuple[str, str, dict[str, Any]]] = []
    if first.sym.passes > 1:
        alt.append(("cfg-off", "classifier-free guidance off (guidance 1)",
                    {"guidance_scale": 1.0, "resolution_binning": False}))
    else:
        alt.append(("cfg-on", "classifier-free guidance on (guidance 7.5)",
                    {"guidance_scale": 7.5, "resolution_binning": False}))
        if "true_cfg_scale" in pipeline_options(first.sym.pipeline):
            alt.append(("true-cfg", f"true CFG (--true-cfg-scale {TRUE_CFG_SCALE:g} with a negative prompt)",
                        {"true_cfg_scale": TRUE_CFG_SCALE, "negative_prompt": True, "resolution_binning": False}))
    for key, label, settings in alt:
        try:
            v = _Variant(card, key, label, settings)
        except FlopcalcError:
            continue
        if v.sym.passes != first.sym.passes:
            out.append(v)
    return out


def _guidance_rule(variants: Sequence[_Variant]) -> dict[str, Any]:
    """Which variant each probed guidance scale runs: ``gt1`` where a scale above 1 runs the CFG variant and one
    at most 1 the other (diffusers' ``do_classifier_free_guidance``), ``any`` where every scale runs the default
    (a guidance-distilled model), else ``fixed`` (the page keeps the card's guidance)."""
    from flopcalc.flops.estimate import estimate

    first = variants[0]
    default = first.sym.settings.guidance_scale
    by_cfg = {v.sym.passes > 1: v for v in variants if v.key in ("default", "cfg-on", "cfg-off")}
    ran = []
    for g in GUIDANCE_PROBES:
        try:
            r = estimate(first.card, **{**first.settings, "guidance_scale": g})
        except FlopcalcError:
            return {"rule": "fixed", "default": default}
        ran.append((g, r.passes, r.flops))
    from flopcalc.site.laws import evaluate

    def runs_variant(v: _Variant, passes: int, flops: int) -> bool:
        return passes == v.sym.passes and sum(evaluate(r["flops"], v.rep) for r in v.rows) == flops

    if all(runs_variant(first, p, f) for _, p, f in ran):
        return {"rule": "any", "default": default}
    if set(by_cfg) == {True, False} and all(runs_variant(by_cfg[g > 1], p, f) for g, p, f in ran):
        return {"rule": "gt1", "default": default}
    return {"rule": "fixed", "default": default}


def _bins(card: str, points: Sequence[Mapping[str, int]]) -> bool:
    """Whether the pipeline snaps sizes to bins by default at any of ``points`` (then the page's commands turn it
    off, as the law does)."""
    from flopcalc.flops.estimate import estimate

    for point in points:
        sizes = {SETTING_OF[k]: x for k, x in point.items() if k in ("H", "W")}
        try:
            if estimate(card, **sizes).flops != estimate(card, **sizes, resolution_binning=False).flops:
                return True
        except FlopcalcError:
            return True
    return False


def _weights(card: str, settings: Mapping[str, Any], est: Any) -> dict[str, Any]:
    """Per dtype the page offers (the dtype ``flopcalc energy`` loads each precision's weights in), every
    component's weights (exact, they do not depend on the size), or why not: the components ``est`` (a
    :func:`flopcalc.gpu_memory.estimate.memory` result at these settings) weighs, each as that function weighs it."""
    from dataclasses import replace

    from flopcalc.energy_laws.backbone import PRECISIONS
    from flopcalc.energy_laws.predict import _memory_dtype
    from flopcalc.engine.sources import resolve
    from flopcalc.gpu_memory.weights import component_weights

    from flopcalc.gpu_memory.allocator import replayed_weights

    source = resolve(card)
    out: dict[str, Any] = {}
    for dtype in dict.fromkeys(_memory_dtype(p) for p in PRECISIONS):
        try:
            weighed = [c if c.dtype == dtype else
                       replace(component_weights(source.components[c.component], component=c.component, dtype=dtype),
                               runs=c.runs) for c in est.components]
        except FlopcalcError as exc:
            out[dtype] = {"why": str(exc)}
            continue
        # the reserve's pieces (memory(): ``kinds``, ``weights_reserved``): each component's reserve law kind, and
        # the caching allocator's exact reserve above its weights where its config was replayed at this dtype
        exact = replayed_weights(source.components, weighed)
        out[dtype] = {"components": [{"component": c.component, "bytes": c.bytes, "buffer_bytes": c.buffer_bytes,
                                      "largest_module_bytes": c.largest_module_bytes, "runs": c.runs,
                                      "block_bytes": list(c.block_bytes),
                                      "kind": est.kinds.get(c.component, "denoiser"),
                                      **({"weights_reserve": exact[c.component]} if c.component in exact else {})}
                                     for c in weighed]}
    return out


def _loaded(weights: Mapping[str, Any]) -> list[tuple[str, bool]]:
    """The components weighed and whether each runs."""
    for entry in weights.values():
        if "components" in entry:
            return [(c["component"], c["runs"]) for c in entry["components"]]
    return []


def _memory(v: _Variant, points: Sequence[dict[str, int]], base: Mapping[str, Any] | None) -> dict[str, Any]:
    """The variant's memory pieces (weights per dtype, per row the forwards and the activation fit), checked;
    ``base``: another variant's weights, taken where the same components are loaded and run."""
    from flopcalc.engine.sources import resolve
    from flopcalc.flops.estimate import estimate
    from flopcalc.gpu_memory.activations import fit_entry
    from flopcalc.gpu_memory.allocator import call_law
    from flopcalc.gpu_memory.estimate import memory

    try:
        est = memory(v.card, **v.settings)
    except FlopcalcError as exc:
        return {"why": str(exc)}
    loaded = [(c.component, c.runs) for c in est.components]
    weights = base if base is not None and _loaded(base) == loaded else _weights(v.card, v.settings, est)
    running = [c.component for c in est.running]
    report = estimate(v.card, **v.settings)
    source = resolve(v.card)
    rows = v.memory_rows()
    for row, c in zip(rows, report.components):
        if "n" in row:
            entry = fit_entry(c.class_name, c.call, source.components[c.component], c.shape)
            if entry is not None and "fused" in entry:
                row["fit"] = {a: {"phases": entry[a]["phases"]} for a in ("fused", "math") if a in entry}
                law = call_law(c.class_name, c.call, source.components[c.component])
                if law is not None:  # the call's own reserve law (factor, error), as memory() takes it
                    row["law"] = list(law)
    if not all(v.check_memory(p, running) for p in points):
        return {"why": "the memory pieces could not be checked against `flopcalc memory` at these settings"}
    return {"weights": weights, "nipp": v.sym.settings.num_images_per_prompt,
            "rows": [{k: r[k] for k in ("component", "call", "role", "runs", "batch", "n", "fit", "law") if k in r}
                     for r in rows]}


def _training(card: str, denoisers: Sequence[str], points: Sequence[dict[str, int]]) -> dict[str, Any]:
    """The law of one training sample's FLOPs (:func:`flopcalc.training.estimate.train` at its defaults), checked;
    ``denoisers``: the classes of the card's denoisers (training counts one, with a declared backward)."""
    from flopcalc.engine.errors import OptionError
    from flopcalc.flops.symbolic import symbolic_estimate
    from flopcalc.site.features import training_sample
    from flopcalc.site.laws import compile_law, evaluate
    from flopcalc.training.backward import graph_of
    from flopcalc.training.estimate import FROZEN_ROLES, train

    try:
        if len(denoisers) != 1:
            raise FlopcalcError(f"training counts one denoiser; this pipeline has {len(denoisers)}")
        graph_of(denoisers[0])  # refused before any law is built
        try:
            sym = symbolic_estimate(card, steps=1, strength=1.0, resolution_binning=False)
        except OptionError as exc:
            if "--strength does not apply" not in str(exc):
                raise
            sym = symbolic_estimate(card, steps=1, resolution_binning=False)
        law = compile_law(training_sample(sym, FROZEN_ROLES))
        rep = {**sym.representative(), "P": sym.passes}
        for point in points:
            sizes = {SETTING_OF[k]: x for k, x in point.items() if k in SETTING_OF and k not in ("S", "B")}
            if evaluate(law, {**rep, **point}) != train(card, **sizes).flops_per_sample:
                return {"why": "the training law differs from `flopcalc train` at these settings"}
    except (FlopcalcError, TypeError, ValueError) as exc:
        return {"why": str(exc).split("\n")[0]}
    return {"law": law}


def card_data(name: str) -> dict[str, Any]:
    """One card's entry (see the module docstring)."""
    from flopcalc.engine.cards import find_card
    from flopcalc.engine.pipelines.base import pipeline_options

    card = find_card(name)
    base = {"name": card.name, "title": card.title, "hub_id": card.hub_id, "aliases": list(card.aliases)}
    try:
        variants = _variants(card.name)
    except FlopcalcError as exc:
        from flopcalc.flops.estimate import estimate

        try:
            report = estimate(card.name)
            base.update(pipeline=report.pipeline, video=report.settings.num_frames is not None)
        except FlopcalcError:
            pass
        return {**base, "law": None, "why": str(exc)}
    first = variants[0]
    domain, points = _domain(first)
    joint = _joint_point(domain, first.rep)
    points = [p for p in points if p] + ([joint] if joint else [])
    out_variants: list[dict[str, Any]] = []
    shared = None
    for v in variants:
        flops_ok, energy_ok, report = zip(*(v.check_flops(p) for p in [{}, *([joint] if joint else [])]))
        if not all(flops_ok):
            continue
        entry = {"key": v.key, "label": v.label, "settings": v.settings, "passes": v.sym.passes, "rows": v.rows}
        if all(energy_ok):
            entry["features"] = v.features({c.component: c.params for c in report[0].components})
        else:
            entry["features_why"] = "the energy features of this card are not stated as laws (their check failed)"
        entry["memory"] = _memory(v, [{}, *([joint] if joint else [])], shared)
        shared = entry["memory"].get("weights", shared)
        out_variants.append(entry)
    sizes = {"H": "height", "W": "width"}
    return {
        **base, "law": True, "pipeline": first.sym.pipeline, "video": "F" in first.sym.symbols,
        "symbols": [s for s in first.sym.symbols], "defaults": first.rep, "domain": domain,
        "bins": _bins(card.name, [{}, *([joint] if joint else []), *({k: domain[k]["lo"]} for k in ("H",) if k in domain)]), "guidance": _guidance_rule(variants),
        "variants": out_variants,
        "training": _training(card.name, [c.class_name for c in first.sym.components if c.role == "denoiser"],
                              [{}] + ([{k: x for k, x in joint.items() if k in sizes}] if joint else [])),
        "options": sorted(pipeline_options(first.sym.pipeline) - {"true_cfg_scale", "max_sequence_length",
                                                                  "num_frames", "reference_images"}),
        "checked_points": len(points),
    }


# --------------------------------------------------------------------------- the whole document


def _gpus() -> dict[str, Any]:
    from flopcalc.hardware.gpus import _index, _normal, gpus

    from flopcalc.gpu_memory.allocator import workspace_bytes

    return {
        "table": [{"key": g.key, "name": g.name, "aliases": list(g.aliases), "memory_bytes": g.memory_bytes,
                   "memory_bandwidth": g.memory_bandwidth, "tdp_w": g.tdp_w, "idle_w": g.idle_w,
                   "peak_flops": dict(g.peak_flops), "host_link_bytes_per_s": g.host_link_bytes_per_s,
                   "family": g.family, "architecture": g.architecture,
                   # the reserve's per-GPU parts (flopcalc.gpu_memory.allocator): the cuBLAS/cuBLASLt workspaces'
                   # segments and the CUDA context of one process
                   "workspace_bytes": workspace_bytes(g), "context_bytes": g.context_bytes} for g in gpus()],
        "index": {label: [g.key, what] for label, (g, _, what) in _index().items()},
        "normal": "lower-case letters and digits only (flopcalc.hardware.gpus._normal)",
        "example": _normal("H100 80GB HBM3"),
    }


def _energy() -> dict[str, Any]:
    from flopcalc.energy_laws.predict import load_coefficients

    doc = load_coefficients()
    cals = {}
    for key, cal in doc["calibrations"].items():
        nested = cal["opclass"]["errors"]["nested"]
        cals[key] = {"gpu": cal["gpu"], "precision": cal["precision"], "stack": cal["stack"],
                     "models": len(cal["models"]), "fitted_range": cal["fitted_range"],
                     "opclass": {k: cal["opclass"][k] for k in ("terms", "time", "power")},
                     "errors": {t: {k: nested[t][k] for k in ("interval_log_halfwidth", "median_pct", "max_pct")}
                                for t in ("energy", "latency")}}
    transfer = doc["transfer"]
    return {"source": doc.get("source", ""),
            "stacks": {k: {"description": v["description"], "denoisers": list(v["denoisers"])}
                       for k, v in doc["stacks"].items()},
            "calibrations": cals,
            "transfer": {"gamma": transfer["gamma"],
                         "errors": {t: {k: transfer["errors"][t][k] for k in ("interval_log_halfwidth", "median_pct")}
                                    for t in ("energy", "latency")} if transfer.get("errors") else {}}}


def _constants() -> dict[str, Any]:
    """Every number and name the page's ports read, from the modules that define them."""
    from flopcalc.energy_laws import backbone, laws, predict
    from flopcalc.energy_laws.fit import BYTES_PER_PARAMETER
    from flopcalc.gpu_memory import allocator
    from flopcalc.gpu_memory.estimate import OFFLOAD
    from flopcalc.gpu_memory.quantized import REST_DTYPE, canonical
    from flopcalc.gpu_memory.weights import DTYPE_BYTES
    from flopcalc.flops.symbolic import SYMBOL_TEXT
    from flopcalc.formulas.ops import SOFTMAX_OPS

    fit = allocator.fit()
    law_keys = ("weights_overhead", "weights_constant_bytes", "weights_loco_max_rel_error", "activation_factor",
                "activation_constant_bytes", "activation_loco_max_rel_error")
    return {"softmax_ops": SOFTMAX_OPS,
            # the reserve laws per component kind and the size under which a part's error is taken relative to it
            # (flopcalc/data/allocator_fit.json, read by flopcalc.gpu_memory.allocator.reserve)
            "allocator": {"kinds": {k: {x: fit["kinds"][k][x] for x in law_keys} for k in allocator.KINDS},
                          "significant_bytes": fit["significant_bytes"],
                          "no_gpu_note": allocator.reserve(0, gpu=None).note}, "precisions": list(backbone.PRECISIONS), "op_classes": list(backbone.OP_CLASSES),
            "bytes_per_parameter": dict(BYTES_PER_PARAMETER), "dtype_bytes": dict(DTYPE_BYTES),
            # the bytes of an activation element under each dtype the page loads weights in (estimate.py: the rest
            # dtype under a quantized format, whose canonical name ``fp8`` is an alias of)
            "activation_dtype_bytes": {d: DTYPE_BYTES[REST_DTYPE if canonical(d) else d]
                                       for d in dict.fromkeys(predict._memory_dtype(p) for p in backbone.PRECISIONS)},
            "memory_dtype": {p: predict._memory_dtype(p) for p in backbone.PRECISIONS},
            "offload": list(OFFLOAD),
            # the bound estimate._check_offload puts on --blocks-per-group and --block-swap
            "offload_option_max": 100_000,
            "opclass_terms": list(laws.OPCLASS_TERMS), "compute": list(laws.COMPUTE),
            "power_groups": list(laws.POWER_GROUPS), "group_of": dict(laws.GROUP_OF),
            "grid_g_per_kwh": predict.DEFAULT_GRID_G_PER_KWH, "grid_source": predict.GRID_SOURCE,
            "flags": FLAG_OF, "setting_of": SETTING_OF, "symbols": dict(SYMBOL_TEXT)}


def fingerprint() -> str:
    """A digest of everything an export reads: the package's code and data, the formulas and the cards."""
    import importlib.util

    digest = hashlib.sha256(f"{_FORMAT} {__version__}".encode())
    roots = [Path(__file__).resolve().parents[1]]
    for extra in ("flopcalc.formulas", "flopcalc.model_cards"):  # installed beside the package, or from a clone
        spec = importlib.util.find_spec(extra)
        if spec is not None:
            roots += [Path(p) for p in spec.submodule_search_locations or []]
    for root in roots:
        for path in sorted(root.rglob("*")):
            if path.is_file() and path.suffix in (".py", ".json", ".yaml", ".yml"):
                st = path.stat()
                digest.update(f"{path.relative_to(root)} {st.st_size} {st.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:20]


def _cache_dir() -> Path | None:
    from flopcalc.engine.discovery import cache_file

    path = cache_file()
    return None if path is None else path.parent / f"site-{fingerprint()}"


def _cached_card(name: str) -> dict[str, Any]:
    folder = _cache_dir()
    path = None if folder is None else folder / f"{name}.json"
    if path is not None:
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            pass
    data = card_data(name)
    if path is not None:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps(data), encoding="utf-8")
            os.replace(tmp, path)
        except OSError:
            pass
    return data


def card_names(models: Iterable[str] | None = None) -> list[str]:
    """The cards ``models`` names (names or aliases; default: every bundled card); an unknown one is refused in one
    line (the site holds bundled cards only: a folder or Hub id has no checked export)."""
    import difflib

    from flopcalc.engine.cards import find_card, list_cards

    if models is None:
        return [c.name for c in list_cards()]
    names = []
    for m in models:
        card = find_card(m)
        if card is None:
            close = difflib.get_close_matches(m, [c.name for c in list_cards()], n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise FlopcalcError(f"--models {m!r}: not a bundled card (the site holds the cards of `flopcalc list`){hint}")
        names.append(card.name)
    return list(dict.fromkeys(names))


def export(models: Iterable[str] | None = None, *, jobs: int | None = None,
           progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The site's data: every bundled card (or ``models``), the GPU table, the energy coefficients, the
    constants. ``jobs``: processes exporting cards (default: the CPUs)."""
    names = card_names(models)
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(names)))
    if jobs == 1:
        cards = []
        for n in names:
            cards.append(_cached_card(n))
            if progress:
                progress(n)
    else:
        import multiprocessing

        with multiprocessing.get_context("spawn").Pool(jobs) as pool:
            cards = []
            for n, data in zip(names, pool.imap(_cached_card, names)):
                cards.append(data)
                if progress:
                    progress(n)
    return {"format": _FORMAT, "version": __version__, "cards": cards, "gpus": _gpus(), "energy": _energy(),
            "constants": _constants()}
