"""Perturbed-attention guidance (PAG) pipelines, against diffusers 0.42.1's ``pipelines/pag/``: each plan
is its base pipeline's plan plus the PAG passes (``PAGMixin``: one perturbed row per step and image, the
original rows carrying the PAG layers), ``pag_scale`` 0 gives the base plan, the defaults are the PAG
pipelines' own (checked against their signatures where diffusers is installed), and the layer ids are
chosen, validated and refused as ``_set_pag_attn_processor`` chooses and refuses them."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest
from card_support import Card

import flopcalc
from flopcalc.flops.estimate import estimate_configs
from flopcalc.energy_laws.features import work_of
from flopcalc.engine.errors import ConfigError, OptionError
from flopcalc.engine.perturbed_attention import PerturbedAttention, layer_ids
from flopcalc.engine.pipelines import Settings
from flopcalc.engine.pipelines.dispatch import plan

REPO = Path(__file__).resolve().parent.parent

#: PAG pipeline → (the pipeline whose plan it extends, a card whose configs run it, its denoiser,
#: default pag_applied_layers, the PAG pipeline's own default strength where it has one).
PAG = {
    "StableDiffusionPAGPipeline": ("StableDiffusionPipeline", "sd1.5", "unet", "mid", None),
    "StableDiffusionPAGImg2ImgPipeline": ("StableDiffusionImg2ImgPipeline", "sd1.5", "unet", "mid", 0.8),
    "StableDiffusionPAGInpaintPipeline": ("StableDiffusionInpaintPipeline", "sd1.5", "unet", "mid", 0.9999),
    "StableDiffusionXLPAGPipeline": ("StableDiffusionXLPipeline", "sdxl-base", "unet", "mid", None),
    "StableDiffusionXLPAGImg2ImgPipeline": ("StableDiffusionXLImg2ImgPipeline", "sdxl-base", "unet", "mid", 0.3),
    "StableDiffusionXLPAGInpaintPipeline": ("StableDiffusionXLInpaintPipeline", "sdxl-base", "unet", "mid", 0.9999),
    "StableDiffusionControlNetPAGPipeline": ("StableDiffusionControlNetPipeline", "sd1.5", "unet", "mid", None),
    "StableDiffusionControlNetPAGInpaintPipeline": ("StableDiffusionInpaintPipeline", "sd1.5", "unet", "mid", 1.0),
    "StableDiffusionXLControlNetPAGPipeline": ("StableDiffusionXLControlNetPipeline", "sdxl-base", "unet", "mid",
                                               None),
    "StableDiffusionXLControlNetPAGImg2ImgPipeline": ("StableDiffusionXLImg2ImgPipeline", "sdxl-base", "unet", "mid",
                                                      0.8),
    "KolorsPAGPipeline": ("KolorsPipeline", "kolors", "unet", "mid", None),
    "StableDiffusion3PAGPipeline": ("StableDiffusion3Pipeline", "sd3-medium", "transformer", "blocks.1", None),
    "StableDiffusion3PAGImg2ImgPipeline": ("StableDiffusion3Img2ImgPipeline", "sd3-medium", "transformer", "blocks.1",
                                           0.6),
    "PixArtSigmaPAGPipeline": ("PixArtSigmaPipeline", "pixart-alpha-1024", "transformer", "blocks.1", None),
    "HunyuanDiTPAGPipeline": ("HunyuanDiTPipeline", "hunyuandit-v1.2", "transformer", "blocks.1", None),
    "SanaPAGPipeline": ("SanaPipeline", "sana-600m-512", "transformer", "transformer_blocks.0", None),
}
SD_CONTROLNET = json.loads((REPO / "validation/configs/sd-controlnet-canny/controlnet/config.json").read_text())
SDXL_CONTROLNET = json.loads((REPO / "validation/configs/controlnet-canny-sdxl-1.0/controlnet/config.json").read_text())


def _folder(pipeline: str, card: str) -> tuple[dict, dict]:
    c = Card(card)
    components = c.components()
    if "ControlNet" in pipeline:
        components["controlnet"] = SDXL_CONTROLNET if "XL" in pipeline else SD_CONTROLNET
    return {**c.index(), "_class_name": pipeline}, components


def _runs(p) -> list[tuple[str, str, int, object]]:
    return [(r.component, r.call, r.runs, r.shape) for r in p.runs]


@pytest.mark.parametrize("pipeline", sorted(PAG))
def test_pag_adds_one_perturbed_row_per_step_and_image(pipeline):
    base, card, denoiser, layers, strength = PAG[pipeline]
    index, components = _folder(pipeline, card)
    s = Settings(steps=10, batch_size=2, num_images_per_prompt=3)
    p = plan(index, components, s)
    off = plan(index, components, Settings.make(steps=10, batch_size=2, num_images_per_prompt=3, pag_scale=0))
    assert p.settings.pag_scale == 3.0 and p.settings.pag_applied_layers == (layers,)
    assert p.settings.strength == strength and off.settings.strength == strength
    runs = [r for r in p.runs if r.component == denoiser]
    (base_run,) = [r for r in off.runs if r.component == denoiser]
    original, perturbed = runs
    steps = base_run.runs // (p.passes * 6)
    assert original.runs == base_run.runs == steps * p.passes * 6
    assert perturbed.runs == steps * 6  # one perturbed row per kept step × image
    assert original.shape.perturbed == PerturbedAttention((layers,), False)
    assert perturbed.shape.perturbed == PerturbedAttention((layers,), True)
    assert original.shape.latent_height == base_run.shape.latent_height and base_run.shape.perturbed is None
    others = [(r.component, r.call, r.runs) for r in p.runs if r.component not in (denoiser, "controlnet")]
    assert others == [(r.component, r.call, r.runs) for r in off.runs if r.component not in (denoiser, "controlnet")]
    if "ControlNet" in pipeline:  # the ControlNet runs every row of the batch (control_model_input = latents)
        (cn,) = [r for r in p.runs if r.component == "controlnet"]
        (cn_off,) = [r for r in off.runs if r.component == "controlnet"]
        assert (cn.runs, cn_off.runs) == (steps * (p.passes + 1) * 6, steps * p.passes * 6)


@pytest.mark.parametrize("pipeline", sorted(PAG))
def test_pag_scale_zero_is_the_base_plan(pipeline):
    base, card, denoiser, layers, strength = PAG[pipeline]
    index, components = _folder(pipeline, card)
    off = plan(index, components, Settings.make(pag_scale=0, strength=strength))
    if "ControlNet" in pipeline and "ControlNet" not in base:  # no such base pipeline: the runs without the ControlNet
        components = {k: v for k, v in components.items() if k != "controlnet"}
    ref = plan({**index, "_class_name": base}, components, Settings(strength=strength))
    assert [x for x in _runs(off) if x[0] != "controlnet" or "ControlNet" in base] == _runs(ref)
    assert off.passes == ref.passes and off.pipeline == pipeline


def test_without_cfg_the_batch_is_cond_and_perturbed():
    p = plan(*_folder("StableDiffusionXLPAGPipeline", "sdxl-base"), Settings(guidance_scale=1.0, steps=20))
    unet = [r for r in p.runs if r.component == "unet"]
    assert p.passes == 1 and [r.runs for r in unet] == [20, 20]


def test_a_pag_report_row_is_the_batched_call():
    r = flopcalc.estimate(str(REPO / "validation/configs/sd1.5-pag"), steps=30)
    unet = r.component("unet")
    assert unet.runs == 30 and [p.count for p in unet.tree.children] == [2, 1]
    fx = json.loads((REPO / "validation/fixtures/sd1.5-pag/unet-512x512.json").read_text())
    assert 2 * unet.macs_per_run == fx["torch"]["flops"]
    # the energy features see one batched UNet call per step, as without PAG
    for report in (r, flopcalc.estimate("sd1.5", steps=30)):
        assert {c.component: c.calls for c in work_of(report).components}["unet"] == 30


def test_layer_ids_are_simple_and_bounded():
    assert layer_ids("mid") == ("mid",) and layer_ids(["down_blocks.2", "up"]) == ("down_blocks.2", "up")
    for bad in ("blocks.(1|2)", "a*", "", "x" * 101, ["mid"] * 65, [], 3, ["mid", None]):
        with pytest.raises(OptionError):
            layer_ids(bad)
    with pytest.raises(OptionError, match="not a simple id"):
        flopcalc.estimate(str(REPO / "validation/configs/sd1.5-pag"), pag_applied_layers=["mid|up"])


def test_layer_ids_match_as_diffusers_regular_expressions():
    # "blocks.1" also matches blocks 10-19: `.` is any character and re.search looks anywhere (pag_utils.py:80)
    pa = PerturbedAttention(("blocks.1",), True)
    names = [f"transformer_blocks.{i}.attn" for i in range(24)]
    assert sorted(pa.select(names, "transformer")) == sorted([names[1]] + names[10:20])
    p = plan(*_folder("StableDiffusion3PAGPipeline", "sd3-medium"), Settings())
    assert p.settings.pag_applied_layers == ("blocks.1",)
    r = flopcalc.estimate(str(REPO / "validation/configs/sd3-medium-pag"))
    assert r.component("transformer").runs == 28
    with pytest.raises(OptionError, match="matches no self-attention layer"):
        PerturbedAttention(("down.block_2",), True).select(["down_blocks.2.attentions.0.transformer_blocks.0.attn1"],
                                                             "unet")


def test_unmatched_layers_and_non_pag_pipelines_are_refused():
    with pytest.raises(OptionError, match="matches no self-attention layer"):
        flopcalc.estimate(str(REPO / "validation/configs/sd1.5-pag"), pag_applied_layers=["nowhere"])
    with pytest.raises(OptionError, match="--pag-scale does not apply to StableDiffusionPipeline"):
        flopcalc.estimate("sd1.5", pag_scale=2.0)
    with pytest.raises(OptionError, match="--pag-applied-layers does not apply"):
        flopcalc.estimate("flux-dev", pag_applied_layers=["mid"])
    for bad in (-1.0, float("nan"), True):
        with pytest.raises(OptionError, match="pag_scale"):
            flopcalc.estimate(str(REPO / "validation/configs/sd1.5-pag"), pag_scale=bad)


def test_sd35_medium_dual_attention_layers_are_refused():
    # SD3.5-medium's blocks 0-12 have an image-only attn2; "blocks.1" matches block 1's, which the joint PAG
    # processors cannot run (they read encoder_hidden_states, which attn2 is not given)
    cfg = json.loads((REPO / "validation/configs/sd3.5-medium-transformer/config.json").read_text())
    index = {"_class_name": "StableDiffusion3PAGPipeline"}
    with pytest.raises(OptionError, match="attn2 of MMDiT-X"):
        estimate_configs(index, {"transformer": cfg}, Settings())
    r = estimate_configs(index, {"transformer": cfg}, Settings.make(pag_applied_layers=("transformer_blocks.20",)))
    assert r.component("transformer").runs == 28


def test_controlnet_guess_mode_under_cfg_is_refused_where_diffusers_fails():
    index, components = _folder("StableDiffusionControlNetPAGPipeline", "sd1.5")
    components["controlnet"] = {**SD_CONTROLNET, "global_pool_conditions": True}
    with pytest.raises(ConfigError, match="guess mode"):
        plan(index, components, Settings())
    p = plan(index, components, Settings(guidance_scale=1.0, steps=10))
    assert [r.runs for r in p.runs if r.component == "controlnet"] == [20]  # cond + perturbed
    index, components = _folder("StableDiffusionXLControlNetPAGPipeline", "sdxl-base")  # no guess-mode branch there
    components["controlnet"] = {**SDXL_CONTROLNET, "global_pool_conditions": True}
    assert [r.runs for r in plan(index, components, Settings(steps=10)).runs if r.component == "controlnet"] == [30]


def test_cli_pag_options(capsys):
    from flopcalc.cli.main import main

    assert main(["estimate", str(REPO / "validation/configs/sd1.5-pag"), "--pag-scale", "0"]) == 0
    assert "perturbed" not in capsys.readouterr().out
    assert main(["estimate", str(REPO / "validation/configs/sd1.5-pag"), "--pag-applied-layers", "mid", "up"]) == 0
    assert "layers matching mid, up" in capsys.readouterr().out
    assert main(["estimate", "sd1.5", "--pag-scale", "3"]) == 2


def test_defaults_mirror_the_diffusers_signatures():
    pytest.importorskip("diffusers")
    import importlib
    import pkgutil

    import diffusers.pipelines.pag as pag

    classes = {}
    for module in pkgutil.iter_modules(pag.__path__):
        if module.name.startswith("pipeline_pag_"):
            classes.update(vars(importlib.import_module(f"diffusers.pipelines.pag.{module.name}")))
    for pipeline, (_base, card, _denoiser, layers, strength) in PAG.items():
        cls = classes[pipeline]
        init = inspect.signature(cls.__init__).parameters
        call = inspect.signature(cls.__call__).parameters
        assert init["pag_applied_layers"].default == layers, pipeline
        assert call["pag_scale"].default == 3.0, pipeline
        p = plan(*_folder(pipeline, card), Settings())
        assert p.settings.steps == call["num_inference_steps"].default, pipeline
        assert p.settings.guidance_scale == call["guidance_scale"].default, pipeline
        assert p.settings.strength == (call["strength"].default if "strength" in call else None), pipeline
