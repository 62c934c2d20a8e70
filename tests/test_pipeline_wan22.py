"""Wan 2.2 under ``WanPipeline`` (diffusers ``pipelines/wan/pipeline_wan.py``): the A14B two-expert split
(``boundary_ratio``: ``transformer`` on the high-noise steps, ``transformer_2`` below), the TI2V-5B
per-token timesteps (``expand_timesteps``) and 16× VAE, and what is refused. No torch needed (the
scheduler comparison skips without diffusers)."""

from __future__ import annotations

import pytest

import flopcalc
from flopcalc.flops.estimate import estimate_configs
from flopcalc.engine.errors import ConfigError, FlopcalcError
from flopcalc.engine.pipelines import Settings
from flopcalc.engine.pipelines.wan import expert_steps, flow_unipc_timesteps
from flopcalc.engine.sources import resolve
from card_support import runs_by_call

A14B, TI2V = "wan2.2-t2v-a14b", "wan2.2-ti2v-5b"


def _plan(card: str, settings: Settings, *, index: dict | None = None, drop: tuple[str, ...] = (), **overrides):
    source = resolve(card)
    components = {k: {**v, **overrides.get(k, {})} for k, v in source.components.items() if k not in drop}
    return estimate_configs({**source.model_index, **(index or {})}, components, settings)


# --------------------------------------------------------------------------- two experts


def test_a14b_defaults_split_the_steps_at_the_boundary():
    r = flopcalc.estimate(A14B)
    s = r.settings
    assert (s.height, s.width, s.num_frames, s.steps, s.guidance_scale) == (480, 832, 81, 50, 5.0)
    # 50 flow-sigma timesteps (shift 3): t = 999, 993, ..., the first 16 at or above 875
    assert runs_by_call(r) == {"text_encoder.forward": 2, "transformer.forward": 16 * 2, "transformer_2.forward": 34 * 2,
                        "vae.decode": 1}
    assert r.component("transformer").macs_per_run == r.component("transformer_2").macs_per_run
    assert any("transformer on the 16 step(s)" in n for n in r.notes)


def test_timesteps_by_hand():
    """σ = linspace(1, 1/1000, S + 1)[:-1], shifted 3σ/(1 + 2σ), the first nudged below 1, ×1000 truncated."""
    assert flow_unipc_timesteps(2, 3.0) == [999, 750]  # σ = 1, 0.5005 → 0.75037…
    assert flow_unipc_timesteps(4, 3.0) == [999, 900, 750, 500]
    assert expert_steps([999, 900, 750, 500], 0.875) == (2, 2)
    assert expert_steps([999, 900, 750, 500], 0.9) == (2, 2)  # 900 ≥ 900: high noise
    assert expert_steps([999, 899], 0.9) == (1, 1)


def test_split_has_no_closed_form():
    """In exact arithmetic the high-noise steps are ⌊100·S/333⌋ + 1 (σ ≥ 0.7 ⇔ t ≥ 875 at shift 3); the
    scheduler's float timesteps fall one short wherever the boundary is hit exactly (S = 333k)."""
    for steps in range(1, 200):
        assert expert_steps(flow_unipc_timesteps(steps, 3.0), 0.875)[0] == 100 * steps // 333 + 1
    assert expert_steps(flow_unipc_timesteps(333, 3.0), 0.875)[0] == 100  # not 101


def test_split_equals_diffusers_scheduler():
    pytest.importorskip("torch")
    diffusers = pytest.importorskip("diffusers")
    scheduler = diffusers.UniPCMultistepScheduler(prediction_type="flow_prediction", use_flow_sigmas=True,
                                                  num_train_timesteps=1000, flow_shift=3.0)
    for steps in (*range(1, 61), 100, 333, 666):
        scheduler.set_timesteps(steps)
        assert [int(t) for t in scheduler.timesteps] == flow_unipc_timesteps(steps, 3.0)
        for ratio in (0.875, 0.9):
            boundary = ratio * scheduler.config.num_train_timesteps
            high = sum(1 for t in scheduler.timesteps if t >= boundary)  # WanPipeline.__call__'s test
            assert expert_steps(flow_unipc_timesteps(steps, 3.0), ratio) == (high, steps - high)
            r = _plan(A14B, Settings(steps=steps), index={"boundary_ratio": ratio})
            runs = runs_by_call(r)
            assert runs.get("transformer.forward", 0) == 2 * high
            assert runs.get("transformer_2.forward", 0) == 2 * (steps - high)


