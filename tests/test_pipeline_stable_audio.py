"""``StableAudioPipeline`` (diffusers 0.42.1 ``pipelines/stable_audio``) with the stable-audio-open-1.0 card: the
fixtures (t5-base on 128 tokens, the projection model, the DiT's 2-row guidance call, the Oobleck decode) equal
flopcalc exactly; the plan's defaults, options and refusals; and the real ``__call__`` on tiny random components runs
what flopcalc plans (text encoder and projections per prompt, the DiT rows per step with the timestep embedded once
per call, one decode per waveform)."""

from __future__ import annotations

import inspect

import pytest
from card_support import runs_by_call
from fixture_support import assert_fixture_exact, fixtures_of

import flopcalc
from flopcalc.engine.errors import FlopcalcError, OptionError
from flopcalc.engine.pipelines import Settings
from flopcalc.engine.pipelines.dispatch import plan

CARD = "stable-audio-open-1.0"


@pytest.mark.parametrize("path", fixtures_of(CARD), ids=lambda p: p.stem)
def test_fixtures_are_exact(path):
    assert_fixture_exact(path)


def test_defaults_as_the_pipeline_runs_them():
    r = flopcalc.estimate(CARD)
    s = r.settings
    assert (r.pipeline, s.steps, s.guidance_scale, r.passes) == ("StableAudioPipeline", 100, 7.0, 2)
    # no negative prompt: zeros for the unconditional row; the DiT on 2 rows per step, one timestep embedding each
    assert runs_by_call(r) == {"text_encoder.forward": 1, "projection_model.forward": 1, "transformer.forward": 100,
                               "vae.decode": 1}
    dit = r.component("transformer")
    assert dit.shape == {"seq_len": 1024, "text_len": 130, "timestep_tokens": 1}
    assert [p.count for p in dit.tree.children] == [1, 1]
    with_time, without = dit.tree.children
    assert with_time.find("timestep_proj").total.macs("torch") > 0 == without.find("timestep_proj").total.macs("torch")
    assert r.component("text_encoder").class_name == "T5EncoderModel"
    assert r.component("text_encoder").shape == {"seq_len": 128}
    assert r.component("vae").shape == {"seq_len": 1024}
    assert round(dit.params / 1e9, 2) == 1.06


def test_negative_prompt_waveforms_and_guidance():
    p = plan(*_folder(), Settings(negative_prompt=True, batch_size=2, num_images_per_prompt=3, steps=10))
    runs = [(r.component, r.call, r.runs, r.shape.seq_len, r.shape.text_len_2, r.shape.timestep_tokens)
            for r in p.runs]
    assert runs == [("text_encoder", "forward", 4, 128, None, None),
                    ("projection_model", "forward", 4, 128, 0, None), ("projection_model", "forward", 2, 0, 2, None),
                    ("transformer", "forward", 10, 1024, None, 1), ("transformer", "forward", 110, 1024, None, 0),
                    ("vae", "decode", 6, 1024, None, None)]
    p = plan(*_folder(), Settings(guidance_scale=1.0, steps=10))
    assert p.passes == 1 and [(r.component, r.runs) for r in p.runs if r.component == "transformer"] == [
        ("transformer", 10)]


def _folder():
    from card_support import Card

    c = Card(CARD)
    return c.index(), c.components()


def test_refusals():
    for option in (dict(height=512), dict(width=512), dict(strength=0.5)):
        with pytest.raises(OptionError, match="does not apply to StableAudioPipeline"):
            flopcalc.estimate(CARD, **option)
    with pytest.raises(OptionError, match="--num-frames does not apply"):
        flopcalc.estimate(CARD, num_frames=8)
    from flopcalc.flops.symbolic import symbolic_estimate

    with pytest.raises(FlopcalcError, match="no closed-form law"):
        symbolic_estimate(CARD)


def test_signature():
    from diffusers import StableAudioPipeline

    call = inspect.signature(StableAudioPipeline.__call__).parameters
    s = flopcalc.estimate(CARD).settings
    assert (call["num_inference_steps"].default, call["guidance_scale"].default) == (s.steps, s.guidance_scale)


