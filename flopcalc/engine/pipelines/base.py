"""Pipeline semantics: which component runs how often, on what shape.

A pipeline turns the user's run settings into a :class:`Plan`: text encoders once per prompt
(and once more for the negative prompt when classifier-free guidance runs), the denoiser once per
step and guidance pass, the VAE decoder once per image (the encoder once per input image for
image-to-image). Every count is per batch-1 forward: the models' work is linear in the batch.

This module holds the plan types, the registry and the shared pieces (the VAE's runs are :mod:`.vae`, the
planning of a model :mod:`.dispatch`); each family's module beside it registers the plans that mirror the ``__call__`` of the diffusers pipelines of the same
names (defaults, text lengths, latent geometry, CFG), keyed by ``model_index.json``'s
``_class_name``. They are imported on first use.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from flopcalc.engine.config import Config, class_name_of
from flopcalc.engine.discovery import load_everything, provide
from flopcalc.engine.errors import ConfigError, FlopcalcError, ResolutionError
from flopcalc.engine.registry import RunShape, lookup
from flopcalc.engine.settings import (  # noqa: F401  (Settings and the option tables, as plans import them)
    COMMON_OPTIONS, NUMERIC, OPTIONAL, Counting, Settings, declared, option,
)
from flopcalc.formulas.tiling import CallSplit


@dataclass(frozen=True)
class ComponentRun:
    """One component's share of a generation: ``runs`` batch-1 forwards of ``call`` on ``shape``."""

    component: str
    class_name: str
    call: str
    role: str  # text_encoder | denoiser | vae_decoder | vae_encoder
    shape: RunShape
    runs: int
    why: str  # how ``runs`` came about, for the report

    @property
    def built_class(self) -> str | None:
        """The class assembled for this run: the plan's ``class_name`` (a pipeline may load another
        class than config.json names, e.g. ``Qwen3Model`` from a ``Qwen3ForCausalLM`` checkpoint),
        or None (the config's own) where the plan could name none (``"?"``)."""
        return None if self.class_name == "?" else self.class_name


@dataclass(frozen=True)
class Plan:
    pipeline: str
    settings: Settings
    passes: int
    runs: tuple[ComponentRun, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)
    #: whether the guidance passes of a step run as one forward of a concatenated batch (``torch.cat([latents] *
    #: 2)``) or as separate forwards (``register_pipeline(guidance=...)``): what one forward holds in memory
    batched_passes: bool = True


#: ``(components, settings, index=model_index or None) -> Plan``; ``components`` maps each component
#: name to its :class:`~flopcalc.engine.config.Config` (the class defaults applied, as the assemblers see it).
PlanFn = Callable[..., Plan]
_PIPELINES: dict[str, PlanFn] = {}
#: For a bare denoiser config: class → [(pipeline, denoiser component name, predicate on the config)].
_PIPELINE_OF_DENOISER: dict[str, list[tuple[str, str, Callable[[Mapping[str, Any]], bool]]]] = {}

#: Pipeline → the optional options it applies, and its own reasons for refusing others.
_OPTIONS: dict[str, frozenset[str]] = {}
_REFUSALS: dict[str, Mapping[str, str]] = {}
#: Pipeline → how its ``__call__`` runs the guidance passes of a step: "batched" (one forward of a concatenated
#: batch) or "separate" (one forward per pass).
GUIDANCE = ("batched", "separate")
_GUIDANCE: dict[str, str] = {}
#: Pipeline an index names → [(pipeline that plans the folder instead, predicate on the components)].
_SERVED_BY: dict[str, list[tuple[str, Callable[[Mapping[str, Any]], bool]]]] = {}


