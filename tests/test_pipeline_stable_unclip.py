"""Stable unCLIP (``StableUnCLIPPipeline``, ``StableUnCLIPImg2ImgPipeline``), as diffusers 0.42.1 runs it: the
measured fixtures of the diffusers tests' tiny components against flopcalc, the plans' defaults and refusals, the
image normalizer's weights, and each plan against the real ``__call__`` on CPU (which component runs how often, on
what shape)."""

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
T2I = REPO / "validation" / "configs" / "stable-unclip-tiny"
I2I = REPO / "validation" / "configs" / "stable-unclip-img2img-tiny"


def _configs(folder: Path) -> dict[str, dict]:
    return {p.parent.name: json.loads(p.read_text()) for p in sorted(folder.glob("*/config.json"))}


@pytest.mark.parametrize("path", fixtures_of("stable-unclip-tiny", "stable-unclip-img2img-tiny"),
                         ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_fixture_is_exact(path):
    assert_fixture_exact(path)


def test_text_to_image_defaults_run_the_prior_then_the_unet():
    """20 UNet steps at guidance 10 (two passes), the prior's 25 steps at its guidance 4.0 (two passes, whatever
    --guidance-scale says), the size unet.sample_size × the VAE's factor (1 for the tests' one-level VAE)."""
    r = flopcalc.estimate(str(T2I))
    s = r.settings
    assert r.pipeline == "StableUnCLIPPipeline" and r.passes == 2
    assert (s.height, s.width, s.steps, s.guidance_scale) == (32, 32, 20, 10.0)
    assert runs_by_call(r) == {"prior_text_encoder.forward": 2, "prior.forward": 50, "text_encoder.forward": 2,
                               "unet.forward": 40, "vae.decode": 1}
    assert r.component("prior").shape == {"seq_len": 77}
    r = flopcalc.estimate(str(T2I), guidance_scale=1.0, batch_size=2, num_images_per_prompt=2, steps=3)
    assert runs_by_call(r) == {"prior_text_encoder.forward": 4, "prior.forward": 25 * 2 * 4,
                               "text_encoder.forward": 2, "unet.forward": 3 * 4, "vae.decode": 4}


def test_image_variation_encodes_the_image_once_and_refuses_strength():
    r = flopcalc.estimate(str(I2I), batch_size=2)
    assert r.pipeline == "StableUnCLIPImg2ImgPipeline"
    assert runs_by_call(r) == {"image_encoder.forward": 1, "text_encoder.forward": 4, "unet.forward": 20 * 2 * 2,
                               "vae.decode": 2}
    assert r.component("image_encoder").shape == {"height": 32, "width": 32}
    with pytest.raises(OptionError, match="--strength does not apply to StableUnCLIPImg2ImgPipeline"):
        flopcalc.estimate(str(I2I), strength=0.5)
    r = flopcalc.estimate(str(I2I), batch_size=2, num_images_per_prompt=2, guidance_scale=1.0)
    assert runs_by_call(r) == {"image_encoder.forward": 1, "text_encoder.forward": 2, "unet.forward": 20 * 4,
                               "vae.decode": 4}


def test_the_image_normalizer_holds_two_embedding_vectors():
    import torch
    from diffusers.pipelines.stable_diffusion.stable_unclip_image_normalizer import StableUnCLIPImageNormalizer

    with torch.device("meta"):
        real = StableUnCLIPImageNormalizer(embedding_dim=48)
    from flopcalc.engine.registry import RunShape, config_of, lookup

    tree = lookup("StableUnCLIPImageNormalizer", "forward").assemble(
        config_of({"_class_name": "StableUnCLIPImageNormalizer", "embedding_dim": 48}, component="image_normalizer"),
        RunShape())
    assert tree.total.params == sum(p.numel() for p in real.parameters()) == 96
    assert tree.total.macs("torch") == 0


def test_a_unet_without_sample_size_needs_a_size():
    comps = _configs(T2I)
    del comps["unet"]["sample_size"]
    with pytest.raises(OptionError, match="give --height and --width"):
        estimate_configs({"_class_name": "StableUnCLIPPipeline"}, comps, Settings())


# --------------------------------------------------------------------------- the real __call__


@pytest.mark.parametrize("name", ["StableUnCLIPPipeline", "StableUnCLIPImg2ImgPipeline"])
def test_the_plan_mirrors_the_real_call(name, rng):
    import numpy as np
    import torch
    from PIL import Image
    from diffusers import (AutoencoderKL, DDIMScheduler, DDPMScheduler, PriorTransformer, StableUnCLIPImg2ImgPipeline,
                           StableUnCLIPPipeline, UNet2DConditionModel)
    from diffusers.pipelines.stable_diffusion.stable_unclip_image_normalizer import StableUnCLIPImageNormalizer
    from transformers import (CLIPImageProcessor, CLIPTextConfig, CLIPTextModel, CLIPTextModelWithProjection,
                              CLIPVisionConfig, CLIPVisionModelWithProjection)
    from live_support import SEED
    from classic_call_support import Recorder, Tokenizer, planned_runs

    folder = T2I if name == "StableUnCLIPPipeline" else I2I
    configs = _configs(folder)
    torch.manual_seed(0)
    models = {"unet": UNet2DConditionModel.from_config(configs["unet"]),
              "vae": AutoencoderKL.from_config(configs["vae"]),
              "image_normalizer": StableUnCLIPImageNormalizer.from_config(configs["image_normalizer"]),
              "text_encoder": CLIPTextModel(CLIPTextConfig(**configs["text_encoder"]))}
    if name == "StableUnCLIPPipeline":
        models["prior"] = PriorTransformer.from_config(configs["prior"])
        models["prior_text_encoder"] = CLIPTextModelWithProjection(CLIPTextConfig(**configs["prior_text_encoder"]))
    else:
        models["image_encoder"] = CLIPVisionModelWithProjection(CLIPVisionConfig(**configs["image_encoder"]))
    rec = Recorder()
    for key in ("unet", "text_encoder", "prior", "prior_text_encoder", "image_encoder"):
        if key in models:
            models[key].eval()
            rec.hook(models[key], key)
    rec.wrap(models["vae"], "decode", "vae.decode")
    common = dict(image_normalizer=models["image_normalizer"], image_noising_scheduler=DDPMScheduler(),
                  tokenizer=Tokenizer(), text_encoder=models["text_encoder"], unet=models["unet"],
                  scheduler=DDIMScheduler(), vae=models["vae"])
    steps, guidance, batch = rng.randint(1, 2), rng.choice([1.0, 10.0]), rng.randint(1, 2)
    h, w = 8 * rng.randint(2, 5), 8 * rng.randint(2, 5)
    kwargs = dict(height=h, width=w, num_inference_steps=steps, guidance_scale=guidance, output_type="np",
                  generator=torch.Generator().manual_seed(SEED % 2**31))
    if name == "StableUnCLIPPipeline":
        pipe = StableUnCLIPPipeline(prior_tokenizer=Tokenizer(), prior_text_encoder=models["prior_text_encoder"],
                                    prior=models["prior"], prior_scheduler=DDPMScheduler(), **common)
        kwargs.update(prior_num_inference_steps=rng.randint(1, 2))
        nipp = rng.randint(1, 2)
        kwargs["num_images_per_prompt"] = nipp
    else:
        pipe = StableUnCLIPImg2ImgPipeline(feature_extractor=CLIPImageProcessor(crop_size=32, size=32),
                                           image_encoder=models["image_encoder"], **common)
        kwargs["image"] = Image.fromarray(np.zeros((40, 56, 3), dtype=np.uint8))
        nipp = rng.randint(1, 2)
        kwargs["num_images_per_prompt"] = nipp
    pipe.set_progress_bar_config(disable=True)
    with torch.no_grad():
        pipe(prompt=["a prompt"] * batch, **kwargs)
    report = estimate_configs({"_class_name": name}, configs,
                              Settings(height=h, width=w, steps=steps, guidance_scale=guidance, batch_size=batch,
                                       num_images_per_prompt=nipp))
    planned = planned_runs(report)
    if name == "StableUnCLIPPipeline":  # the plan runs the prior at its 25 default steps; the call ran fewer
        prior_steps = kwargs["prior_num_inference_steps"]
        assert planned["prior"] == 25 * 2 * batch * nipp
        planned["prior"] = prior_steps * 2 * batch * nipp
    where = f"seed {SEED}: {name} {h}×{w}, {steps} steps, guidance {guidance}, batch {batch}×{nipp}"
    assert planned == dict(rec.calls), where
    assert rec.shapes["unet"] == {(4, h, w)}, where
    assert rec.shapes["text_encoder"] == {(77,)}, where
    if name != "StableUnCLIPPipeline":
        assert rec.shapes["image_encoder"] == {(3, 32, 32)}, where
