"""Wan image-to-video (diffusers ``pipelines/wan/pipeline_wan_i2v.py``, ``WanImageToVideoPipeline``): Wan 2.1
I2V (a CLIP vision ``image_encoder`` once per call, its tokens into the transformer's ``image_embedder`` and
added k/v), Wan 2.2 I2V-A14B (two experts, no image encoder) and, with ``expand_timesteps``, a TI2V
transformer given an image."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.errors import FlopcalcError, OptionError
from flopcalc.engine.pipelines.base import ComponentRun, Plan, Settings, component_class, register_pipeline, text_runs
from flopcalc.engine.registry import RunShape
from flopcalc.engine.pipelines.wan import _encode_runs, _refuse_unsupported, _vae_runs, denoiser_runs, video_settings

NAME = "WanImageToVideoPipeline"


@register_pipeline(NAME, guidance="separate", denoisers=("WanTransformer3DModel",), when=lambda cfg: cfg.get("image_dim") is not None,
                   options=("max_sequence_length", "num_frames", "vae_tiling"))
def wan_image_to_video_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                index: Mapping[str, Any] | None = None) -> Plan:
    """``WanImageToVideoPipeline.__call__``: the ``WanPipeline`` defaults (480×832, 81 frames, 50 steps,
    ``guidance_scale`` 5.0 as two forwards, 512 UMT5 tokens, the same frame rounding and size flooring), and
    the image:

    * ``prepare_latents``: the image, followed by ``num_frames − 1`` zero frames (``expand_timesteps``: the
      image alone), is VAE-encoded once (``retrieve_latents(self.vae.encode(video_condition))``, then
      repeated over the batch); its latent and 4 mask channels are concatenated to the noise latent, which
      the transformer's ``in_channels`` (36 = 16 + 4 + 16) already holds: the patch embedding reads them;
    * ``image_encoder`` (Wan 2.1 I2V, when ``transformer.config.image_dim`` is set): ``encode_image`` runs the
      CLIP vision model once on the image (``image_size²`` after the processor) and keeps
      ``hidden_states[-2]``, its ``(image_size / patch)² + 1`` tokens, repeated over the batch; the
      transformer embeds them (``image_embedder``) and each ``attn2`` attends to them through its added k/v
      projections (the context split at a hard-coded 512 text tokens, so the count is piecewise in the text
      length: no law is stated);
    * two experts (``boundary_ratio``, Wan 2.2 I2V-A14B: 0.9) split the steps as in ``WanPipeline``;
    * ``expand_timesteps``: one timestep per latent token (``first_frame_mask[0][0][:, ::2, ::2] · t``);
    * ``vae.decode`` once per video, frame by frame, as ``WanPipeline``.

    It takes no ``strength``: the image conditions every step and the whole schedule runs."""
    if s.strength is not None:
        raise OptionError(f"--strength does not apply to {NAME}: the image conditions the video (VAE-encoded once, "
                          "with zeros for the frames after it) and every step runs")
    _refuse_unsupported(index, components, s, NAME)
    s, f, latent_frames, passes, notes = video_settings(components, s, index, NAME)
    runs = text_runs(components, [("text_encoder", s.max_sequence_length)], s.batch_size * passes,
                     f"{s.batch_size} prompt(s)" + (" + negative" if passes == 2 else ""))
    image_runs, image_tokens = _image_encoder_runs(components, s)
    runs += image_runs
    if "vae" in components:
        expand = bool((index or {}).get("expand_timesteps"))
        frames = 1 if expand else s.num_frames
        runs += [replace(r, why="1 conditioning video: " + ("the image" if expand else
                                                              f"the image + {frames - 1} zero frame(s)"))
                 for r in _encode_runs(component_class(components, "vae") or "?", components["vae"],
                                       replace(s, batch_size=1, num_frames=frames), bool(s.vae_tiling))]
        notes.append("the image is VAE-encoded once " + ("alone (expand_timesteps)" if expand else
                     f"with {frames - 1} zero frames after it") + ", and its latent repeated over the batch")
    expert_runs, expert_notes = denoiser_runs(components, s, f, passes, latent_frames, index)
    if image_tokens is not None:
        expert_runs = [replace(r, shape=replace(r.shape, image_tokens=image_tokens)) for r in expert_runs]
    videos = s.batch_size * s.num_images_per_prompt
    decode_runs, vae_notes = _vae_runs(components, s, f, videos, latent_frames, bool(s.vae_tiling))
    return Plan(NAME, s, passes, tuple(runs + expert_runs + decode_runs), tuple(notes + expert_notes + vae_notes))


def _image_encoder_runs(components: Mapping[str, Mapping[str, Any]], s: Settings) -> tuple[list[ComponentRun], Any]:
    """``encode_image``, run when ``transformer.config.image_dim`` is set (diffusers reads the first
    transformer only): the CLIP vision model once on the (one) input image; and the image tokens the
    transformer then sees."""
    from flopcalc.engine.architectures.clip import vision_tokens

    transformer = components.get("transformer")
    if transformer is None or transformer["image_dim"] is None:
        return [], None
    if transformer["added_kv_proj_dim"] is not None and s.symbolic:
        raise FlopcalcError("the transformer's attention splits its context at a hard-coded 512 text tokens "
                            "(WanAttnProcessor), so the count is piecewise in the text length: no closed-form law; "
                            "use the numeric estimate")
    encoder = components.get("image_encoder")
    if encoder is None:
        raise FlopcalcError("the transformer takes CLIP image tokens (image_dim) but the pipeline has no image_encoder "
                            "config to say how many: give the pipeline folder with image_encoder/config.json")
    size = encoder["image_size"]
    run = ComponentRun("image_encoder", component_class(components, "image_encoder") or "?", "forward",
                       "image_encoder", RunShape(height=size, width=size), 1, "1 input image (encode_image)")
    return [run], vision_tokens(encoder)
