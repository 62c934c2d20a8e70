"""``estimate()``: a model (Hub id, folder, config.json, card) and run settings in, a frozen
:class:`Report` out. Data flows one way: source → plan → per-component cost trees → report."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.cost import CONVENTIONS, Node
from flopcalc.engine.config import class_name_of
from flopcalc.engine.errors import (
    ConfigError, FlopcalcError, UnknownArchitectureError, UnplannedPipelineError, install_hint,
)
from flopcalc.engine.pipelines import Plan, Settings, plan
from flopcalc.engine.registry import assemble, component_params, has_formula
from flopcalc.flops.report import ComponentEstimate, Report

def estimate(
    model: str,
    *,
    height: int | None = None,
    width: int | None = None,
    steps: int | None = None,
    guidance_scale: float | None = None,
    true_cfg_scale: float | None = None,
    negative_prompt: bool = False,
    batch_size: int = 1,
    num_images_per_prompt: int = 1,
    max_sequence_length: int | None = None,
    strength: float | None = None,
    resolution_binning: bool = True,
    num_frames: int | None = None,
    vae_tiling: bool | None = None,
    convention: str = "torch",
    revision: str | None = None,
    token: str | None = None,
    measure: bool = False,
    **options: Any,
) -> Report:
    """Estimate the compute of one generation with ``model``.

    ``model`` is a bundled card name or alias (``flux-dev``), a local diffusers folder, a single
    component ``config.json`` (or its folder), or a Hub repo id (``org/name``; only
    ``model_index.json`` and the components' ``config.json`` are fetched). Unset settings take
    the pipeline's defaults. ``options``: the options particular pipeline families declare
    (:mod:`flopcalc.engine.settings`, e.g. ``pag_scale=2.0``, ``ensemble_size=4``); a pipeline that does not take one
    refuses it. Raises :class:`flopcalc.engine.errors.FlopcalcError` with an actionable message on bad input.
    """
    from flopcalc.engine.settings import checked
    from flopcalc.engine.sources import resolve

    extra = checked(options)  # before any file is read: a misspelt option is the first error

    source = resolve(model, revision=revision, token=token)
    settings = Settings(height=height, width=width, steps=steps, guidance_scale=guidance_scale,
                        true_cfg_scale=true_cfg_scale, negative_prompt=negative_prompt, batch_size=batch_size,
                        num_images_per_prompt=num_images_per_prompt, max_sequence_length=max_sequence_length,
                        strength=strength, resolution_binning=resolution_binning, num_frames=num_frames,
                        vae_tiling=vae_tiling, extra=extra)
    return estimate_configs(source.model_index, source.components, settings, convention=convention,
                            model=source.name, source_kind=source.kind, revision=source.revision,
                            source_notes=source.notes, missing=tuple(source.missing),
                            config_origins=source.origins, measure=measure)


#: RunShape fields that say how a call runs, not a size: left out of a report's shape.
_HOW_IT_RUNS = ("split", "perturbed", "kv_cache", "shared")


def estimate_configs(
    model_index: Mapping[str, Any] | None,
    components: Mapping[str, Mapping[str, Any]],
    settings: Settings,
    *,
    convention: str = "torch",
    model: str = "(configs)",
    source_kind: str = "configs",
    revision: str | None = None,
    source_notes: tuple[str, ...] = (),
    missing: tuple[str, ...] = (),
    config_origins: Mapping[str, Any] | None = None,
    measure: bool = False,
) -> Report:
    """The same as :func:`estimate` for configs already in memory. ``source_notes`` (what the
    source could not give) lead the report's notes; ``missing`` names listed components without a
    config, whose generic "absent" plan note they replace; ``config_origins`` says where each
    component's config came from."""
    if convention not in CONVENTIONS:
        raise FlopcalcError(f"unknown convention {convention!r}; choose one of: {', '.join(CONVENTIONS)}")
    p, stand_ins = _plan(model_index, components, settings, measure)
    params: dict[str, int] = {}
    estimates = []
    measured_notes = []
    for group in _same_call_groups(p.runs):
        run = group[0]
        cfg = components[run.component]
        stand_in = stand_ins.get(run.component)
        if measure and (stand_in is not None or not has_formula(run.class_name, run.call)):
            estimate_, note = _measured(cfg, group, p.settings, convention, stand_in)
            estimates.append(estimate_)
            measured_notes.append(note)
            continue
        try:
            trees = [assemble(cfg, r.shape, component=r.component, call=r.call, class_name=r.built_class,
                              validated=True) for r in group]
        except UnknownArchitectureError as exc:
            raise _with_measure_hint(exc, model_index, components) from None
        if run.component not in params:
            params[run.component] = component_params(cfg, component=run.component, assembled=trees[0],
                                                     call=run.call, class_name=run.built_class)
        shape = {k: v for k, v in vars(run.shape).items() if v is not None and k not in _HOW_IT_RUNS}
        if len(group) == 1:
            tree, runs, why = replace(trees[0], name=run.component), run.runs, run.why
        else:
            tree, runs, why = _merge_pieces(run.component, group, trees)
        estimates.append(ComponentEstimate(run.component, run.class_name, run.call, run.role, runs, why,
                                           params[run.component], shape, tree, convention))
        _check_counts(estimates[-1])
    plan_notes = tuple(n for n in p.notes if not any(n.startswith(f"{name} is absent") for name in missing))
    return Report(model, source_kind, revision, p.pipeline, convention, p.settings, p.passes, tuple(estimates),
                  tuple(source_notes) + plan_notes + tuple(measured_notes), dict(config_origins or {}),
                  {name: components[name] for name in dict.fromkeys(c.component for c in estimates)},
                  p.batched_passes)


def _plan(model_index: Mapping[str, Any] | None, components: Mapping[str, Mapping[str, Any]], settings: Settings,
          measure: bool) -> tuple[Plan, dict[str, Any]]:
    """The pipeline's plan, and with ``measure`` the stand-ins of its components whose class has no formula
    (:mod:`flopcalc.engine.measure.stand_in`: the plan reads each as the class the pipeline expects there, on the
    real class's whole config); a bare config of a class with no formula runs as its input builder says (a text
    encoder). Without ``measure``, a refusal for a class ``--measure`` could count says so."""
    if not measure:
        try:
            return plan(model_index, components, settings), {}
        except UnknownArchitectureError as exc:
            raise _with_measure_hint(exc, model_index, components) from None
    from flopcalc.engine.measure.component import role_of
    from flopcalc.engine.measure.stand_in import plan_view, stand_ins

    pipeline = _planned_name(model_index)
    ins = stand_ins(pipeline, components) if pipeline else {}
    view = {name: plan_view(ins[name]) if name in ins else cfg for name, cfg in components.items()}
    try:
        return plan(model_index, view, settings, role_without_formula=role_of), ins
    except UnplannedPipelineError as exc:
        raise UnplannedPipelineError(f"{exc}; --measure counts components of a planned pipeline only") from None
    except UnknownArchitectureError as exc:
        raise UnknownArchitectureError(f"{exc}; --measure cannot stand in for it: {pipeline or 'the pipeline'} "
                                       "expects no class with a formula there") from None


def _planned_name(model_index: Mapping[str, Any] | None) -> str | None:
    """The pipeline class ``model_index.json`` names, when flopcalc plans it (None: a bare config, or no plan)."""
    from flopcalc.engine.discovery import index

    name = (model_index or {}).get("_class_name")
    return name if isinstance(name, str) and name in index().pipelines else None


def _with_measure_hint(exc: UnknownArchitectureError, model_index: Mapping[str, Any] | None,
                       components: Mapping[str, Mapping[str, Any]]) -> UnknownArchitectureError:
    """``exc``, pointing to ``--measure`` where it can count the class the error names: a class with an input
    builder, or one the pipeline's expected class lends its builder (:func:`~flopcalc.engine.measure.stand_in.
    measurable_in_slot`), never a class it would then refuse."""
    from flopcalc.engine.measure.stand_in import builder_classes, measurable_in_slot

    pipeline = _planned_name(model_index)
    for name, cfg in components.items():
        cls = class_name_of(cfg)
        if not cls or f"{name}: class {cls!r}" not in str(exc) or "auto_map" in cfg:
            continue
        if measurable_in_slot(pipeline, name, cls) if pipeline else cls in builder_classes():
            return UnknownArchitectureError(f"{exc}; --measure counts it on the meta device, with "
                                            f"{install_hint('measure')}")
    return exc


def _measured(cfg: Mapping[str, Any], group: list, settings: Settings, convention: str, stand_in: Any = None
              ) -> tuple[ComponentEstimate, str]:
    """The row of a component call with no formula, measured; its runs come from the plan (for a stand-in, the
    plan of the class its pipeline expects there)."""
    from flopcalc.engine.errors import MeasureError
    from flopcalc.engine.measure.component import measure_call

    run = group[0]
    class_name = stand_in.actual if stand_in is not None else run.class_name
    if convention != "torch":
        raise MeasureError(f"{run.component}: a measured row counts what FlopCounterMode counts (the torch "
                           f"convention); --convention {convention} cannot be measured without its formula")
    if len(group) > 1:
        raise MeasureError(f"{run.component}.{run.call}: the plan runs this call in pieces of several shapes; "
                           "--measure counts a call made whole only")
    if stand_in is not None:
        from flopcalc.engine.measure.stand_in import why_not

        reason = why_not(stand_in.pipeline, run.component, class_name)
        if reason is not None:
            raise MeasureError(f"{run.component}: {class_name} has no formula, and --measure cannot count it as "
                               f"{stand_in.pipeline}'s {run.component}: {reason}")
    m = measure_call(cfg, component=run.component, class_name=class_name, call=run.call, shape=run.shape,
                     settings=settings, stand_in=stand_in)
    shape = {k: v for k, v in vars(run.shape).items() if v is not None and k not in _HOW_IT_RUNS}
    row = ComponentEstimate(run.component, class_name, run.call, run.role, run.runs, run.why, m.params, shape,
                            m.tree, convention, method="measured", measure_seconds=m.seconds)
    inputs = ", ".join(f"{k}={v}" for k, v in m.inputs_from.items()) or "no settings"
    lent = (f"; planned and fed as the {stand_in.expected} {stand_in.pipeline} expects there"
            if stand_in is not None and stand_in.expected and m.builder != class_name else "")
    note = (f"measured: {run.component}{'.' + run.call if run.call != 'forward' else ''} ({class_name}) has no "
            f"formula; built from its config on the meta device and counted with FlopCounterMode in "
            f"{m.seconds:.2f} s (inputs from {inputs}{', by the ' + m.builder + ' input builder' if lent else ''})"
            f"{lent}; no block tree or elementwise estimate for it")
    return row, note


def _check_counts(comp: ComponentEstimate) -> None:
    """The last line of defence of every printed number: exact, non-negative, and positive where a
    component runs (a config whose values pass validation but describe no work is refused)."""
    from flopcalc.engine.cost import invalid_count

    where = invalid_count(comp.tree)
    work = comp.tree.total.macs("torch")  # thop may rightly count 0 (a model of conv subclasses and functional ops)
    if where is None and isinstance(work, int) and work <= 0 < comp.runs:
        where = f"{work} MACs per run"
    if where is not None:
        raise ConfigError(f"{comp.component}/config.json ({comp.class_name}): its values give {where} for "
                          f"{comp.call}; check the config's sizes and counts, or use the model's original config.json.")


def _same_call_groups(runs) -> list[list]:
    """Consecutive runs of the same component call (e.g. a tiled VAE decode: one run per tile
    shape) form one group."""
    groups: list[list] = []
    for run in runs:
        if groups and (groups[-1][0].component, groups[-1][0].call) == (run.component, run.call):
            groups[-1].append(run)
        else:
            groups.append([run])
    return groups


def _merge_pieces(name: str, group: list, trees: list[Node]) -> tuple[Node, int, str]:
    """One report row for a call made in pieces (tiles of several shapes): runs = the greatest
    common count, each piece a child node ``piece <i>`` repeated ``runs_i / runs`` times."""
    from math import gcd

    runs = 0
    for r in group:
        runs = gcd(runs, r.runs)
    children = tuple(replace(t, name=f"piece{i}", count=t.count * (r.runs // runs))
                     for i, (r, t) in enumerate(zip(group, trees)))
    why = f"{runs} run(s) of {len(group)} piece shapes: " + "; ".join(r.why for r in group)
    return Node(name, children=children, formula="pieces"), runs, why
