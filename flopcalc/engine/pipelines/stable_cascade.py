"""Stable Cascade pipelines (diffusers ``pipelines/stable_cascade``): ``StableCascadePriorPipeline``
(stage C: ``text_encoder``, ``prior``, optional ``image_encoder``), ``StableCascadeDecoderPipeline``
(stage B and A: ``text_encoder``, ``decoder``, ``vqgan``) and ``StableCascadeCombinedPipeline``
(the prior pipeline, then the decoder pipeline, on ``prior_*`` and plain components).

Latent geometry: the prior's latent side is ``ceil(side / resolution_multiple)``
(``prepare_latents``, pipeline_stable_cascade_prior.py:138, 42.67 by default), the decoder's
``int(prior side · latent_dim_scale)`` (pipeline_stable_cascade.py:119, 10.67 by default), and the
VQGAN decodes that to ``PaellaVQModel``'s scale (4×) of it. Python float arithmetic, as diffusers
does it: no closed-form law in H and W (a symbolic law is refused).

The ``DDPMWuerstchenScheduler`` timesteps are ``linspace(1, 0, steps + 1)`` and the pipelines drop the
last (``timesteps[:-1]``), so the denoiser runs ``steps`` times. CLIP encodes 77 tokens
(``padding="max_length"``); under classifier-free guidance (``guidance_scale > 1``) the negative
prompt ("" when not given) is encoded too and the denoiser runs on the doubled batch. The prior's
image encoder runs once per reference image (``images``; ``--reference-images N``: ``encode_image``,
pipeline_stable_cascade_prior.py:262, at batch 1, whatever the batch and guidance: the negative image
embeddings are zeros), and the prior then sees ``clip_seq`` tokens per image; without images it gets one
zero image embedding (:533).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.errors import ConfigError, FlopcalcError, OptionError, ResolutionError
from flopcalc.engine.pipelines.base import (
    ComponentRun,
    Plan,
    Settings,
    cfg_passes,
    component_class,
    missing_notes,
    register_pipeline,
    text_runs,
    vae_scale_factor,
)
from flopcalc.engine.registry import RunShape
from flopcalc.engine.settings import COUNT, pipeline_option

pipeline_option("reference_images", kind=COUNT, bound=(64, "reference images"),
                help="reference images conditioning the generation (Stable Cascade prior: CLIP-encoded; FLUX.2: "
                     "VAE-encoded tokens appended at every step; default none)",
                refusal="it takes no reference images to condition on")

#: CLIP tokenizer ``model_max_length``: ``encode_prompt`` pads to it.
TEXT_LEN = 77
#: ``StableCascadePriorPipeline.__init__(resolution_multiple=42.67)`` and its ``__call__`` defaults.
RESOLUTION_MULTIPLE = 42.67
PRIOR_SIZE, PRIOR_STEPS, PRIOR_GUIDANCE = 1024, 20, 4.0
#: ``StableCascadeDecoderPipeline.__init__(latent_dim_scale=10.67)`` and its ``__call__`` defaults.
LATENT_DIM_SCALE = 10.67
DECODER_STEPS, DECODER_GUIDANCE = 10, 0.0
#: ``StableCascadeCombinedPipeline.__call__`` defaults (pipeline_stable_cascade_combined.py:165-170); it
#: builds both inner pipelines with their ``__init__`` defaults (42.67, 10.67).
COMBINED_SIZE, COMBINED_PRIOR_STEPS, COMBINED_PRIOR_GUIDANCE = 512, 60, 4.0
COMBINED_DECODER_STEPS, COMBINED_DECODER_GUIDANCE = 12, 0.0
#: ``image_embeds_pooled = torch.zeros(B, 1, clip_image_in_channels)`` when no image is given.
IMAGE_EMBEDDINGS = 1


def _index_number(index: Mapping[str, Any] | None, key: str, default: float) -> float:
    """A pipeline ``__init__`` value ``register_to_config`` stored in model_index.json."""
    value = (index or {}).get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not 0 < value <= 1e4:
        raise ConfigError(f"model_index.json: {key!r} is {value!r}; expected a positive number (diffusers' default "
                          f"is {default})")
    return value


def prior_latent_side(side: int, resolution_multiple: float = RESOLUTION_MULTIPLE) -> int:
    """``ceil(side / resolution_multiple)`` (``StableCascadePriorPipeline.prepare_latents``)."""
    return math.ceil(side / resolution_multiple)


def decoder_latent_side(prior_side: int, latent_dim_scale: float = LATENT_DIM_SCALE) -> int:
    """``int(prior_side · latent_dim_scale)`` (``StableCascadeDecoderPipeline.prepare_latents``)."""
    return int(prior_side * latent_dim_scale)


def _refuse_unsupported(s: Settings) -> None:
    """No closed-form law (float geometry), and no image-to-image: Stable Cascade's pipelines take
    ``images`` only as CLIP conditioning of the prior, never as a starting latent."""
    if s.strength is not None:
        raise OptionError("--strength does not apply to Stable Cascade: its pipelines have no image-to-image "
                          "mode (reference images only condition the prior through CLIP)")
    if s.symbolic:
        raise FlopcalcError("Stable Cascade's latent sides are ceil(side / 42.67) and int(· × 10.67) in floating "
                            "point: no closed-form law in H and W; use the numeric estimate")


def _check_patch(cfg: Mapping[str, Any], latent: tuple[int, int], what: str) -> None:
    """``PixelUnshuffle(patch_size)`` (the UNet's ``embedding``) needs latent sides that divide by the patch."""
    patch = cfg["patch_size"]
    if latent[0] % patch or latent[1] % patch:
        raise ResolutionError(f"{what}, which the UNet's PixelUnshuffle({patch}) cannot split: the real pipeline "
                              "fails at this size; choose another height or width (e.g. a multiple of 128)")


def _prior_runs(components: Mapping[str, Mapping[str, Any]], s: Settings, steps: int, guidance: float,
                multiple: float, names: tuple[str, str, str]) -> tuple[list[ComponentRun], int, tuple[int, int], list[str]]:
    """The prior pipeline's runs (``text_encoder``, ``prior``): the CLIP encoder on the prompts (and the
    negatives under CFG), the prior ``steps × passes × images`` times. Returns the runs, the passes, the
    prior latent size and notes."""
    text, prior, image = names
    passes = cfg_passes(s, guidance > 1)
    runs = text_runs(components, [(text, TEXT_LEN)], s.batch_size * (2 if guidance > 1 else 1),
                     f"{s.batch_size} prompt(s)" + (" + negative" if guidance > 1 else ""))
    latent = prior_latent_side(s.height, multiple), prior_latent_side(s.width, multiple)
    images = s.batch_size * s.num_images_per_prompt
    notes = []
    refs = s.reference_images
    if refs and image not in components:
        notes.append(f"{image} is absent: its {refs} reference-image encoding(s) are not counted")
    elif refs:
        size = components[image]["image_size"]
        runs.append(ComponentRun(image, component_class(components, image) or "?", "forward", "image_encoder",
                                 RunShape(height=size, width=size), refs,
                                 f"{refs} reference image(s), once each (encode_image)"))
    if prior in components:
        cfg = components[prior]
        if cfg["clip_text_in_channels"] is None or cfg["clip_image_in_channels"] is None:
            raise ConfigError(f"{prior}/config.json: the prior pipeline passes CLIP text tokens and image embeddings; "
                              "this StableCascadeUNet has no clip_text_in_channels or clip_image_in_channels (a "
                              "decoder's config?)")
        _check_patch(cfg, latent, f"the prior latent is {latent[0]}×{latent[1]} (ceil(side / {multiple}))")
        runs.append(ComponentRun(prior, component_class(components, prior) or "?", "forward", "denoiser",
                                 RunShape(latent_height=latent[0], latent_width=latent[1], text_len=TEXT_LEN,
                                          image_tokens=refs or IMAGE_EMBEDDINGS),
                                 steps * passes * images, f"{steps} steps × {passes} pass(es) × {images} image(s)"))
    if image in components and not refs:
        notes.append(f"{image} runs only for reference images (--reference-images N): none given, so not counted; "
                     "the prior gets one zero image embedding")
    return runs, passes, latent, notes


def _decoder_runs(components: Mapping[str, Mapping[str, Any]], s: Settings, steps: int, guidance: float,
                  prior_latent: tuple[int, int], scale: float, encode_text: bool
                  ) -> tuple[list[ComponentRun], int, tuple[int, int]]:
    """The decoder pipeline's runs (``text_encoder`` when it encodes, ``decoder``, ``vqgan``)."""
    passes = cfg_passes(s, guidance > 1)
    runs = text_runs(components, [("text_encoder", TEXT_LEN)], s.batch_size * (2 if guidance > 1 else 1),
                     f"{s.batch_size} prompt(s)" + (" + negative" if guidance > 1 else "")) if encode_text else []
    latent = decoder_latent_side(prior_latent[0], scale), decoder_latent_side(prior_latent[1], scale)
    images = s.batch_size * s.num_images_per_prompt
    if "decoder" in components:
        _check_patch(components["decoder"], latent,
                     f"the decoder latent is {latent[0]}×{latent[1]} (int(ceil(side / 42.67) × {scale}))")
        runs.append(ComponentRun("decoder", component_class(components, "decoder") or "?", "forward", "denoiser",
                                 RunShape(latent_height=latent[0], latent_width=latent[1], text_len=TEXT_LEN),
                                 steps * passes * images, f"{steps} steps × {passes} pass(es) × {images} image(s)"))
    if "vqgan" in components:
        runs.append(ComponentRun("vqgan", component_class(components, "vqgan") or "?", "decode", "vae_decoder",
                                 RunShape(latent_height=latent[0], latent_width=latent[1]), images,
                                 f"{images} image(s)"))
    return runs, passes, latent


def _image_note(components: Mapping[str, Mapping[str, Any]], s: Settings, latent: tuple[int, int]) -> list[str]:
    if "vqgan" not in components:
        return []
    f = vae_scale_factor(components, "vqgan")
    out = latent[0] * f, latent[1] * f
    return [] if out == (s.height, s.width) else [
        f"the image comes out {out[0]}×{out[1]}: the VQGAN decodes the {latent[0]}×{latent[1]} decoder latent "
        f"(int(ceil(side / 42.67) × 10.67)) at {f}×"]


@register_pipeline("StableCascadePriorPipeline", denoisers=("StableCascadeUNet",), component="prior",
                   options=("reference_images",), when=lambda cfg: cfg.get("effnet_in_channels") is None)
def stable_cascade_prior_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                  index: Mapping[str, Any] | None = None) -> Plan:
    """``StableCascadePriorPipeline.__call__`` (pipeline_stable_cascade_prior.py:377): 1024², 20 steps,
    ``guidance_scale`` 4.0; the prior latent is ``16 × ceil(H / 42.67) × ceil(W / 42.67)``; the prior
    sees the 77 text tokens, ``clip_seq`` pooled-text tokens and ``clip_seq`` per image embedding."""
    _refuse_unsupported(s)
    s = replace(s, height=s.height or PRIOR_SIZE, width=s.width or PRIOR_SIZE, steps=s.steps or PRIOR_STEPS,
                guidance_scale=PRIOR_GUIDANCE if s.guidance_scale is None else s.guidance_scale)
    multiple = _index_number(index, "resolution_multiple", RESOLUTION_MULTIPLE)
    runs, passes, _, notes = _prior_runs(components, s, s.steps, s.guidance_scale, multiple,
                                         ("text_encoder", "prior", "image_encoder"))
    notes = [*missing_notes(components, ["text_encoder", "prior"]), *notes,
             "the output is the stage C latent (image_embeddings) the decoder pipeline takes"]
    return Plan("StableCascadePriorPipeline", s, passes, tuple(runs), tuple(notes))


