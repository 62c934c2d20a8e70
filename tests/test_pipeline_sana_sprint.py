"""SanaSprintPipeline / SanaSprintImg2ImgPipeline (diffusers ``pipelines/sana/pipeline_sana_sprint*.py``):
few-step sCM sampling, guidance embedded instead of classifier-free guidance. The plan tests need no
torch; the scheduler tests run diffusers' own ``SCMScheduler`` and ``get_timesteps`` when installed."""

from __future__ import annotations

import pytest

import flopcalc
from flopcalc.flops.estimate import estimate_configs
from flopcalc.engine.errors import ConfigError, FlopcalcError
from flopcalc.engine.pipelines import Settings

from card_support import Card, runs_by_call

CARD = Card("sana-sprint-1.6b")


def _estimate(pipeline: str, **settings):
    return estimate_configs({**CARD.index(), "_class_name": pipeline}, CARD.components(), Settings.make(**settings))


def test_defaults_two_steps_one_pass_prompt_once():
    r = flopcalc.estimate("sana-sprint-1.6b")
    s = r.settings
    assert r.pipeline == "SanaSprintPipeline"
    assert (s.height, s.width, s.steps, s.guidance_scale, s.max_sequence_length) == (1024, 1024, 2, 4.5, 300)
    assert r.passes == 1
    assert runs_by_call(r) == {"text_encoder.forward": 1, "transformer.forward": 2, "vae.decode": 1}
    assert r.component("transformer").shape == {"latent_height": 32, "latent_width": 32, "text_len": 300}
    assert any("embedded" in n for n in r.notes) and any("complex human instruction" in n for n in r.notes)


def test_guidance_is_a_second_timestep_mlp_not_a_pass():
    """The Sprint transformer is SANA 1.5 1.6B plus ``guidance_embedder`` (256 → D → D, D = 2240)."""
    sprint = flopcalc.estimate("sana-sprint-1.6b", guidance_scale=1.0).component("transformer")
    base = flopcalc.estimate("sana-1.5-1.6b").component("transformer")
    dim = 2240
    assert sprint.params - base.params == 256 * dim + dim + dim * dim + dim
    assert sprint.macs_per_run - base.macs_per_run == 256 * dim + dim * dim
    assert sprint.tree.find("time_embed.guidance_embedder") is not None
    assert flopcalc.estimate("sana-sprint-1.6b", guidance_scale=9.0).passes == 1


def test_other_step_counts_run_once_per_step_with_a_note():
    r = flopcalc.estimate("sana-sprint-1.6b", steps=4, batch_size=2, num_images_per_prompt=3)
    assert runs_by_call(r) == {"text_encoder.forward": 2, "transformer.forward": 4 * 6, "vae.decode": 6}
    assert any("intermediate_timesteps=None" in n for n in r.notes)
    assert not any("intermediate_timesteps" in n for n in flopcalc.estimate("sana-sprint-1.6b").notes)


def test_binning_uses_the_1024_table_only():
    r = flopcalc.estimate("sana-sprint-1.6b", height=500, width=900)
    assert (r.settings.height, r.settings.width) == (768, 1344)  # 0.556: "0.57" of ASPECT_RATIO_1024_BIN
    cfg = dict(CARD.config("transformer"), sample_size=16)
    with pytest.raises(FlopcalcError, match="sample_size 32.*Invalid sample size"):
        estimate_configs(CARD.index(), {**CARD.components(), "transformer": cfg}, Settings())
    r = estimate_configs(CARD.index(), {**CARD.components(), "transformer": cfg}, Settings(resolution_binning=False))
    assert (r.settings.height, r.settings.width) == (1024, 1024)


def test_needs_a_guidance_embedding_transformer():
    cfg = dict(CARD.config("transformer"), guidance_embeds=False)
    with pytest.raises(ConfigError, match="guidance_embeds: true"):
        estimate_configs(CARD.index(), {**CARD.components(), "transformer": cfg}, Settings())
    # a bare transformer runs under the pipeline made for it
    assert estimate_configs(None, {"transformer": CARD.config("transformer")}, Settings()).pipeline \
        == "SanaSprintPipeline (denoiser only)"
    assert estimate_configs(None, {"transformer": cfg}, Settings()).pipeline == "SanaPipeline (denoiser only)"


def test_negative_prompt_is_not_taken():
    r = flopcalc.estimate("sana-sprint-1.6b", negative_prompt=True)
    assert r.passes == 1 and runs_by_call(r)["text_encoder.forward"] == 1
    assert any("takes none" in n for n in r.notes)


def test_img2img_strength_0_6_keeps_both_steps_and_encodes_the_image():
    r = _estimate("SanaSprintImg2ImgPipeline")
    assert r.pipeline == "SanaSprintImg2ImgPipeline" and r.settings.strength == 0.6
    assert runs_by_call(r) == {"text_encoder.forward": 1, "transformer.forward": 2, "vae.encode": 1, "vae.decode": 1}
    assert r.component("vae", "encode").shape == {"height": 1024, "width": 1024}
    assert runs_by_call(_estimate("SanaSprintImg2ImgPipeline", strength=0.4))["transformer.forward"] == 1
    assert runs_by_call(_estimate("SanaSprintImg2ImgPipeline", strength=0.01, steps=2))["transformer.forward"] == 1


# --------------------------------------------------------------------------- diffusers' own scheduler

def _scm_forwards(steps: int, strength: float | None) -> int:
    """The transformer calls SanaSprint(Img2Img)Pipeline makes: SCMScheduler's timesteps, the
    img2img ``get_timesteps`` cut, then ``timesteps[:-1]``."""
    from diffusers import SCMScheduler
    from diffusers.pipelines.sana.pipeline_sana_sprint_img2img import SanaSprintImg2ImgPipeline

    scheduler = SCMScheduler(prediction_type="trigflow", sigma_data=0.5)
    scheduler.set_timesteps(steps, intermediate_timesteps=1.3 if steps == 2 else None)
    timesteps = scheduler.timesteps
    if strength is not None:
        holder = type("P", (), {"scheduler": scheduler})()
        timesteps, _ = SanaSprintImg2ImgPipeline.get_timesteps(holder, steps, strength, "cpu")
    return len(timesteps[:-1])


@pytest.mark.parametrize("steps", [1, 2, 3, 4, 7])
@pytest.mark.parametrize("strength", [None, 0.01, 0.3, 0.5, 0.6, 0.75, 1.0])
def test_forwards_match_diffusers_scheduler(steps, strength):
    pytest.importorskip("diffusers")
    expected = _scm_forwards(steps, strength)
    pipeline = "SanaSprintPipeline" if strength is None else "SanaSprintImg2ImgPipeline"
    assert expected >= 1
    assert runs_by_call(_estimate(pipeline, steps=steps, strength=strength))["transformer.forward"] == expected


def test_default_scheduler_refuses_other_step_counts():
    pytest.importorskip("diffusers")
    from diffusers import SCMScheduler

    with pytest.raises(ValueError, match="num_inference_steps != 2"):
        SCMScheduler().set_timesteps(4, intermediate_timesteps=1.3)
