"""Kandinsky 3 pipelines (diffusers ``pipelines/kandinsky3``): ``Kandinsky3Pipeline`` and
``Kandinsky3Img2ImgPipeline``, with components ``text_encoder`` (the Flan-UL2 ``T5EncoderModel``),
``unet`` (``Kandinsky3UNet``) and ``movq`` (``VQModel``)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.architectures.kandinsky3 import latent_multiple
from flopcalc.engine.architectures.vq_model import scale_factor
from flopcalc.engine.errors import FlopcalcError
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
)
from flopcalc.engine.registry import RunShape

#: ``encode_prompt``: ``max_length = 128`` (``padding="max_length"``), fixed, for the prompt and
#: the negative prompt alike.
TEXT_LEN = 128
#: ``downscale_height_and_width(height, width, 8)`` and ``prepare_latents`` in ``__call__``.
LATENT_FACTOR = 8
#: ``__call__`` defaults of both pipelines.
DEFAULT_SIZE = 1024
DEFAULT_STEPS = 25
DEFAULT_GUIDANCE = 3.0
DEFAULT_STRENGTH = 0.3  # Kandinsky3Img2ImgPipeline


def downscale_height_and_width(height: int, width: int, scale_factor: int = LATENT_FACTOR) -> tuple[int, int]:
    """``pipeline_kandinsky3.downscale_height_and_width``: the latent side is
    ``⌈side / scale_factor²⌉ · scale_factor``, so the image generated is the size rounded *up*
    to a multiple of 64."""
    def side(v: int) -> int:
        return (v // scale_factor**2 + (1 if v % scale_factor**2 else 0)) * scale_factor

    return side(height), side(width)


def img2img_steps(steps: int, strength: float) -> int:
    """``Kandinsky3Img2ImgPipeline.get_timesteps``: ``init_timestep = min(int(steps·strength), steps)``
    and the last ``init_timestep`` steps run."""
    return min(int(steps * strength), steps)


def _movq_scale_factor(components: Mapping[str, Mapping[str, Any]]) -> int:
    """``movq_scale_factor = 2 ** (len(movq.config.block_out_channels) - 1)`` (8 without a MoVQ), the
    image processor's ``vae_scale_factor`` in ``Kandinsky3Img2ImgPipeline.__init__``."""
    movq = components.get("movq")
    return 8 if movq is None else scale_factor(movq)


def _unet_text_len(s: Settings) -> int:
    """Tokens the UNet sees: ``process_embeds(..., cut_context=True)`` keeps
    ``attention_mask.sum(-1).max() + 1`` of the 128 (the longest prompt's tokens incl. EOS, plus
    one, at most 128). The prompt is unknown, so 128, the upper bound, unless
    ``max_sequence_length`` names the cut length."""
    n = s.max_sequence_length or TEXT_LEN
    if n > TEXT_LEN:
        raise FlopcalcError(f"Kandinsky 3 encodes {TEXT_LEN} T5 tokens and the UNet sees at most that many "
                            f"(the context cut to the prompt); max_sequence_length {n} is more than {TEXT_LEN}")
    return n