def test_a14b_without_guidance_runs_one_pass_per_expert():
    r = _plan(A14B, Settings(guidance_scale=1.0, steps=40))
    assert r.passes == 1
    assert runs_by_call(r) == {"text_encoder.forward": 1, "transformer.forward": 13, "transformer_2.forward": 27,
                        "vae.decode": 1}


def test_a14b_video_to_video_splits_the_kept_timesteps():
    # strength 0.5 of 50 steps keeps the last 25 timesteps, all below 875: transformer_2 only
    r = _plan(A14B, Settings(strength=0.5))
    assert runs_by_call(r) == {"text_encoder.forward": 2, "transformer_2.forward": 25 * 2, "vae.encode": 1,
                        "vae.decode": 1}
    r = _plan(A14B, Settings(strength=0.8))  # the last 40 timesteps: 6 of them ≥ 875
    assert runs_by_call(r)["transformer.forward"] == 6 * 2 and runs_by_call(r)["transformer_2.forward"] == 34 * 2


def test_a14b_law_is_refused():
    pytest.importorskip("sympy")
    from flopcalc.flops.symbolic import symbolic_estimate

    with pytest.raises(FlopcalcError, match="no closed-form law in S"):
        symbolic_estimate(A14B)


def test_expert_configuration_errors():
    with pytest.raises(FlopcalcError, match="no transformer_2"):
        _plan(A14B, Settings(), drop=("transformer_2",), index={"transformer_2": [None, None]})
    with pytest.raises(FlopcalcError, match="no boundary_ratio"):
        _plan(A14B, Settings(), index={"boundary_ratio": None})
    # listed but its config absent: the rest is counted and the missing expert named
    r = _plan(A14B, Settings(), drop=("transformer_2",))
    assert "transformer_2.forward" not in runs_by_call(r)
    assert any(n.startswith("transformer_2 is absent") for n in r.notes)


# --------------------------------------------------------------------------- TI2V-5B


def test_ti2v_defaults_expand_the_timestep_per_token():
    r = flopcalc.estimate(TI2V)
    assert runs_by_call(r) == {"text_encoder.forward": 2, "transformer.forward": 100, "vae.decode": 1}
    # 16× VAE: latent 30×52, 21 latent frames; one timestep per 2×2 patch of every latent frame
    assert r.component("transformer").shape == {"latent_height": 30, "latent_width": 52, "text_len": 512,
                                                "latent_frames": 21, "timestep_tokens": 21 * 15 * 26}
    assert r.component("vae").shape == {"latent_height": 30, "latent_width": 52, "latent_frames": 21}
    one = _plan(TI2V, Settings(), index={"expand_timesteps": False})
    d, f = 24 * 128, 256
    expanded = r.component("transformer").tree.find("condition_embedder")
    single = one.component("transformer").tree.find("condition_embedder")
    n = 21 * 15 * 26
    # time_embedder f·d + d², time_proj 6d², on n timesteps instead of one
    assert expanded.total.macs("torch") - single.total.macs("torch") == (n - 1) * (f * d + d * d + 6 * d * d)


def test_ti2v_sizes_floor_to_the_16x_vae_and_2x2_patches():
    r = flopcalc.estimate(TI2V, height=496, width=848)
    assert (r.settings.height, r.settings.width) == (480, 832)
    assert any("floored to 480×832" in n for n in r.notes)


def test_expanded_timesteps_need_2x2_patches():
    with pytest.raises(ConfigError, match="1×2×2 patches"):
        _plan(TI2V, Settings(), transformer={"patch_size": [1, 1, 1]})


def test_ti2v_law_carries_the_per_token_timesteps():
    pytest.importorskip("sympy")
    from flopcalc.flops.symbolic import symbolic_estimate

    law = symbolic_estimate(TI2V)
    for h, w, f in ((480, 832, 81), (704, 1280, 121), (256, 512, 5)):
        exact = flopcalc.estimate(TI2V, height=h, width=w, num_frames=f)
        assert law.at(**{**law.representative(), "H": h, "W": w, "F": f}) == exact.flops


# --------------------------------------------------------------------------- image-to-video (WanImageToVideoPipeline)

I2V = "wan2.2-i2v-a14b"


