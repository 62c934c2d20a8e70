"""LucyEditPipeline semantics (diffusers ``pipelines/lucy/pipeline_lucy_edit.py``) on the Wan2.2-TI2V-5B card's
configs with a 96-channel transformer (48 noise + 48 video latent channels, the Lucy Edit layout): the video to
edit encoded once per generated video, the per-token timesteps of ``expand_timesteps``. No torch needed."""

from __future__ import annotations

import pytest

from flopcalc.flops.estimate import estimate_configs
from flopcalc.engine.errors import FlopcalcError, OptionError
from flopcalc.engine.pipelines import Settings

from card_support import Card, runs_by_call

TI2V = Card("wan2.2-ti2v-5b")


def _plan(settings: Settings, in_channels: int = 96):
    components = TI2V.components()
    components["transformer"] = {**components["transformer"], "in_channels": in_channels}
    return estimate_configs({**TI2V.index(), "_class_name": "LucyEditPipeline"}, components, settings)


def test_defaults_encode_the_video_and_expand_the_timesteps():
    r = _plan(Settings())
    s = r.settings
    assert r.pipeline == "LucyEditPipeline"
    assert (s.height, s.width, s.num_frames, s.steps, s.guidance_scale) == (480, 832, 81, 50, 5.0)
    assert runs_by_call(r) == {"text_encoder.forward": 2, "vae.encode": 1, "transformer.forward": 100, "vae.decode": 1}
    assert r.component("vae", "encode").shape["frames"] == 81
    t = r.component("transformer").shape
    assert t["latent_frames"] == 21 and t["timestep_tokens"] == 21 * 15 * 26


def test_one_video_to_edit_per_generated_video_and_no_strength():
    r = _plan(Settings(batch_size=2, num_images_per_prompt=2, steps=5, num_frames=17))
    assert runs_by_call(r) == {"text_encoder.forward": 4, "vae.encode": 4, "transformer.forward": 40, "vae.decode": 4}
    with pytest.raises(OptionError, match="--strength does not apply to LucyEditPipeline"):
        _plan(Settings(strength=0.5))
    with pytest.raises(FlopcalcError, match="in_channels 48 ≠ out_channels 48 \\+ the VAE's z_dim 48"):
        _plan(Settings(), in_channels=48)
