"""BRIA FIBO (diffusers ``pipelines/bria_fibo``: ``BriaFiboPipeline``, ``BriaFiboEditPipeline``)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.errors import FlopcalcError, OptionError
from flopcalc.engine.pipelines.base import (
    ComponentRun,
    Plan,
    RunShape,
    Settings,
    cfg_passes,
    check_divisible,
    component_class,
    missing_notes,
    register_pipeline,
)
from flopcalc.engine.pipelines import stable_cascade  # noqa: F401  (declares the reference_images option)
from flopcalc.engine.pipelines.vae import vae_runs

#: ``BriaFiboPipeline.__init__``: ``vae_scale_factor = 16`` (hard-coded: the Wan 2.2 VAE's ×16) and
#: ``default_sample_size`` 64: 1024².
VAE_SCALE_FACTOR, DEFAULT_SAMPLE_SIZE = 16, 64
#: ``__call__`` defaults; ``check_inputs`` refuses ``max_sequence_length`` above 3000 and sides not divisible by 16.
STEPS, GUIDANCE, MAX_SEQUENCE_LENGTH = 30, 5.0, 3000


def fibo_text_runs(components: Mapping[str, Any], s: Settings, cfg: bool) -> list[ComponentRun]:
    """``get_prompt_embeds``: the text encoder on each batch of prompts, ``padding="longest"`` truncated at
    ``max_sequence_length`` (counted in full: the upper bound); under guidance the negative prompts too, which
    for ``""`` (the default) is one ``<|begin_of_text|>`` token per prompt."""
    if "text_encoder" not in components:
        return []
    cls = component_class(components, "text_encoder") or "?"
    runs = [ComponentRun("text_encoder", cls, "forward", "text_encoder", RunShape(seq_len=s.max_sequence_length),
                         s.batch_size, f"{s.batch_size} prompt(s)")]
    if cfg:
        length = s.max_sequence_length if s.negative_prompt else 1
        runs.append(ComponentRun("text_encoder", cls, "forward", "text_encoder", RunShape(seq_len=length),
                                 s.batch_size, f"{s.batch_size} negative prompt(s)"
                                 + ("" if s.negative_prompt else " (\"\": one token)")))
    return runs


def fibo_settings(s: Settings) -> Settings:
    s = replace(s, height=s.height or DEFAULT_SAMPLE_SIZE * VAE_SCALE_FACTOR,
                width=s.width or DEFAULT_SAMPLE_SIZE * VAE_SCALE_FACTOR, steps=s.steps or STEPS,
                guidance_scale=GUIDANCE if s.guidance_scale is None else s.guidance_scale,
                max_sequence_length=s.max_sequence_length or MAX_SEQUENCE_LENGTH)
    if s.max_sequence_length > MAX_SEQUENCE_LENGTH:
        raise FlopcalcError(f"max_sequence_length cannot be greater than {MAX_SEQUENCE_LENGTH} for BRIA FIBO, got "
                            f"{s.max_sequence_length}")
    check_divisible(s.height, s.width, VAE_SCALE_FACTOR, "BRIA FIBO height and width")
    return s


@register_pipeline("BriaFiboPipeline", denoisers=("BriaFiboTransformer2DModel",), options=("max_sequence_length",))
def bria_fibo_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                       index: Mapping[str, Any] | None = None) -> Plan:
    """``BriaFiboPipeline.__call__``: 1024² (``default_sample_size`` 64 × 16), 30 steps, ``guidance_scale`` 5.0;
    guidance (``> 1``) doubles the transformer's batch (negative rows, then prompt rows: two passes).

    The text encoder (``SmolLM3ForCausalLM``; every layer's hidden state is read, ``lm_head`` runs too) encodes the
    (structured JSON) prompt unpadded, truncated at ``max_sequence_length`` (3000): flopcalc counts 3000 tokens,
    the upper bound; give the prompt's token count with ``max_sequence_length``. The negative embeddings are
    zero-padded to the prompt's length, so the transformer sees ``max_sequence_length`` text tokens per row, plus
    one token per ``H/16 × W/16`` latent pixel (``do_patching`` off, the default), with every block reading its own
    text-encoder layer through a caption projection. The Wan 2.2 VAE decodes one frame at ``H/16 × W/16``."""
    if s.strength is not None:
        raise OptionError("--strength does not apply to BriaFiboPipeline: its __call__ takes no strength (it generates "
                          "from noise; BriaFiboEditPipeline edits an image)")
    s = fibo_settings(s)
    cfg = s.guidance_scale > 1
    passes = cfg_passes(s, cfg)
    images = s.batch_size * s.num_images_per_prompt
    lat_h, lat_w = s.height // VAE_SCALE_FACTOR, s.width // VAE_SCALE_FACTOR
    notes = list(missing_notes(components, ["text_encoder", "transformer", "vae"]))
    notes.append(f"text: {s.max_sequence_length} tokens per prompt (the upper bound: the pipeline encodes the prompt "
                 "unpadded; set max_sequence_length to its token count)")
    if s.negative_prompt and not cfg:
        notes.append("the negative prompt is ignored with guidance_scale ≤ 1 (as in BriaFiboPipeline)")
    runs = fibo_text_runs(components, s, cfg)
    if "transformer" in components:
        runs.append(ComponentRun("transformer", component_class(components, "transformer") or "?", "forward",
                                 "denoiser", RunShape(latent_height=lat_h, latent_width=lat_w,
                                                      text_len=s.max_sequence_length),
                                 s.steps * passes * images, f"{s.steps} steps × {passes} pass(es) × {images} image(s)"))
    runs += vae_runs(components, s, images, lat_h, lat_w)
    return Plan("BriaFiboPipeline", s, passes, tuple(runs), tuple(notes))


# --------------------------------------------------------------------------- FIBO Edit

#: ``PREFERRED_RESOLUTION[1024 * 1024]`` of pipeline_bria_fibo_edit.py:97-127, ``(width, height)`` pairs: without a
#: size, the output takes the one whose aspect is nearest the first reference image's.
PREFERRED_EDIT_RESOLUTIONS = ((832, 1248), (880, 1184), (912, 1136), (1024, 1024), (1136, 912), (1184, 880),
                              (1216, 848), (1248, 832), (1248, 832), (1264, 816), (1296, 800), (1360, 768))


def vae_safe_dims(width: int, height: int, base: int = 1024, multiple: int = 16) -> tuple[int, int]:
    """``_vae_safe_dims`` (pipeline_bria_fibo_edit.py:185-193): a reference capped at ``base²`` pixels (its aspect
    kept), each side rounded to a multiple of 16 (at least 16); ``(width, height)``."""
    scale = min(1.0, ((base * base) / float(width * height)) ** 0.5)
    return tuple(max(multiple, int(round(side * scale / multiple)) * multiple) for side in (width, height))


def preferred_edit_size(height: int, width: int) -> tuple[int, int]:
    """The output size ``BriaFiboEditPipeline`` picks for a first reference of ``height × width`` (``_auto_resize``,
    :707-717): its VAE-safe size, then the preferred resolution of nearest aspect; ``(height, width)``."""
    w, h = vae_safe_dims(width, height)
    best = min(PREFERRED_EDIT_RESOLUTIONS, key=lambda size: abs(size[0] / size[1] - w / h))
    return best[1], best[0]


@register_pipeline("BriaFiboEditPipeline", options=("max_sequence_length", "reference_images"))
def bria_fibo_edit_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                            index: Mapping[str, Any] | None = None) -> Plan:
    """``BriaFiboEditPipeline.__call__`` (``pipeline_bria_fibo_edit.py``): BRIA FIBO's plan (30 steps,
    ``guidance_scale`` 5.0, the text encoder as in :func:`bria_fibo_pipeline`) with ``reference_images`` input images
    (default 1), each taken at ``height × width`` (default 1024²). Each reference is VAE-encoded once, at its
    VAE-safe size (at most 1024² pixels, sides rounded to 16), and its latent pixels are appended as tokens after the
    generated latent's in every transformer row. Without a size of its own the pipeline generates at the preferred
    resolution nearest the first reference's aspect (``_auto_resize``): flopcalc does so unless resolution binning is
    off (``--no-resolution-binning``: the output at ``height × width`` as given). A mask is pasted on the image: no
    work."""
    if s.strength is not None:
        raise OptionError("--strength does not apply to BriaFiboEditPipeline: its __call__ takes no strength (every step "
                          "runs; the reference images condition it)")
    if s.symbolic:
        raise FlopcalcError("BRIA FIBO Edit resizes its references by square roots and rounding: no closed-form law; "
                            "use the numeric estimate")
    refs = 1 if s.reference_images is None else s.reference_images
    in_h, in_w = s.height or DEFAULT_SAMPLE_SIZE * VAE_SCALE_FACTOR, s.width or DEFAULT_SAMPLE_SIZE * VAE_SCALE_FACTOR
    ref_w, ref_h = vae_safe_dims(in_w, in_h)
    out_h, out_w = preferred_edit_size(in_h, in_w) if s.resolution_binning else (in_h, in_w)
    s = fibo_settings(replace(s, height=out_h, width=out_w))
    cfg = s.guidance_scale > 1
    passes = cfg_passes(s, cfg)
    images = s.batch_size * s.num_images_per_prompt
    lat_h, lat_w = s.height // VAE_SCALE_FACTOR, s.width // VAE_SCALE_FACTOR
    ref_tokens = refs * (ref_h // VAE_SCALE_FACTOR) * (ref_w // VAE_SCALE_FACTOR)
    notes = list(missing_notes(components, ["text_encoder", "transformer", "vae"]))
    notes.append(f"text: {s.max_sequence_length} tokens per prompt (the upper bound: the pipeline encodes the prompt "
                 "unpadded; set max_sequence_length to its token count)")
    notes.append(f"{refs} reference image(s) of {in_h}×{in_w}, VAE-encoded at {ref_h}×{ref_w}: {ref_tokens} tokens after "
                 f"the {lat_h * lat_w} of the {s.height}×{s.width} output in every row")
    runs = fibo_text_runs(components, s, cfg)
    if "vae" in components:
        runs.append(ComponentRun("vae", component_class(components, "vae") or "?", "encode", "vae_encoder",
                                 RunShape(height=ref_h, width=ref_w), refs, f"{refs} reference image(s)"))
    if "transformer" in components:
        runs.append(ComponentRun("transformer", component_class(components, "transformer") or "?", "forward",
                                 "denoiser", RunShape(latent_height=lat_h, latent_width=lat_w,
                                                      text_len=s.max_sequence_length, reference_tokens=ref_tokens),
                                 s.steps * passes * images, f"{s.steps} steps × {passes} pass(es) × {images} image(s)"))
    runs += vae_runs(components, s, images, lat_h, lat_w)
    return Plan("BriaFiboEditPipeline", s, passes, tuple(runs), tuple(notes))
