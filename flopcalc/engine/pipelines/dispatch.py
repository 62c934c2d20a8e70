"""Planning a model: the plan of a pipeline folder (its ``model_index.json`` names the pipeline) or of one
component's config given alone, after every setting is checked and every option the pipeline does not apply is
refused in one line.

The plans themselves are the family modules beside this one (registered in :mod:`.base`), imported on first
use through the discovery index.
"""

from __future__ import annotations

import math
from dataclasses import fields, replace
from typing import Any, Callable, Mapping

from flopcalc.engine.config import Config, class_name_of, validate_components
from flopcalc.engine.discovery import denoiser_modules, load_modules, pipeline_modules
from flopcalc.engine.errors import FlopcalcError, OptionError, UnplannedPipelineError, few, unbuildable
from flopcalc.engine.limits import check_settings
from flopcalc.engine.pipelines import base
from flopcalc.engine.pipelines.base import ComponentRun, Plan, RunShape, check_divisible, vae_scale_factor
from flopcalc.engine.pipelines.vae import vae_runs
from flopcalc.engine.registry import config_of, has_formula, lookup
from flopcalc.engine.settings import COMMON_OPTIONS, Settings, check

__all__ = ["plan"]


def plan(model_index: Mapping[str, Any] | None, components: Mapping[str, Mapping[str, Any]],
         settings: Settings, *, role_without_formula: Callable[[str | None, str], str] | None = None) -> Plan:
    """The plan for a pipeline folder (``model_index`` given) or a bare component config.
    ``role_without_formula(class_name, component)`` gives the role of a bare config whose class has
    no formula (``--measure``: what its input builder says), else such a config is refused."""
    _validate(settings)
    validate_components(components)
    if model_index is not None:
        name = model_index.get("_class_name")
        if isinstance(name, str):
            load_modules(pipeline_modules(name))  # its plan's module and those of the plans that may serve it
        if isinstance(name, str) and name not in base._PIPELINES:
            base._load()  # not where the index said: look everywhere before saying it is unsupported
        if not isinstance(name, str) or name not in base._PIPELINES:
            raise UnplannedPipelineError(_unplanned(name, components))
        configs = _configs(components)
        name = next((pipe for pipe, applies in base._SERVED_BY.get(name, []) if applies(configs)), name)
        _refuse_unapplied(name, settings)
        with unbuildable("model_index.json", name, "pipeline plan"):
            planned = base._PIPELINES[name](configs, settings, index=model_index)
        return replace(planned, batched_passes=base._GUIDANCE[name] == "batched")
    with unbuildable(next(iter(components), "model"), None, "plan"):
        return _standalone(components, settings, role_without_formula)


def _unplanned(name: Any, components: Mapping[str, Mapping[str, Any]]) -> str:
    """One line for a pipeline with no plan: what is missing for it (the plan, and its components' classes with
    no formula), and where to look."""
    lacking = [f"{c} ({cls})" for c, cls in ((c, class_name_of(cfg)) for c, cfg in components.items())
               if cls and not has_formula(cls) and not has_formula(cls, "decode")]
    what = f"; its {few(lacking, 3)} {'has' if len(lacking) == 1 else 'have'} no formula" if lacking else ""
    return (f"pipeline {name!r} has no plan in flopcalc{what}; `flopcalc coverage` lists what is counted, and a "
            "component's config.json can be estimated alone")


def _configs(components: Mapping[str, Mapping[str, Any]]) -> dict[str, Config]:
    """What a plan reads: each component's config with its class defaults."""
    return {name: config_of(cfg, component=name) for name, cfg in components.items()}


def _refuse_unapplied(name: str, s: Settings) -> None:
    """One refusal, naming the option, the pipeline and why, for a set option ``name`` does not apply."""
    option = _first_unapplied(s, COMMON_OPTIONS | base._OPTIONS[name])
    if option is not None:
        flag, why = base._refusal(option)
        raise OptionError(f"{flag} does not apply to {name}: {base._REFUSALS[name].get(option, why)}")


#: A component given alone: what it runs, and the options that change it.
_ALONE = {
    "text encoder": ("it encodes max_sequence_length tokens once per prompt",
                     frozenset({"batch_size", "max_sequence_length", "resolution_binning"})),
    "VAE": ("it decodes (with --strength: encodes) one image per batch entry",
            frozenset({"height", "width", "batch_size", "num_images_per_prompt", "strength", "resolution_binning"})),
}


def _refuse_unapplied_alone(what: str, s: Settings, extra: frozenset[str] = frozenset()) -> None:
    how, applied = _ALONE[what]
    applied |= extra
    option = _first_unapplied(s, applied)
    if option is not None:
        flags = ", ".join(base._flag(o) for o in sorted(applied - {"resolution_binning"}))
        raise OptionError(f"{base._flag(option)} does not apply to a {what} given alone: {how}; only {flags} apply")


