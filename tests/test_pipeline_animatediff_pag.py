"""``AnimateDiffPAGPipeline`` (diffusers 0.42.1 ``pipelines/pag/pipeline_pag_sd_animatediff.py``): AnimateDiff's plan
with perturbed-attention guidance. The fixtures (the animatediff-v1-5-3 UNet's whole 3-row PAG call) equal flopcalc
exactly; the defaults are the pipeline's signatures' (``"mid_block.*attn1"`` spelled as simple ids); and the real
``__call__`` on tiny random components counts, per component, the rows flopcalc plans (the UNet on
``[uncond, cond, perturbed]`` per step, the text encoder per prompt and negative, one decode per frame)."""

from __future__ import annotations

import inspect

import pytest
from card_support import Card
from fixture_support import assert_fixture_exact, fixtures_of

from flopcalc.engine.errors import OptionError
from flopcalc.engine.perturbed_attention import PerturbedAttention
from flopcalc.engine.pipelines import Settings
from flopcalc.engine.pipelines.dispatch import plan

AD = Card("animatediff-v1-5-3")
PIPE = "AnimateDiffPAGPipeline"


def _index() -> dict:
    return {**AD.index(), "_class_name": PIPE}


@pytest.mark.parametrize("path", fixtures_of("animatediff-v1-5-3-pag"), ids=lambda p: p.stem)
def test_fixtures_are_exact(path):
    assert_fixture_exact(path)


def test_defaults_and_the_perturbed_rows():
    p = plan(_index(), AD.components(), Settings())
    s = p.settings
    assert (s.height, s.width, s.num_frames, s.steps, s.guidance_scale, s.pag_scale) == (512, 512, 16, 50, 7.5, 3.0)
    # v1-5-3 has no motion mid block: "mid_block.*attn1" is the mid block's spatial attn1 alone
    assert s.pag_applied_layers == ("mid_block.attentions",) and p.passes == 2
    unet = [r for r in p.runs if r.component == "unet"]
    assert [(r.runs, r.shape.perturbed) for r in unet] == [
        (100, PerturbedAttention(("mid_block.attentions",), False)),
        (50, PerturbedAttention(("mid_block.attentions",), True))]
    assert all(r.shape.latent_frames == 16 for r in unet)
    # pag_scale 0: AnimateDiffPipeline's plan
    off = plan({**AD.index(), "_class_name": "AnimateDiffPipeline"}, AD.components(), Settings())
    zero = plan(_index(), AD.components(), Settings.make(pag_scale=0))
    assert zero.runs == off.runs and zero.passes == off.passes


def test_default_layers_with_a_motion_mid_block():
    from flopcalc.engine.pipelines.pag import _animatediff_mid_attn1

    unet = {**AD.components()["unet"], "use_motion_mid_block": True, "temporal_transformer_layers_per_mid_block": 2}
    assert _animatediff_mid_attn1({"unet": unet}) == (
        "mid_block.attentions", "mid_block.motion_modules.0.transformer_blocks.0.attn1",
        "mid_block.motion_modules.0.transformer_blocks.1.attn1")


def test_signatures():
    from diffusers import AnimateDiffPAGPipeline

    init = inspect.signature(AnimateDiffPAGPipeline.__init__).parameters
    call = inspect.signature(AnimateDiffPAGPipeline.__call__).parameters
    assert init["pag_applied_layers"].default == "mid_block.*attn1"
    s = plan(_index(), AD.components(), Settings()).settings
    assert (call["num_inference_steps"].default, call["guidance_scale"].default, call["num_frames"].default,
            call["pag_scale"].default) == (s.steps, s.guidance_scale, s.num_frames, s.pag_scale)


