"""SDXL ControlNet-Union pipelines (``StableDiffusionXLControlNetUnion{,Img2Img,Inpaint}Pipeline``), hand-checked
against diffusers 0.42.1's ``__call__`` / ``get_timesteps``. No torch needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from card_support import Card

import flopcalc
from flopcalc.engine.errors import ConfigError, FlopcalcError
from flopcalc.flops.estimate import estimate_configs
from flopcalc.engine.pipelines import Settings
from flopcalc.engine.pipelines.dispatch import plan

REPO = Path(__file__).resolve().parent.parent
SDXL = Card("sdxl-base")
FOLDER = REPO / "validation" / "configs" / "controlnet-union-sdxl-promax"
UNION = json.loads((FOLDER / "controlnet" / "config.json").read_text())


def _plan(pipeline: str, controlnet: dict = UNION, **settings):
    comps = {**SDXL.components(), "controlnet": controlnet}
    return plan({**SDXL.index(), "_class_name": pipeline}, comps, Settings(**settings))


def _runs(p) -> dict[str, int]:
    return {f"{r.component}.{r.call}": r.runs for r in p.runs}


def test_text_to_image_defaults():
    p = _plan("StableDiffusionXLControlNetUnionPipeline")
    s = p.settings
    assert (s.height, s.width, s.steps, s.guidance_scale) == (1024, 1024, 50, 5.0)
    # no negative prompt: zero embeddings, encoders once; the union on the doubled CFG batch every step
    assert _runs(p) == {"text_encoder.forward": 1, "text_encoder_2.forward": 1, "controlnet.forward": 100,
                        "unet.forward": 100, "vae.decode": 1}
    cn = next(r for r in p.runs if r.component == "controlnet")
    assert (cn.role, cn.shape.latent_height, cn.shape.text_len) == ("controlnet", 128, 77)
    # guess mode (global_pool_conditions): the conditional half only
    pooled = _plan("StableDiffusionXLControlNetUnionPipeline", {**UNION, "global_pool_conditions": True})
    assert _runs(pooled)["controlnet.forward"] == 50


def test_img2img_defaults_floor_the_steps():
    p = _plan("StableDiffusionXLControlNetUnionImg2ImgPipeline", steps=28, batch_size=2)
    assert p.settings.strength == 0.8
    # int(28 × 0.8) = 22 kept steps × 2 passes × 2 images; the input image encoded once per prompt
    assert _runs(p) == {"text_encoder.forward": 2, "text_encoder_2.forward": 2, "vae.encode": 2,
                        "controlnet.forward": 22 * 2 * 2, "unet.forward": 22 * 2 * 2, "vae.decode": 2}


def test_inpaint_defaults_encode_image_and_masked_image():
    p = _plan("StableDiffusionXLControlNetUnionInpaintPipeline")
    assert (p.settings.strength, p.settings.guidance_scale) == (0.9999, 5.0)
    assert _runs(p) == {"text_encoder.forward": 1, "text_encoder_2.forward": 1, "vae.encode": 2,
                        "controlnet.forward": 98, "unet.forward": 98, "vae.decode": 1}


def test_inpaint_refuses_a_nine_channel_unet():
    comps = {**SDXL.components(), "controlnet": UNION, "unet": {**SDXL.config("unet"), "in_channels": 9}}
    with pytest.raises(ConfigError, match="4-channel UNet only"):
        plan({**SDXL.index(), "_class_name": "StableDiffusionXLControlNetUnionInpaintPipeline"}, comps, Settings())


def test_estimate_equals_the_fixture():
    r = flopcalc.estimate(str(FOLDER), height=768, width=1344)
    fx = json.loads((REPO / "validation" / "fixtures" / "controlnet-union-sdxl-promax" /
                     "controlnet-768x1344.json").read_text())
    assert r.pipeline == "StableDiffusionXLControlNetUnionPipeline"
    assert 2 * r.component("controlnet").macs_per_run == fx["torch"]["flops"]
    assert r.component("controlnet").params == fx["params"]


def test_a_union_without_addition_time_embed_dim_is_refused():
    with pytest.raises(FlopcalcError, match="addition_time_embed_dim"):
        estimate_configs({"_class_name": "StableDiffusionXLControlNetUnionPipeline"},
                                      {"controlnet": {**UNION, "addition_time_embed_dim": None,
                                                      "addition_embed_type": None}}, Settings())


def test_the_law_matches_the_exact_count():
    from flopcalc.flops.symbolic import symbolic_estimate

    law = symbolic_estimate(str(FOLDER))
    exact = flopcalc.estimate(str(FOLDER), height=768, width=512, steps=20, batch_size=2)
    assert law.at(H=768, W=512, S=20, B=2, P=2) == exact.flops
