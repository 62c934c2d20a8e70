"""The classic diffusion pipelines (diffusers ``pipelines/ddpm``, ``ddim``, ``consistency_models``,
``latent_diffusion``):

* ``DDPMPipeline`` (1000 steps), ``DDIMPipeline`` (50 steps), ``ConsistencyModelPipeline`` (1 step; a random ImageNet
  class per image when the UNet has a class table): a pixel-space ``UNet2DModel`` once per step and image on a
  ``unet.sample_size`` image (``--height/--width`` estimate the UNet at another size: these ``__call__`` s take none);
  no text, no guidance, no VAE;
* ``LDMSuperResolutionPipeline`` (100 steps): the ``UNet2DModel`` on the low-resolution image's grid (resized down to a
  multiple of 32) with the image concatenated every step, then ``vqvae.decode`` (``VQModel``) to 4× its size;
* ``LDMTextToImagePipeline`` (50 steps, guidance 1.0): ``LDMBertModel`` on the prompt (77 tokens; also on "" when
  ``guidance_scale != 1``), a ``UNet2DConditionModel`` on the ``H/8 × W/8`` latent (the doubled batch when guided),
  ``vqvae.decode`` once per image.
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
    missing_notes,
    register_pipeline,
    text_runs,
    vae_scale_factor,
)
from flopcalc.engine.registry import RunShape

#: ``__call__`` default steps.
STEPS = {"DDPMPipeline": 1000, "DDIMPipeline": 50, "ConsistencyModelPipeline": 1, "LDMSuperResolutionPipeline": 100,
         "LDMTextToImagePipeline": 50}
#: ``LDMTextToImagePipeline``: the tokenizer pads to 77; guidance 1.0 (off); the latent is H/8 × W/8 (hard-coded).
LDM_TEXT_LEN, LDM_GUIDANCE, LDM_LATENT = 77, 1.0, 8
#: ``LDMSuperResolutionPipeline``'s ``preprocess``: the image is cut down to a multiple of 32.
SR_MULTIPLE = 32


def _refuse(s: Settings, name: str, *, guidance: bool = True, text: bool = True) -> None:
    if s.strength is not None:
        raise OptionError(f"--strength does not apply to {name}: its __call__ takes no strength")
    if guidance and s.guidance_scale is not None:
        raise OptionError(f"--guidance-scale does not apply to {name}: it has no classifier-free guidance")
    if text and s.negative_prompt:
        raise OptionError(f"--negative-prompt does not apply to {name}: it takes no prompt")


def _sample_size(components: Mapping[str, Any]) -> tuple[int, int] | None:
    unet = components.get("unet")
    size = None if unet is None else unet.get("sample_size")
    if size is None:
        return None
    return (size, size) if isinstance(size, int) else (size[0], size[1])


def _unet_run(components, s: Settings, grid: tuple[Any, Any], why: str) -> list[ComponentRun]:
    """The ``UNet2DModel`` once per step on the whole batch (no guidance)."""
    if "unet" not in components:
        return []
    return [ComponentRun("unet", component_class(components, "unet") or "?", "forward", "denoiser",
                         RunShape(latent_height=grid[0], latent_width=grid[1]), s.steps * s.batch_size, why)]


def _pixel_plan(components, s: Settings, name: str) -> Plan:
    """The pixel-space loops of DDPM, DDIM and consistency models: ``image_shape = (batch, in_channels, *sample_size)``
    (pipeline_ddpm.py:102-110), the UNet once per timestep on the whole batch."""
    _refuse(s, name)
    if s.num_images_per_prompt != 1:
        raise OptionError(f"--num-images-per-prompt does not apply to {name}: it takes no prompt (--batch-size is "
                          "the number of images)")
    size = _sample_size(components)
    if (s.height is None or s.width is None) and size is None:
        raise OptionError(f"{name}: the UNet config sets no sample_size: give --height and --width")
    h, w = s.height or size[0], s.width or size[1]
    s = replace(s, height=h, width=w, steps=s.steps or STEPS[name])
    runs = _unet_run(components, s, (h, w), f"{s.steps} steps × {s.batch_size} image(s)")
    notes = list(missing_notes(components, ["unet"]))
    if size is not None and (h, w) != size:
        notes.append(f"{name}.__call__ takes no size: it generates unet.sample_size images ({size[0]}×{size[1]}); "
                     f"this estimates the UNet at {h}×{w}")
    notes.append("pixel-space: the UNet denoises the image itself (no text encoder, no VAE, no guidance)")
    return Plan(name, s, 1, tuple(runs), tuple(notes))


@register_pipeline("DDPMPipeline", denoisers=("UNet2DModel",), component="unet",
                   when=lambda cfg: cfg.get("num_class_embeds") is None and cfg.get("in_channels", 3) == 3)
def ddpm_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                  index: Mapping[str, Any] | None = None) -> Plan:
    """``DDPMPipeline.__call__`` (pipeline_ddpm.py:57-135): 1000 steps on a ``unet.sample_size`` image."""
    return _pixel_plan(components, s, "DDPMPipeline")


@register_pipeline("DDIMPipeline")
def ddim_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                  index: Mapping[str, Any] | None = None) -> Plan:
    """``DDIMPipeline.__call__`` (pipeline_ddim.py:75-170): 50 steps on a ``unet.sample_size`` image."""
    return _pixel_plan(components, s, "DDIMPipeline")


@register_pipeline("ConsistencyModelPipeline", denoisers=("UNet2DModel",), component="unet",
                   when=lambda cfg: cfg.get("num_class_embeds") is not None)
def consistency_model_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                               index: Mapping[str, Any] | None = None) -> Plan:
    """``ConsistencyModelPipeline.__call__`` (pipeline_consistency_models.py:170-280): 1 step (the scheduler's
    timesteps: ``num_inference_steps``), the UNet with ``class_labels`` (random classes when the UNet has a class
    table and none are given) on a ``unet.sample_size`` image."""
    return _pixel_plan(components, s, "ConsistencyModelPipeline")


@register_pipeline("LDMSuperResolutionPipeline", denoisers=("UNet2DModel",), component="unet",
                   when=lambda cfg: cfg.get("in_channels", 3) != 3 and cfg.get("num_class_embeds") is None)
def ldm_super_resolution_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                  index: Mapping[str, Any] | None = None) -> Plan:
    """``LDMSuperResolutionPipeline.__call__`` (pipeline_latent_diffusion_superresolution.py:70-190): 100 steps of the
    UNet on the low-resolution image's grid (``preprocess`` cuts it to a multiple of 32; ``in_channels // 2`` noise
    channels plus the image's), one ``vqvae.decode`` per image to 4× (the VQ-VAE's factor). ``--height/--width`` are
    the input image's size (default: ``unet.sample_size``)."""
    name = "LDMSuperResolutionPipeline"
    _refuse(s, name)
    if s.num_images_per_prompt != 1:
        raise OptionError(f"--num-images-per-prompt does not apply to {name}: one output per input image "
                          "(--batch-size)")
    size = _sample_size(components)
    if (s.height is None or s.width is None) and size is None:
        raise OptionError(f"{name}: give --height and --width (the input image's size)")
    given = (s.height or size[0], s.width or size[1])
    # a law is stated for whole multiples (the cut has no closed form)
    h, w = given if s.symbolic else (v - v % SR_MULTIPLE for v in given)
    if not (h and w):
        raise OptionError(f"{name}: an input of {given[0]}×{given[1]} is cut to nothing (preprocess keeps a multiple "
                          f"of {SR_MULTIPLE})")
    s = replace(s, height=h, width=w, steps=s.steps or STEPS[name])
    runs = _unet_run(components, s, (h, w), f"{s.steps} steps × {s.batch_size} image(s)")
    if "vqvae" in components:
        runs.append(ComponentRun("vqvae", component_class(components, "vqvae") or "?", "decode", "vae_decoder",
                                 RunShape(latent_height=h, latent_width=w), s.batch_size,
                                 f"{s.batch_size} image(s)"))
    notes = list(missing_notes(components, ["unet", "vqvae"]))
    if (h, w) != given:
        notes.append(f"the {given[0]}×{given[1]} input is cut to {h}×{w} (preprocess: a multiple of {SR_MULTIPLE})")
    f = vae_scale_factor(components, "vqvae") if "vqvae" in components else None
    notes.append(f"the UNet runs on the input's {h}×{w} grid; the VQ-VAE decodes it to "
                 + (f"{h * f}×{w * f}" if f else "its output size"))
    return Plan(name, s, 1, tuple(runs), tuple(notes))


