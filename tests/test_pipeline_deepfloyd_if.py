"""DeepFloyd IF, as diffusers 0.42.1's ``pipelines/deepfloyd_if`` runs it: the measured fixtures (the IF-I-XL card's
T5 and UNet, the IF-II-L UNet, the diffusers tests' tiny stage I and II UNets) against flopcalc; the six plans'
defaults, the input image's ``resize``, the options and refusals; and each plan against the real ``__call__`` run
on CPU with tiny random components (which component runs how often, on what shape)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import flopcalc
from card_support import runs_by_call
from fixture_support import assert_fixture_exact, fixtures_of
from flopcalc.engine.errors import FlopcalcError, OptionError
from flopcalc.engine.pipelines import Settings
from flopcalc.engine.pipelines.deepfloyd_if import if_resize
from flopcalc.engine.settings import Counting
from flopcalc.flops.estimate import estimate_configs

REPO = Path(__file__).resolve().parent.parent
CARD = REPO / "model_cards" / "deepfloyd-if-i-xl"
IF_II = REPO / "validation" / "configs" / "if-ii-l-v1.0"
TINY = REPO / "validation" / "configs" / "if-tiny"
SR_TINY = REPO / "validation" / "configs" / "if-sr-tiny"


def _configs(folder: Path, *names: str) -> dict[str, dict]:
    return {n: json.loads((folder / n / "config.json").read_text()) for n in names if (folder / n).is_dir()}


@pytest.mark.parametrize("path", fixtures_of("deepfloyd-if-i-xl", "if-ii-l-v1.0", "if-tiny", "if-sr-tiny"),
                         ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_fixture_is_exact(path):
    assert_fixture_exact(path)


def test_stage_i_card_defaults():
    """IFPipeline: 64² (unet.sample_size), 100 steps, guidance 7.0; T5 on the prompt and "" (77 tokens); the UNet
    on the doubled batch; no VAE (the UNet's grid is the image's). IF-I-XL's UNet is 4.3B parameters."""
    r = flopcalc.estimate("deepfloyd-if-i-xl")
    s = r.settings
    assert r.pipeline == "IFPipeline" and r.passes == 2
    assert (s.height, s.width, s.steps, s.guidance_scale) == (64, 64, 100, 7.0)
    assert runs_by_call(r) == {"text_encoder.forward": 2, "unet.forward": 200}
    assert r.component("unet").shape == {"latent_height": 64, "latent_width": 64, "text_len": 77}
    assert r.component("text_encoder").shape == {"seq_len": 77}
    assert round(r.component("unet").params / 1e9, 2) == 4.30
    one = flopcalc.estimate("deepfloyd-if-i-xl", guidance_scale=1.0, batch_size=2, num_images_per_prompt=3,
                            steps=10, height=64, width=96)
    assert runs_by_call(one) == {"text_encoder.forward": 2, "unet.forward": 10 * 6}
    assert one.component("unet").shape["latent_width"] == 96


def test_strength_is_refused_where_call_takes_none():
    with pytest.raises(OptionError, match="--strength does not apply to IFPipeline.*IFImg2ImgPipeline"):
        flopcalc.estimate("deepfloyd-if-i-xl", strength=0.5)
    with pytest.raises(OptionError, match="--strength does not apply to IFSuperResolutionPipeline"):
        flopcalc.estimate(str(IF_II), strength=0.5, height=256, width=256)


def test_resize_rule():
    """``resize``: short side sample_size, long side round(size / 8 · aspect) · 8, half to even."""
    assert if_resize(512, 768, 64) == (64, 96)
    assert if_resize(768, 512, 64) == (96, 64)
    assert if_resize(64, 64, 64) == (64, 64)
    assert if_resize(100, 260, 64) == (64, 168)  # 8 · 2.6 = 20.8 → 21
    assert if_resize(200, 100, 64) == (128, 64)
    assert if_resize(100, 125, 64) == (64, 80)  # 8 · 1.25 = 10.0


def test_image_to_image_variants_on_the_card():
    comps = _configs(CARD, "text_encoder", "unet")
    r = estimate_configs({"_class_name": "IFImg2ImgPipeline"}, comps, Settings(height=512, width=768))
    assert (r.settings.height, r.settings.width, r.settings.steps, r.settings.strength) == (64, 96, 80, 0.7)
    assert r.settings.guidance_scale == 10.0
    assert runs_by_call(r) == {"text_encoder.forward": 2, "unet.forward": int(80 * 0.7) * 2}
    assert any("resized to 64×96" in n for n in r.notes)
    r = estimate_configs({"_class_name": "IFInpaintingPipeline"}, comps, Settings())
    assert (r.settings.steps, r.settings.strength) == (50, 1.0) and runs_by_call(r)["unet.forward"] == 100
    r = estimate_configs({"_class_name": "IFInpaintingPipeline"}, comps, Settings(strength=0.3, steps=10))
    assert runs_by_call(r)["unet.forward"] == 3 * 2
    with pytest.raises(FlopcalcError, match="no closed-form law"):
        estimate_configs({"_class_name": "IFImg2ImgPipeline"}, comps, Settings(counting=Counting(symbolic=True)))


