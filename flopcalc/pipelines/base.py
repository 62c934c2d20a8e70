"""Pipeline semantics: which component runs how often, on what shape.

A pipeline turns the user's run settings into a :class:`Plan`: text encoders once per prompt
(and once more for the negative prompt when classifier-free guidance runs), the denoiser once per
step and guidance pass, the VAE decoder once per image (the encoder once per input image for
image-to-image). Every count is per batch-1 forward: the models' work is linear in the batch.

This module holds the plan types, the registry and the shared pieces; each family's module
beside it registers the plans that mirror the ``__call__`` of the diffusers pipelines of the same
names (defaults, text lengths, latent geometry, CFG), keyed by ``model_index.json``'s
``_class_name``. They are imported on first use.
"""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass, field, fields, replace
from typing import Any, Callable, Mapping

from flopcalc.config import Config, class_name_of, validate_components
from flopcalc.errors import (
    ConfigError, FlopcalcError, OptionError, ResolutionError, UnplannedPipelineError, unbuildable,
)
from flopcalc.formulas.tiling import CallSplit
from flopcalc.limits import check_settings
from flopcalc.registry import RunShape


@dataclass(frozen=True)
class Counting:
    """How a plan makes its counts. The numeric estimate counts in exact integers; the symbolic
    path (:mod:`flopcalc.symbolic`) hands in integers that also carry the law they stand for, and
    says so here, so a plan never inspects the type of its numbers: ``symbolic`` tells a plan that
    a closed-form law is being built (a branch with no law, such as a tiled VAE, refuses), and
    ``passes`` turns the guidance passes per step (1 or 2) into the count the plan multiplies by."""

    symbolic: bool = False
    passes: Callable[[int], int] = int


#: Exact integers: the numeric estimate.
NUMERIC = Counting()


