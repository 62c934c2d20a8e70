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
import pkgutil
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping

from flopcalc.config import class_name_of, validate_components
from flopcalc.errors import ConfigError, FlopcalcError, ResolutionError, unbuildable
from flopcalc.limits import check_settings
from flopcalc.registry import RunShape


@dataclass(frozen=True)
class Settings:
    """Run settings, as the pipeline's ``__call__`` takes them. ``None`` means the pipeline's
    default (resolved into the plan's settings)."""

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


@dataclass(frozen=True)
class Plan:
    pipeline: str
    settings: Settings
    passes: int
    runs: tuple[ComponentRun, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)


PlanFn = Callable[..., Plan]  # (components, settings, index=model_index or None) -> Plan
_PIPELINES: dict[str, PlanFn] = {}
#: For a bare denoiser config: class → [(pipeline, denoiser component name, predicate on the config)].
_PIPELINE_OF_DENOISER: dict[str, list[tuple[str, str, Callable[[Mapping[str, Any]], bool]]]] = {}


def register_pipeline(name: str, *, denoisers: tuple[str, ...] = (), component: str = "transformer",
                      when: Callable[[Mapping[str, Any]], bool] = lambda cfg: True) -> Callable[[PlanFn], PlanFn]:
    """Register a pipeline plan; ``denoisers`` run under it when given alone (``when`` picks
    between pipelines sharing a denoiser class, e.g. SD and SDXL UNets)."""

    def deco(fn: PlanFn) -> PlanFn:
        _PIPELINES[name] = fn
        for d in denoisers:
            _PIPELINE_OF_DENOISER.setdefault(d, []).append((name, component, when))
        return fn

    return deco


def plan(model_index: Mapping[str, Any] | None, components: Mapping[str, Mapping[str, Any]],
         settings: Settings) -> Plan:
    """The plan for a pipeline folder (``model_index`` given) or a bare component config."""
    _load()
    _validate(settings)
    validate_components(components)
    if model_index is not None:
        name = model_index.get("_class_name")
        if not isinstance(name, str) or name not in _PIPELINES:
            raise FlopcalcError(
                f"pipeline {name!r} is not supported (supported: {', '.join(sorted(_PIPELINES))}); "
                f"estimate a component alone by passing its config.json."
            )
        with unbuildable("model_index.json", name, "pipeline plan"):
            return _PIPELINES[name](components, settings, index=model_index)
    with unbuildable(next(iter(components), "model"), None, "plan"):
        return _standalone(components, settings)


# --------------------------------------------------------------------------- shared pieces


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


#: While a symbolic plan is built, guidance passes are tracked as the symbol ``P``.
_PASSES_SYMBOL: list = []


def cfg_passes(active: bool) -> int:
    """Denoiser passes per step: 2 under classifier-free guidance (a doubled batch or two
    forwards), else 1. In a symbolic plan the count carries the symbol ``P``."""
    n = 2 if active else 1
    if _PASSES_SYMBOL:
        from flopcalc.symbolic import Tracked

        return Tracked(n, _PASSES_SYMBOL[0])
    return n


def denoising_steps(steps: int, strength: float | None) -> int:
    """Steps actually run: image-to-image skips the first ``(1 − strength)`` of the schedule
    (``get_timesteps``: ``init_timestep = min(steps·strength, steps)``,
    ``t_start = int(max(steps − init_timestep, 0))``)."""
    if strength is None:
        return steps
    init_timestep = min(steps * strength, steps)
    return steps - int(max(steps - init_timestep, 0))


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
                                     s.width, encode=s.strength is not None)
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


def missing_notes(components, expected: list[str]) -> tuple[str, ...]:
    return tuple(f"{name} is absent from this pipeline and was not counted" for name in expected
                 if name not in components)


def denoiser_run(components, name: str, s: Settings, f: int, text_len: int, passes: int,
                 latent_frames: int | None = None) -> list[ComponentRun]:
    """The denoiser's runs: every kept step × guidance passes × images (videos), on the latent
    grid (video: of ``latent_frames`` frames)."""
    if name not in components:
        return []
    steps = denoising_steps(s.steps, s.strength)
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


def _standalone(components: Mapping[str, Mapping[str, Any]], s: Settings) -> Plan:
    """A single component's config: a denoiser runs under the pipeline built for it; a text
    encoder encodes ``max_sequence_length`` (default: its position limit, or 512) tokens once
    per prompt; a VAE decodes one image per batch entry."""

    (name, cfg), = components.items()
    cls = class_name_of(cfg)
    role = _role_of(cls, name)
    if role == "denoiser":
        choices = [(pipe, comp) for pipe, comp, when in _PIPELINE_OF_DENOISER.get(cls or "", []) if when(cfg)]
        if not choices:
            raise FlopcalcError(f"{name}: no pipeline is registered for denoiser {cls!r}")
        pipe, comp = choices[0]
        p = _PIPELINES[pipe]({comp: cfg}, s)
        runs = tuple(replace(r, component=name) for r in p.runs)
        return replace(p, pipeline=f"{pipe} (denoiser only)", runs=runs, notes=p.notes + ("only the denoiser was given",))
    if role == "text_encoder":
        # its position limit when that is a short CLIP-like window, else 512 (LLM limits run to 128k)
        limit = cfg.get("max_position_embeddings")
        seq = s.max_sequence_length or (limit if isinstance(limit, int) and limit <= 512 else 512)
        s = replace(s, max_sequence_length=seq)
        run = ComponentRun(name, cls or "?", "forward", "text_encoder", RunShape(seq_len=seq), s.batch_size,
                           f"{s.batch_size} prompt(s)")
        return Plan("text encoder only", s, 1, (run,))
    f = vae_scale_factor({name: cfg}, name)
    size = cfg.get("sample_size") if isinstance(cfg.get("sample_size"), int) else 1024
    s = replace(s, height=s.height or size, width=s.width or size)
    check_divisible(s.height, s.width, f, "VAE height and width")
    images = s.batch_size * s.num_images_per_prompt
    runs = vae_runs({"vae": cfg}, s, images, s.height // f, s.width // f)
    return Plan("VAE only", s, 1, tuple(replace(r, component=name) for r in runs))


def _role_of(class_name: str | None, component: str) -> str:
    from flopcalc.registry import lookup

    for call in ("forward", "decode"):
        try:
            return lookup(class_name, call, component=component).role
        except FlopcalcError:
            continue
    lookup(class_name, component=component)  # raises the actionable error
    raise AssertionError("unreachable")



def _load() -> None:
    """Import every family module of this package once: importing registers its plans."""
    if _LOADED:
        return
    _LOADED.append(True)
    import flopcalc.pipelines as package

    for info in pkgutil.iter_modules(package.__path__):
        if info.name != "base":
            importlib.import_module(f"flopcalc.pipelines.{info.name}")


_LOADED: list[bool] = []