def register_pipeline(name: str, *, denoisers: tuple[str, ...] = (), component: str = "transformer",
                      when: Callable[[Mapping[str, Any]], bool] = lambda cfg: True,
                      options: tuple[str, ...] = (), refuses: Mapping[str, str] | None = None,
                      serves: Mapping[str, Callable[[Mapping[str, Any]], bool]] | None = None,
                      guidance: str = "batched") -> Callable[[PlanFn], PlanFn]:
    """Register a pipeline plan; ``denoisers`` run under it when given alone (``when`` picks
    between pipelines sharing a denoiser class, e.g. SD and SDXL UNets). ``options`` names the
    options of :data:`OPTIONAL` the plan applies (beyond :data:`COMMON_OPTIONS`); any other set
    option is refused before the plan runs, with the reason in :data:`OPTIONAL` or, where the
    pipeline knows better, in ``refuses`` (option → why). ``serves`` (pipeline name → predicate on
    the components): a folder whose index names that pipeline but whose components satisfy the
    predicate is planned by this one instead (Kolors' Hub index names its own SDXL variant). ``guidance``: how
    ``__call__`` runs a step's guidance passes, "batched" (``torch.cat([latents] * 2)``: one forward of the doubled
    batch) or "separate" (a forward per pass, as Wan's and Qwen-Image's), cited where the plan is."""
    if guidance not in GUIDANCE:
        raise RuntimeError(f"{name}: guidance must be one of {GUIDANCE}")
    unknown = set(options) - set(OPTIONAL) - set(declared())
    if unknown:
        raise RuntimeError(f"{name}: unknown options {sorted(unknown)} (optional ones: {sorted(OPTIONAL)}, and those "
                           "declared with flopcalc.engine.settings.pipeline_option before the plan)")

    def deco(fn: PlanFn) -> PlanFn:
        if name in _PIPELINES:
            raise RuntimeError(f"pipeline {name} registered twice")
        _PIPELINES[name] = fn
        _GUIDANCE[name] = guidance
        _OPTIONS[name] = frozenset(options)
        _REFUSALS[name] = dict(refuses or {})
        for d in denoisers:
            _PIPELINE_OF_DENOISER.setdefault(d, []).append((name, component, when))
        for served, applies in (serves or {}).items():
            _SERVED_BY.setdefault(served, []).append((name, applies))
        return fn

    return deco


def pipeline_options(name: str) -> frozenset[str]:
    """The optional options pipeline ``name`` applies (for variants registered on top of it)."""
    if name not in _OPTIONS:  # the variants import their base's module, so this is a fallback
        _load()
    return _OPTIONS[name]


def guidance_of(name: str) -> str:
    """How pipeline ``name`` runs a step's guidance passes (for variants registered on top of it)."""
    if name not in _GUIDANCE:
        _load()
    return _GUIDANCE[name]


def registered_plan(name: str) -> PlanFn:
    """The plan registered as ``name`` (for pipelines built on a registered variant; import the module
    that registers it first)."""
    return _PIPELINES[name]


def pipeline_modules() -> dict[str, str]:
    """Pipeline class name → the module that registers its plan (for :mod:`flopcalc.engine.discovery`)."""
    return {name: fn.__module__ for name, fn in _PIPELINES.items()}


def served_modules() -> dict[str, list[str]]:
    """Pipeline class name → the modules whose plans may serve a folder whose index names it."""
    return {served: list(dict.fromkeys(_PIPELINES[pipe].__module__ for pipe, _applies in entries))
            for served, entries in _SERVED_BY.items()}


def denoiser_modules() -> dict[str, list[str]]:
    """Denoiser class → the modules whose plans run it when given alone."""
    out: dict[str, list[str]] = {}
    for cls, entries in _PIPELINE_OF_DENOISER.items():
        out[cls] = list(dict.fromkeys(_PIPELINES[pipe].__module__ for pipe, _comp, _when in entries))
    return out


def _refusal(name: str) -> tuple[str, str]:
    """(flag, why a pipeline that does not take it refuses it) of an optional or a family option."""
    if name in OPTIONAL:
        return OPTIONAL[name]
    spec = option(name)
    return spec.flag, spec.refusal


def _flag(name: str) -> str:
    return OPTIONAL[name][0] if name in OPTIONAL else "--" + name.replace("_", "-")


# --------------------------------------------------------------------------- shared pieces


