"""AnimateDiff pipelines (``AnimateDiffPipeline``, ``AnimateDiffVideoToVideoPipeline`` and their ControlNet
variants) hand-checked against diffusers 0.42.1's ``pipelines/animatediff`` ``__call__``s, and the
``UNetMotionModel`` formula's structure: its 2-D layers are the SD1.5 UNet's, once per frame. No torch needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from card_support import Card, runs_by_call

import flopcalc
from flopcalc.engine.errors import ConfigError, OptionError, ResolutionError
from flopcalc.engine.pipelines import Settings
from flopcalc.engine.pipelines.dispatch import plan
from flopcalc.engine.registry import RunShape, assemble

REPO = Path(__file__).resolve().parent.parent
AD = Card("animatediff-v1-5-3")


def _folder(tmp_path: Path, pipeline: str, *, controlnet: dict | None = None) -> Path:
    """The card's components in a folder whose index names ``pipeline`` (plus a ControlNet)."""
    index = {**AD.index(), "_class_name": pipeline}
    components = AD.components()
    if controlnet is not None:
        components["controlnet"] = controlnet
        index["controlnet"] = ["diffusers", "ControlNetModel"]
    for name, cfg in components.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(json.dumps(cfg))
    (tmp_path / "model_index.json").write_text(json.dumps(index))
    return tmp_path


def _controlnet(**overrides) -> dict:
    cfg = json.loads((REPO / "validation/configs/sd-controlnet-canny/controlnet/config.json").read_text())
    return {**cfg, **overrides}


def test_defaults_as_the_pipeline_runs_them():
    # pipeline_animatediff.py:574: num_frames 16, 50 steps, guidance 7.5; height = sample_size (64) × 8
    r = flopcalc.estimate("animatediff-v1-5-3")
    s = r.settings
    assert r.pipeline == "AnimateDiffPipeline"
    assert (s.height, s.width, s.num_frames, s.steps, s.guidance_scale) == (512, 512, 16, 50, 7.5)
    assert r.passes == 2
    # CLIP on the prompt and the negative prompt; the UNet per step on the doubled batch; one decode per frame
    assert runs_by_call(r) == {"text_encoder.forward": 2, "unet.forward": 100, "vae.decode": 16}
    unet = r.component("unet")
    assert unet.class_name == "UNetMotionModel"
    assert unet.shape == {"latent_height": 64, "latent_width": 64, "text_len": 77, "latent_frames": 16}
    assert r.component("text_encoder").shape == {"seq_len": 77}


def test_mlenergy_v2_setting():
    # ML.ENERGY v2 (leaderboard benchmark/diffusion/text-to-video): 25 steps, 16 frames, the pipeline's size and CFG
    r = flopcalc.estimate("animatediff-v1-5-3", steps=25, num_frames=16, batch_size=4)
    assert runs_by_call(r) == {"text_encoder.forward": 8, "unet.forward": 25 * 2 * 4, "vae.decode": 16 * 4}


def test_guidance_off_and_batch():
    r = flopcalc.estimate("animatediff-v1-5-3", guidance_scale=1.0, batch_size=3, num_frames=8, steps=10)
    assert r.passes == 1
    assert runs_by_call(r) == {"text_encoder.forward": 3, "unet.forward": 30, "vae.decode": 24}


def test_videos_per_prompt_is_overwritten():
    r = flopcalc.estimate("animatediff-v1-5-3", num_images_per_prompt=3)
    assert runs_by_call(r)["unet.forward"] == 100 and r.settings.num_images_per_prompt == 1
    assert any("num_videos_per_prompt 3 is ignored" in n for n in r.notes)


def test_refusals():
    with pytest.raises(ResolutionError, match="motion_max_seq_length 32"):
        flopcalc.estimate("animatediff-v1-5-3", num_frames=33)
    with pytest.raises(OptionError, match="--strength does not apply to AnimateDiffPipeline"):
        flopcalc.estimate("animatediff-v1-5-3", strength=0.5)
    with pytest.raises(OptionError, match="--max-sequence-length does not apply"):
        flopcalc.estimate("animatediff-v1-5-3", max_sequence_length=77)
    with pytest.raises(ResolutionError):
        flopcalc.estimate("animatediff-v1-5-3", height=500)


def test_base_unet_with_adapter_is_refused_with_the_way_out(tmp_path):
    # AnimateDiffPipeline.from_pretrained(base, motion_adapter=...): the base's 2-D UNet beside the adapter
    components = {"unet": json.loads((REPO / "model_cards/sd1.5/unet/config.json").read_text()),
                  "motion_adapter": AD.config("motion_adapter")}
    with pytest.raises(ConfigError, match="from_unet2d"):
        plan({"_class_name": "AnimateDiffPipeline"}, components, Settings())


def test_video_to_video(tmp_path):
    # pipeline_animatediff_video2video.py: strength 0.8, get_timesteps keeps int(50 · 0.8) = 40 steps;
    # encode_video encodes every input frame, decode_latents decodes every frame
    r = flopcalc.estimate(str(_folder(tmp_path, "AnimateDiffVideoToVideoPipeline")), num_frames=12)
    assert r.settings.strength == 0.8
    assert runs_by_call(r) == {"text_encoder.forward": 2, "vae.encode": 12, "unet.forward": 80, "vae.decode": 12}
    assert r.component("vae", "encode").shape == {"height": 512, "width": 512}