def _plan(components: Mapping[str, Mapping[str, Any]], s: Settings, name: str) -> Plan:
    s = replace(s, steps=s.steps or DEFAULT_STEPS,
                guidance_scale=DEFAULT_GUIDANCE if s.guidance_scale is None else s.guidance_scale)
    text_len = _unet_text_len(s)
    s = replace(s, max_sequence_length=text_len)
    notes = list(missing_notes(components, ["text_encoder", "unet", "movq"]))
    height, width = s.height or DEFAULT_SIZE, s.width or DEFAULT_SIZE
    if s.strength is None:
        latent_h, latent_w = downscale_height_and_width(height, width)
        image_h, image_w = latent_h * LATENT_FACTOR, latent_w * LATENT_FACTOR
        if (image_h, image_w) != (height, width):
            notes.append(f"{height}×{width} is generated at {image_h}×{image_w}: {name} rounds the size up to a "
                         "multiple of 64 (downscale_height_and_width)")
        s = replace(s, height=image_h, width=image_w)
        steps = s.steps
    else:
        f = _movq_scale_factor(components)
        image_h, image_w = height - height % f, width - width % f
        if (image_h, image_w) != (height, width):
            notes.append(f"the {height}×{width} input image is resized to {image_h}×{image_w}, a multiple of the "
                         f"MoVQ factor {f} (VaeImageProcessor)")
        s = replace(s, height=image_h, width=image_w)
        multiple = f * latent_multiple(components.get("unet", {}))
        check_divisible(s.height, s.width, multiple, "Kandinsky 3 image-to-image: the input image (MoVQ factor × "
                        "the UNet's 2× downsamplings)")
        latent_h, latent_w = s.height // f, s.width // f
        steps = img2img_steps(s.steps, s.strength)
    passes = cfg_passes(s, s.guidance_scale > 1)
    encode_negative = passes == 2 and s.negative_prompt
    runs = text_runs(components, [("text_encoder", TEXT_LEN)], s.batch_size * (2 if encode_negative else 1),
                     f"{s.batch_size} prompt(s)" + (" + negative" if encode_negative else ""))
    if passes == 2 and not encode_negative:
        notes.append("no negative prompt: Kandinsky 3 uses zero negative embeddings, so the text encoder runs once "
                     "per prompt")
    if text_len == TEXT_LEN:
        notes.append(f"the UNet sees the context cut to the prompt (its tokens + 1, at most {TEXT_LEN}): {TEXT_LEN} "
                     "is the upper bound; --max-sequence-length sets the cut length")
    images = s.batch_size * s.num_images_per_prompt
    if "unet" in components:
        runs.append(ComponentRun("unet", component_class(components, "unet") or "?", "forward", "denoiser",
                                 RunShape(latent_height=latent_h, latent_width=latent_w, text_len=text_len),
                                 steps * passes * images,
                                 f"{steps} steps × {passes} pass(es) × {images} image(s)"))
    if "movq" in components:
        cls = component_class(components, "movq") or "?"
        if s.strength is not None:
            runs.append(ComponentRun("movq", cls, "encode", "vae_encoder", RunShape(height=s.height, width=s.width),
                                     s.batch_size, f"{s.batch_size} input image(s)"))
        runs.append(ComponentRun("movq", cls, "decode", "vae_decoder",
                                 RunShape(latent_height=latent_h, latent_width=latent_w), images, f"{images} image(s)"))
    return Plan(name, s, passes, tuple(runs), tuple(notes))


@register_pipeline("Kandinsky3Pipeline", denoisers=("Kandinsky3UNet",), component="unet",
                   options=("max_sequence_length",))
def kandinsky3_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                        index: Mapping[str, Any] | None = None) -> Plan:
    """``Kandinsky3Pipeline.__call__`` (``pipelines/kandinsky3/pipeline_kandinsky3.py``): 1024²,
    25 steps, ``guidance_scale`` 3.0; with CFG (> 1) the UNet runs on the concatenated
    [negative, prompt] batch (two passes). The Flan-UL2 encoder runs on 128 tokens per prompt;
    the negative prompt is encoded only when one is given (otherwise its embeddings are zeros).
    The latent is ``⌈H/64⌉·8 × ⌈W/64⌉·8`` (4 channels), and ``movq.decode(latents,
    force_not_quantize=True)`` decodes it once per image. Given ``strength``, the run is planned as
    ``Kandinsky3Img2ImgPipeline`` (the input image ``movq.encode``-d once per prompt)."""
    return _plan(components, s, "Kandinsky3Pipeline")


@register_pipeline("Kandinsky3Img2ImgPipeline", options=("max_sequence_length",))
def kandinsky3_img2img_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                index: Mapping[str, Any] | None = None) -> Plan:
    """``Kandinsky3Img2ImgPipeline.__call__`` (``pipeline_kandinsky3_img2img.py``): ``strength``
    0.3, 25 steps, ``guidance_scale`` 3.0; the input image (``height × width``, 1024² when not
    given) is resized down to a multiple of the MoVQ factor and ``movq.encode``-d (its latent must
    then divide by the UNet's 8), and ``int(steps · strength)`` steps run."""
    s = replace(s, strength=DEFAULT_STRENGTH if s.strength is None else s.strength)
    return _plan(components, s, "Kandinsky3Img2ImgPipeline")