def vae_scale_factor(components: Mapping[str, Mapping[str, Any]], name: str = "vae") -> int:
    """The pipelines' ``vae_scale_factor``: image pixels per latent pixel, as the VAE class
    defines it (``2 ** (len(block_out_channels) - 1)`` for ``AutoencoderKL``; each VAE
    architecture registers its own), or 8 without a VAE (as the pipelines do)."""
    vae = components.get(name)
    if vae is None:
        return 8
    arch = lookup(class_name_of(vae), "decode", component=name)
    if arch.scale_factor is None:
        raise ConfigError(f"{name}: {arch.class_name} registers no scale factor")
    return arch.scale_factor(vae)


def nearest_aspect_bin(table: str, sample_size: int, height: int, width: int, pipeline: str) -> tuple[int, int]:
    """``PixArtImageProcessor.classify_height_width_bin``, which PixArt and SANA run with
    ``use_resolution_binning``: the bin whose aspect ratio is nearest ``height / width``, from the
    model's ``sample_size`` table in ``flopcalc/data/<table>`` (diffusers' own tables, copied by
    ``validation/extract_tables.py``)."""
    tables = _data(table)
    if str(sample_size) not in tables:
        raise FlopcalcError(f"{pipeline} resolution binning has no table for transformer sample_size {sample_size} "
                            f"(only {', '.join(k for k in tables if not k.startswith('_'))}); "
                            "turn binning off (--no-resolution-binning) to estimate the size as given")
    ratios = tables[str(sample_size)]
    ar = float(height / width)
    closest = min(ratios, key=lambda r: abs(float(r) - ar))
    return ratios[closest][0], ratios[closest][1]


def _data(name: str) -> dict[str, Any]:
    import json
    from importlib.resources import files

    if name not in _DATA:
        _DATA[name] = json.loads(files("flopcalc").joinpath(f"data/{name}").read_text())
    return _DATA[name]


_DATA: dict[str, dict[str, Any]] = {}