@pytest.mark.parametrize("guess", [False, True])
def test_controlnet_runs_per_frame(tmp_path, guess):
    # pipeline_animatediff_controlnet.py:1063: the ControlNet sees the frames folded into the batch, on the
    # doubled CFG batch, or the conditional half in guess mode (global_pool_conditions)
    folder = _folder(tmp_path, "AnimateDiffControlNetPipeline", controlnet=_controlnet(global_pool_conditions=guess))
    r = flopcalc.estimate(str(folder), steps=20, num_frames=8)
    assert runs_by_call(r) == {"text_encoder.forward": 2, "controlnet.forward": 20 * (1 if guess else 2) * 8,
                        "unet.forward": 40, "vae.decode": 8}
    assert r.component("controlnet").shape == {"latent_height": 64, "latent_width": 64, "text_len": 77}


def test_video_to_video_controlnet(tmp_path):
    folder = _folder(tmp_path, "AnimateDiffVideoToVideoControlNetPipeline", controlnet=_controlnet())
    r = flopcalc.estimate(str(folder), steps=20, strength=0.5, num_frames=4)
    assert runs_by_call(r) == {"text_encoder.forward": 2, "vae.encode": 4, "controlnet.forward": 10 * 2 * 4,
                        "unet.forward": 20, "vae.decode": 4}


def test_vae_tiling_tiles_each_frame():
    r = flopcalc.estimate("animatediff-v1-5-3", height=1024, width=1024, num_frames=4, vae_tiling=True)
    untiled = flopcalc.estimate("animatediff-v1-5-3", height=1024, width=1024, num_frames=4)
    assert r.component("vae", "decode").macs > untiled.component("vae", "decode").macs
    sd = flopcalc.estimate("sd1.5", height=1024, width=1024, vae_tiling=True)
    assert r.component("vae", "decode").macs == 4 * sd.component("vae", "decode").macs


def test_2d_layers_are_the_sd15_unet_per_frame():
    # UNetMotionModel.forward folds the frames into the batch; the time embedding runs once per video
    motion = AD.config("unet")
    base = json.loads((REPO / "model_cards/sd1.5/unet/config.json").read_text())
    frames = 5
    tree = assemble(motion, RunShape(latent_height=40, latent_width=48, text_len=77, latent_frames=frames),
                    component="unet")
    unet2d = assemble(base, RunShape(latent_height=40, latent_width=48, text_len=77), component="unet")
    motions = sum(node.total.macs() for path, node in tree.walk() if node.formula == "motion_module")
    time = tree.find("time_embedding").total.macs()
    assert tree.total.macs() - motions == frames * (unet2d.total.macs() - time) + time
    assert unet2d.total.params + sum(n.total.params for _, n in tree.walk() if n.formula == "motion_module") \
        == tree.total.params


def test_motion_module_count_and_size():
    # v1-5-3 (use_motion_mid_block false): 2 per down block, 3 per up block, none in the mid block
    tree = assemble(AD.config("unet"), RunShape(latent_height=64, latent_width=64, text_len=77, latent_frames=16),
                    component="unet")
    modules = [p for p, n in tree.walk() if n.formula == "motion_module"]
    counts = sum(n.count for _, n in tree.walk() if n.formula == "motion_module")
    assert counts == 4 * 2 + 4 * 3 and not any(p.startswith("unet.mid_block") for p in modules)
    # the UNet's parameters as measured (the SD1.5 UNet's plus the adapter's 417.1M)
    fx = AD.fixture("unet-512x512.json")
    assert tree.total.params == fx["params"]


def test_sdxl_defaults_as_the_pipeline_runs_them():
    # pipeline_animatediff_sdxl.py:872: default_sample_size (128) × 8, 16 frames, 50 steps, guidance 5.0; no negative
    # prompt: force_zeros_for_empty_prompt, the encoders run once per prompt; all frames decoded
    r = flopcalc.estimate("animatediff-sdxl-beta")
    s = r.settings
    assert r.pipeline == "AnimateDiffSDXLPipeline"
    assert (s.height, s.width, s.num_frames, s.steps, s.guidance_scale) == (1024, 1024, 16, 50, 5.0)
    assert runs_by_call(r) == {"text_encoder.forward": 1, "text_encoder_2.forward": 1, "unet.forward": 100,
                        "vae.decode": 16}
    assert any("force_zeros_for_empty_prompt" in n for n in r.notes)
    r = flopcalc.estimate("animatediff-sdxl-beta", negative_prompt=True, steps=25, batch_size=2)
    assert runs_by_call(r) == {"text_encoder.forward": 4, "text_encoder_2.forward": 4, "unet.forward": 100,
                        "vae.decode": 32}


def test_sdxl_motion_unet_keeps_text_time_once_per_video():
    # the SDXL UNet's add_embedding runs on the pooled text and time ids once per video (unet_motion_model.py:1980)
    cfg = Card("animatediff-sdxl-beta").config("unet")
    assert cfg["addition_embed_type"] == "text_time" and cfg["transformer_layers_per_block"] == [1, 2, 10]
    one = assemble(cfg, RunShape(latent_height=32, latent_width=32, text_len=77, latent_frames=1), component="unet")
    three = assemble(cfg, RunShape(latent_height=32, latent_width=32, text_len=77, latent_frames=3), component="unet")
    assert three.find("add_embedding").total.macs() == one.find("add_embedding").total.macs()
