"""``flopcalc coverage``: which diffusers pipeline and model classes flopcalc counts.

The diffusers side is a data file shipped in the package, ``flopcalc/data/diffusers/<version>.json``,
written by ``validation/extract_diffusers_classes.py`` from an installed diffusers (every exported
pipeline class with the model classes its ``__init__`` hints allow per component, deprecated ones
marked; every exported model class), so this needs no diffusers at run time. flopcalc's side comes
from its registries through the discovery index (:mod:`flopcalc.engine.discovery`): a plan or formula added
in a family module shows up here with no list to edit.

A pipeline is

* ``planned``: flopcalc has its plan (``flopcalc estimate`` runs it);
* ``components-only``: no plan, but every required model component (one its ``__init__`` does not
  allow to be ``None``) has a class with a formula: what a plan would need is there;
* ``missing``: a required component has no class with a formula (named), or it has no torch module
  to count at all (ONNX pipelines).

A model class has a ``formula``, or is ``measurable`` (``estimate --measure`` counts it inside a planned pipeline:
it has an input builder in ``flopcalc/engine/measure/inputs``, or it stands in for the class a planned pipeline
expects in its place, :func:`measurable_classes`), or ``missing``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping

from flopcalc.engine.class_list import class_list, shipped_versions  # noqa: F401  (coverage's API)
from flopcalc.engine.errors import OptionError

FORMATS = ("table", "json", "markdown")
PIPELINE_STATUSES = ("planned", "components-only", "missing")
MODEL_STATUSES = ("formula", "measurable", "missing")


@dataclass(frozen=True)
class PipelineCoverage:
    name: str
    status: str
    deprecated: bool
    components: tuple[str, ...]  # "name: Class | Class" (optional ones marked "?")
    lacking: tuple[str, ...]  # required components with no class that has a formula


@dataclass(frozen=True)
class ModelCoverage:
    name: str
    library: str
    status: str
    pipelines: int  # non-deprecated pipelines that list it as a component
    exported: bool  # a model class diffusers exports (else a class a pipeline's component hint names)


@dataclass(frozen=True)
class Coverage:
    diffusers_version: str
    pipelines: tuple[PipelineCoverage, ...]
    models: tuple[ModelCoverage, ...]
    planned_elsewhere: tuple[str, ...]  # plans for pipeline names this diffusers does not export

    def count(self, status: str, *, deprecated: bool | None = False) -> int:
        return sum(p.status == status for p in self.pipelines if deprecated is None or p.deprecated == deprecated)


def measurable_classes(version: str | None = None) -> frozenset[str]:
    """Classes ``estimate --measure`` counts (:mod:`flopcalc.engine.measure.stand_in`), read without importing
    torch: those with an input builder of their own; those a planned pipeline's ``__init__`` hint names beside a
    class with a formula and an input builder, which lends them its place in the plan and its builder
    (:func:`~flopcalc.engine.measure.stand_in.why_not`: the library builds them from a config, their call takes
    what the builder passes, the pipeline does not branch on their class); and the drop-in replacements diffusers
    documents for such a class (``AutoencoderTiny`` for ``AutoencoderKL``)."""
    from flopcalc.engine.discovery import index
    from flopcalc.engine.measure.stand_in import DROP_INS, builder_classes, lends_builder, main_call, why_not

    builders = builder_classes()
    formulas = set(index().architectures)
    planned = set(index().pipelines)
    found = set(builders)
    found.update(cls for cls, (replaced, _why) in DROP_INS.items()
                 if replaced in builders and lends_builder(replaced, cls, main_call(replaced)) is None)
    for name, entry in class_list(version)["pipelines"].items():
        if name not in planned:
            continue
        for comp in entry["components"]:
            found.update(c["class"] for c in comp["classes"]
                         if c["class"] not in formulas and why_not(name, comp["name"], c["class"]) is None)
    return frozenset(found)


def coverage(version: str | None = None) -> Coverage:
    from flopcalc.engine.discovery import index

    data = class_list(version)
    idx = index()
    formulas = set(idx.architectures)
    planned = set(idx.pipelines)
    measurable = measurable_classes(version)
    pipelines = tuple(_pipeline(name, entry, planned, formulas) for name, entry in sorted(data["pipelines"].items()))
    used: dict[str, int] = {}
    library: dict[str, str] = {name: "diffusers" for name in data["models"]}
    for name, entry in data["pipelines"].items():
        for comp in entry["components"]:
            for cls in comp["classes"]:
                library.setdefault(cls["class"], cls["library"])
                if not entry["deprecated"]:
                    used[cls["class"]] = used.get(cls["class"], 0) + 1
    models = tuple(
        ModelCoverage(cls, library[cls], _model_status(cls, formulas, measurable), used.get(cls, 0),
                      cls in data["models"])
        for cls in sorted(library)
    )
    return Coverage(data["diffusers_version"], pipelines, models, tuple(sorted(planned - set(data["pipelines"]))))


def _pipeline(name: str, entry: Mapping[str, Any], planned: set[str], formulas: set[str]) -> PipelineCoverage:
    components = tuple(f"{c['name']}{'?' if c['optional'] else ''}: " + " | ".join(k["class"] for k in c["classes"])
                       for c in entry["components"])
    required = [c for c in entry["components"] if not c["optional"]]
    lacking = tuple(c["name"] for c in required
                    if not any(name in formulas for k in c["classes"] for name in (k["class"], *k.get("subclasses", ()))))
    if name in planned:
        status = "planned"
    elif required and not lacking:
        status = "components-only"
    else:
        status = "missing"
    return PipelineCoverage(name, status, bool(entry["deprecated"]), components, lacking)


def _model_status(cls: str, formulas: set[str], measurable: frozenset[str]) -> str:
    if cls in formulas:
        return "formula"
    return "measurable" if cls in measurable else "missing"


# --------------------------------------------------------------------------- rendering


def summary_lines(cov: Coverage) -> list[str]:
    total = len(cov.pipelines)
    deprecated = sum(p.deprecated for p in cov.pipelines)
    current = total - deprecated
    planned, only, missing = (cov.count(s) for s in PIPELINE_STATUSES)
    every = planned + only
    exported = [m for m in cov.models if m.exported]
    named = [m for m in cov.models if not m.exported]
    lines = [
        f"diffusers {cov.diffusers_version}: {total} exported pipeline classes, {deprecated} deprecated, "
        f"{current} current.",
        f"current pipelines: {planned} planned ({_pct(planned, current)}), {only} components-only, {missing} missing; "
        f"every required component class has a formula for {every} ({_pct(every, current)}).",
        f"all pipelines, deprecated included: {cov.count('planned', deprecated=None)} planned, "
        f"{cov.count('components-only', deprecated=None)} components-only, "
        f"{cov.count('missing', deprecated=None)} missing.",
        f"model classes diffusers exports: {len(exported)}, {_statuses(exported)}; further classes the pipelines' "
        f"components name (transformers encoders, pipelines' own modules): {len(named)}, {_statuses(named)}.",
    ]
    if cov.planned_elsewhere:
        lines.append(f"planned but not exported by diffusers {cov.diffusers_version}: {', '.join(cov.planned_elsewhere)}.")
    return lines


def _statuses(models: list[ModelCoverage]) -> str:
    return ", ".join(f"{sum(m.status == s for m in models)} {s}" for s in MODEL_STATUSES)


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "-"


def to_dict(cov: Coverage) -> dict[str, Any]:
    return {
        "diffusers_version": cov.diffusers_version,
        "statuses": {"pipeline": list(PIPELINE_STATUSES), "model": list(MODEL_STATUSES)},
        "counts": {
            "pipelines": len(cov.pipelines),
            "deprecated": sum(p.deprecated for p in cov.pipelines),
            "current": {s: cov.count(s) for s in PIPELINE_STATUSES},
            "all": {s: cov.count(s, deprecated=None) for s in PIPELINE_STATUSES},
        },
        "pipelines": [{"name": p.name, "status": p.status, "deprecated": p.deprecated,
                       "components": list(p.components), "lacking": list(p.lacking)} for p in cov.pipelines],
        "models": [{"name": m.name, "library": m.library, "exported": m.exported, "status": m.status,
                    "pipelines": m.pipelines}
                   for m in cov.models],
        "planned_elsewhere": list(cov.planned_elsewhere),
    }


def _order(cov: Coverage) -> list[PipelineCoverage]:
    rank = {s: i for i, s in enumerate(PIPELINE_STATUSES)}
    return sorted(cov.pipelines, key=lambda p: (p.deprecated, rank[p.status], p.name))


def _model_order(cov: Coverage) -> list[ModelCoverage]:
    rank = {s: i for i, s in enumerate(MODEL_STATUSES)}
    return sorted(cov.models, key=lambda m: (rank[m.status], -m.pipelines, m.name))


def table(cov: Coverage) -> str:
    from flopcalc.render.text_tables import columns

    rows = [("pipeline", "status", "deprecated", "lacking a formula")]
    rows += [(p.name, p.status, "yes" if p.deprecated else "", ", ".join(p.lacking)) for p in _order(cov)]
    models = [("model class", "library", "status", "pipelines")]
    models += [(m.name, m.library + ("" if m.exported else " (component)"), m.status, str(m.pipelines))
               for m in _model_order(cov)]
    lines = summary_lines(cov) + [""] + columns(rows, right=()) + [""] + columns(models, right=(3,))
    return "\n".join(lines) + "\n"


def markdown(cov: Coverage) -> str:
    lines = [
        "# Coverage of diffusers classes",
        "",
        "<!-- generated by `flopcalc coverage --format markdown`; tests/test_coverage.py checks it is current -->",
        "",
        *(f"- {line}" for line in summary_lines(cov)),
        "",
        "Status: **planned**: `flopcalc estimate` runs the pipeline; **components-only**: no plan yet, but every "
        "required model component has a class with a formula; **missing**: a required component has none (named), "
        "or the pipeline holds no torch module. A model class has a **formula**, is **measurable** "
        "(`flopcalc estimate --measure` counts it inside a planned pipeline: it has an input builder, or it stands "
        "in for the class the pipeline expects there, docs/usage.md) or is **missing**. "
        "Components: optional ones end in `?`; `A | B`: the classes the type hint allows.",
        "",
        "## Pipelines",
        "",
        "| pipeline | status | deprecated | components | lacking a formula |",
        "|---|---|---|---|---|",
    ]
    for p in _order(cov):
        comps = "<br>".join(c.replace("|", "\\|") for c in p.components) or "(no torch module)"
        lines.append(f"| `{p.name}` | {p.status} | {'yes' if p.deprecated else ''} | {comps} | "
                     f"{', '.join(p.lacking)} |")
    lines += ["", "## Model classes", "",
              "Exported by diffusers, or (component) named by a pipeline's component type hint.", "",
              "| class | library | status | current pipelines using it |", "|---|---|---|---|"]
    lines += [f"| `{m.name}` | {m.library}{'' if m.exported else ' (component)'} | {m.status} | {m.pipelines} |"
              for m in _model_order(cov)]
    return "\n".join(lines) + "\n"


def render(cov: Coverage, fmt: str = "table") -> str:
    if fmt == "json":
        return json.dumps(to_dict(cov), indent=2) + "\n"
    if fmt == "markdown":
        return markdown(cov)
    if fmt == "table":
        return table(cov)
    raise OptionError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