def check_divisible(height: int, width: int, multiple: int, why: str) -> None:
    """One clear error naming the nearest valid sizes when a side does not divide."""
    bad = [(name, v) for name, v in (("height", height), ("width", width)) if v % multiple]
    if bad:
        parts = []
        for name, v in bad:
            lo = (v // multiple) * multiple
            options = [o for o in (lo, lo + multiple) if o > 0]
            parts.append(f"{name} {v} → nearest valid: {' or '.join(map(str, options))}")
        raise ResolutionError(f"{why} must be a multiple of {multiple}: " + "; ".join(parts) + ".")


def cfg_passes(s: Settings, active: bool) -> int:
    """Denoiser passes per step: 2 under classifier-free guidance (a doubled batch or two
    forwards), else 1, counted as ``s.counting`` counts (a symbolic law carries the symbol ``P``)."""
    return s.counting.passes(2 if active else 1)


def denoising_steps(steps: int, strength: float | None) -> int:
    """Steps actually run: image-to-image skips the first ``(1 − strength)`` of the schedule
    (``get_timesteps`` of FLUX, SD3, Qwen-Image: ``init_timestep = min(steps·strength, steps)``,
    ``t_start = int(max(steps − init_timestep, 0))``)."""
    if strength is None:
        return steps
    init_timestep = min(steps * strength, steps)
    return steps - int(max(steps - init_timestep, 0))


def denoising_steps_floored(steps: int, strength: float | None) -> int:
    """Steps actually run where ``get_timesteps`` floors first (Stable Diffusion 1.x/2.x and SDXL
    img2img and inpaint, ``pipeline_stable_diffusion_img2img.py:724``:
    ``init_timestep = min(int(steps·strength), steps)``, ``t_start = max(steps − init_timestep, 0)``):
    ``int(steps·strength)`` steps, one fewer than :func:`denoising_steps` where ``steps·strength``
    is not whole (28 steps at 0.3: 8, not 9). Below strength 1 the count is a plain int even when
    ``steps`` is tracked (a floor of ``S·strength`` has no closed form): a law holds at those steps."""
    if strength is None or strength == 1:
        return steps
    return min(int(steps * strength), steps)


def config_value(components: Mapping[str, Config], name: str, key: str, absent: Any) -> Any:
    """``key`` of component ``name``: its config's value or its class default (the assemblers'),
    or ``absent``, the pipeline's own fallback when the pipeline has no such component (as in
    diffusers: ``transformer.config.patch_size if self.transformer is not None else 2``)."""
    cfg = components.get(name)
    return absent if cfg is None else cfg[key]


def component_class(components: Mapping[str, Mapping[str, Any]], name: str) -> str | None:
    cfg = components.get(name)
    return class_name_of(cfg) if cfg is not None else None


def text_runs(components, encoders: list[tuple[str, int]], prompts_encoded: int, why: str) -> list[ComponentRun]:
    return [
        ComponentRun(name, component_class(components, name) or "?", "forward", "text_encoder",
                     RunShape(seq_len=seq), prompts_encoded, why)
        for name, seq in encoders
        if name in components
    ]


def tile_runs(component: str, class_name: str, call: str, role: str, split: CallSplit, times: int,
              shape: Callable[[Any, Any], RunShape], why: Callable[[int, Any, Any], str]) -> list[ComponentRun]:
    """A call split into spatial tiles (the VAE's ``decode_split`` / ``encode_split``, frames whole) as
    runs: one per distinct tile shape ``(h, w)``, largest first, ``n × times`` runs of ``shape(h, w)``
    for its ``n`` tiles; the report folds them into one row listing the pieces."""
    return [ComponentRun(component, class_name, call, role, shape(h, w), n * times, why(n, h, w))
            for (h, w), n in split.tiles().items()]


def video_decode_runs(components, split: CallSplit, videos: int, latent_frames: Any,
                      frames: Any = None) -> list[ComponentRun]:
    """``vae.decode`` of each of ``videos`` latents, made as the VAE's ``decode_split`` says (:func:`tile_runs`): one
    run of ``videos`` for the whole latent, or one per distinct spatial tile shape, every tile over all
    ``latent_frames`` (``frames``: the decoded frames, where the plan states them)."""
    return tile_runs("vae", component_class(components, "vae") or "?", "decode", "vae_decoder", split, videos,
                     lambda h, w: RunShape(latent_height=h, latent_width=w, latent_frames=latent_frames, frames=frames),
                     lambda k, h, w: f"{videos} video(s)" if split.is_whole
                     else f"{k} tile(s) of {h}×{w} latent × {videos} video(s)")


def require_numeric_tiling(s: Settings) -> None:
    """A tiled VAE call has no closed-form law: its tile count and edge tiles step with the size."""
    if s.symbolic:
        raise FlopcalcError("a tiled VAE has no closed-form law in H and W (its tile count steps with the size): "
                            "use the numeric estimate, or --no-vae-tiling")


def missing_notes(components, expected: list[str]) -> tuple[str, ...]:
    return tuple(f"{name} is absent from this pipeline and was not counted" for name in expected
                 if name not in components)


def denoiser_run(components, name: str, s: Settings, f: int, text_len: int, passes: int,
                 latent_frames: int | None = None,
                 kept_steps: Callable[[int, float | None], int] = denoising_steps) -> list[ComponentRun]:
    """The denoiser's runs: every kept step (``kept_steps``: the pipeline's own ``get_timesteps``
    rule) × guidance passes × images (videos), on the latent grid (video: of ``latent_frames``
    frames)."""
    if name not in components:
        return []
    steps = kept_steps(s.steps, s.strength)
    images = s.batch_size * s.num_images_per_prompt
    what = "video(s)" if latent_frames is not None else "image(s)"
    return [ComponentRun(name, component_class(components, name) or "?", "forward", "denoiser",
                         RunShape(latent_height=s.height // f, latent_width=s.width // f, text_len=text_len,
                                  latent_frames=latent_frames),
                         steps * passes * images, f"{steps} steps × {passes} pass(es) × {images} {what}")]


def _load() -> None:
    """Import every family module once (importing registers its plans): for the full list only;
    one question imports only its plan's module (:mod:`flopcalc.engine.discovery`)."""
    if _LOADED:
        return
    _LOADED.append(True)
    load_everything()


_LOADED: list[bool] = []


provide("pipelines", pipeline_modules)
provide("served", served_modules)
provide("denoisers", denoiser_modules)
