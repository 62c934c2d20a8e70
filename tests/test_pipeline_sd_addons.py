"""Stable Diffusion add-ons: inpainting (SD, SDXL, SD3), ControlNet and T2I-Adapter (SD, SDXL), the SD/SDXL img2img step rule,
hand-checked against diffusers 0.42.1's ``__call__`` / ``get_timesteps``. No torch needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from card_support import Card

import flopcalc
from flopcalc.engine.errors import ConfigError, FlopcalcError
from flopcalc.engine.pipelines import Settings
from flopcalc.engine.pipelines.base import denoising_steps, denoising_steps_floored
from flopcalc.engine.pipelines.dispatch import plan

REPO = Path(__file__).resolve().parent.parent
SD2 = Card("sd2-inpainting")
SDXL = Card("sdxl-base")
SD3 = Card("sd3-medium")


def _runs(p) -> dict[str, int]:
    return {f"{r.component}.{r.call}": r.runs for r in p.runs}


def _config(name: str) -> dict:
    return json.loads((REPO / "validation" / "configs" / name / "config.json").read_text())


def _index(card: Card, pipeline: str) -> dict:
    return {**card.index(), "_class_name": pipeline}


def test_get_timesteps_rules():
    # SD/SDXL img2img/inpaint: init_timestep = min(int(28 * 0.3), 28) = 8 -> 8 steps;
    # FLUX/SD3: init_timestep = 8.4, t_start = int(19.6) = 19 -> 9 steps
    assert denoising_steps_floored(28, 0.3) == 8 and denoising_steps(28, 0.3) == 9
    assert denoising_steps_floored(50, 0.9999) == 49 and denoising_steps_floored(50, 1.0) == 50
    assert denoising_steps_floored(50, None) == 50
    assert denoising_steps_floored(3, 0.2) == 0


def test_sd_and_sdxl_img2img_floor_the_steps():
    for card in ("sd1.5", "sdxl-base"):
        r = flopcalc.estimate(card, strength=0.3, steps=28)
        assert r.component("unet").runs == 8 * 2, card  # 8 kept steps × CFG
    assert flopcalc.estimate("sd3-medium", strength=0.3, steps=28).component("transformer").runs == 9 * 2
    assert flopcalc.estimate("kandinsky-3", strength=0.3, steps=28).component("unet").runs == 8 * 2
    # KolorsImg2ImgPipeline and CogVideoXVideoToVideoPipeline floor too (their get_timesteps)
    assert flopcalc.estimate("kolors", strength=0.3, steps=28).component("unet").runs == 8 * 2
    assert flopcalc.estimate("cogvideox-2b", strength=0.3, steps=28).component("transformer").runs == 8 * 2


def test_sd2_inpainting_card_defaults():
    r = flopcalc.estimate("sd2-inpainting")
    s = r.settings
    assert r.pipeline == "StableDiffusionInpaintPipeline"
    assert (s.height, s.width, s.steps, s.guidance_scale, s.strength) == (512, 512, 50, 7.5, 1.0)
    # strength 1 and a 9-channel UNet: only the masked image is encoded (prepare_mask_latents)
    assert {f"{c.component}.{c.call}": c.runs for c in r.components} == {
        "text_encoder.forward": 2, "unet.forward": 100, "vae.encode": 1, "vae.decode": 1}
    assert r.component("unet").shape == {"latent_height": 64, "latent_width": 64, "text_len": 77}


def test_sd_inpaint_strength_below_one_also_encodes_the_image():
    p = plan(SD2.index(), SD2.components(), Settings(strength=0.5, steps=30, batch_size=3))
    assert _runs(p) == {"text_encoder.forward": 6, "unet.forward": 15 * 2 * 3, "vae.encode": 3 * 2,
                        "vae.decode": 3}


def test_sd_inpaint_with_a_plain_unet_encodes_the_image_too():
    p = plan(_index(Card("sd1.5"), "StableDiffusionInpaintPipeline"), Card("sd1.5").components(), Settings())
    assert _runs(p)["vae.encode"] == 2  # return_image_latents (4-channel UNet) + the masked image


def test_sdxl_inpaint_defaults_run_49_steps():
    comps = {**SDXL.components(), "unet": _config("sdxl-inpainting-unet")}
    p = plan(_index(SDXL, "StableDiffusionXLInpaintPipeline"), comps, Settings())
    s = p.settings
    assert p.pipeline == "StableDiffusionXLInpaintPipeline"
    assert (s.height, s.width, s.steps, s.guidance_scale, s.strength) == (1024, 1024, 50, 7.5, 0.9999)
    # int(50 × 0.9999) = 49 steps × 2 passes; strength < 1: image + masked image encoded;
    # no negative prompt: zero embeddings (force_zeros_for_empty_prompt), encoders once
    assert _runs(p) == {"text_encoder.forward": 1, "text_encoder_2.forward": 1, "unet.forward": 98,
                        "vae.encode": 2, "vae.decode": 1}


def test_sd3_inpaint_defaults():
    p = plan(_index(SD3, "StableDiffusion3InpaintPipeline"), SD3.components(), Settings())
    s = p.settings
    assert (s.height, s.width, s.steps, s.guidance_scale, s.strength, s.max_sequence_length) == (
        1024, 1024, 50, 7.0, 0.6, 256)
    # init_timestep = 30.0, t_start = 20 -> 30 steps × 2; 16-channel transformer: image + masked image
    assert _runs(p) == {"text_encoder.forward": 2, "text_encoder_2.forward": 2, "text_encoder_3.forward": 2,
                        "transformer.forward": 60, "vae.encode": 2, "vae.decode": 1}


def test_a_denoiser_of_another_width_is_refused():
    comps = {**SD2.components(), "unet": {**SD2.config("unet"), "in_channels": 8}}
    with pytest.raises(ConfigError, match="in_channels is 8"):
        plan(SD2.index(), comps, Settings())


def test_the_law_at_strength_one_and_at_fixed_steps_below():
    from flopcalc.flops.symbolic import symbolic_estimate

    law = symbolic_estimate("sd2-inpainting")
    exact = flopcalc.estimate("sd2-inpainting", height=640, width=384, steps=20, batch_size=2)
    assert law.at(H=640, W=384, S=20, B=2, P=2) == exact.flops
    # below strength 1 the kept steps, int(S·strength), have no closed form: the law holds at its steps
    law = symbolic_estimate("sd2-inpainting", strength=0.5, steps=30)
    unet = next(c for c in law.components if c.component == "unet")
    assert "S" not in {str(x) for x in unet.runs.free_symbols}
    exact = flopcalc.estimate("sd2-inpainting", strength=0.5, steps=30, height=640, width=384, batch_size=2)
    assert law.at(H=640, W=384, B=2, P=2, S=30) == exact.flops


# --------------------------------------------------------------------------- ControlNet

def _controlnet(case: str) -> dict:
    return json.loads((REPO / "validation" / "configs" / case / "controlnet" / "config.json").read_text())


def test_sd_controlnet_runs_per_step_and_pass():
    comps = {**Card("sd1.5").components(), "controlnet": _controlnet("sd-controlnet-canny")}
    p = plan({"_class_name": "StableDiffusionControlNetPipeline"}, comps, Settings(steps=30))
    s = p.settings
    assert (s.height, s.width, s.guidance_scale) == (512, 512, 7.5)
    # guess_mode off: the ControlNet sees the doubled CFG batch, like the UNet
    assert _runs(p) == {"text_encoder.forward": 2, "controlnet.forward": 60, "unet.forward": 60, "vae.decode": 1}
    cn = next(r for r in p.runs if r.component == "controlnet")
    assert (cn.role, cn.shape.latent_height, cn.shape.latent_width, cn.shape.text_len) == ("controlnet", 64, 64, 77)


def test_sdxl_controlnet_defaults_and_guess_mode():
    comps = {**SDXL.components(), "controlnet": _controlnet("controlnet-canny-sdxl-1.0")}
    index = {**SDXL.index(), "_class_name": "StableDiffusionXLControlNetPipeline"}
    p = plan(index, comps, Settings())
    assert (p.settings.height, p.settings.steps, p.settings.guidance_scale) == (1024, 50, 5.0)
    assert _runs(p) == {"text_encoder.forward": 1, "text_encoder_2.forward": 1, "controlnet.forward": 100,
                        "unet.forward": 100, "vae.decode": 1}
    # global_pool_conditions turns guess mode on: the ControlNet runs on the conditional half only
    pooled = {**comps, "controlnet": {**comps["controlnet"], "global_pool_conditions": True}}
    assert _runs(plan(index, pooled, Settings()))["controlnet.forward"] == 50
    # no CFG: one pass for both
    assert _runs(plan(index, comps, Settings(guidance_scale=1.0)))["controlnet.forward"] == 50


def test_controlnet_estimate_adds_its_row():
    folder = REPO / "validation" / "configs" / "sd-controlnet-canny"
    r = flopcalc.estimate(str(folder), height=768, width=1344)
    fx = json.loads((REPO / "validation" / "fixtures" / "sd-controlnet-canny" / "controlnet-768x1344.json").read_text())
    assert r.component("controlnet").runs == 100
    assert 2 * r.component("controlnet").macs_per_run == fx["torch"]["flops"]


def test_a_controlnet_alone_is_refused_with_a_clear_line():
    with pytest.raises(FlopcalcError, match="runs inside its pipeline"):
        flopcalc.estimate(str(REPO / "validation" / "configs" / "sd-controlnet-canny" / "controlnet" / "config.json"))


# --------------------------------------------------------------------------- T2I-Adapter

def _adapter() -> dict:
    return json.loads((REPO / "validation" / "configs" / "t2i-adapter-full" / "adapter" / "config.json").read_text())


def test_t2i_adapter_runs_once_per_control_image():
    comps = {**Card("sd1.5").components(), "adapter": _adapter()}
    p = plan({"_class_name": "StableDiffusionAdapterPipeline"}, comps,
             Settings(batch_size=2, num_images_per_prompt=3, steps=20))
    # the adapter once per prompt's control image; its features are repeated per image and for CFG
    assert _runs(p) == {"text_encoder.forward": 4, "adapter.forward": 2, "unet.forward": 20 * 2 * 6,
                        "vae.decode": 6}
    a = next(r for r in p.runs if r.component == "adapter")
    assert (a.role, a.shape.height, a.shape.width) == ("adapter", 512, 512)


def test_sdxl_adapter_defaults_and_size_check():
    comps = {**SDXL.components(), "adapter": {**_adapter(), "adapter_type": "full_adapter_xl",
                                              "downscale_factor": 16}}
    index = {**SDXL.index(), "_class_name": "StableDiffusionXLAdapterPipeline"}
    p = plan(index, comps, Settings())
    assert (p.settings.height, p.settings.guidance_scale) == (1024, 5.0)
    assert _runs(p)["adapter.forward"] == 1 and _runs(p)["unet.forward"] == 100
    from flopcalc.engine.errors import ResolutionError
    with pytest.raises(ResolutionError, match="downscale_factor"):
        plan(index, comps, Settings(height=1032, width=1024))


def test_t2i_adapter_estimate_equals_the_fixture():
    r = flopcalc.estimate(str(REPO / "validation" / "configs" / "t2i-adapter-full"), height=768, width=1344)
    fx = json.loads((REPO / "validation" / "fixtures" / "t2i-adapter-full" / "adapter-768x1344.json").read_text())
    assert 2 * r.component("adapter").macs_per_run == fx["torch"]["flops"]
    assert r.component("adapter").params == fx["params"]


def test_training_a_pipeline_with_an_add_on_is_refused(tmp_path):
    import shutil

    from flopcalc.training.estimate import train

    folder = tmp_path / "sd-adapter"
    shutil.copytree(REPO / "model_cards" / "sd1.5", folder)
    shutil.copytree(REPO / "validation" / "configs" / "t2i-adapter-full" / "adapter", folder / "adapter")
    index = json.loads((folder / "model_index.json").read_text())
    index.update(_class_name="StableDiffusionAdapterPipeline", adapter=["diffusers", "T2IAdapter"])
    (folder / "model_index.json").write_text(json.dumps(index))
    with pytest.raises(FlopcalcError, match="add-on model is not modelled"):
        train(str(folder))