def test_super_resolution_variants():
    """IF-II-L: 50 steps, guidance 4.0; its UNet config names no sample_size, so the size must be given (the
    real pipeline fails without one too); the SR image-to-image variants take the original image's resized size."""
    with pytest.raises(OptionError, match="give --height and --width"):
        flopcalc.estimate(str(IF_II))
    r = flopcalc.estimate(str(IF_II), height=256, width=256)
    assert r.pipeline == "IFSuperResolutionPipeline"
    assert (r.settings.steps, r.settings.guidance_scale) == (50, 4.0)
    assert runs_by_call(r) == {"unet.forward": 100}
    unet = _configs(IF_II, "unet")
    with pytest.raises(FlopcalcError, match="sample_size"):
        estimate_configs({"_class_name": "IFImg2ImgSuperResolutionPipeline"}, unet, Settings())
    sr = _configs(SR_TINY, "unet")
    r = estimate_configs({"_class_name": "IFImg2ImgSuperResolutionPipeline"}, sr, Settings(height=64, width=128))
    assert (r.settings.height, r.settings.width, r.settings.strength) == (32, 64, 0.8)
    assert runs_by_call(r) == {"unet.forward": 40 * 2}
    r = estimate_configs({"_class_name": "IFInpaintingSuperResolutionPipeline"}, sr, Settings())
    assert (r.settings.steps, r.settings.guidance_scale) == (100, 4.0) and runs_by_call(r) == {"unet.forward": 160}


def test_stage_unets_alone_pick_their_stage():
    r = estimate_configs(None, _configs(TINY, "unet"), Settings())
    assert r.pipeline.startswith("IFPipeline")
    r = estimate_configs(None, _configs(SR_TINY, "unet"), Settings())
    assert r.pipeline.startswith("IFSuperResolutionPipeline")


def test_a_layer_norm_cross_norm_is_refused():
    from flopcalc.engine.errors import UnknownArchitectureError

    unet = _configs(TINY, "unet")
    unet["unet"]["cross_attention_norm"] = "layer_norm"
    with pytest.raises(UnknownArchitectureError, match="cross_attention_norm"):
        estimate_configs({"_class_name": "IFPipeline"}, unet, Settings())


# --------------------------------------------------------------------------- the real __call__


def _pipeline(name: str, rng):
    """The pipeline ``name`` built from tiny components: the tests' stage I or II UNet, a 1-layer T5."""
    import torch
    from diffusers import DDPMScheduler, UNet2DConditionModel
    import diffusers
    from classic_call_support import Recorder, Tokenizer, diffusers_config, tiny_t5

    folder = SR_TINY if "SuperResolution" in name else TINY
    unet_cfg = json.loads((folder / "unet" / "config.json").read_text())
    torch.manual_seed(0)
    unet = UNet2DConditionModel.from_config(unet_cfg).eval()
    t5, t5_cfg = tiny_t5(32)
    rec = Recorder()
    rec.hook(unet, "unet")
    rec.hook(t5, "text_encoder")
    extra = {"image_noising_scheduler": DDPMScheduler()} if "SuperResolution" in name else {}
    pipe = getattr(diffusers, name)(tokenizer=Tokenizer(), text_encoder=t5, unet=unet, scheduler=DDPMScheduler(),
                                    safety_checker=None, feature_extractor=None, watermarker=None,
                                    requires_safety_checker=False, **extra)
    pipe.set_progress_bar_config(disable=True)
    return pipe, rec, {"unet": diffusers_config(unet), "text_encoder": t5_cfg}


def _pil(h: int, w: int):
    import numpy as np
    from PIL import Image

    return Image.fromarray(np.zeros((h, w, 3), dtype=np.uint8))


@pytest.mark.parametrize("name", ["IFPipeline", "IFImg2ImgPipeline", "IFInpaintingPipeline",
                                  "IFSuperResolutionPipeline", "IFImg2ImgSuperResolutionPipeline",
                                  "IFInpaintingSuperResolutionPipeline"])
def test_the_plan_mirrors_the_real_call(name, rng):
    import torch
    from classic_call_support import planned_runs
    from live_support import SEED

    pipe, rec, configs = _pipeline(name, rng)
    steps, guidance = rng.randint(1, 3), rng.choice([1.0, 4.0])
    h, w = 8 * rng.randint(2, 9), 8 * rng.randint(2, 9)  # the generated size, or the input image's (PIL)
    kwargs = dict(num_inference_steps=steps, guidance_scale=guidance, output_type="pt",
                  generator=torch.Generator().manual_seed(SEED % 2**31))
    strength = None
    if name != "IFPipeline" and name != "IFSuperResolutionPipeline":
        strength = rng.choice([0.5, 0.75, 1.0])
        kwargs["strength"] = strength
    if name == "IFPipeline":
        kwargs.update(height=h, width=w)
    elif name == "IFSuperResolutionPipeline":
        kwargs.update(height=h, width=w, image=torch.zeros(1, 3, 8, 8))
    elif name in ("IFImg2ImgPipeline", "IFInpaintingPipeline"):
        kwargs["image"] = _pil(h, w)
    else:
        kwargs.update(image=torch.zeros(1, 3, 8, 8), original_image=_pil(h, w))
    if "Inpainting" in name:
        kwargs["mask_image"] = _pil(h, w)
    with torch.no_grad():
        pipe(prompt="a prompt", **kwargs)
    report = estimate_configs({"_class_name": name}, configs,
                              Settings(height=h, width=w, steps=steps, guidance_scale=guidance, strength=strength))
    where = f"seed {SEED}: {name} {h}×{w}, {steps} steps, guidance {guidance}, strength {strength}"
    # a strength that keeps no step (int(steps · strength) = 0) plans the UNet 0 times and runs it never
    assert {k: v for k, v in planned_runs(report).items() if v} == dict(rec.calls), where
    s = report.settings
    channels = 6 if "SuperResolution" in name else 3
    assert rec.shapes.get("unet", {(channels, s.height, s.width)}) == {(channels, s.height, s.width)}, where
    assert rec.shapes["text_encoder"] == {(77,)}, where
