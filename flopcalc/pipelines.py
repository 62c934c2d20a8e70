"""Pipeline semantics: which component runs how often, on what shape.

A pipeline turns the user's run settings into a :class:`Plan`: text encoders once per prompt
(and once more for the negative prompt when classifier-free guidance runs), the denoiser once per
step and guidance pass, the VAE decoder once per image (the encoder once per input image for
image-to-image). Every count is per batch-1 forward: the models' work is linear in the batch.

Each spec mirrors the ``__call__`` of the diffusers pipeline of the same name (defaults, text
lengths, latent geometry, CFG), registered by the ``_class_name`` of ``model_index.json``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping

from flopcalc.config import class_name_of
from flopcalc.errors import ConfigError, FlopcalcError, ResolutionError
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
    _validate(settings)
    if model_index is not None:
        name = model_index.get("_class_name")
        if name not in _PIPELINES:
            raise FlopcalcError(
                f"pipeline {name!r} is not supported (supported: {', '.join(sorted(_PIPELINES))}); "
                f"estimate a component alone by passing its config.json."
            )
        return _PIPELINES[name](components, settings, index=model_index)
    return _standalone(components, settings)


# --------------------------------------------------------------------------- shared pieces


def _validate(s: Settings) -> None:
    for key in ("height", "width", "steps", "max_sequence_length"):
        v = getattr(s, key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v <= 0):
            raise FlopcalcError(f"{key} must be a positive integer, got {v!r}")
    for key in ("batch_size", "num_images_per_prompt"):
        v = getattr(s, key)
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise FlopcalcError(f"{key} must be a positive integer, got {v!r}")
    if s.strength is not None and not 0 < s.strength <= 1:
        raise FlopcalcError(f"strength must be in (0, 1], got {s.strength}")


def vae_scale_factor(components: Mapping[str, Mapping[str, Any]]) -> int:
    """``2 ** (len(vae.config.block_out_channels) - 1)``, or 8 without a VAE (as the pipelines do)."""
    vae = components.get("vae")
    if vae is None:
        return 8
    channels = vae.get("block_out_channels")
    if not isinstance(channels, list) or not channels:
        raise ConfigError("vae/config.json: 'block_out_channels' must be a non-empty list")
    return 2 ** (len(channels) - 1)


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


def denoising_steps(steps: int, strength: float | None) -> int:
    """Steps actually run: image-to-image skips the first ``(1 − strength)`` of the schedule
    (``get_timesteps``: ``init_timestep = min(steps·strength, steps)``,
    ``t_start = int(max(steps − init_timestep, 0))``)."""
    if strength is None:
        return steps
    init_timestep = min(steps * strength, steps)
    return steps - int(max(steps - init_timestep, 0))


def _component_class(components: Mapping[str, Mapping[str, Any]], name: str) -> str | None:
    cfg = components.get(name)
    return class_name_of(cfg) if cfg is not None else None


def _text_runs(components, encoders: list[tuple[str, int]], prompts_encoded: int, why: str) -> list[ComponentRun]:
    return [
        ComponentRun(name, _component_class(components, name) or "?", "forward", "text_encoder",
                     RunShape(seq_len=seq), prompts_encoded, why)
        for name, seq in encoders
        if name in components
    ]


def _vae_runs(components, s: Settings, images: int, latent_h: int, latent_w: int) -> list[ComponentRun]:
    if "vae" not in components:
        return []
    cls = _component_class(components, "vae") or "?"
    runs = [ComponentRun("vae", cls, "decode", "vae_decoder", RunShape(latent_height=latent_h, latent_width=latent_w),
                         images, f"{images} image(s)")]
    if s.strength is not None:
        runs.insert(0, ComponentRun("vae", cls, "encode", "vae_encoder", RunShape(height=s.height, width=s.width),
                                    s.batch_size, f"{s.batch_size} input image(s)"))
    return runs


def _missing_notes(components, expected: list[str]) -> tuple[str, ...]:
    return tuple(f"{name} is absent from this pipeline and was not counted" for name in expected
                 if name not in components)


def _denoiser_run(components, name: str, s: Settings, f: int, text_len: int, passes: int) -> list[ComponentRun]:
    """The denoiser's runs: every kept step × guidance passes × images, on the latent grid."""
    if name not in components:
        return []
    steps = denoising_steps(s.steps, s.strength)
    images = s.batch_size * s.num_images_per_prompt
    return [ComponentRun(name, _component_class(components, name) or "?", "forward", "denoiser",
                         RunShape(latent_height=s.height // f, latent_width=s.width // f, text_len=text_len),
                         steps * passes * images, f"{steps} steps × {passes} pass(es) × {images} image(s)")]


def _image_runs(components, s: Settings, f: int) -> list[ComponentRun]:
    return _vae_runs(components, s, s.batch_size * s.num_images_per_prompt, s.height // f, s.width // f)


# --------------------------------------------------------------------------- FLUX


@register_pipeline("FluxPipeline", denoisers=("FluxTransformer2DModel",))
def flux_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                  index: Mapping[str, Any] | None = None) -> Plan:
    """``FluxPipeline.__call__`` (diffusers ``pipelines/flux/pipeline_flux.py``): 1024² default
    (``default_sample_size`` 128 × ``vae_scale_factor``), 28 steps, ``guidance_scale`` 3.5 as an
    embedding (guidance-distilled: one pass), true CFG (two passes, the negative prompt encoded
    too) only when ``true_cfg_scale > 1`` and a negative prompt is given. CLIP runs on 77 tokens
    for its pooled output, T5 on ``max_sequence_length`` (512, at most 512). Latents are packed
    2×2, so each side must divide by ``vae_scale_factor · 2``."""
    f = vae_scale_factor(components)
    s = replace(
        s,
        height=s.height or 128 * f,
        width=s.width or 128 * f,
        steps=s.steps or 28,
        guidance_scale=3.5 if s.guidance_scale is None else s.guidance_scale,
        true_cfg_scale=1.0 if s.true_cfg_scale is None else s.true_cfg_scale,
        max_sequence_length=s.max_sequence_length or 512,
    )
    if s.max_sequence_length > 512:
        raise FlopcalcError(f"max_sequence_length cannot be greater than 512 for FLUX, got {s.max_sequence_length}")
    check_divisible(s.height, s.width, f * 2, "FLUX height and width (packed 2×2 latents)")
    true_cfg = s.true_cfg_scale > 1 and s.negative_prompt
    passes = 2 if true_cfg else 1
    notes = list(_missing_notes(components, ["text_encoder", "text_encoder_2", "transformer", "vae"]))
    if s.true_cfg_scale > 1 and not s.negative_prompt:
        notes.append("true_cfg_scale > 1 has no effect without a negative prompt (as in FluxPipeline): one pass")
    runs = _text_runs(components, [("text_encoder", 77), ("text_encoder_2", s.max_sequence_length)],
                      s.batch_size * passes, f"{s.batch_size} prompt(s)" + (" + negative" if true_cfg else ""))
    runs += _denoiser_run(components, "transformer", s, f, s.max_sequence_length, passes)
    runs += _image_runs(components, s, f)
    return Plan("FluxPipeline", s, passes, tuple(runs), tuple(notes))


# --------------------------------------------------------------------------- SD3


@register_pipeline("StableDiffusion3Pipeline", denoisers=("SD3Transformer2DModel",))
def sd3_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                 index: Mapping[str, Any] | None = None) -> Plan:
    """``StableDiffusion3Pipeline.__call__`` (diffusers ``pipelines/stable_diffusion_3/
    pipeline_stable_diffusion_3.py``): default size ``transformer.sample_size × vae_scale_factor``
    (1024²), 28 steps, ``guidance_scale`` 7.0; CFG when ``guidance_scale > 1`` runs the
    transformer on a doubled batch (two passes) and encodes the negative prompt ("" by default)
    with all three encoders. CLIP-L and CLIP-G on 77 tokens, T5 on ``max_sequence_length`` (256);
    the transformer sees 77 + 256 = 333 text tokens. Sides must divide by
    ``vae_scale_factor · patch_size``."""
    f = vae_scale_factor(components)
    transformer = components.get("transformer", {})
    patch = transformer.get("patch_size", 2)
    sample = transformer.get("sample_size", 128)
    s = replace(
        s,
        height=s.height or sample * f,
        width=s.width or sample * f,
        steps=s.steps or 28,
        guidance_scale=7.0 if s.guidance_scale is None else s.guidance_scale,
        max_sequence_length=s.max_sequence_length or 256,
    )
    check_divisible(s.height, s.width, f * patch, "SD3 height and width (VAE factor × patch size)")
    cfg = s.guidance_scale > 1
    passes = 2 if cfg else 1
    runs = _text_runs(
        components,
        [("text_encoder", 77), ("text_encoder_2", 77), ("text_encoder_3", s.max_sequence_length)],
        s.batch_size * passes, f"{s.batch_size} prompt(s)" + (" + negative" if cfg else ""),
    )
    runs += _denoiser_run(components, "transformer", s, f, 77 + s.max_sequence_length, passes)
    runs += _image_runs(components, s, f)
    notes = _missing_notes(components, ["text_encoder", "text_encoder_2", "text_encoder_3", "transformer", "vae"])
    return Plan("StableDiffusion3Pipeline", s, passes, tuple(runs), notes)


