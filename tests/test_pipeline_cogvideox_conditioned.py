"""CogVideoXImageToVideoPipeline and CogVideoXVideoToVideoPipeline semantics (diffusers
``pipelines/cogvideo/pipeline_cogvideox_image2video.py``, ``pipeline_cogvideox_video2video.py``): defaults,
what is encoded, the channel concatenation, CogVideoX 1.5's ``ofs`` and frame padding, and the runs matching
the measured fixtures' inputs. No torch needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import flopcalc
from flopcalc.flops.estimate import estimate_configs
from flopcalc.engine.errors import FlopcalcError, OptionError, ResolutionError
from flopcalc.engine.pipelines import Settings

from card_support import Card, runs_by_call

REPO = Path(__file__).resolve().parent.parent
I2V = Card("cogvideox-5b-i2v")
T2V = Card("cogvideox-2b")
I2V15 = REPO / "validation/configs/cogvideox1.5-5b-i2v-transformer/config.json"
FIXTURES = REPO / "validation/fixtures"


def _with(card: Card, pipeline: str, settings: Settings, **overrides):
    components = {k: {**v, **overrides.get(k, {})} for k, v in card.components().items()}
    return estimate_configs({**card.index(), "_class_name": pipeline}, components, settings)


def _fixture(case: str, name: str) -> dict:
    return json.loads((FIXTURES / case / name).read_text())


# --------------------------------------------------------------------------- image-to-video


def test_i2v_defaults_encode_the_image_once_and_double_the_channels():
    r = flopcalc.estimate(I2V.name)
    s = r.settings
    assert r.pipeline == "CogVideoXImageToVideoPipeline"
    assert (s.height, s.width, s.num_frames, s.steps, s.guidance_scale, s.max_sequence_length, s.strength) == \
        (480, 720, 49, 50, 6.0, 226, None)
    assert r.passes == 2
    assert runs_by_call(r) == {"text_encoder.forward": 2, "vae.encode": 1, "transformer.forward": 100, "vae.decode": 1}
    assert r.component("vae", "encode").shape == {"height": 480, "width": 720, "frames": 1}
    assert r.component("transformer").shape == {"latent_height": 60, "latent_width": 90, "latent_frames": 13,
                                                "text_len": 226}
    assert r.component("vae", "decode").shape == {"latent_height": 60, "latent_width": 90, "latent_frames": 13,
                                                  "frames": 49}


def test_i2v_runs_are_the_measured_ones():
    """The fixtures' inputs are what the plan runs: hidden_states (1, T, 32, h, w) with T the latent frames,
    the one-frame image into the encoder."""
    r = flopcalc.estimate(I2V.name)
    t = r.component("transformer").shape
    fixture = _fixture("cogvideox-5b-i2v", "transformer-480x720.json")
    assert fixture["inputs"]["hidden_states"] == [1, t["latent_frames"], I2V.config("transformer")["in_channels"],
                                                 t["latent_height"], t["latent_width"]]
    assert I2V.config("transformer")["in_channels"] == 2 * I2V.config("vae")["latent_channels"]
    assert _fixture("cogvideox-5b-i2v", "vae-f1-encode-480x720.json")["inputs"]["x"] == [1, 3, 1, 480, 720]
    assert r.component("transformer").macs_per_run * 2 == fixture["torch"]["flops"]


def test_i2v_batch_encodes_one_image_per_prompt_and_forces_one_video_per_prompt():
    r = flopcalc.estimate(I2V.name, batch_size=3, num_images_per_prompt=2, steps=10, guidance_scale=1.0)
    assert runs_by_call(r) == {"text_encoder.forward": 3, "vae.encode": 3, "transformer.forward": 30, "vae.decode": 3}
    assert any("num_videos_per_prompt 2 is ignored" in n for n in r.notes)


def test_i2v_takes_no_strength_and_only_its_sample_size():
    with pytest.raises(OptionError, match="--strength does not apply to CogVideoXImageToVideoPipeline"):
        flopcalc.estimate(I2V.name, strength=0.5)
    with pytest.raises(ResolutionError, match="60×90 latent grid"):
        flopcalc.estimate(I2V.name, height=768, width=1360)
    with pytest.raises(FlopcalcError, match="max_text_seq_length=226"):
        flopcalc.estimate(I2V.name, max_sequence_length=128)
    with pytest.raises(FlopcalcError, match="no closed-form law"):
        from flopcalc.flops.symbolic import symbolic_estimate

        symbolic_estimate(I2V.name)


def test_i2v_frames_set_the_latent_frames():
    r = flopcalc.estimate(I2V.name, num_frames=13)
    assert r.component("transformer").shape["latent_frames"] == 4
    assert r.component("vae", "encode").shape["frames"] == 1
    assert r.component("transformer").macs_per_run * 2 == \
        _fixture("cogvideox-5b-i2v", "transformer-f13-480x720.json")["torch"]["flops"]


def test_i2v_needs_twice_the_latent_channels():
    with pytest.raises(FlopcalcError, match="in_channels 16 ≠ 2 × the VAE's 16 latent channels"):
        _with(I2V, "CogVideoXImageToVideoPipeline", Settings(), transformer={"in_channels": 16})


def test_a_text_to_video_pipeline_refuses_the_i2v_transformer():
    with pytest.raises(FlopcalcError, match="in_channels 32 ≠ 1 × the VAE's 16"):
        _with(I2V, "CogVideoXPipeline", Settings())
    with pytest.raises(FlopcalcError, match="passes no ofs"):
        _with(I2V, "CogVideoXVideoToVideoPipeline", Settings(),
              transformer={"ofs_embed_dim": 512, "in_channels": 16})


def test_cogvideox_15_i2v_pads_the_latent_frames_and_embeds_ofs():
    """The bare 1.5 I2V transformer runs under the image-to-video pipeline (32 channels, ofs): at its 49-frame
    default 13 latent frames are padded to 14 (patch_size_t 2), 81 frames give 21 → 22; its ofs embedding is
    in the tree; the sample size 96 × 170 latent gives 768 × 1360."""
    r = flopcalc.estimate(str(I2V15))
    assert r.pipeline == "CogVideoXImageToVideoPipeline (denoiser only)"
    (t,) = r.components
    assert (r.settings.height, r.settings.width, r.settings.num_frames) == (768, 1360, 49)
    assert t.shape["latent_frames"] == 14
    assert t.tree.find("ofs_embedding") is not None
    fixture = _fixture("cogvideox1.5-5b-i2v-transformer", "transformer-768x1360.json")
    assert fixture["inputs"]["hidden_states"] == [1, 14, 32, 96, 170] and fixture["inputs"]["ofs"] == [1]
    assert t.macs_per_run * 2 == fixture["torch"]["flops"]
    r81 = flopcalc.estimate(str(I2V15), num_frames=81)
    assert r81.components[0].shape["latent_frames"] == 22
    assert any("21 latent frames padded to 22" in n for n in r81.notes)


def test_a_bare_text_to_video_transformer_still_runs_under_the_text_to_video_pipeline():
    r = flopcalc.estimate(str(REPO / "model_cards/cogvideox-2b/transformer/config.json"))
    assert r.pipeline == "CogVideoXPipeline (denoiser only)"


# --------------------------------------------------------------------------- video-to-video


def test_v2v_defaults_strength_0_8_encode_the_video_and_keep_40_steps():
    r = _with(T2V, "CogVideoXVideoToVideoPipeline", Settings())
    s = r.settings
    assert r.pipeline == "CogVideoXVideoToVideoPipeline"
    assert (s.height, s.width, s.num_frames, s.steps, s.strength) == (480, 720, 49, 50, 0.8)
    assert runs_by_call(r) == {"text_encoder.forward": 2, "vae.encode": 1, "transformer.forward": 80, "vae.decode": 1}
    assert r.component("vae", "encode").shape == {"height": 480, "width": 720, "frames": 49}
    assert any("input video's length sets num_frames" in n for n in r.notes)


def test_v2v_floors_the_kept_steps_and_encodes_one_video_per_prompt():
    r = _with(T2V, "CogVideoXVideoToVideoPipeline", Settings(steps=7, strength=0.5, batch_size=2, num_frames=13))
    # get_timesteps: min(int(7 · 0.5), 7) = 3 steps
    assert runs_by_call(r) == {"text_encoder.forward": 4, "vae.encode": 2, "transformer.forward": 12, "vae.decode": 2}
    assert r.component("vae", "encode").shape["frames"] == 13
    assert not any("input video's length" in n for n in r.notes)


def test_v2v_refuses_latent_frames_patch_size_t_does_not_divide():
    overrides = {"transformer": {"patch_size_t": 2, "use_rotary_positional_embeddings": True}}
    with pytest.raises(ResolutionError, match="13 latent frames are not divisible by the transformer's patch_size_t 2"):
        _with(T2V, "CogVideoXVideoToVideoPipeline", Settings(), **overrides)
    r = _with(T2V, "CogVideoXVideoToVideoPipeline", Settings(num_frames=53), **overrides)
    assert r.component("transformer").shape["latent_frames"] == 14


# --------------------------------------------------------------------------- CogVideoX-Fun control

FUN = {"transformer": {"in_channels": 32, "use_rotary_positional_embeddings": True}}  # a Fun-Control layout


def test_fun_control_encodes_the_control_video_and_concatenates_it():
    r = _with(T2V, "CogVideoXFunControlPipeline", Settings(), **FUN)
    s = r.settings
    assert r.pipeline == "CogVideoXFunControlPipeline"
    assert (s.height, s.width, s.num_frames, s.steps, s.guidance_scale, s.strength) == (480, 720, 49, 50, 6.0, None)
    assert runs_by_call(r) == {"text_encoder.forward": 2, "vae.encode": 1, "transformer.forward": 100, "vae.decode": 1}
    assert r.component("vae", "encode").shape == {"height": 480, "width": 720, "frames": 49}
    assert any("control video's length sets num_frames" in n for n in r.notes)
    r2 = _with(T2V, "CogVideoXFunControlPipeline", Settings(batch_size=2, num_frames=13, guidance_scale=1.0), **FUN)
    assert runs_by_call(r2) == {"text_encoder.forward": 2, "vae.encode": 2, "transformer.forward": 100, "vae.decode": 2}
    assert r2.component("transformer").shape["latent_frames"] == 4


def test_fun_control_refuses_strength_plain_transformers_and_undivided_frames():
    with pytest.raises(OptionError, match="--strength does not apply to CogVideoXFunControlPipeline"):
        _with(T2V, "CogVideoXFunControlPipeline", Settings(strength=0.5), **FUN)
    with pytest.raises(FlopcalcError, match="in_channels 16 ≠ 2 × the VAE's 16"):
        _with(T2V, "CogVideoXFunControlPipeline", Settings())
    with pytest.raises(ResolutionError, match="not divisible by the transformer's patch_size_t 2"):
        _with(T2V, "CogVideoXFunControlPipeline", Settings(),
              transformer={**FUN["transformer"], "patch_size_t": 2})
