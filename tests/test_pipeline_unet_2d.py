"""The classic pipelines (``DDPMPipeline``, ``DDIMPipeline``, ``ConsistencyModelPipeline``,
``LDMSuperResolutionPipeline``, ``LDMTextToImagePipeline``), as diffusers 0.42.1 runs them: the measured fixtures
(the DDPM CIFAR-10 and consistency ImageNet-64 cards, tiny test components) against flopcalc, the plans' defaults,
sizes and refusals, and each plan against the real ``__call__`` on CPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import flopcalc
from card_support import runs_by_call
from fixture_support import assert_fixture_exact, fixtures_of
from flopcalc.engine.errors import OptionError
from flopcalc.engine.pipelines import Settings
from flopcalc.flops.estimate import estimate_configs

REPO = Path(__file__).resolve().parent.parent
CONFIGS = REPO / "validation" / "configs"


def _configs(folder: Path) -> dict[str, dict]:
    return {p.parent.name: json.loads(p.read_text()) for p in sorted(folder.glob("*/config.json"))}


@pytest.mark.parametrize("path", fixtures_of("ddpm-cifar10-32", "cd-imagenet64-l2", "ddpm-tiny",
                                             "consistency-class-cond-tiny", "ldm-super-resolution-tiny",
                                             "ldm-text2im-tiny"), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_fixture_is_exact(path):
    assert_fixture_exact(path)


def test_pixel_space_defaults():
    """DDPM: 1000 steps of the 35.7M UNet on a 32² image; the consistency model 1 step on 64² (its class label a
    table lookup); DDIM 50 steps. Sizes other than sample_size estimate the UNet there (the __call__ takes none)."""
    r = flopcalc.estimate("ddpm-cifar10-32")
    assert (r.pipeline, r.settings.height, r.settings.steps) == ("DDPMPipeline", 32, 1000)
    assert runs_by_call(r) == {"unet.forward": 1000}
    assert round(r.component("unet").params / 1e6, 1) == 35.7
    r = flopcalc.estimate("ddpm-cifar10-32", batch_size=4, steps=10, height=64, width=64)
    assert runs_by_call(r) == {"unet.forward": 40} and any("takes no size" in n for n in r.notes)
    r = flopcalc.estimate("cd-imagenet64-l2")
    assert (r.pipeline, r.settings.height, r.settings.steps, runs_by_call(r)) == (
        "ConsistencyModelPipeline", 64, 1, {"unet.forward": 1})
    r = flopcalc.estimate(str(CONFIGS / "ddpm-tiny"))
    assert (r.pipeline, r.settings.steps, runs_by_call(r)) == ("DDIMPipeline", 50, {"unet.forward": 50})
    for option in (dict(guidance_scale=2.0), dict(strength=0.5), dict(negative_prompt=True),
                   dict(num_images_per_prompt=2)):
        with pytest.raises(OptionError, match="does not apply to DDPMPipeline"):
            flopcalc.estimate("ddpm-cifar10-32", **option)


def test_unets_alone_pick_their_pipeline():
    assert estimate_configs(None, _configs(REPO / "model_cards" / "ddpm-cifar10-32"),
                            Settings()).pipeline.startswith("DDPMPipeline")
    assert estimate_configs(None, _configs(REPO / "model_cards" / "cd-imagenet64-l2"),
                            Settings()).pipeline.startswith("ConsistencyModelPipeline")
    assert estimate_configs(None, {"unet": _configs(CONFIGS / "ldm-super-resolution-tiny")["unet"]},
                            Settings()).pipeline.startswith("LDMSuperResolutionPipeline")


def test_latent_diffusion_plans():
    sr = CONFIGS / "ldm-super-resolution-tiny"
    r = flopcalc.estimate(str(sr), height=100, width=70)
    assert (r.settings.height, r.settings.width, r.settings.steps) == (96, 64, 100)
    assert runs_by_call(r) == {"unet.forward": 100, "vqvae.decode": 1}
    assert r.component("vqvae", "decode").shape == {"latent_height": 96, "latent_width": 64}
    t2i = CONFIGS / "ldm-text2im-tiny"
    r = flopcalc.estimate(str(t2i))
    assert (r.settings.height, r.settings.guidance_scale, r.passes) == (64, 1.0, 1)  # sample_size 32 × factor 2
    assert runs_by_call(r) == {"bert.forward": 1, "unet.forward": 50, "vqvae.decode": 1}
    assert r.component("unet").shape == {"latent_height": 8, "latent_width": 8, "text_len": 77}  # H/8, hard-coded
    r = flopcalc.estimate(str(t2i), guidance_scale=0.5, batch_size=2)  # != 1: guided
    assert runs_by_call(r) == {"bert.forward": 4, "unet.forward": 200, "vqvae.decode": 2}


# --------------------------------------------------------------------------- the real __call__


@pytest.mark.parametrize("name", ["DDPMPipeline", "DDIMPipeline", "ConsistencyModelPipeline",
                                  "LDMSuperResolutionPipeline", "LDMTextToImagePipeline"])
def test_the_plan_mirrors_the_real_call(name, rng):
    import numpy as np
    import torch
    from PIL import Image
    import diffusers
    from diffusers.pipelines.latent_diffusion.pipeline_latent_diffusion import LDMBertConfig, LDMBertModel
    from live_support import SEED
    from classic_call_support import Recorder, Tokenizer, planned_runs

    folder = {"DDPMPipeline": "ddpm-tiny", "DDIMPipeline": "ddpm-tiny",
              "ConsistencyModelPipeline": "consistency-class-cond-tiny",
              "LDMSuperResolutionPipeline": "ldm-super-resolution-tiny",
              "LDMTextToImagePipeline": "ldm-text2im-tiny"}[name]
    configs = _configs(CONFIGS / folder)
    torch.manual_seed(0)
    rec = Recorder()
    unet_cls = diffusers.UNet2DConditionModel if name == "LDMTextToImagePipeline" else diffusers.UNet2DModel
    unet = unet_cls.from_config(configs["unet"]).eval()
    rec.hook(unet, "unet")
    steps, batch = rng.randint(1, 3), rng.randint(1, 2)
    gen = torch.Generator().manual_seed(SEED % 2**31)
    settings = dict(steps=steps, batch_size=batch)
    if name in ("DDPMPipeline", "DDIMPipeline"):
        scheduler = diffusers.DDPMScheduler() if name == "DDPMPipeline" else diffusers.DDIMScheduler()
        pipe = getattr(diffusers, name)(unet=unet, scheduler=scheduler)
        call = dict(batch_size=batch, num_inference_steps=steps)
    elif name == "ConsistencyModelPipeline":
        pipe = diffusers.ConsistencyModelPipeline(unet=unet, scheduler=diffusers.CMStochasticIterativeScheduler(
            num_train_timesteps=40, sigma_min=0.002, sigma_max=80.0))
        call = dict(batch_size=batch, num_inference_steps=steps)
    elif name == "LDMSuperResolutionPipeline":
        vqvae = diffusers.VQModel.from_config(configs["vqvae"]).eval()
        rec.wrap(vqvae, "decode", "vqvae.decode")
        pipe = diffusers.LDMSuperResolutionPipeline(vqvae=vqvae, unet=unet, scheduler=diffusers.DDIMScheduler())
        h, w = rng.randint(32, 80), rng.randint(32, 80)
        call = dict(image=Image.fromarray(np.zeros((h, w, 3), dtype=np.uint8)), num_inference_steps=steps)
        settings.update(height=h, width=w, batch_size=1)
    else:
        vqvae = diffusers.AutoencoderKL.from_config(configs["vqvae"]).eval()
        rec.wrap(vqvae, "decode", "vqvae.decode")
        bert = LDMBertModel(LDMBertConfig(**{k: v for k, v in configs["bert"].items() if k != "architectures"})).eval()
        rec.hook(bert, "bert")
        pipe = diffusers.LDMTextToImagePipeline(vqvae=vqvae, bert=bert, tokenizer=Tokenizer(), unet=unet,
                                                scheduler=diffusers.DDIMScheduler())
        guidance = rng.choice([1.0, 2.0])
        h, w = 8 * rng.randint(2, 5), 8 * rng.randint(2, 5)
        call = dict(prompt=["a prompt"] * batch, height=h, width=w, num_inference_steps=steps, guidance_scale=guidance)
        settings.update(height=h, width=w, guidance_scale=guidance)
    pipe.set_progress_bar_config(disable=True)
    with torch.no_grad():
        pipe(generator=gen, output_type="np", **call)
    report = estimate_configs({"_class_name": name}, configs, Settings(**settings))
    where = f"seed {SEED}: {name} {settings}"
    assert planned_runs(report) == dict(rec.calls), where
    run = report.component("unet").shape
    assert {tuple(s[1:3]) for s in rec.shapes["unet"]} == {(run["latent_height"], run["latent_width"])}, where