# --------------------------------------------------------------------------- Stable Diffusion 1.x / 2.x, SDXL


def _unet_cfg_passes(components, s: Settings) -> int:
    """``do_classifier_free_guidance``: ``guidance_scale > 1`` and no ``time_cond_proj_dim`` (LCM)."""
    return 2 if s.guidance_scale > 1 and components.get("unet", {}).get("time_cond_proj_dim") is None else 1


def _unet_defaults(components, s: Settings, steps: int, guidance: float) -> tuple[Settings, int]:
    f = vae_scale_factor(components)
    sample = components.get("unet", {}).get("sample_size", 64)
    sample = sample if isinstance(sample, int) else sample[0]
    s = replace(s, height=s.height or sample * f, width=s.width or sample * f, steps=s.steps or steps,
                guidance_scale=guidance if s.guidance_scale is None else s.guidance_scale)
    check_divisible(s.height, s.width, 8, "Stable Diffusion height and width")
    return s, f


@register_pipeline("StableDiffusionPipeline", denoisers=("UNet2DConditionModel",), component="unet",
                   when=lambda cfg: cfg.get("addition_embed_type") != "text_time")
def sd_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                index: Mapping[str, Any] | None = None) -> Plan:
    """``StableDiffusionPipeline.__call__`` (diffusers ``pipelines/stable_diffusion/
    pipeline_stable_diffusion.py``): default size ``unet.sample_size × vae_scale_factor`` (512²
    for SD1.5 and SD2.1-base), 50 steps, ``guidance_scale`` 7.5; with CFG the UNet runs on the
    concatenated [uncond, cond] batch (two passes) and the negative prompt ("" by default) is
    encoded. CLIP on 77 tokens."""
    s, f = _unet_defaults(components, s, 50, 7.5)
    passes = _unet_cfg_passes(components, s)
    runs = _text_runs(components, [("text_encoder", 77)], s.batch_size * passes,
                      f"{s.batch_size} prompt(s)" + (" + negative" if passes == 2 else ""))
    runs += _denoiser_run(components, "unet", s, f, 77, passes) + _image_runs(components, s, f)
    return Plan("StableDiffusionPipeline", s, passes, tuple(runs),
                _missing_notes(components, ["text_encoder", "unet", "vae"]))