def _first_unapplied(s: Settings, applied: frozenset[str]) -> str | None:
    """The first user option set away from its default that is not in ``applied``."""
    for f in fields(s):
        if f.metadata.get("option", True) and f.name not in applied and getattr(s, f.name) != f.default:
            return f.name
    return next((name for name, _value in s.extra if name not in applied), None)


def _validate(s: Settings) -> None:
    for key in ("height", "width", "steps", "max_sequence_length", "num_frames"):
        v = getattr(s, key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v <= 0):
            raise FlopcalcError(f"{key} must be a positive integer, got {v!r}")
    for key in ("batch_size", "num_images_per_prompt"):
        v = getattr(s, key)
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise FlopcalcError(f"{key} must be a positive integer, got {v!r}")
    check_settings(s)
    if s.strength is not None and not 0 < s.strength <= 1:
        raise FlopcalcError(f"strength must be in (0, 1], got {s.strength}")
    for name, value in s.extra:
        check(name, value)
    for key in ("guidance_scale", "true_cfg_scale"):
        v = getattr(s, key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0):
            raise OptionError(f"{key} must be a finite number >= 0 (guidance is on above 1), got {v!r}")


def _standalone(components: Mapping[str, Mapping[str, Any]], s: Settings,
                role_without_formula: Callable[[str | None, str], str] | None = None) -> Plan:
    """A single component's config: a denoiser runs under the pipeline built for it; a text
    encoder encodes ``max_sequence_length`` (default: its position limit, or 512) tokens once
    per prompt; a VAE decodes one image per batch entry."""

    (name, cfg), = components.items()
    cls = class_name_of(cfg)
    role = _role_of(cls, name, role_without_formula)
    if role == "denoiser":
        load_modules(denoiser_modules(cls or ""))
        if not base._PIPELINE_OF_DENOISER.get(cls or ""):
            base._load()  # not where the index said: look everywhere
        choices = [(pipe, comp) for pipe, comp, when in base._PIPELINE_OF_DENOISER.get(cls or "", []) if when(cfg)]
        if not choices:
            raise FlopcalcError(f"{name}: no pipeline is registered for denoiser {cls!r}")
        pipe, comp = choices[0]
        _refuse_unapplied(pipe, s)
        p = base._PIPELINES[pipe](_configs({comp: cfg}), s)
        runs = tuple(replace(r, component=name) for r in p.runs)
        return replace(p, pipeline=f"{pipe} (denoiser only)", runs=runs, notes=p.notes + ("only the denoiser was given",),
                       batched_passes=base._GUIDANCE[pipe] == "batched")
    if role == "text_encoder":
        _refuse_unapplied_alone("text encoder", s)
        # its position limit when that is a short CLIP-like window, else 512 (LLM limits run to 128k)
        limit = cfg.get("max_position_embeddings")
        seq = s.max_sequence_length or (limit if isinstance(limit, int) and limit <= 512 else 512)
        s = replace(s, max_sequence_length=seq)
        run = ComponentRun(name, cls or "?", "forward", "text_encoder", RunShape(seq_len=seq), s.batch_size,
                           f"{s.batch_size} prompt(s)")
        return Plan("text encoder only", s, 1, (run,))
    if role != "vae":
        raise FlopcalcError(f"{name}: {cls} ({role}) runs inside its pipeline, not alone: estimate a folder whose "
                            f"model_index.json names the pipeline and holds this component as {role!r}")
    from flopcalc.engine.image_tiling import image_tiling

    _refuse_unapplied_alone("VAE", s, frozenset({"vae_tiling"}) if image_tiling(cls or "") else frozenset())
    f = vae_scale_factor({name: cfg}, name)
    size = cfg.get("sample_size") if isinstance(cfg.get("sample_size"), int) else 1024
    s = replace(s, height=s.height or size, width=s.width or size)
    check_divisible(s.height, s.width, f, "VAE height and width")
    images = s.batch_size * s.num_images_per_prompt
    runs = vae_runs({"vae": cfg}, s, images, s.height // f, s.width // f)
    return Plan("VAE only", s, 1, tuple(replace(r, component=name) for r in runs))


def _role_of(class_name: str | None, component: str,
             role_without_formula: Callable[[str | None, str], str] | None = None) -> str:
    for call in ("forward", "decode"):
        try:
            return lookup(class_name, call, component=component).role
        except FlopcalcError:
            continue
    if role_without_formula is not None:
        return role_without_formula(class_name, component)
    lookup(class_name, component=component)  # raises the actionable error
    raise AssertionError("unreachable")
