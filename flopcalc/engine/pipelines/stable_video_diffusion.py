"""Stable Video Diffusion (diffusers ``pipelines/stable_video_diffusion/pipeline_stable_video_diffusion.py``):
``StableVideoDiffusionPipeline``, components ``image_encoder`` (``CLIPVisionModelWithProjection``),
``unet`` (``UNetSpatioTemporalConditionModel``) and ``vae`` (``AutoencoderKLTemporalDecoder``)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.architectures.autoencoder_kl_temporal_decoder import scale_factor
from flopcalc.engine.errors import OptionError
from flopcalc.engine.pipelines.base import (
    ComponentRun,
    Plan,
    Settings,
    cfg_passes,
    check_divisible,
    component_class,
    config_value,
    missing_notes,
    register_pipeline,
)
from flopcalc.engine.registry import RunShape
from flopcalc.engine.settings import COUNT, pipeline_option

pipeline_option("decode_chunk_size", kind=COUNT, bound=(4096, "frames"),
                help="Stable Video Diffusion: latent frames per VAE decode call (default: all of a video's)",
                refusal="its __call__ takes no decode_chunk_size (its VAE decodes whole)")

NAME = "StableVideoDiffusionPipeline"
#: ``__call__`` defaults (pipeline_stable_video_diffusion.py).
DEFAULT_HEIGHT, DEFAULT_WIDTH = 576, 1024
DEFAULT_STEPS = 25
DEFAULT_MAX_GUIDANCE = 3.0
#: ``UNetSpatioTemporalConditionModel.__init__``'s ``num_frames``, where the config has none.
DEFAULT_FRAMES = 25
#: ``_encode_image``: one CLIP image embedding per video, the UNet's one context vector per frame.
IMAGE_TOKENS = 1


@register_pipeline(NAME, denoisers=("UNetSpatioTemporalConditionModel",), component="unet",
                   options=("num_frames", "decode_chunk_size"))
def stable_video_diffusion_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                    index: Mapping[str, Any] | None = None) -> Plan:
    """``StableVideoDiffusionPipeline.__call__``: 576×1024, ``num_frames`` = ``unet.config.num_frames``
    (14 for img2vid, 25 for img2vid-xt), 25 steps, guidance from ``min_guidance_scale`` 1.0 to
    ``max_guidance_scale`` 3.0 across the frames (``--guidance`` sets the maximum: classifier-free guidance,
    a doubled batch, whenever it exceeds 1, whatever the per-frame scales);

    * ``_encode_image``: the CLIP vision model on the input image resized to 224² (one embedding: one
      context vector per frame), once per video;
    * ``_encode_vae_image``: the (noise-augmented) image at height × width ``vae.encode``-d once per video;
      its latent is repeated over the frames and concatenated to the noise on channels (``in_channels`` 8);
    * ``added_time_ids`` (fps − 1, ``motion_bucket_id``, ``noise_aug_strength``): three sinusoidal embeddings
      into ``add_embedding``, no work that depends on their values;
    * the UNet ``steps × passes`` per video on ``num_frames`` latent frames (no temporal compression);
    * ``decode_latents``: the latents of all videos flattened to ``videos × num_frames`` frames, ``vae.decode``
      on consecutive chunks of ``decode_chunk_size`` of them (the last one shorter), by default
      ``num_frames``: one call per video. The temporal decoder's ``Conv3d`` s mix the frames of a chunk only.

    It takes no ``strength`` (every step runs) and no text."""
    if s.strength is not None:
        raise OptionError(f"--strength does not apply to {NAME}: its __call__ takes no strength (the image "
                          "conditions every step and the whole schedule runs)")
    frames = s.num_frames or config_value(components, "unet", "num_frames", DEFAULT_FRAMES)
    s = replace(s, steps=s.steps or DEFAULT_STEPS, num_frames=frames,
                guidance_scale=DEFAULT_MAX_GUIDANCE if s.guidance_scale is None else s.guidance_scale,
                height=s.height or DEFAULT_HEIGHT, width=s.width or DEFAULT_WIDTH)
    f = scale_factor(components["vae"]) if "vae" in components else 8
    unet = components.get("unet")
    levels = len(unet["block_out_channels"]) - 1 if unet is not None else 3
    check_divisible(s.height, s.width, f, f"{NAME}: the image (VAE-encoded at height × width)")
    passes = cfg_passes(s, s.guidance_scale > 1)
    videos = s.batch_size * s.num_images_per_prompt
    notes = list(missing_notes(components, ["image_encoder", "unet", "vae"]))
    runs: list[ComponentRun] = []
    encoder = components.get("image_encoder")
    if encoder is not None:
        size = encoder["image_size"]
        runs.append(ComponentRun("image_encoder", component_class(components, "image_encoder") or "?", "forward",
                                 "image_encoder", RunShape(height=size, width=size), s.batch_size,
                                 f"{s.batch_size} input image(s) (_encode_image)"))
    if "vae" in components:
        runs.append(ComponentRun("vae", component_class(components, "vae") or "?", "encode", "vae_encoder",
                                 RunShape(height=s.height, width=s.width), s.batch_size,
                                 f"{s.batch_size} input image(s) (_encode_vae_image)"))
    latent_h, latent_w = s.height // f, s.width // f
    if unet is not None:
        runs.append(ComponentRun("unet", component_class(components, "unet") or "?", "forward", "denoiser",
                                 RunShape(latent_height=latent_h, latent_width=latent_w, text_len=IMAGE_TOKENS,
                                          latent_frames=frames),
                                 s.steps * passes * videos,
                                 f"{s.steps} steps × {passes} pass(es) × {videos} video(s)"))
        if not s.symbolic and (latent_h % 2 ** levels or latent_w % 2 ** levels):
            notes.append(f"the {latent_h}×{latent_w} latent does not halve evenly {levels} times: the UNet's up "
                         "blocks interpolate to the skip connections' sizes (forward_upsample_size)")
    if "vae" in components:
        runs += _decode_runs(components, s, latent_h, latent_w, videos)
    notes.append(f"guidance rises from min_guidance_scale 1.0 to max_guidance_scale {s.guidance_scale} across the "
                 "frames; the UNet runs on the doubled batch whenever the maximum exceeds 1")
    return Plan(NAME, s, passes, tuple(runs), tuple(notes))


def _decode_runs(components, s: Settings, latent_h, latent_w, videos) -> list[ComponentRun]:
    """``decode_latents`` (pipeline_stable_video_diffusion.py): ``range(0, videos · num_frames,
    decode_chunk_size)``, one ``vae.decode(chunk, num_frames=len(chunk))`` each: the full chunks, then the
    remainder."""
    total = videos * s.num_frames
    chunk = s.decode_chunk_size or s.num_frames
    if s.symbolic and s.decode_chunk_size is not None:
        raise OptionError("--decode-chunk-size splits the frames by floor division: no closed-form law in F; use "
                          "the numeric estimate")
    full, rest = (videos, 0) if s.decode_chunk_size is None else (total // chunk, total % chunk)
    cls = component_class(components, "vae") or "?"
    runs = []
    for count, frames in ((full, min(chunk, total)), (1 if rest else 0, rest)):
        if count:
            runs.append(ComponentRun("vae", cls, "decode", "vae_decoder",
                                     RunShape(latent_height=latent_h, latent_width=latent_w, frames=frames), count,
                                     f"decode_latents: {count} chunk(s) of {frames} frame(s) of {videos} video(s)"))
    return runs
