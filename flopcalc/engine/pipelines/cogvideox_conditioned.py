"""CogVideoX conditioned on an image or a video (diffusers ``pipelines/cogvideo/``): image-to-video
(``pipeline_cogvideox_image2video.py``, ``CogVideoXImageToVideoPipeline``), video-to-video
(``pipeline_cogvideox_video2video.py``, ``CogVideoXVideoToVideoPipeline``) and CogVideoX-Fun control
(``pipeline_cogvideox_fun_control.py``, ``CogVideoXFunControlPipeline``). They share the text-to-video
plan (:func:`flopcalc.engine.pipelines.cogvideox.cogvideox_plan`: 50 steps, ``guidance_scale`` 6 as a doubled
batch, 226 T5 tokens, the transformer's sample size × 8, ``num_videos_per_prompt`` forced to 1, the
frame-batched decode of the unpadded latent) and differ in what is encoded and how the transformer is fed.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.errors import OptionError
from flopcalc.engine.pipelines.base import Plan, Settings, register_pipeline
from flopcalc.engine.pipelines.cogvideox import Variant, cogvideox_plan

_OPTIONS = ("max_sequence_length", "num_frames", "vae_tiling")

#: ``CogVideoXImageToVideoPipeline.__call__`` (pipeline_cogvideox_image2video.py:600): ``num_frames`` 49
#: (not the transformer's ``sample_frames``), the image latent on channels (``in_channels // 2`` noise
#: channels, :791), ``ofs`` 2.0 when ``ofs_embed_dim`` (:816), latent frames padded to ``patch_size_t`` (:782).
IMAGE_TO_VIDEO = Variant("CogVideoXImageToVideoPipeline", channel_inputs=2, conditioning="image", num_frames=49,
                         passes_ofs=True)
#: ``CogVideoXVideoToVideoPipeline.__call__`` (pipeline_cogvideox_video2video.py:577): ``strength`` 0.8, the
#: input video VAE-encoded into the initial latent (:385), ``in_channels`` latent channels (:769), latent
#: frames not divisible by ``patch_size_t`` refused (:759).
VIDEO_TO_VIDEO = Variant("CogVideoXVideoToVideoPipeline", conditioning="video", pads_frames=False,
                         default_strength=0.8)


def _frames_from_input(plan: Plan, s: Settings, video: str) -> Plan:
    """The plan, with a note where the frame count (the ``video``'s length in the pipeline) was assumed."""
    if s.num_frames is not None:
        return plan
    return replace(plan, notes=plan.notes + (f"the {video}'s length sets num_frames; none given: "
                                             f"{plan.settings.num_frames} frames (the transformer's sample_frames) "
                                             "assumed",))


def _image_transformer(cfg: Mapping[str, Any]) -> bool:
    from flopcalc.engine.pipelines.cogvideox import _text_to_video_transformer

    return not _text_to_video_transformer(cfg)


@register_pipeline(IMAGE_TO_VIDEO.name, denoisers=("CogVideoXTransformer3DModel",), when=_image_transformer,
                   options=_OPTIONS)
def cogvideox_image_to_video_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                      index: Mapping[str, Any] | None = None) -> Plan:
    """``CogVideoXImageToVideoPipeline.__call__``: the text-to-video defaults, but 49 frames by default, and
    the image:

    * ``prepare_latents`` (:344): the image, as a one-frame video at the output size, is VAE-encoded once per
      video (``[self.vae.encode(img.unsqueeze(0)) for img in image]``, ``batch_size`` calls; the encoder's
      first frame batch holds the one frame), padded with ``latent_frames − 1`` zero frames, and concatenated
      to the noise latent on channels every step: the transformer's ``in_channels`` (32) is twice the VAE's
      16 latent channels, its patch embedding reads both;
    * CogVideoX 1.5 I2V: ``ofs`` (``latents.new_full((1,), 2.0)``) into the transformer's ``ofs_embedding``,
      and the latent frames padded up to a multiple of ``patch_size_t`` (``additional_frames``, dropped
      before decoding);
    * CogVideoX-5b-I2V's learned positional table only runs at its 60 × 90 sample latent (480 × 720), on
      any frame count (the table is recomputed as sincos for other frame counts, without MACs).

    It takes no ``strength``: every step runs."""
    if s.strength is not None:
        raise OptionError(f"--strength does not apply to {IMAGE_TO_VIDEO.name}: the image conditions every step "
                          "(its latent concatenated on channels) and the whole schedule runs")
    return cogvideox_plan(components, s, IMAGE_TO_VIDEO)


@register_pipeline(VIDEO_TO_VIDEO.name, options=_OPTIONS)
def cogvideox_video_to_video_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                      index: Mapping[str, Any] | None = None) -> Plan:
    """``CogVideoXVideoToVideoPipeline.__call__``: the text-to-video defaults with ``strength`` 0.8: the input
    video (``num_frames = len(video)``: the plan takes ``--num-frames``, the transformer's ``sample_frames``
    when not given, and asks for ``4k + 1`` frames) is VAE-encoded once per prompt (:385, frame batches of
    8), ``get_timesteps`` keeps ``min(int(steps · strength), steps)`` steps (:408: 40 of 50), and the latent
    is decoded as in text-to-video. Latent frames not divisible by ``patch_size_t`` (CogVideoX 1.5) are
    refused, as the pipeline raises."""
    return _frames_from_input(cogvideox_plan(components, s, VIDEO_TO_VIDEO), s, "input video")


#: ``CogVideoXFunControlPipeline.__call__`` (pipeline_cogvideox_fun_control.py:553): the control video's
#: latent on channels (``in_channels // 2`` noise channels, :743), latent frames not divisible by
#: ``patch_size_t`` refused (:737), no ``ofs``, no ``strength``.
FUN_CONTROL = Variant("CogVideoXFunControlPipeline", channel_inputs=2, conditioning="control video",
                      pads_frames=False)


@register_pipeline(FUN_CONTROL.name, options=_OPTIONS)
def cogvideox_fun_control_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                   index: Mapping[str, Any] | None = None) -> Plan:
    """``CogVideoXFunControlPipeline.__call__`` (CogVideoX-Fun Control / Pose): the text-to-video defaults;
    ``num_frames = len(control_video[0])`` (the plan takes ``--num-frames``, the transformer's
    ``sample_frames`` when not given); ``prepare_control_latents`` (:362) VAE-encodes the control video once
    per prompt (``for i in range(masked_image.size(0))``, frame batches of 8), and its latent is
    concatenated to the noise latent on channels every step (``in_channels`` = 2 × the VAE's latent
    channels). It takes no ``strength``: the latents start from noise and every step runs."""
    if s.strength is not None:
        raise OptionError(f"--strength does not apply to {FUN_CONTROL.name}: the control video conditions every "
                          "step (its latent concatenated on channels) and the whole schedule runs")
    return _frames_from_input(cogvideox_plan(components, s, FUN_CONTROL), s, "control video")