@register_pipeline("StableDiffusionXLPipeline", denoisers=("UNet2DConditionModel",), component="unet",
                   when=lambda cfg: cfg.get("addition_embed_type") == "text_time")
def sdxl_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                  index: Mapping[str, Any] | None = None) -> Plan:
    """``StableDiffusionXLPipeline.__call__`` (``pipelines/stable_diffusion_xl/
    pipeline_stable_diffusion_xl.py``): 1024² default (``unet.sample_size`` 128 × 8), 50 steps,
    ``guidance_scale`` 5.0, CFG as a doubled UNet batch. Both CLIP encoders run on 77 tokens per
    prompt; the negative prompt is encoded only when one is given: without it,
    ``force_zeros_for_empty_prompt`` (the default) uses zero embeddings instead."""
    s, f = _unet_defaults(components, s, 50, 5.0)
    passes = _unet_cfg_passes(components, s)
    force_zeros_for_empty_prompt = (index or {}).get("force_zeros_for_empty_prompt", True)
    encode_negative = passes == 2 and (s.negative_prompt or not force_zeros_for_empty_prompt)
    runs = _text_runs(components, [("text_encoder", 77), ("text_encoder_2", 77)],
                      s.batch_size * (2 if encode_negative else 1),
                      f"{s.batch_size} prompt(s)" + (" + negative" if encode_negative else ""))
    runs += _denoiser_run(components, "unet", s, f, 77, passes) + _image_runs(components, s, f)
    notes = list(_missing_notes(components, ["text_encoder", "text_encoder_2", "unet", "vae"]))
    if passes == 2 and not encode_negative:
        notes.append("no negative prompt: SDXL uses zero negative embeddings (force_zeros_for_empty_prompt), "
                     "so the text encoders run once per prompt")
    return Plan("StableDiffusionXLPipeline", s, passes, tuple(runs), tuple(notes))


