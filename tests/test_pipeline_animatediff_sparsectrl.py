"""``AnimateDiffSparseControlNetPipeline`` (diffusers 0.42.1 ``pipelines/animatediff/pipeline_animatediff_sparsectrl.py``)
and its ``SparseControlNetModel``: the fixtures (the whole 2-row CFG call of the RGB and scribble ControlNets as the
conversion script builds them) equal flopcalc exactly; the defaults, options and refusals of the plan; and the real
``__call__`` on tiny random components (the diffusers tests' dummies) runs what flopcalc plans: the ControlNet on the
UNet's batch every step with the conditioning video embedded once per call, the conditioning frames VAE-encoded
for the simplified embedding, one decode per frame."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from card_support import Card
from fixture_support import assert_fixture_exact, fixtures_of

from flopcalc.engine.errors import ConfigError, OptionError, ResolutionError
from flopcalc.engine.pipelines import Settings
from flopcalc.engine.pipelines.dispatch import plan
from flopcalc.flops.estimate import estimate_configs

REPO = Path(__file__).resolve().parent.parent
AD = Card("animatediff-v1-5-3")
PIPE = "AnimateDiffSparseControlNetPipeline"
RGB = json.loads((REPO / "validation/configs/sparsectrl-rgb-converted/controlnet/config.json").read_text())
SCRIBBLE = json.loads((REPO / "validation/configs/sparsectrl-scribble-converted/controlnet/config.json").read_text())


def _folder(controlnet: dict | None = RGB) -> tuple[dict, dict]:
    components = AD.components()
    index = {**AD.index(), "_class_name": PIPE}
    if controlnet is not None:
        components["controlnet"] = controlnet
    return index, components


@pytest.mark.parametrize("path", fixtures_of("sparsectrl-rgb-converted", "sparsectrl-scribble-converted"),
                         ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_fixtures_are_exact(path):
    assert_fixture_exact(path)


def test_defaults_as_the_pipeline_runs_them():
    p = plan(*_folder(), Settings())
    s = p.settings
    # __call__ (:714): 16 frames, 50 steps, 7.5; unet.sample_size × 8; one conditioning image (indices [0])
    assert (s.height, s.width, s.num_frames, s.steps, s.guidance_scale, s.conditioning_frames) == (
        512, 512, 16, 50, 7.5, 1)
    runs = [(r.component, r.call, r.runs, r.shape.frames) for r in p.runs]
    assert runs == [("text_encoder", "forward", 2, None), ("vae", "encode", 1, None),
                    ("controlnet", "forward", 50, 16), ("controlnet", "forward", 50, 0),
                    ("unet", "forward", 100, None), ("vae", "decode", 16, None)]
    cn = [r for r in p.runs if r.component == "controlnet"]
    assert all(r.shape.latent_frames == 16 and r.shape.latent_height == 64 and r.shape.text_len == 77 for r in cn)


def test_options_and_the_full_embedding():
    p = plan(*_folder(), Settings.make(conditioning_frames=4, guidance_scale=1.0, batch_size=3, num_frames=8))
    assert [(r.component, r.call, r.runs, r.shape.frames) for r in p.runs if r.component != "text_encoder"] == [
        ("vae", "encode", 4, None), ("controlnet", "forward", 50, 8), ("controlnet", "forward", 100, 0),
        ("unet", "forward", 150, None), ("vae", "decode", 24, None)]
    # the scribble ControlNet embeds the images themselves: nothing is VAE-encoded
    p = plan(*_folder(SCRIBBLE), Settings())
    assert [r.call for r in p.runs if r.component == "vae"] == ["decode"]
    # one report row of two pieces: the row embedding the conditioning costs that embedding more
    r = estimate_configs(*_folder(SCRIBBLE), Settings(steps=10))
    cn = r.component("controlnet")
    first, second = cn.tree.children
    assert cn.runs == 10 and (first.count, second.count) == (1, 1)
    assert first.find("controlnet_cond_embedding").total.macs("torch") > 0
    assert second.find("controlnet_cond_embedding").total.macs("torch") == 0
    assert first.total.params == second.total.params == cn.params


def test_refusals():
    with pytest.raises(OptionError, match="strength"):
        plan(*_folder(), Settings(strength=0.5))
    with pytest.raises(OptionError, match="frame index"):
        plan(*_folder(), Settings.make(conditioning_frames=17))
    with pytest.raises(ConfigError, match="guess mode"):
        plan(*_folder({**RGB, "global_pool_conditions": True}), Settings())
    assert plan(*_folder({**RGB, "global_pool_conditions": True}), Settings(guidance_scale=1.0)).passes == 1
    with pytest.raises(ResolutionError, match="addition fails"):
        plan(*_folder({**SCRIBBLE, "conditioning_embedding_out_channels": [16, 32]}), Settings())
    with pytest.raises(OptionError, match="--conditioning-frames does not apply"):
        plan({**AD.index()}, AD.components(), Settings.make(conditioning_frames=2))
    p = plan(*_folder(None), Settings())
    assert "controlnet is absent from this pipeline and was not counted" in p.notes


@pytest.mark.parametrize("simplified, guidance", [(False, 7.5), (True, 1.0)])
def test_real_call_runs_what_is_planned(simplified, guidance):
    pytest.importorskip("torch")
    from classic_call_support import Recorder, Tokenizer, diffusers_config, planned_runs

    import torch
    from diffusers import (AnimateDiffSparseControlNetPipeline, AutoencoderKL, DDIMScheduler, MotionAdapter,
                           SparseControlNetModel, UNet2DConditionModel)
    from PIL import Image
    from transformers import CLIPTextConfig, CLIPTextModel

    torch.manual_seed(0)
    # the diffusers tests' dummies (tests/pipelines/animatediff/test_animatediff_sparsectrl.py)
    unet = UNet2DConditionModel(block_out_channels=(8, 8), layers_per_block=2, sample_size=8, in_channels=4,
                                out_channels=4, down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
                                up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"), cross_attention_dim=8,
                                norm_num_groups=2)
    controlnet = SparseControlNetModel(block_out_channels=(8, 8), layers_per_block=2, in_channels=4,
                                       conditioning_channels=4 if simplified else 3,
                                       down_block_types=("CrossAttnDownBlockMotion", "DownBlockMotion"),
                                       cross_attention_dim=8, conditioning_embedding_out_channels=(8, 8),
                                       norm_num_groups=1, use_simplified_condition_embedding=simplified)
    vae = AutoencoderKL(block_out_channels=(8, 8), in_channels=3, out_channels=3, latent_channels=4,
                        down_block_types=["DownEncoderBlock2D"] * 2, up_block_types=["UpDecoderBlock2D"] * 2,
                        norm_num_groups=2)
    te_cfg = CLIPTextConfig(bos_token_id=0, eos_token_id=2, hidden_size=8, intermediate_size=37, num_attention_heads=4,
                            num_hidden_layers=1, pad_token_id=1, vocab_size=1000)
    adapter = MotionAdapter(block_out_channels=(8, 8), motion_layers_per_block=2, motion_norm_num_groups=2,
                            motion_num_attention_heads=4)
    pipe = AnimateDiffSparseControlNetPipeline(
        vae=vae, text_encoder=CLIPTextModel(te_cfg).eval(), tokenizer=Tokenizer(), unet=unet, motion_adapter=adapter,
        controlnet=controlnet, scheduler=DDIMScheduler(clip_sample=False), feature_extractor=None, image_encoder=None)
    rec = Recorder()
    rec.hook(pipe.text_encoder, "text_encoder")
    rec.hook(pipe.unet, "unet")
    rec.hook(pipe.controlnet, "controlnet")
    rec.hook(pipe.controlnet.controlnet_cond_embedding, "cond_embedding")
    rec.wrap(pipe.vae, "decode", "vae.decode")
    rec.wrap(pipe.vae, "encode", "vae.encode")
    pipe.set_progress_bar_config(disable=True)
    frames = 3
    with torch.no_grad():
        pipe(prompt="a squirrel", num_inference_steps=2, num_frames=frames, guidance_scale=guidance,
             conditioning_frames=[Image.new("RGB", (32, 32))] * 2, controlnet_frame_indices=[0, 2], output_type="pt")
    components = {"unet": diffusers_config(pipe.unet), "vae": diffusers_config(pipe.vae),
                  "controlnet": diffusers_config(pipe.controlnet),
                  "motion_adapter": diffusers_config(pipe.motion_adapter),
                  "text_encoder": {**te_cfg.to_dict(), "architectures": ["CLIPTextModel"]}}
    report = estimate_configs({"_class_name": PIPE}, components,
                              Settings.make(steps=2, num_frames=frames, guidance_scale=guidance, conditioning_frames=2))
    planned = planned_runs(report)
    rows = 1 + (guidance > 1)
    cn = report.component("controlnet")
    pieces = cn.tree.children if cn.tree.formula == "pieces" else (cn.tree,)
    assert rec.calls["controlnet"] == cn.runs * sum(p.count for p in pieces) == 2 * rows
    # the conditioning video (one for the batch) is embedded once per ControlNet call, on its frames
    assert rec.calls["cond_embedding"] == 2 * frames
    assert sum(p.count * (p.find("controlnet_cond_embedding").total.macs("torch") > 0) for p in pieces) * cn.runs == 2
    assert rec.calls["unet"] == planned["unet"] == 2 * rows
    assert rec.calls["text_encoder"] == planned["text_encoder"]
    assert rec.calls["vae.decode"] == planned["vae.decode"] == frames
    assert rec.calls.get("vae.encode", 0) == planned.get("vae.encode", 0) == (2 if simplified else 0)
    assert rec.shapes["controlnet"] == {(4, frames, cn.shape["latent_height"], cn.shape["latent_width"])}
