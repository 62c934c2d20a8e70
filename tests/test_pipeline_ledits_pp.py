"""LEDITS++ (``LEditsPPPipelineStableDiffusion``, ``LEditsPPPipelineStableDiffusionXL``), as diffusers 0.42.1 runs
one edit (``invert`` then ``__call__``): the measured fixtures of the diffusers tests' tiny components, the plans'
defaults, options and refusals, the SD 1.5 card's components under the LEDITS++ index, and each plan against the real
``invert`` + ``__call__`` on CPU (which component runs how often, on what shape)."""

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
SD = REPO / "validation" / "configs" / "ledits-pp-sd-tiny"
SDXL = REPO / "validation" / "configs" / "ledits-pp-sdxl-tiny"
SD15 = REPO / "model_cards" / "sd1.5"


def _configs(folder: Path) -> dict[str, dict]:
    return {p.parent.name: json.loads(p.read_text()) for p in sorted(folder.glob("*/config.json"))
            if p.parent.name in ("unet", "vae", "text_encoder", "text_encoder_2")}


@pytest.mark.parametrize("path", fixtures_of("ledits-pp-sd-tiny", "ledits-pp-sdxl-tiny"),
                         ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_fixture_is_exact(path):
    assert_fixture_exact(path)


def test_sd_defaults_are_the_inversion_and_a_reconstruction():
    """30 inversion steps at source guidance 3.5 (the empty source prompt is encoded, the UNet runs once per step),
    then __call__ without editing prompts (diffusers' default): one more UNet pass per step; encode once, decode
    twice (the inversion's reconstruction and the result)."""
    r = estimate_configs({"_class_name": "LEditsPPPipelineStableDiffusion"}, _configs(SD15), Settings())
    s = r.settings
    assert (s.height, s.width, s.steps, s.guidance_scale) == (512, 512, 30, 3.5)
    assert runs_by_call(r) == {"text_encoder.forward": 3, "unet.forward": 60, "vae.encode": 1, "vae.decode": 2}
    assert r.component("unet").shape == {"latent_height": 64, "latent_width": 64, "text_len": 77}


def test_editing_prompts_and_a_source_prompt():
    r = flopcalc.estimate(str(SD), editing_prompts=3, source_prompt=1, batch_size=2, steps=10)
    assert r.passes == 4
    assert runs_by_call(r) == {"text_encoder.forward": 2 + 2 + 2 + 3 * 2, "unet.forward": 10 * 2 * (2 + 1 + 3),
                               "vae.encode": 2, "vae.decode": 4}
    r = flopcalc.estimate(str(SDXL), editing_prompts=2)
    assert (r.settings.steps, r.settings.height) == (50, 64)
    assert runs_by_call(r) == {"text_encoder.forward": 1 + 1 + 2, "text_encoder_2.forward": 4,
                               "unet.forward": 50 * (1 + 1 + 2), "vae.encode": 1, "vae.decode": 2}
    r = flopcalc.estimate(str(SDXL), editing_prompts=1, source_prompt=1, steps=5)
    assert runs_by_call(r)["text_encoder.forward"] == 2 + 2 and runs_by_call(r)["unet.forward"] == 5 * (2 + 2)


def test_refusals():
    with pytest.raises(OptionError, match="--strength does not apply"):
        flopcalc.estimate(str(SD), strength=0.5)
    with pytest.raises(OptionError, match="num_images_per_prompt = 1"):
        flopcalc.estimate(str(SD), num_images_per_prompt=2)
    with pytest.raises(OptionError, match="fails"):
        flopcalc.estimate(str(SD), source_prompt=1, guidance_scale=1.0)
    with pytest.raises(OptionError, match="--batch-size does not apply"):
        flopcalc.estimate(str(SDXL), batch_size=2)
    with pytest.raises(ResolutionError, match="multiple of 32"):
        flopcalc.estimate(str(SD), height=48, width=64)
    with pytest.raises(OptionError, match="--editing-prompts does not apply"):
        flopcalc.estimate("sd1.5", editing_prompts=1)


@pytest.mark.parametrize("xl", [False, True], ids=["sd", "sdxl"])
def test_the_plan_mirrors_the_real_invert_and_call(xl, rng):
    import numpy as np
    import torch
    from PIL import Image
    from diffusers import (AutoencoderKL, DPMSolverMultistepScheduler, LEditsPPPipelineStableDiffusion,
                           LEditsPPPipelineStableDiffusionXL, UNet2DConditionModel)
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTextModelWithProjection
    from live_support import SEED
    from classic_call_support import Recorder, Tokenizer, planned_runs

    folder = SDXL if xl else SD
    configs = _configs(folder)
    torch.manual_seed(0)
    models = {"unet": UNet2DConditionModel.from_config(configs["unet"]).eval(),
              "vae": AutoencoderKL.from_config(configs["vae"]).eval(),
              "text_encoder": CLIPTextModel(CLIPTextConfig(**configs["text_encoder"])).eval()}
    if xl:
        models["text_encoder_2"] = CLIPTextModelWithProjection(CLIPTextConfig(**configs["text_encoder_2"])).eval()
    rec = Recorder()
    for key in ("unet", "text_encoder", "text_encoder_2"):
        if key in models:
            rec.hook(models[key], key)
    rec.wrap(models["vae"], "encode", "vae.encode")
    rec.wrap(models["vae"], "decode", "vae.decode")
    scheduler = DPMSolverMultistepScheduler(algorithm_type="sde-dpmsolver++", solver_order=2)
    if xl:
        pipe = LEditsPPPipelineStableDiffusionXL(tokenizer=Tokenizer(), tokenizer_2=Tokenizer(), scheduler=scheduler,
                                                 image_encoder=None, feature_extractor=None, **models)
    else:
        pipe = LEditsPPPipelineStableDiffusion(tokenizer=Tokenizer(), scheduler=scheduler, safety_checker=None,
                                               feature_extractor=None, requires_safety_checker=False, **models)
    pipe.set_progress_bar_config(disable=True)
    steps, k, source = rng.randint(1, 2), rng.randint(0, 2), rng.randint(0, 1)
    batch = 1 if xl else rng.randint(1, 2)
    h, w = 32 * rng.randint(1, 2), 32 * rng.randint(1, 2)
    images = [Image.fromarray(np.zeros((h, w, 3), dtype=np.uint8))] * batch
    gen = torch.Generator().manual_seed(SEED % 2**31)
    with torch.no_grad():
        pipe.invert(image=images, source_prompt="a photo" if source else "", num_inversion_steps=steps,
                    generator=gen)
        pipe(editing_prompt=["glasses", "sunshine", "hat"][:k] or None, output_type="np", generator=gen)
    report = estimate_configs({"_class_name": type(pipe).__name__}, configs,
                              Settings(height=h, width=w, steps=steps, batch_size=batch).with_options(
                                  editing_prompts=k, source_prompt=source))
    where = f"seed {SEED}: {type(pipe).__name__} {h}×{w}, {steps} steps, {k} edits, source {source}, batch {batch}"
    assert planned_runs(report) == dict(rec.calls), where
    f = 2  # the tiny VAE's two levels
    assert rec.shapes["unet"] == {(4, h // f, w // f)}, where
    assert rec.shapes["text_encoder"] == {(77,)}, where