# --------------------------------------------------------------------------- PixArt-α, DiT


def pixart_binned_size(height: int, width: int, sample_size: int) -> tuple[int, int]:
    """``PixArtImageProcessor.classify_height_width_bin``: the bin whose aspect ratio is nearest
    ``height / width``, from the table of the model's ``sample_size`` (diffusers' own tables,
    copied by ``validation/extract_pixart_bins.py``)."""
    import json
    from importlib.resources import files

    tables = json.loads(files("flopcalc").joinpath("data/pixart_aspect_ratio_bins.json").read_text())
    if str(sample_size) not in tables:
        raise FlopcalcError(f"PixArt resolution binning has no table for sample_size {sample_size} "
                            f"(only {', '.join(k for k in tables if not k.startswith('_'))}); "
                            "turn binning off to estimate the size as given")
    ratios = tables[str(sample_size)]
    ar = float(height / width)
    closest = min(ratios, key=lambda r: abs(float(r) - ar))
    return ratios[closest][0], ratios[closest][1]


@register_pipeline("PixArtAlphaPipeline", denoisers=("PixArtTransformer2DModel",))
def pixart_alpha_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                          index: Mapping[str, Any] | None = None) -> Plan:
    """``PixArtAlphaPipeline.__call__`` (``pipelines/pixart_alpha/pipeline_pixart_alpha.py``):
    default size ``transformer.sample_size × 8``; with ``use_resolution_binning`` (default) the
    size snaps to the nearest aspect-ratio bin and the image is generated there, then resized.
    20 steps, ``guidance_scale`` 4.5, CFG as a doubled batch with the negative prompt ("")
    encoded; T5 on ``max_sequence_length`` 120 tokens."""
    return _pixart(components, s, "PixArtAlphaPipeline", 120)


@register_pipeline("PixArtSigmaPipeline")
def pixart_sigma_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                          index: Mapping[str, Any] | None = None) -> Plan:
    """``PixArtSigmaPipeline.__call__`` (``pipeline_pixart_sigma.py``): as PixArt-α with T5 on
    300 tokens and a 2048px bin table for ``sample_size`` 256."""
    return _pixart(components, s, "PixArtSigmaPipeline", 300)


def _pixart(components: Mapping[str, Mapping[str, Any]], s: Settings, name: str, text_len: int) -> Plan:
    f = vae_scale_factor(components)
    transformer = components.get("transformer", {})
    sample = transformer.get("sample_size", 128)
    patch = transformer.get("patch_size", 2)
    s = replace(s, height=s.height or sample * f, width=s.width or sample * f, steps=s.steps or 20,
                guidance_scale=4.5 if s.guidance_scale is None else s.guidance_scale,
                max_sequence_length=s.max_sequence_length or text_len)
    notes = list(_missing_notes(components, ["text_encoder", "transformer", "vae"]))
    if s.resolution_binning:
        binned = pixart_binned_size(s.height, s.width, sample)
        if binned != (s.height, s.width):
            notes.append(f"resolution binning: {s.height}×{s.width} is generated at {binned[0]}×{binned[1]} and "
                         f"resized, as {name} does (turn off with --no-resolution-binning)")
            s = replace(s, height=binned[0], width=binned[1])
    check_divisible(s.height, s.width, f * patch, "PixArt height and width (VAE factor × patch size)")
    passes = 2 if s.guidance_scale > 1 else 1
    runs = _text_runs(components, [("text_encoder", s.max_sequence_length)], s.batch_size * passes,
                      f"{s.batch_size} prompt(s)" + (" + negative" if passes == 2 else ""))
    runs += _denoiser_run(components, "transformer", s, f, s.max_sequence_length, passes)
    runs += _image_runs(components, s, f)
    return Plan(name, s, passes, tuple(runs), tuple(notes))


