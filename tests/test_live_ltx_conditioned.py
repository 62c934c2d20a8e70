"""Live re-measurement of LTX-Video 0.9.5 and LTXImageToVideoPipeline as flopcalc plans them: the transformer
with one timestep per token at a random size and frame count, the 0.9.5 VAE (timestep-conditioned decoder)
decoding and encoding at a random size and frame count, and the one-frame image encode, each planned by the
pipeline and measured on the meta device now.

The seed is printed; ``FLOPCALC_SEED=N`` replays it. Bar: ``torch`` convention exact (total and every
measured module), parameters exact, ``thop`` convention exact.
"""

from __future__ import annotations

import json

import pytest

from live_support import REPO, SEED, assert_matches_measurement, check_plan, measure, random_size, write_config

from flopcalc.flops.estimate import estimate_configs  # noqa: E402

from flopcalc.engine.pipelines import Settings  # noqa: E402

pytestmark = pytest.mark.live

CARD = REPO / "model_cards/ltx-video-0.9.5"
INDEX = json.loads((CARD / "model_index.json").read_text())
I2V = {**INDEX, "_class_name": "LTXImageToVideoPipeline"}


def _frames(rng) -> int:
    return 8 * rng.randint(0, 8) + 1


def test_i2v_transformer_at_a_random_size_and_frame_count(rng):
    h, w, f = random_size(rng, 32, 128, 768), random_size(rng, 32, 128, 1024), _frames(rng)
    check_plan(CARD / "transformer", "transformer", Settings(height=h, width=w, num_frames=f),
               {"height": h, "width": w, "num_frames": f, "text_len": 128, "per_token_timesteps": 1}, index=I2V)


@pytest.mark.parametrize("call", ["decode", "encode"])
def test_0_9_5_vae_at_a_random_size_and_frame_count(rng, call):
    h, w, f = random_size(rng, 32, 128, 640), random_size(rng, 32, 128, 768), _frames(rng)
    settings = Settings(height=h, width=w, num_frames=f, strength=1.0 if call == "encode" else None)
    check_plan(CARD / "vae", "vae", settings, {"height": h, "width": w, "num_frames": f}, index=INDEX, call=call)


def test_i2v_image_encode_at_a_random_size(rng):
    h, w = random_size(rng, 32, 128, 768), random_size(rng, 32, 128, 1024)
    check_plan(CARD / "vae", "vae", Settings(height=h, width=w, num_frames=_frames(rng)),
               {"height": h, "width": w, "num_frames": 1}, index=I2V, call="encode")


UPSCALER = REPO / "model_cards/ltxv-spatial-upscaler-0.9.7"
UPSAMPLE = json.loads((UPSCALER / "model_index.json").read_text())


def test_upsample_pipeline_runs_at_a_random_size_and_frame_count(rng):
    """The latent upsampler on the input latent, the VAE decoding the upsampled latent (2H × 2W), as planned."""
    h, w, f = random_size(rng, 32, 128, 512), random_size(rng, 32, 128, 640), _frames(rng)
    settings = Settings(height=h, width=w, num_frames=f)
    check_plan(UPSCALER / "latent_upsampler", "latent_upsampler", settings, {"height": h, "width": w, "num_frames": f},
               index=UPSAMPLE)
    components = {name: json.loads((UPSCALER / name / "config.json").read_text()) for name in ("vae", "latent_upsampler")}
    decode = estimate_configs(UPSAMPLE, components, settings, convention="torch").component("vae", "decode")
    fx = measure.measure_component(UPSCALER / "vae", settings={"height": 2 * h, "width": 2 * w, "num_frames": f},
                                   call="decode")
    assert_matches_measurement(decode, fx, f"seed {SEED}, upsampled decode of {h}x{w}x{f}")


def test_random_latent_upsampler_configs(rng, tmp_path):
    for i in range(5):
        dims = rng.choice([2, 3])
        spatial, temporal = rng.choice([(True, False), (True, False), (True, True), (False, True)] if dims == 3
                                       else [(True, False)])
        cfg = {"_class_name": "LTXLatentUpsamplerModel", "in_channels": rng.choice([4, 16]),
               "mid_channels": 32 * rng.randint(1, 2), "num_blocks_per_stage": rng.randint(0, 2), "dims": dims,
               "spatial_upsample": spatial, "temporal_upsample": temporal}
        h, w, f = random_size(rng, 32, 32, 256), random_size(rng, 32, 32, 256), _frames(rng)
        check_plan(write_config(tmp_path, f"up{i}", cfg), "latent_upsampler", Settings(height=h, width=w, num_frames=f),
                   {"height": h, "width": w, "num_frames": f}, index=UPSAMPLE)


def test_condition_pipeline_transformer_with_random_conditioning_items(rng):
    """LTXConditionPipeline: random images/videos at random frame indices; the transformer measured with the
    appended conditioning tokens (video_coords for the rotary tables) and one timestep per token."""
    h, w, f = random_size(rng, 32, 128, 512), random_size(rng, 32, 128, 640), 8 * rng.randint(1, 8) + 1
    conditions = tuple((rng.choice([1, 9, 17, 33]), rng.choice([0, 0, 8 * rng.randint(1, (f - 1) // 8)]))
                       for _ in range(rng.randint(1, 3)))
    settings = Settings.make(height=h, width=w, num_frames=f, conditions=conditions)
    cfg = json.loads((CARD / "transformer/config.json").read_text())
    t = estimate_configs({"_class_name": "LTXConditionPipeline"}, {"transformer": cfg}, settings,
                         convention="torch").component("transformer")
    extra = t.shape.get("reference_tokens", 0)
    fx = measure.measure_component(CARD / "transformer", settings={
        "height": h, "width": w, "num_frames": f, "text_len": 256, "per_token_timesteps": 1, "extra_tokens": extra})
    assert_matches_measurement(t, fx, f"seed {SEED}, conditions {conditions} at {h}x{w}x{f}")