def test_refusals():
    from flopcalc.flops.estimate import estimate_configs

    with pytest.raises(OptionError, match="matches no self-attention layer"):  # counted as diffusers refuses it
        estimate_configs(_index(), AD.components(), Settings.make(pag_applied_layers=("nowhere",)))
    # a motion module's attn2 is a self-attention too: PAG may perturb it
    r = estimate_configs(_index(), AD.components(), Settings.make(pag_applied_layers=("motion_modules.0.transformer_blocks.0.attn2",)))
    original, perturbed = r.component("unet").tree.children
    assert perturbed.find("down_blocks.0.motion_modules.0.transformer_blocks.0.attn2").formula == "identity_attention"
    assert original.find("down_blocks.0.motion_modules.0.transformer_blocks.0.attn2").formula != "identity_attention"
    with pytest.raises(OptionError, match="strength"):
        plan(_index(), AD.components(), Settings(strength=0.5))


@pytest.mark.parametrize("guidance, pag_scale", [(7.5, 3.0), (1.0, 3.0)])
def test_real_call_runs_what_is_planned(guidance, pag_scale):
    pytest.importorskip("torch")
    from classic_call_support import Recorder, Tokenizer, diffusers_config, planned_runs

    import torch
    from diffusers import AnimateDiffPAGPipeline, AutoencoderKL, DDIMScheduler, MotionAdapter, UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel

    from flopcalc.flops.estimate import estimate_configs

    torch.manual_seed(0)
    # the diffusers tests' dummies (tests/pipelines/pag/test_pag_animatediff.py)
    unet = UNet2DConditionModel(block_out_channels=(8, 8), layers_per_block=2, sample_size=8, in_channels=4,
                                out_channels=4, down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
                                up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"), cross_attention_dim=8,
                                norm_num_groups=2)
    vae = AutoencoderKL(block_out_channels=(8, 8), in_channels=3, out_channels=3, latent_channels=4,
                        down_block_types=["DownEncoderBlock2D"] * 2, up_block_types=["UpDecoderBlock2D"] * 2,
                        norm_num_groups=2)
    te_cfg = CLIPTextConfig(bos_token_id=0, eos_token_id=2, hidden_size=8, intermediate_size=37, num_attention_heads=4,
                            num_hidden_layers=1, pad_token_id=1, vocab_size=1000)
    adapter = MotionAdapter(block_out_channels=(8, 8), motion_layers_per_block=2, motion_norm_num_groups=2,
                            motion_num_attention_heads=4)
    pipe = AnimateDiffPAGPipeline(vae=vae, text_encoder=CLIPTextModel(te_cfg).eval(), tokenizer=Tokenizer(),
                                  unet=unet, motion_adapter=adapter, scheduler=DDIMScheduler(clip_sample=False),
                                  feature_extractor=None, image_encoder=None)
    rec = Recorder()
    rec.hook(pipe.text_encoder, "text_encoder")
    rec.hook(pipe.unet, "unet")
    rec.wrap(pipe.vae, "decode", "vae.decode")
    pipe.set_progress_bar_config(disable=True)
    with torch.no_grad():
        pipe(prompt="a squirrel", num_inference_steps=2, num_frames=3, guidance_scale=guidance, pag_scale=pag_scale,
             output_type="pt")
    components = {"unet": diffusers_config(pipe.unet), "vae": diffusers_config(pipe.vae),
                  "motion_adapter": diffusers_config(pipe.motion_adapter),
                  "text_encoder": {**te_cfg.to_dict(), "architectures": ["CLIPTextModel"]}}
    report = estimate_configs({"_class_name": PIPE}, components,
                              Settings.make(steps=2, num_frames=3, guidance_scale=guidance, pag_scale=pag_scale))
    planned = planned_runs(report)
    unet = report.component("unet")  # one batched call per step: its pieces are the original and perturbed rows
    rows = unet.runs * (sum(p.count for p in unet.tree.children) if unet.tree.formula == "pieces" else 1)
    assert rec.calls["unet"] == rows == 2 * (1 + (guidance > 1) + (pag_scale > 0))
    assert rec.calls["text_encoder"] == planned["text_encoder"]
    assert rec.calls["vae.decode"] == planned["vae.decode"] == 3
    (unet_shape,) = rec.shapes["unet"]
    assert unet_shape == (4, 3, unet.shape["latent_height"], unet.shape["latent_width"])  # (C, F, h, w)
