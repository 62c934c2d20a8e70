"""Stable unCLIP (diffusers ``pipelines/stable_diffusion/pipeline_stable_unclip.py`` and
``pipeline_stable_unclip_img2img.py``): a Stable Diffusion 2.1 UNet conditioned, besides the text, on a noised CLIP
image embedding (``class_embed_type: projection``: the embedding and the sinusoid of its noise level, concatenated,
``projection_class_embeddings_input_dim`` = 2 × the embedding width, through ``class_embedding``).

* ``StableUnCLIPPipeline`` makes the image embedding with a Karlo prior: the ``prior_text_encoder``
  (``CLIPTextModelWithProjection``) on the prompt and, under the prior's guidance (``prior_guidance_scale`` 4.0),
  the empty prompt; the ``prior`` (``PriorTransformer``) ``prior_num_inference_steps`` (25) steps on the doubled
  batch.
* ``StableUnCLIPImg2ImgPipeline`` takes it from the input image: the ``image_encoder``
  (``CLIPVisionModelWithProjection``) on the image at its ``image_size`` (the feature extractor's crop), once.

Then both: the ``image_normalizer`` scales the embedding, the ``image_noising_scheduler`` noises it (``noise_level``
0 by default) and unscales it (elementwise, no MACs); the ``text_encoder`` (CLIP, 77 tokens) on the prompt and,
under guidance (``guidance_scale`` 10), the negative prompt ("" by default); the UNet ``num_inference_steps`` (20)
steps on the doubled batch (the unconditional half gets a zero image embedding); ``vae.decode`` once per image. The
denoising starts from noise (there is no ``strength``): the input image only conditions through its embedding.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.errors import OptionError
from flopcalc.engine.pipelines.base import (
    ComponentRun,
    Plan,
    Settings,
    cfg_passes,
    check_divisible,
    component_class,
    denoiser_run,
    missing_notes,
    register_pipeline,
    text_runs,
    vae_scale_factor,
)
from flopcalc.engine.pipelines.vae import image_runs
from flopcalc.engine.registry import RunShape

#: ``__call__`` defaults of both pipelines: 20 steps, guidance 10; the prior's 25 steps at guidance 4.0.
STEPS, GUIDANCE = 20, 10.0
PRIOR_STEPS, PRIOR_GUIDANCE = 25, 4.0
#: CLIP tokens (``tokenizer.model_max_length``, ``prior_tokenizer.model_max_length``), padded.
TEXT_LEN = 77


def _unet_defaults(components: Mapping[str, Any], s: Settings, name: str) -> Settings:
    if s.strength is not None:
        raise OptionError(f"--strength does not apply to {name}: its __call__ takes no strength (it denoises from "
                          "noise; an input image only conditions through its CLIP embedding)")
    f = vae_scale_factor(components)
    unet = components.get("unet")
    sample = unet.get("sample_size") if unet is not None else None
    sample = sample[0] if isinstance(sample, (list, tuple)) else sample
    if (s.height is None or s.width is None) and sample is None:
        raise OptionError(f"{name}: the UNet config sets no sample_size (the default size is sample_size × "
                          "vae_scale_factor): give --height and --width")
    s = replace(s, height=s.height or sample * f, width=s.width or sample * f, steps=s.steps or STEPS,
                guidance_scale=GUIDANCE if s.guidance_scale is None else s.guidance_scale)
    check_divisible(s.height, s.width, f, f"{name} height and width (the VAE's scale factor)")
    return s


def _denoise(components: Mapping[str, Any], s: Settings, name: str, prefix_runs: list[ComponentRun],
             notes: list[str]) -> Plan:
    f = vae_scale_factor(components)
    passes = cfg_passes(s, s.guidance_scale > 1)
    runs = list(prefix_runs)
    runs += text_runs(components, [("text_encoder", TEXT_LEN)], s.batch_size * passes,
                      f"{s.batch_size} prompt(s)" + (" + negative" if passes == 2 else ""))
    runs += denoiser_run(components, "unet", s, f, TEXT_LEN, passes)
    runs += image_runs(components, s, f)
    if "image_normalizer" in components:
        notes.append("image_normalizer (StableUnCLIPImageNormalizer): its scale / unscale of the image embedding "
                     "are elementwise, no MACs (its mean and std count as weights)")
    notes.append("the UNet's class_embedding reads the noised image embedding with its noise-level sinusoid "
                 "(class_embed_type projection); the unconditional half gets zeros")
    return Plan(name, s, passes, tuple(runs), tuple(notes))


@register_pipeline("StableUnCLIPPipeline")
def stable_unclip_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                           index: Mapping[str, Any] | None = None) -> Plan:
    """``StableUnCLIPPipeline.__call__`` (pipeline_stable_unclip.py:640-940): ``unet.sample_size`` ×
    ``vae_scale_factor``, 20 steps, guidance 10; first the prior (``_encode_prior_prompt``: the prior text encoder
    on the prompts and, under the prior's guidance 4.0, on as many empty prompts; the prior 25 steps × 2 on every
    image's embedding), then the UNet as above."""
    s = _unet_defaults(components, s, "StableUnCLIPPipeline")
    images = s.batch_size * s.num_images_per_prompt
    prior_passes = 2 if PRIOR_GUIDANCE > 1 else 1  # the prior's own guidance, not the law's P
    runs = text_runs(components, [("prior_text_encoder", TEXT_LEN)], s.batch_size * prior_passes,
                     f"{s.batch_size} prompt(s) + the empty prompt (the prior's guidance)")
    if "prior" in components:
        runs.append(ComponentRun("prior", component_class(components, "prior") or "?", "forward", "denoiser",
                                 RunShape(seq_len=TEXT_LEN), PRIOR_STEPS * prior_passes * images,
                                 f"{PRIOR_STEPS} prior steps × {prior_passes} pass(es) × {images} embedding(s)"))
    notes = list(missing_notes(components, ["prior_text_encoder", "prior", "text_encoder", "unet", "vae"]))
    notes.append(f"the prior runs at its defaults ({PRIOR_STEPS} steps, guidance {PRIOR_GUIDANCE}); --steps and "
                 "--guidance-scale set the UNet's")
    return _denoise(components, s, "StableUnCLIPPipeline", runs, notes)


@register_pipeline("StableUnCLIPImg2ImgPipeline")
def stable_unclip_img2img_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                   index: Mapping[str, Any] | None = None) -> Plan:
    """``StableUnCLIPImg2ImgPipeline.__call__`` (pipeline_stable_unclip_img2img.py:620-880): as the text-to-image
    pipeline, its image embedding from ``_encode_image``: the image encoder once on the one input image (a PIL
    image, its embedding repeated for every prompt) at the encoder's ``image_size``."""
    name = "StableUnCLIPImg2ImgPipeline"
    s = _unet_defaults(components, s, name)
    runs: list[ComponentRun] = []
    encoder = components.get("image_encoder")
    if encoder is not None:
        size = encoder["image_size"]
        runs.append(ComponentRun("image_encoder", component_class(components, "image_encoder") or "?", "forward",
                                 "image_encoder", RunShape(height=size, width=size), 1,
                                 "_encode_image: 1 input image (its embedding repeated per prompt)"))
    notes = list(missing_notes(components, ["image_encoder", "text_encoder", "unet", "vae"]))
    return _denoise(components, s, name, runs, notes)