@register_pipeline("StableCascadeDecoderPipeline", denoisers=("StableCascadeUNet",), component="decoder",
                   when=lambda cfg: cfg.get("effnet_in_channels") is not None)
def stable_cascade_decoder_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                    index: Mapping[str, Any] | None = None) -> Plan:
    """``StableCascadeDecoderPipeline.__call__`` (pipeline_stable_cascade.py:308): 10 steps,
    ``guidance_scale`` 0.0 (no CFG); it takes the prior's ``image_embeddings``, planned here as the prior
    pipeline makes them for ``height × width`` (1024² when not given; ``ceil(side / 42.67)``); the decoder
    latent is ``4 × int(· × latent_dim_scale)`` per side and the VQGAN decodes it once per image."""
    _refuse_unsupported(s)
    s = replace(s, height=s.height or PRIOR_SIZE, width=s.width or PRIOR_SIZE, steps=s.steps or DECODER_STEPS,
                guidance_scale=DECODER_GUIDANCE if s.guidance_scale is None else s.guidance_scale)
    scale = _index_number(index, "latent_dim_scale", LATENT_DIM_SCALE)
    prior = prior_latent_side(s.height), prior_latent_side(s.width)
    runs, passes, latent = _decoder_runs(components, s, s.steps, s.guidance_scale, prior, scale, True)
    notes = [*missing_notes(components, ["text_encoder", "decoder", "vqgan"]),
             f"image_embeddings (the prior's output) taken as {prior[0]}×{prior[1]}: ceil(side / 42.67), as "
             "StableCascadePriorPipeline makes them", *_image_note(components, s, latent)]
    return Plan("StableCascadeDecoderPipeline", s, passes, tuple(runs), tuple(notes))


