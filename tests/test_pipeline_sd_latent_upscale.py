"""Stable Diffusion x2 latent upscaler (``StableDiffusionLatentUpscalePipeline``), as diffusers 0.42.1 runs it: the
measured fixtures (the card's k-diffusion UNet and CLIP, the diffusers tests' tiny components) against flopcalc, the
plan's defaults, sizes and refusals, and the plan against the real ``__call__`` on CPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import flopcalc
from card_support import runs_by_call
from fixture_support import assert_fixture_exact, fixtures_of
from flopcalc.engine.errors import OptionError, ResolutionError
from flopcalc.engine.pipelines import Settings
from flopcalc.flops.estimate import estimate_configs

REPO = Path(__file__).resolve().parent.parent
TINY = REPO / "validation" / "configs" / "sd-x2-latent-upscaler-tiny"


@pytest.mark.parametrize("path", fixtures_of("sd-x2-latent-upscaler", "sd-x2-latent-upscaler-tiny"),
                         ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_fixture_is_exact(path):
    assert_fixture_exact(path)


def test_card_defaults():
    """75 steps at guidance 9 (two passes) on the 1024² output's 128² latent; the card's VAE config is missing,
    and named so."""
    r = flopcalc.estimate("sd-x2-latent-upscaler")
    s = r.settings
    assert (r.pipeline, s.height, s.width, s.steps, s.guidance_scale) == (
        "StableDiffusionLatentUpscalePipeline", 1024, 1024, 75, 9.0)
    assert runs_by_call(r) == {"text_encoder.forward": 2, "unet.forward": 150}
    assert r.component("unet").shape == {"latent_height": 128, "latent_width": 128, "text_len": 77}
    assert any("vae" in n and ("absent" in n or "not there" in n) for n in r.notes)


def test_tiny_pipeline_encodes_the_half_size_input():
    r = flopcalc.estimate(str(TINY), height=256, width=384, guidance_scale=0, batch_size=2, steps=4)
    assert runs_by_call(r) == {"text_encoder.forward": 2, "unet.forward": 4 * 2, "vae.encode": 2, "vae.decode": 2}
    assert r.component("vae", "encode").shape == {"height": 128, "width": 192}
    assert r.component("unet").shape["latent_height"] == 32
    with pytest.raises(ResolutionError, match="multiple of 64"):
        flopcalc.estimate(str(TINY), height=96, width=128)
    with pytest.raises(OptionError, match="--strength does not apply"):
        flopcalc.estimate(str(TINY), strength=0.5)


def test_the_plan_mirrors_the_real_call(rng):
    import numpy as np
    import torch
    from PIL import Image
    from diffusers import AutoencoderKL, EulerDiscreteScheduler, StableDiffusionLatentUpscalePipeline, UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel
    from live_support import SEED
    from classic_call_support import Recorder, Tokenizer, planned_runs

    configs = {p.parent.name: json.loads(p.read_text()) for p in TINY.glob("*/config.json")}
    torch.manual_seed(0)
    unet = UNet2DConditionModel.from_config(configs["unet"]).eval()
    vae = AutoencoderKL.from_config(configs["vae"]).eval()
    text = CLIPTextModel(CLIPTextConfig(**configs["text_encoder"])).eval()
    rec = Recorder()
    rec.hook(unet, "unet")
    rec.hook(text, "text_encoder")
    rec.wrap(vae, "encode", "vae.encode")
    rec.wrap(vae, "decode", "vae.decode")
    pipe = StableDiffusionLatentUpscalePipeline(vae=vae, text_encoder=text, tokenizer=Tokenizer(), unet=unet,
                                                scheduler=EulerDiscreteScheduler(prediction_type="sample"))
    pipe.set_progress_bar_config(disable=True)
    steps, guidance, batch = rng.randint(1, 2), rng.choice([0.0, 1.0, 9.0]), rng.randint(1, 2)
    h, w = 128 * rng.randint(1, 2), 128 * rng.randint(1, 2)  # the input image; the output is twice it
    image = Image.fromarray(np.zeros((h, w, 3), dtype=np.uint8))
    with torch.no_grad():
        pipe(prompt=["a prompt"] * batch, image=[image] * batch, num_inference_steps=steps, guidance_scale=guidance,
             output_type="np", generator=torch.Generator().manual_seed(SEED % 2**31))
    report = estimate_configs({"_class_name": "StableDiffusionLatentUpscalePipeline"}, configs,
                              Settings(height=2 * h, width=2 * w, steps=steps, guidance_scale=guidance,
                                       batch_size=batch))
    where = f"seed {SEED}: input {h}×{w}, {steps} steps, guidance {guidance}, batch {batch}"
    assert planned_runs(report) == dict(rec.calls), where
    assert rec.shapes["unet"] == {(8, 2 * h // 8, 2 * w // 8)}, where
    assert rec.shapes["vae.encode"] == {(3, h, w)}, where