@pytest.mark.parametrize("guidance, negative, waveforms", [(6.0, True, 2), (1.0, False, 1)])
def test_real_call_runs_what_is_planned(guidance, negative, waveforms):
    pytest.importorskip("torch")
    from classic_call_support import Recorder, Tokenizer, diffusers_config, tiny_t5

    import torch
    from diffusers import (AutoencoderOobleck, DDIMScheduler, StableAudioDiTModel, StableAudioPipeline,
                           StableAudioProjectionModel)

    from flopcalc.flops.estimate import estimate_configs

    torch.manual_seed(0)
    # the diffusers tests' dummies (tests/pipelines/stable_audio/test_stable_audio.py); DDIM for the scheduler (the
    # cosine DPM-Solver needs torchsde): one transformer call per step either way
    transformer = StableAudioDiTModel(sample_size=4, in_channels=3, num_layers=2, attention_head_dim=4,
                                      num_key_value_attention_heads=2, out_channels=3, cross_attention_dim=4,
                                      time_proj_dim=8, global_states_input_dim=8, cross_attention_input_dim=4)
    vae = AutoencoderOobleck(encoder_hidden_size=6, downsampling_ratios=[1, 2], decoder_channels=3,
                             decoder_input_channels=3, audio_channels=2, channel_multiples=[2, 4], sampling_rate=4)
    text_encoder, te_cfg = tiny_t5(d_model=8)
    projection = StableAudioProjectionModel(text_encoder_dim=8, conditioning_dim=4, min_value=0, max_value=32)
    pipe = StableAudioPipeline(vae=vae, text_encoder=text_encoder, tokenizer=Tokenizer(model_max_length=25),
                               transformer=transformer, projection_model=projection, scheduler=DDIMScheduler())
    rec = Recorder()
    rec.hook(pipe.text_encoder, "text_encoder")
    rec.hook(pipe.projection_model.start_number_conditioner, "projection.numbers")
    rec.hook(pipe.transformer, "transformer")
    rec.hook(pipe.transformer.timestep_proj, "timestep_proj")
    rec.wrap(pipe.vae, "decode", "vae.decode")
    pipe.set_progress_bar_config(disable=True)
    calls = {"text": 0}  # the projection's text calls, by the rows of their text states
    original = pipe.projection_model.forward

    def counted(text_hidden_states=None, start_seconds=None, end_seconds=None):
        if text_hidden_states is not None:
            calls["text"] += text_hidden_states.shape[0]
        return original(text_hidden_states=text_hidden_states, start_seconds=start_seconds, end_seconds=end_seconds)
    pipe.projection_model.forward = counted
    with torch.no_grad():
        pipe(prompt="a hammer", negative_prompt="noise" if negative else None, num_inference_steps=2,
             guidance_scale=guidance, num_waveforms_per_prompt=waveforms, audio_end_in_s=1.0)
    components = {"transformer": diffusers_config(pipe.transformer), "vae": diffusers_config(pipe.vae),
                  "projection_model": diffusers_config(pipe.projection_model), "text_encoder": te_cfg}
    s = Settings(steps=2, guidance_scale=guidance, negative_prompt=negative, num_images_per_prompt=waveforms)
    from flopcalc.engine.pipelines import stable_audio

    runs = plan({"_class_name": "StableAudioPipeline"}, components, s).runs
    planned = {}
    for r in runs:
        key = r.component if r.component != "projection_model" else (
            "projection.text" if r.shape.seq_len else "projection.numbers")
        planned[key] = planned.get(key, 0) + r.runs
    rows = waveforms * (2 if guidance > 1 else 1)
    assert rec.calls["transformer"] == planned["transformer"] == 2 * rows
    assert rec.calls["timestep_proj"] == 2  # once per call, whatever the rows
    assert [r.runs for r in runs if r.component == "transformer" and r.shape.timestep_tokens == 1] == [2]
    assert rec.calls["text_encoder"] == planned["text_encoder"] == 1 + negative
    assert calls["text"] == planned["projection.text"] and rec.calls["projection.numbers"] == planned[
        "projection.numbers"] == 1
    assert rec.calls["vae.decode"] == planned["vae"] == waveforms
    (dit_shape,) = rec.shapes["transformer"]
    assert dit_shape == (3, 4)  # (in_channels, sample_size)
    assert stable_audio.TEXT_LEN == 128  # the card's length; the tiny tokenizer pads to its own 25 here
    assert estimate_configs({"_class_name": "StableAudioPipeline"}, components, s).flops > 0
