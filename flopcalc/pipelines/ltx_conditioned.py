"""LTX-Video conditioned on an image: ``LTXImageToVideoPipeline`` (diffusers
``pipelines/ltx/pipeline_ltx_image2video.py``), planned on top of the text-to-video plan
(:func:`flopcalc.pipelines.ltx.ltx_pipeline`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from flopcalc.architectures import autoencoder_kl_ltx as ltx_vae
from flopcalc.errors import OptionError
from flopcalc.pipelines.base import ComponentRun, Plan, Settings, component_class, config_value, register_pipeline, tile_runs
from flopcalc.pipelines.ltx import compression, ltx_pipeline
from flopcalc.registry import RunShape

IMAGE_TO_VIDEO = "LTXImageToVideoPipeline"


def packed_tokens(components: Mapping[str, Mapping[str, Any]], s: Settings, latent_frames: Any) -> Any:
    """``_pack_latents``: ``(T / p_t)(h / p)(w / p)`` tokens of the latent (the plan has checked the sizes
    divide)."""
    spatial, _ = compression(components)
    p = config_value(components, "transformer", "patch_size", 1) or 1
    p_t = config_value(components, "transformer", "patch_size_t", 1) or 1
    return latent_frames // p_t * (s.height // spatial // p) * (s.width // spatial // p)


def image_encode_runs(components: Mapping[str, Mapping[str, Any]], s: Settings, images: int,
                      why: str) -> list[ComponentRun]:
    """``vae.encode`` of ``images`` one-frame videos at the output size (``image.unsqueeze(2)``), tiled as
    the VAE would when ``vae_tiling``."""
    vae = components.get("vae")
    if vae is None:
        return []
    split = ltx_vae.encode_split(vae, s.height, s.width, bool(s.vae_tiling))
    return tile_runs("vae", component_class(components, "vae") or "?", "encode", "vae_encoder", split, images,
                     lambda h, w: RunShape(height=h, width=w, frames=1),
                     lambda n, h, w: f"{images} {why}" if split.is_whole else f"{n} tile(s) of {h}×{w} px × {images} {why}")


@register_pipeline(IMAGE_TO_VIDEO, options=("max_sequence_length", "num_frames", "vae_tiling"))
def ltx_image_to_video_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                index: Mapping[str, Any] | None = None) -> Plan:
    """``LTXImageToVideoPipeline.__call__`` (pipeline_ltx_image2video.py:598): ``LTXPipeline``'s defaults
    (512×704, 161 frames, 50 steps, ``guidance_scale`` 3.0 on a doubled batch, 128 T5 tokens, the decode),
    and the image:

    * ``prepare_latents`` (:502): the image, as a one-frame video at the output size, is VAE-encoded
      (``self.vae.encode(img.unsqueeze(0).unsqueeze(2))`` for each input image: one per prompt here), and
      its latent replaces the first latent frame (a mask, no channels added);
    * every step, the transformer gets one timestep per token: ``t.unsqueeze(-1) · (1 − conditioning_mask)``
      (:841), a ``(batch, N)`` tensor the model flattens, so ``time_embed`` runs on all N packed tokens.

    It takes no ``strength``: every step runs."""
    if s.strength is not None:
        raise OptionError(f"--strength does not apply to {IMAGE_TO_VIDEO}: the image replaces the first latent frame "
                          "and the whole schedule runs")
    base = ltx_pipeline(components, s, index=index)
    s = base.settings
    runs = list(base.runs)
    transformer = [i for i, r in enumerate(runs) if r.component == "transformer"]
    for i in transformer:
        tokens = packed_tokens(components, s, runs[i].shape.latent_frames)
        runs[i] = replace(runs[i], shape=replace(runs[i].shape, timestep_tokens=tokens))
    encode = image_encode_runs(components, s, s.batch_size, "input image(s) (one per prompt)")
    at = transformer[0] if transformer else len(runs)
    runs[at:at] = encode
    notes = list(base.notes)
    if encode:
        notes.append("the image is VAE-encoded as a one-frame video, one per prompt; its latent replaces the first "
                     "latent frame (a conditioning mask: no channels added)")
    if transformer:
        notes.append("one timestep per latent token (t · (1 − conditioning_mask)): the transformer's time_embed runs "
                     "on every token")
    return Plan(IMAGE_TO_VIDEO, s, base.passes, tuple(runs), tuple(notes))