@dataclass(frozen=True, kw_only=True)
class Settings:
    """Run settings, as the pipeline's ``__call__`` takes them. ``None`` means the pipeline's
    default (resolved into the plan's settings). Every field but ``counting`` is a user option."""

    height: int | None = None
    width: int | None = None
    steps: int | None = None
    guidance_scale: float | None = None
    true_cfg_scale: float | None = None
    negative_prompt: bool = False
    batch_size: int = 1
    num_images_per_prompt: int = 1
    max_sequence_length: int | None = None
    strength: float | None = None  # image-to-image when set
    resolution_binning: bool = True  # PixArt: snap the size to the model's aspect-ratio bins, as the pipeline does
    num_frames: int | None = None  # video pipelines: frames generated (None: the pipeline's default)
    vae_tiling: bool | None = None  # video VAEs: decode in tiles/temporal chunks (None: as the pipeline does)
    reference_images: int | None = None  # Stable Cascade prior: images CLIP-encoded as conditioning (None: none)
    counting: Counting = field(default=NUMERIC, metadata={"option": False})

    @property
    def symbolic(self) -> bool:
        """Whether a symbolic law is being built from this plan (see :class:`Counting`)."""
        return self.counting.symbolic

    def options(self) -> dict[str, Any]:
        """The user options, by name (what reports print)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.metadata.get("option", True)}


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


#: ``(components, settings, index=model_index or None) -> Plan``; ``components`` maps each component
#: name to its :class:`~flopcalc.config.Config` (the class defaults applied, as the assemblers see it).
PlanFn = Callable[..., Plan]
_PIPELINES: dict[str, PlanFn] = {}
#: For a bare denoiser config: class → [(pipeline, denoiser component name, predicate on the config)].
_PIPELINE_OF_DENOISER: dict[str, list[tuple[str, str, Callable[[Mapping[str, Any]], bool]]]] = {}

#: Options every pipeline applies: size, steps, guidance, batch, image-to-image ``strength``, a
#: negative prompt (under classifier-free guidance the negative prompt, "" when not given, is
#: encoded either way), and resolution binning (a pipeline without bins estimates the size as given,
#: which is what turning binning off asks for).
COMMON_OPTIONS = frozenset({"height", "width", "steps", "guidance_scale", "batch_size", "num_images_per_prompt",
                            "strength", "negative_prompt", "resolution_binning"})
#: The options a pipeline applies only when it declares them (``register_pipeline(options=...)``):
#: option → (its CLI flag, why a pipeline that does not declare it refuses it).
OPTIONAL = {
    "true_cfg_scale": ("--true-cfg-scale", "it has no true classifier-free guidance (a separate negative-prompt "
                                          "pass); use --guidance-scale"),
    "max_sequence_length": ("--max-sequence-length", "its __call__ takes no max_sequence_length (its text encoders "
                                                    "run on a fixed number of tokens)"),
    "num_frames": ("--num-frames", "it generates images, not videos"),
    "vae_tiling": ("--vae-tiling / --no-vae-tiling", "flopcalc does not model a tiled decode of its VAE"),
    "reference_images": ("--reference-images", "it takes no reference images to condition on"),
}
#: Pipeline → the optional options it applies, and its own reasons for refusing others.
_OPTIONS: dict[str, frozenset[str]] = {}
_REFUSALS: dict[str, Mapping[str, str]] = {}
#: Pipeline an index names → [(pipeline that plans the folder instead, predicate on the components)].
_SERVED_BY: dict[str, list[tuple[str, Callable[[Mapping[str, Any]], bool]]]] = {}


def register_pipeline(name: str, *, denoisers: tuple[str, ...] = (), component: str = "transformer",
                      when: Callable[[Mapping[str, Any]], bool] = lambda cfg: True,
                      options: tuple[str, ...] = (), refuses: Mapping[str, str] | None = None,
                      serves: Mapping[str, Callable[[Mapping[str, Any]], bool]] | None = None,
                      ) -> Callable[[PlanFn], PlanFn]:
    """Register a pipeline plan; ``denoisers`` run under it when given alone (``when`` picks
    between pipelines sharing a denoiser class, e.g. SD and SDXL UNets). ``options`` names the
    options of :data:`OPTIONAL` the plan applies (beyond :data:`COMMON_OPTIONS`); any other set
    option is refused before the plan runs, with the reason in :data:`OPTIONAL` or, where the
    pipeline knows better, in ``refuses`` (option → why). ``serves`` (pipeline name → predicate on
    the components): a folder whose index names that pipeline but whose components satisfy the
    predicate is planned by this one instead (Kolors' Hub index names its own SDXL variant)."""
    unknown = set(options) - set(OPTIONAL)
    if unknown:
        raise RuntimeError(f"{name}: unknown options {sorted(unknown)} (optional ones: {sorted(OPTIONAL)})")

    def deco(fn: PlanFn) -> PlanFn:
        if name in _PIPELINES:
            raise RuntimeError(f"pipeline {name} registered twice")
        _PIPELINES[name] = fn
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


def pipeline_modules() -> dict[str, str]:
    """Pipeline class name → the module that registers its plan (for :mod:`flopcalc.discovery`)."""
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


def _load_modules(modules: list[str]) -> None:
    for module in modules:
        importlib.import_module(module)


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
            from flopcalc.discovery import pipeline_modules as modules_of

            _load_modules(modules_of(name))  # its plan's module and those of the plans that may serve it
        if isinstance(name, str) and name not in _PIPELINES:
            _load()  # not where the index said: look everywhere before saying it is unsupported
        if not isinstance(name, str) or name not in _PIPELINES:
            raise UnplannedPipelineError(
                f"pipeline {name!r} is not supported (supported: {', '.join(sorted(_PIPELINES))}); "
                f"estimate a component alone by passing its config.json."
            )
        configs = _configs(components)
        name = next((pipe for pipe, applies in _SERVED_BY.get(name, []) if applies(configs)), name)
        _refuse_unapplied(name, settings)
        with unbuildable("model_index.json", name, "pipeline plan"):
            return _PIPELINES[name](configs, settings, index=model_index)
    with unbuildable(next(iter(components), "model"), None, "plan"):
        return _standalone(components, settings, role_without_formula)


def _configs(components: Mapping[str, Mapping[str, Any]]) -> dict[str, Config]:
    """What a plan reads: each component's config with its class defaults."""
    from flopcalc.registry import config_of

    return {name: config_of(cfg, component=name) for name, cfg in components.items()}


def _refuse_unapplied(name: str, s: Settings) -> None:
    """One refusal, naming the option, the pipeline and why, for a set option ``name`` does not apply."""
    option = _first_unapplied(s, COMMON_OPTIONS | _OPTIONS[name])
    if option is not None:
        flag, why = OPTIONAL[option]
        raise OptionError(f"{flag} does not apply to {name}: {_REFUSALS[name].get(option, why)}")


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
        flags = ", ".join(_flag(o) for o in sorted(applied - {"resolution_binning"}))
        raise OptionError(f"{_flag(option)} does not apply to a {what} given alone: {how}; only {flags} apply")


def _first_unapplied(s: Settings, applied: frozenset[str]) -> str | None:
    """The first user option set away from its default that is not in ``applied``."""
    for f in fields(s):
        if f.metadata.get("option", True) and f.name not in applied and getattr(s, f.name) != f.default:
            return f.name
    return None


def _flag(option: str) -> str:
    return OPTIONAL[option][0] if option in OPTIONAL else "--" + option.replace("_", "-")


# --------------------------------------------------------------------------- shared pieces


def _validate(s: Settings) -> None:
    for key in ("height", "width", "steps", "max_sequence_length", "num_frames", "reference_images"):
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
    for key in ("guidance_scale", "true_cfg_scale"):
        v = getattr(s, key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0):
            raise OptionError(f"{key} must be a finite number >= 0 (guidance is on above 1), got {v!r}")


def vae_scale_factor(components: Mapping[str, Mapping[str, Any]], name: str = "vae") -> int:
    """The pipelines' ``vae_scale_factor``: image pixels per latent pixel, as the VAE class
    defines it (``2 ** (len(block_out_channels) - 1)`` for ``AutoencoderKL``; each VAE
    architecture registers its own), or 8 without a VAE (as the pipelines do)."""
    from flopcalc.registry import lookup

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


def vae_runs(components, s: Settings, images: int, latent_h: int, latent_w: int,
             latent_frames: int | None = None) -> list[ComponentRun]:
    """The VAE decoding each image (video: each clip of ``latent_frames`` latent frames) once,
    and, for image-to-image, encoding each input image (clip of ``num_frames``) once; an image VAE
    with ``vae_tiling`` in tiles, as ``vae.enable_tiling()`` makes it (:mod:`.image_vae_tiling`)."""
    if "vae" not in components:
        return []
    cls = component_class(components, "vae") or "?"
    if s.vae_tiling and latent_frames is None:
        from flopcalc.pipelines.image_vae_tiling import tiled_image_vae_runs

        tiled = tiled_image_vae_runs(components["vae"], cls, images, s.batch_size, latent_h, latent_w, s.height,
                                     s.width, encode=s.strength is not None, symbolic=s.symbolic)
        if tiled is not None:
            return tiled
    what = "video(s)" if latent_frames is not None else "image(s)"
    runs = [ComponentRun("vae", cls, "decode", "vae_decoder",
                         RunShape(latent_height=latent_h, latent_width=latent_w, latent_frames=latent_frames),
                         images, f"{images} {what}")]
    if s.strength is not None:
        frames = s.num_frames if latent_frames is not None else None
        runs.insert(0, ComponentRun("vae", cls, "encode", "vae_encoder",
                                    RunShape(height=s.height, width=s.width, frames=frames),
                                    s.batch_size, f"{s.batch_size} input {what}"))
    return runs


def tile_runs(component: str, class_name: str, call: str, role: str, split: CallSplit, times: int,
              shape: Callable[[Any, Any], RunShape], why: Callable[[int, Any, Any], str]) -> list[ComponentRun]:
    """A call split into spatial tiles (the VAE's ``decode_split`` / ``encode_split``, frames whole) as
    runs: one per distinct tile shape ``(h, w)``, largest first, ``n × times`` runs of ``shape(h, w)``
    for its ``n`` tiles; the report folds them into one row listing the pieces."""
    return [ComponentRun(component, class_name, call, role, shape(h, w), n * times, why(n, h, w))
            for (h, w), n in split.tiles().items()]


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


def image_runs(components, s: Settings, f: int, latent_frames: int | None = None) -> list[ComponentRun]:
    return vae_runs(components, s, s.batch_size * s.num_images_per_prompt, s.height // f, s.width // f,
                    latent_frames)



# --------------------------------------------------------------------------- a bare config


def _standalone(components: Mapping[str, Mapping[str, Any]], s: Settings,
                role_without_formula: Callable[[str | None, str], str] | None = None) -> Plan:
    """A single component's config: a denoiser runs under the pipeline built for it; a text
    encoder encodes ``max_sequence_length`` (default: its position limit, or 512) tokens once
    per prompt; a VAE decodes one image per batch entry."""

    (name, cfg), = components.items()
    cls = class_name_of(cfg)
    role = _role_of(cls, name, role_without_formula)
    if role == "denoiser":
        from flopcalc.discovery import denoiser_modules as modules_of

        _load_modules(modules_of(cls or ""))
        if not _PIPELINE_OF_DENOISER.get(cls or ""):
            _load()  # not where the index said: look everywhere
        choices = [(pipe, comp) for pipe, comp, when in _PIPELINE_OF_DENOISER.get(cls or "", []) if when(cfg)]
        if not choices:
            raise FlopcalcError(f"{name}: no pipeline is registered for denoiser {cls!r}")
        pipe, comp = choices[0]
        _refuse_unapplied(pipe, s)
        p = _PIPELINES[pipe](_configs({comp: cfg}), s)
        runs = tuple(replace(r, component=name) for r in p.runs)
        return replace(p, pipeline=f"{pipe} (denoiser only)", runs=runs, notes=p.notes + ("only the denoiser was given",))
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
    from flopcalc.pipelines.image_vae_tiling import TILED_CLASSES

    _refuse_unapplied_alone("VAE", s, frozenset({"vae_tiling"}) if cls in TILED_CLASSES else frozenset())
    f = vae_scale_factor({name: cfg}, name)
    size = cfg.get("sample_size") if isinstance(cfg.get("sample_size"), int) else 1024
    s = replace(s, height=s.height or size, width=s.width or size)
    check_divisible(s.height, s.width, f, "VAE height and width")
    images = s.batch_size * s.num_images_per_prompt
    runs = vae_runs({"vae": cfg}, s, images, s.height // f, s.width // f)
    return Plan("VAE only", s, 1, tuple(replace(r, component=name) for r in runs))


def _role_of(class_name: str | None, component: str,
             role_without_formula: Callable[[str | None, str], str] | None = None) -> str:
    from flopcalc.registry import lookup

    for call in ("forward", "decode"):
        try:
            return lookup(class_name, call, component=component).role
        except FlopcalcError:
            continue
    if role_without_formula is not None:
        return role_without_formula(class_name, component)
    lookup(class_name, component=component)  # raises the actionable error
    raise AssertionError("unreachable")



def _load() -> None:
    """Import every family module once (importing registers its plans): for the full list only;
    one question imports only its plan's module (:mod:`flopcalc.discovery`)."""
    if _LOADED:
        return
    _LOADED.append(True)
    from flopcalc.discovery import load_everything

    load_everything()


_LOADED: list[bool] = []