@register_pipeline("LDMTextToImagePipeline")
def ldm_text_to_image_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                               index: Mapping[str, Any] | None = None) -> Plan:
    """``LDMTextToImagePipeline.__call__`` (pipeline_latent_diffusion.py:78-230): ``unet.sample_size × vae_scale_factor``
    (the VQ-VAE's), 50 steps, guidance 1.0 (off: guidance is on when ``guidance_scale != 1``); LDMBert on 77 tokens."""
    name = "LDMTextToImagePipeline"
    if s.strength is not None:
        raise OptionError(f"--strength does not apply to {name}: its __call__ takes no strength")
    if s.negative_prompt:
        raise OptionError(f"--negative-prompt does not apply to {name}: its unconditional prompt is always \"\"")
    f = vae_scale_factor(components, "vqvae") if "vqvae" in components else 8
    size = _sample_size(components)
    if (s.height is None or s.width is None) and size is None:
        raise OptionError(f"{name}: the UNet config sets no sample_size: give --height and --width")
    s = replace(s, height=s.height or size[0] * f, width=s.width or size[1] * f, steps=s.steps or STEPS[name],
                guidance_scale=LDM_GUIDANCE if s.guidance_scale is None else s.guidance_scale)
    check_divisible(s.height, s.width, LDM_LATENT, f"{name} height and width (the latent is H/8 × W/8)")
    guided = s.guidance_scale != 1.0
    passes = cfg_passes(s, guided)
    images = s.batch_size * s.num_images_per_prompt
    runs = text_runs(components, [("bert", LDM_TEXT_LEN)], s.batch_size * passes,
                     f"{s.batch_size} prompt(s)" + (" + the empty prompt" if guided else ""))
    if "unet" in components:
        runs.append(ComponentRun("unet", component_class(components, "unet") or "?", "forward", "denoiser",
                                 RunShape(latent_height=s.height // LDM_LATENT, latent_width=s.width // LDM_LATENT,
                                          text_len=LDM_TEXT_LEN),
                                 s.steps * passes * images, f"{s.steps} steps × {passes} pass(es) × {images} image(s)"))
    if "vqvae" in components:
        runs.append(ComponentRun("vqvae", component_class(components, "vqvae") or "?", "decode", "vae_decoder",
                                 RunShape(latent_height=s.height // LDM_LATENT, latent_width=s.width // LDM_LATENT),
                                 images, f"{images} image(s)"))
    notes = list(missing_notes(components, ["bert", "unet", "vqvae"]))
    if f != LDM_LATENT:
        notes.append(f"the latent is H/8 × W/8 whatever the VQ-VAE's factor ({f}): the pipeline hard-codes 8")
    return Plan(name, s, passes, tuple(runs), tuple(notes))