@register_pipeline("StableCascadeCombinedPipeline", options=("reference_images",))
def stable_cascade_combined_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                     index: Mapping[str, Any] | None = None) -> Plan:
    """``StableCascadeCombinedPipeline.__call__`` (pipeline_stable_cascade_combined.py:161): 512²; the
    prior pipeline with ``prior_num_inference_steps`` 60 and ``prior_guidance_scale`` 4.0 (``--steps`` and
    ``--guidance-scale`` set these two), then the decoder pipeline with its own ``num_inference_steps`` 12
    and ``decoder_guidance_scale`` 0.0. The decoder pipeline gets the prior's prompt embeddings
    (``prompt_embeds`` from the prior's output, so ``prompt=None``), so its ``text_encoder`` never runs."""
    _refuse_unsupported(s)
    s = replace(s, height=s.height or COMBINED_SIZE, width=s.width or COMBINED_SIZE,
                steps=s.steps or COMBINED_PRIOR_STEPS,
                guidance_scale=COMBINED_PRIOR_GUIDANCE if s.guidance_scale is None else s.guidance_scale)
    prior_runs, passes, prior, prior_notes = _prior_runs(
        components, s, s.steps, s.guidance_scale, RESOLUTION_MULTIPLE,
        ("prior_text_encoder", "prior_prior", "prior_image_encoder"))
    decoder_runs, _, latent = _decoder_runs(components, s, COMBINED_DECODER_STEPS, COMBINED_DECODER_GUIDANCE,
                                            prior, LATENT_DIM_SCALE, False)
    notes = [*missing_notes(components, ["prior_text_encoder", "prior_prior", "decoder", "vqgan"]), *prior_notes,
             f"--steps and --guidance-scale set the prior's prior_num_inference_steps and prior_guidance_scale; the "
             f"decoder runs its {COMBINED_DECODER_STEPS} steps at decoder_guidance_scale "
             f"{COMBINED_DECODER_GUIDANCE} (one pass)"]
    if "text_encoder" in components:
        notes.append("text_encoder does not run: the decoder pipeline gets the prior's prompt embeddings")
    notes += _image_note(components, s, latent)
    return Plan("StableCascadeCombinedPipeline", s, passes, tuple(prior_runs + decoder_runs), tuple(notes))
