"""SD-family pipelines built on the counted components (issue 12): ControlNet img2img / inpaint (SD, SDXL),
multi-ControlNet folders, Kolors img2img, hand-checked against diffusers 0.42.1's ``__call__``. No torch needed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from card_support import Card

import flopcalc
from flopcalc.errors import ConfigError
from flopcalc.pipelines import Settings
from flopcalc.pipelines.base import plan

REPO = Path(__file__).resolve().parent.parent
SD = Card("sd1.5")
SDXL = Card("sdxl-base")


def _runs(p) -> dict[str, int]:
    return {f"{r.component}.{r.call}": r.runs for r in p.runs}


def _controlnet(case: str) -> dict:
    return json.loads((REPO / "validation" / "configs" / case / "controlnet" / "config.json").read_text())


def _config(name: str) -> dict:
    return json.loads((REPO / "validation" / "configs" / name / "config.json").read_text())


# --------------------------------------------------------------------------- ControlNet img2img / inpaint

def test_sd_controlnet_img2img_defaults():
    comps = {**SD.components(), "controlnet": _controlnet("sd-controlnet-canny")}
    p = plan({"_class_name": "StableDiffusionControlNetImg2ImgPipeline"}, comps, Settings())
    s = p.settings
    assert p.pipeline == "StableDiffusionControlNetImg2ImgPipeline"
    assert (s.height, s.width, s.steps, s.guidance_scale, s.strength) == (512, 512, 50, 7.5, 0.8)
    # get_timesteps: int(50 × 0.8) = 40 steps × 2 passes, ControlNet and UNet alike; the image encoded once
    assert _runs(p) == {"text_encoder.forward": 2, "controlnet.forward": 80, "unet.forward": 80,
                        "vae.encode": 1, "vae.decode": 1}


def test_sdxl_controlnet_img2img_floors_the_steps():
    comps = {**SDXL.components(), "controlnet": _controlnet("controlnet-canny-sdxl-1.0")}
    index = {**SDXL.index(), "_class_name": "StableDiffusionXLControlNetImg2ImgPipeline"}
    p = plan(index, comps, Settings(steps=28, strength=0.3, batch_size=2))
    assert (p.settings.height, p.settings.guidance_scale) == (1024, 5.0)
    # int(28 × 0.3) = 8 steps × 2 passes × 2 images; zero negative embeddings: encoders once per prompt
    assert _runs(p) == {"text_encoder.forward": 2, "text_encoder_2.forward": 2, "controlnet.forward": 32,
                        "unet.forward": 32, "vae.encode": 2, "vae.decode": 2}
    assert plan(index, comps, Settings()).settings.strength == 0.8


def test_sd_controlnet_inpaint_encodes_as_inpainting_does():
    cn = _controlnet("sd-controlnet-canny")
    index = {"_class_name": "StableDiffusionControlNetInpaintPipeline"}
    p = plan(index, {**SD.components(), "controlnet": cn}, Settings())
    assert (p.settings.strength, p.settings.guidance_scale, p.settings.steps) == (1.0, 7.5, 50)
    # a 4-channel UNet: return_image_latents, so the image and the masked image are encoded
    assert _runs(p) == {"text_encoder.forward": 2, "controlnet.forward": 100, "unet.forward": 100,
                        "vae.encode": 2, "vae.decode": 1}
    # a 9-channel inpainting UNet at strength 1: the masked image only
    comps = {**SD.components(), "unet": _config("sd1.5-inpainting-unet"), "controlnet": cn}
    assert _runs(plan(index, comps, Settings()))["vae.encode"] == 1
    with pytest.raises(ConfigError, match="in_channels is 8"):
        plan(index, {**comps, "unet": {**comps["unet"], "in_channels": 8}}, Settings())


def test_sdxl_controlnet_inpaint_defaults_run_49_steps():
    comps = {**SDXL.components(), "unet": _config("sdxl-inpainting-unet"),
             "controlnet": _controlnet("controlnet-canny-sdxl-1.0")}
    p = plan({**SDXL.index(), "_class_name": "StableDiffusionXLControlNetInpaintPipeline"}, comps, Settings())
    s = p.settings
    assert (s.height, s.steps, s.guidance_scale, s.strength) == (1024, 50, 5.0, 0.9999)
    assert _runs(p) == {"text_encoder.forward": 1, "text_encoder_2.forward": 1, "controlnet.forward": 98,
                        "unet.forward": 98, "vae.encode": 2, "vae.decode": 1}


# --------------------------------------------------------------------------- multi-ControlNet

def _multi_controlnet_folder(tmp_path: Path, nets: int, pipeline: str) -> Path:
    """A pipeline folder as ``save_pretrained`` writes one with a ``MultiControlNetModel``: the index names
    ``MultiControlNetModel`` and the nets sit in ``controlnet``, ``controlnet_1``, ..."""
    folder = tmp_path / "sd-multi-controlnet"
    shutil.copytree(REPO / "model_cards" / "sd1.5", folder)
    src = REPO / "validation" / "configs" / "sd-controlnet-canny" / "controlnet"
    for i in range(nets):
        shutil.copytree(src, folder / ("controlnet" if i == 0 else f"controlnet_{i}"))
    index = json.loads((folder / "model_index.json").read_text())
    index.update(_class_name=pipeline, controlnet=["diffusers", "MultiControlNetModel"])
    (folder / "model_index.json").write_text(json.dumps(index))
    return folder


@pytest.mark.parametrize("pipeline", ["StableDiffusionControlNetPipeline", "StableDiffusionControlNetImg2ImgPipeline"])
def test_multi_controlnet_runs_each_net(tmp_path, pipeline):
    folder = _multi_controlnet_folder(tmp_path, 3, pipeline)
    r = flopcalc.estimate(str(folder), steps=20)
    one = flopcalc.estimate(str(_multi_controlnet_folder(tmp_path / "one", 1, pipeline)), steps=20)
    steps = 20 if pipeline == "StableDiffusionControlNetPipeline" else 16  # int(20 × 0.8)
    for name in ("controlnet", "controlnet_1", "controlnet_2"):
        c = r.component(name)
        assert (c.runs, c.macs_per_run) == (steps * 2, one.component("controlnet").macs_per_run)
    assert r.macs - one.macs == 2 * steps * 2 * one.component("controlnet").macs_per_run


def test_multi_controlnet_guess_mode_from_the_first_net():
    cn = _controlnet("sd-controlnet-canny")
    comps = {**SD.components(), "controlnet": {**cn, "global_pool_conditions": True}, "controlnet_1": cn}
    p = plan({"_class_name": "StableDiffusionControlNetPipeline"}, comps, Settings(steps=10))
    assert _runs(p)["controlnet.forward"] == _runs(p)["controlnet_1.forward"] == 10


# --------------------------------------------------------------------------- Kolors img2img

def test_kolors_img2img_defaults():
    card = Card("kolors")
    p = plan({**card.index(), "_class_name": "KolorsImg2ImgPipeline"}, card.components(), Settings())
    s = p.settings
    assert p.pipeline == "KolorsImg2ImgPipeline"
    assert (s.height, s.steps, s.guidance_scale, s.strength, s.max_sequence_length) == (1024, 50, 5.0, 0.3, 256)
    # int(50 × 0.3) = 15 steps × 2 passes; ChatGLM on the prompt and the negative prompt
    assert _runs(p) == {"text_encoder.forward": 2, "unet.forward": 30, "vae.encode": 1, "vae.decode": 1}
    assert not any("names KolorsImg2ImgPipeline" in n for n in p.notes)
