"""ModelScope text-to-video (diffusers ``pipelines/deprecated/text_to_video_synthesis``, deprecated in 0.42.1 but
exported): ``TextToVideoSDPipeline`` and ``VideoToVideoSDPipeline`` on a ``UNet3DConditionModel``.

``TextToVideoSDPipeline.__call__`` (``pipeline_text_to_video_synth.py:452``): size ``unet.sample_size ×
vae_scale_factor`` (32 × 8 = 256² for ``ali-vilab/text-to-video-ms-1.7b``), ``num_frames`` 16, 50 steps,
``guidance_scale`` 9.0 (CFG on a doubled batch when > 1, the negative prompt "" encoded), CLIP on 77 tokens,
``num_images_per_prompt`` overwritten with 1 (:538); the UNet once per step and pass on ``(1, 4, F, H/8, W/8)``
(it repeats the text states per frame itself); ``decode_latents`` (:341) decodes the ``B·F`` frames in one
``vae.decode`` call: one image decode per frame.

``VideoToVideoSDPipeline.__call__`` (``pipeline_text_to_video_synth_img2img.py:517``): the input video's frames
(``--num-frames``, 16 when not given) at its size (the text-to-video default when not given) VAE-encoded in one
``vae.encode`` call (one image encode per frame, ``prepare_latents`` :470), ``strength`` 0.6, ``get_timesteps``
(:459) keeps ``int(steps·strength)`` steps, ``guidance_scale`` 15.0.
"""

from __future__ import annotations

from typing import Any, Mapping

from flopcalc.engine.errors import OptionError
from flopcalc.engine.pipelines.animatediff import video_unet_plan
from flopcalc.engine.pipelines.base import Plan, Settings, register_pipeline

T2V_GUIDANCE = 9.0
V2V_GUIDANCE = 15.0
V2V_STRENGTH = 0.6


@register_pipeline("TextToVideoSDPipeline", denoisers=("UNet3DConditionModel",), component="unet",
                   options=("num_frames", "vae_tiling"))
def text_to_video_sd_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                              index: Mapping[str, Any] | None = None) -> Plan:
    """``TextToVideoSDPipeline.__call__``: see the module docstring."""
    if s.strength is not None:
        raise OptionError("--strength does not apply to TextToVideoSDPipeline: its __call__ takes no strength "
                          "(VideoToVideoSDPipeline takes a video)")
    return video_unet_plan("TextToVideoSDPipeline", components, s, guidance=T2V_GUIDANCE, strength=None)


@register_pipeline("VideoToVideoSDPipeline", options=("num_frames", "vae_tiling"))
def video_to_video_sd_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                               index: Mapping[str, Any] | None = None) -> Plan:
    """``VideoToVideoSDPipeline.__call__``: see the module docstring."""
    return video_unet_plan("VideoToVideoSDPipeline", components, s, guidance=V2V_GUIDANCE, strength=V2V_STRENGTH)