def test_i2v_a14b_defaults_encode_the_image_video_once_and_split_at_0_9():
    r = flopcalc.estimate(I2V)
    assert r.pipeline == "WanImageToVideoPipeline" and r.passes == 2
    # boundary 0.9: 13 of the 50 timesteps (999 … 901) are ≥ 900
    assert runs_by_call(r) == {"text_encoder.forward": 2, "vae.encode": 1, "transformer.forward": 13 * 2,
                        "transformer_2.forward": 37 * 2, "vae.decode": 1}
    # the image followed by 80 zero frames, at the output size
    assert r.component("vae", "encode").shape == {"height": 480, "width": 832, "frames": 81}
    # noise (16) + mask (4) + image latent (16) channels: the 36-channel patch embedding reads them
    t2v = flopcalc.estimate(A14B)
    embed = r.component("transformer").tree.find("patch_embedding").total.macs("torch")
    assert embed * 16 == t2v.component("transformer").tree.find("patch_embedding").total.macs("torch") * 36


def test_i2v_batch_encodes_the_image_once():
    r = flopcalc.estimate(I2V, batch_size=3, num_images_per_prompt=2, steps=10, num_frames=17)
    runs = runs_by_call(r)
    assert runs["vae.encode"] == 1 and runs["vae.decode"] == 6 and runs["text_encoder.forward"] == 6
    assert runs["transformer.forward"] + runs["transformer_2.forward"] == 10 * 2 * 6
    assert r.component("vae", "encode").shape["frames"] == 17


def test_i2v_takes_no_strength():
    with pytest.raises(FlopcalcError, match="--strength does not apply to WanImageToVideoPipeline"):
        flopcalc.estimate(I2V, strength=0.5)


def test_i2v_with_expanded_timesteps_encodes_the_image_alone():
    r = _plan(TI2V, Settings(num_frames=17), index={"_class_name": "WanImageToVideoPipeline"})
    assert r.component("vae", "encode").shape == {"height": 480, "width": 832, "frames": 1}
    assert r.component("transformer").shape["timestep_tokens"] == 5 * 15 * 26


def test_i2v_frames_round_as_the_pipeline_says():
    r = flopcalc.estimate(I2V, num_frames=80)
    assert r.settings.num_frames == 81
    assert any("rounded to 81" in n and "WanImageToVideoPipeline" in n for n in r.notes)


def test_image_tokens_need_the_image_encoder_config():
    with pytest.raises(FlopcalcError, match="no image_encoder"):
        _plan(I2V, Settings(), transformer={"image_dim": 1280, "added_kv_proj_dim": 5120})


# --------------------------------------------------------------------------- Wan 2.1 image-to-video (CLIP image encoder)

I2V21 = "wan2.1-i2v-14b-480p"


def test_wan21_i2v_defaults():
    r = flopcalc.estimate(I2V21)
    assert r.pipeline == "WanImageToVideoPipeline"
    assert runs_by_call(r) == {"text_encoder.forward": 2, "image_encoder.forward": 1, "vae.encode": 1,
                        "transformer.forward": 100, "vae.decode": 1}
    assert r.component("image_encoder").shape == {"height": 224, "width": 224}
    # hidden_states[-2] of ViT-H/14 at 224²: 16² patches + the class token
    assert r.component("transformer").shape["image_tokens"] == 257
    # the image embedder runs on the 257 tokens: 1280² + 1280·5120 MACs each
    embedder = r.component("transformer").tree.find("condition_embedder.image_embedder")
    assert embedder.total.macs("torch") == 257 * (1280 * 1280 + 1280 * 5120)


def test_wan21_i2v_image_encoder_runs_once_per_call():
    r = flopcalc.estimate(I2V21, batch_size=2, num_images_per_prompt=2, steps=4, num_frames=5)
    assert runs_by_call(r)["image_encoder.forward"] == 1 and runs_by_call(r)["transformer.forward"] == 4 * 2 * 4


def test_context_split_is_pythons_slicing_at_512():
    """``WanAttnProcessor``: ``image_context_length = shape[1] − 512``; ``[:c]`` image, ``[c:]`` text."""
    from flopcalc.engine.architectures.wan import context_split

    assert context_split(257 + 512) == (257, 512)
    assert context_split(257 + 600) == (345, 512)  # a longer text: its head counts as image context
    assert context_split(257 + 100) == (202, 155)  # c = −155: [:−155] and [−155:]
    assert context_split(100) == (0, 100)  # c = −412 beyond the start: no image context


def test_wan21_i2v_law_is_refused():
    pytest.importorskip("sympy")
    from flopcalc.flops.symbolic import symbolic_estimate

    with pytest.raises(FlopcalcError, match="hard-coded 512 text tokens"):
        symbolic_estimate(I2V21)


def test_wan_pipeline_refuses_an_image_conditioned_transformer():
    with pytest.raises(ConfigError, match="run by WanImageToVideoPipeline"):
        _plan(I2V21, Settings(), index={"_class_name": "WanPipeline"})
