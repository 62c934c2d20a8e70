"""SkyReels V1 image-to-video on HunyuanVideo: ``HunyuanSkyreelsImageToVideoPipeline`` (diffusers
``pipelines/hunyuan_video/pipeline_hunyuan_skyreels_image2video.py``), planned on top of the HunyuanVideo
text-to-video plan (:func:`flopcalc.engine.pipelines.hunyuan_video.hunyuan_video_pipeline`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from flopcalc.engine.errors import FlopcalcError, OptionError
from flopcalc.engine.pipelines.base import Plan, Settings, component_class, config_value, register_pipeline
from flopcalc.engine.pipelines.hunyuan_video import _vae_run, hunyuan_video_pipeline

NAME = "HunyuanSkyreelsImageToVideoPipeline"
#: ``HunyuanSkyreelsImageToVideoPipeline.__call__`` keyword defaults (pipeline_hunyuan_skyreels_image2video.py:483).
HEIGHT, WIDTH, NUM_FRAMES = 544, 960, 97
TRUE_CFG_SCALE, GUIDANCE_SCALE = 6.0, 1.0


@register_pipeline(NAME, guidance="separate", options=("true_cfg_scale", "max_sequence_length", "num_frames", "vae_tiling"))
def hunyuan_skyreels_image_to_video_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                             index: Mapping[str, Any] | None = None) -> Plan:
    """``HunyuanSkyreelsImageToVideoPipeline.__call__``: ``HunyuanVideoPipeline``'s plan (Llama on 256 + 95
    template tokens and CLIP once per prompt, the guidance embedding, the decode) with its own defaults:
    544×960, 97 frames, 50 steps, ``true_cfg_scale`` 6.0 and ``guidance_scale`` 1.0; true CFG (a second
    forward on the negative prompt, which both encoders then encode) only when a negative prompt is given,
    as ``do_true_cfg = true_cfg_scale > 1 and has_neg_prompt``; and the image:

    * ``prepare_latents`` (:417): the image, as a one-frame video at the output size, is VAE-encoded once per
      video (``[self.vae.encode(img.unsqueeze(0)) for img in image]``: the image batch matches the latents'),
      padded with ``latent_frames − 1`` zero frames and concatenated to the noise latent on channels every
      step: the transformer's ``in_channels`` is twice the VAE's latent channels (``in_channels // 2`` noise
      channels).

    It takes no ``strength``: every step runs."""
    if s.strength is not None:
        raise OptionError(f"--strength does not apply to {NAME}: the image conditions every step (its latent "
                          "concatenated on channels) and the whole schedule runs")
    latent = config_value(components, "vae", "latent_channels", None)
    inputs = config_value(components, "transformer", "in_channels", None)
    if latent is not None and inputs is not None and inputs != 2 * latent:
        raise FlopcalcError(f"transformer: in_channels {inputs} ≠ 2 × the VAE's {latent} latent channels (the noise and "
                            f"the image latent, concatenated on channels by {NAME}): a text-to-video transformer, "
                            "which it cannot run")
    base = hunyuan_video_pipeline(components, replace(
        s, height=s.height or HEIGHT, width=s.width or WIDTH, num_frames=s.num_frames or NUM_FRAMES,
        guidance_scale=GUIDANCE_SCALE if s.guidance_scale is None else s.guidance_scale,
        true_cfg_scale=TRUE_CFG_SCALE if s.true_cfg_scale is None else s.true_cfg_scale), index=index)
    s = base.settings
    runs = list(base.runs)
    notes = [n.replace("HunyuanVideoPipeline", NAME) for n in base.notes]
    if "vae" in components:
        videos = s.batch_size * s.num_images_per_prompt
        encode = _vae_run("encode", component_class(components, "vae") or "?", components["vae"], s, videos,
                          f"{videos} input image(s) (one per video)", height=s.height, width=s.width, frames=1)
        at = next((i for i, r in enumerate(runs) if r.component == "transformer"), len(runs))
        runs.insert(at, encode)
        notes.append("the image is VAE-encoded as a one-frame video once per video; its latent (zero-padded in time) "
                     "is concatenated to the noise latent on channels")
    return Plan(NAME, s, base.passes, tuple(runs), tuple(notes))