@register_pipeline("DiTPipeline", denoisers=("DiTTransformer2DModel",))
def dit_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                 index: Mapping[str, Any] | None = None) -> Plan:
    """``DiTPipeline.__call__`` (``pipelines/dit/pipeline_dit.py``): class-conditional, no text
    encoder; generates at ``transformer.sample_size × 8`` (it takes no size argument: a size
    given here estimates the transformer at that size), 50 steps, ``guidance_scale`` 4.0 with
    the latents doubled (two passes). ``batch_size`` is the number of class labels."""
    f = vae_scale_factor(components)
    sample = components.get("transformer", {}).get("sample_size", 32)
    s = replace(s, height=s.height or sample * f, width=s.width or sample * f, steps=s.steps or 50,
                guidance_scale=4.0 if s.guidance_scale is None else s.guidance_scale)
    check_divisible(s.height, s.width, f * components.get("transformer", {}).get("patch_size", 2),
                    "DiT height and width (VAE factor × patch size)")
    passes = 2 if s.guidance_scale > 1 else 1
    runs = _denoiser_run(components, "transformer", s, f, 0, passes) + _image_runs(components, s, f)
    notes = [] if (s.height, s.width) == (sample * f, sample * f) else [
        f"DiTPipeline itself always generates at {sample * f}×{sample * f}; this estimates the transformer at "
        f"{s.height}×{s.width}"]
    return Plan("DiTPipeline", s, passes, tuple(runs), tuple(notes))


# --------------------------------------------------------------------------- image-to-image variants


def _image_to_image(name: str, base: PlanFn, *, strength: float, steps: int | None = None,
                    guidance: float | None = None) -> None:
    """Register ``name`` as ``base`` with the image-to-image pipeline's own defaults: the input
    image is VAE-encoded and only the last ``strength`` of the schedule runs."""

    def plan_fn(components: Mapping[str, Mapping[str, Any]], s: Settings,
                index: Mapping[str, Any] | None = None) -> Plan:
        s = replace(s, strength=strength if s.strength is None else s.strength, steps=s.steps or steps,
                    guidance_scale=guidance if s.guidance_scale is None else s.guidance_scale)
        return replace(base(components, s, index=index), pipeline=name)

    plan_fn.__doc__ = f"``{name}``: {base.__name__} with strength {strength} (diffusers defaults)."
    register_pipeline(name)(plan_fn)


# diffusers' own defaults (the __call__ signatures of each *_img2img.py pipeline)
_image_to_image("StableDiffusionImg2ImgPipeline", sd_pipeline, strength=0.8)
_image_to_image("StableDiffusionXLImg2ImgPipeline", sdxl_pipeline, strength=0.3)
_image_to_image("FluxImg2ImgPipeline", flux_pipeline, strength=0.6, steps=28, guidance=7.0)
_image_to_image("StableDiffusion3Img2ImgPipeline", sd3_pipeline, strength=0.6, steps=50)


# --------------------------------------------------------------------------- a bare config


def _standalone(components: Mapping[str, Mapping[str, Any]], s: Settings) -> Plan:
    """A single component's config: a denoiser runs under the pipeline built for it; a text
    encoder encodes ``max_sequence_length`` (default: its position limit, or 512) tokens once
    per prompt; a VAE decodes one image per batch entry."""
    from flopcalc.registry import lookup

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
        return replace(p, pipeline=f"{pipe} (denoiser only)", runs=runs, notes=("only the denoiser was given",))
    if role == "text_encoder":
        seq = s.max_sequence_length or cfg.get("max_position_embeddings") or 512
        s = replace(s, max_sequence_length=seq)
        run = ComponentRun(name, cls or "?", "forward", "text_encoder", RunShape(seq_len=seq), s.batch_size,
                           f"{s.batch_size} prompt(s)")
        return Plan("text encoder only", s, 1, (run,))
    f = vae_scale_factor({"vae": cfg})
    size = cfg.get("sample_size") if isinstance(cfg.get("sample_size"), int) else 1024
    s = replace(s, height=s.height or size, width=s.width or size)
    check_divisible(s.height, s.width, f, "VAE height and width")
    images = s.batch_size * s.num_images_per_prompt
    lookup(cls, "decode", component=name)
    return Plan("VAE only", s, 1, tuple(_vae_runs({"vae": cfg}, s, images, s.height // f, s.width // f)))


def _role_of(class_name: str | None, component: str) -> str:
    from flopcalc.registry import lookup

    for call in ("forward", "decode"):
        try:
            return lookup(class_name, call, component=component).role
        except FlopcalcError:
            continue
    lookup(class_name, component=component)  # raises the actionable error
    raise AssertionError("unreachable")
