"""QwenImageControlNetPipeline / QwenImageControlNetInpaintPipeline (diffusers ``pipelines/qwenimage``) and
``QwenImageControlNetModel``: the plans on the qwen-image card with the ControlNets of
``validation/configs/qwen-image-controlnet-{union,inpaint}`` (their measured fixtures), defaults, true CFG, options,
refusals, which pipeline a bare ControlNet config runs under, and both plans against the real ``__call__`` run on
tiny random components on the CPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flopcalc.engine.errors import ConfigError, OptionError
from flopcalc.engine.pipelines import Settings
from flopcalc.flops.estimate import estimate_configs
from card_support import Card, runs_by_call

REPO = Path(__file__).resolve().parent.parent
CARD = Card("qwen-image")
UNION, INPAINT = "qwen-image-controlnet-union", "qwen-image-controlnet-inpaint"
PIPELINES = {UNION: "QwenImageControlNetPipeline", INPAINT: "QwenImageControlNetInpaintPipeline"}


def _controlnet(case: str) -> dict:
    return json.loads((REPO / "validation/configs" / case / "controlnet/config.json").read_text())


def _plan(case: str = UNION, settings: Settings = Settings(), pipeline: str | None = None):
    components = {**CARD.components(), "controlnet": _controlnet(case)}
    return estimate_configs({**CARD.index(), "_class_name": pipeline or PIPELINES[case]}, components, settings)


@pytest.mark.parametrize("case", [UNION, INPAINT])
def test_defaults_one_control_encode_and_the_controlnet_once_per_step(case):
    r = _plan(case)
    s = r.settings
    assert r.pipeline == PIPELINES[case] and r.passes == 1
    assert (s.height, s.width, s.steps, s.true_cfg_scale, s.max_sequence_length) == (1024, 1024, 50, 4.0, 512)
    assert runs_by_call(r) == {"text_encoder.forward": 1, "vae.encode": 1, "controlnet.forward": 50,
                               "transformer.forward": 50, "vae.decode": 1}
    assert r.component("controlnet").shape == {"latent_height": 128, "latent_width": 128, "text_len": 512}
    # true CFG (a negative prompt): the transformer runs twice per step, the ControlNet still once
    r = _plan(case, Settings(negative_prompt=True, num_images_per_prompt=2))
    assert r.passes == 2
    assert runs_by_call(r) == {"text_encoder.forward": 2, "vae.encode": 2, "controlnet.forward": 100,
                               "transformer.forward": 200, "vae.decode": 2}


@pytest.mark.parametrize("case,sizes", [(UNION, [(1024, 1024), (768, 1344)]), (INPAINT, [(1024, 1024), (512, 768)])])
def test_controlnets_equal_their_fixtures(case, sizes):
    for h, w in sizes:
        fx = json.loads((REPO / "validation/fixtures" / case / f"controlnet-{h}x{w}.json").read_text())
        comp = _plan(case, Settings(height=h, width=w)).component("controlnet")
        assert 2 * comp.macs_per_run == fx["torch"]["flops"] and comp.params == fx["params"]
        assert comp.tree.total.macs("thop") == fx["thop"]["macs"]


def test_a_bare_controlnet_is_refused_it_runs_inside_its_pipeline():
    from flopcalc.engine.errors import FlopcalcError

    with pytest.raises(FlopcalcError, match="QwenImageControlNetModel \\(controlnet\\) runs inside its pipeline"):
        estimate_configs(None, {"controlnet": _controlnet(UNION)}, Settings())


def test_refusals():
    with pytest.raises(ConfigError, match="extra_condition_channels 4\\), got 0"):
        _plan(UNION, pipeline="QwenImageControlNetInpaintPipeline")
    with pytest.raises(ConfigError, match="extra_condition_channels 0\\), got 4"):
        _plan(INPAINT, pipeline="QwenImageControlNetPipeline")
    with pytest.raises(OptionError, match="--strength does not apply to QwenImageControlNetPipeline"):
        _plan(UNION, Settings(strength=0.5))


def _tiny():
    from diffusers import AutoencoderKLQwenImage, QwenImageControlNetModel, QwenImageTransformer2DModel
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    text = dict(hidden_size=16, intermediate_size=32, num_attention_heads=2, num_key_value_heads=1,
                num_hidden_layers=1, vocab_size=64, rope_scaling={"type": "mrope", "mrope_section": [1, 1, 2]})
    vision = dict(depth=1, hidden_size=16, intermediate_size=16, num_heads=2, out_hidden_size=16, patch_size=2,
                  spatial_merge_size=1, temporal_patch_size=1, fullatt_block_indexes=[0])
    common = dict(patch_size=2, in_channels=16, out_channels=4, num_layers=1, attention_head_dim=8,
                  num_attention_heads=2, joint_attention_dim=16, axes_dims_rope=(2, 2, 4))
    models = {
        "text_encoder": Qwen2_5_VLForConditionalGeneration(Qwen2_5_VLConfig(text_config=text, vision_config=vision)),
        "transformer": QwenImageTransformer2DModel(**common),
        "vae": AutoencoderKLQwenImage(base_dim=8, z_dim=4, dim_mult=[1, 1, 1, 1], num_res_blocks=1,
                                      latents_mean=[0.0] * 4, latents_std=[1.0] * 4),
    }
    return models, common, QwenImageControlNetModel


@pytest.mark.parametrize("pipeline", ["QwenImageControlNetPipeline", "QwenImageControlNetInpaintPipeline"])
def test_the_plans_mirror_the_real_calls(rng, pipeline):
    from pipeline_call_support import Tokenizer, configs_of, planned, record

    import torch
    import diffusers

    models, common, controlnet_class = _tiny()
    inpaint = pipeline.endswith("InpaintPipeline")
    models["controlnet"] = controlnet_class(**common, extra_condition_channels=4 if inpaint else 0)
    for m in models.values():
        m.eval()
    configs = configs_of(models)
    calls, shapes = record(models, ("text_encoder", "transformer", "controlnet"))
    text = rng.randint(1, 12)  # the prompt's tokens after the 34-token template
    pipe = getattr(diffusers, pipeline)(scheduler=diffusers.FlowMatchEulerDiscreteScheduler(),
                                        tokenizer=Tokenizer(unpadded=34 + text), **models)
    h, w = 16 * rng.randint(2, 4), 16 * rng.randint(2, 4)
    steps, images, negative = rng.randint(1, 2), rng.randint(1, 2), rng.random() < 0.5
    control = dict(control_image=torch.rand(1, 3, h, w))
    if inpaint:
        control["control_mask"] = torch.ones(1, 1, h, w)
    with torch.no_grad():
        pipe("a prompt", negative_prompt="bad" if negative else None, height=h, width=w, num_inference_steps=steps,
             num_images_per_prompt=images, max_sequence_length=text, output_type="np", **control)
    index = {"_class_name": pipeline, **{n: ["x", "y"] for n in models}}
    report = estimate_configs(index, configs, Settings(height=h, width=w, steps=steps, num_images_per_prompt=images,
                                                        negative_prompt=negative, max_sequence_length=text))
    where = f"{pipeline} {h}×{w}, {steps} steps, {images} images, negative {negative}, {text} tokens"
    assert planned(report) == dict(calls), where
    n = (h // 16) * (w // 16)
    assert shapes["controlnet"] == shapes["transformer"] == {(n, 16)}, where
    assert shapes["text_encoder"] == {(34 + text,)}, where
    assert shapes["vae.encode"] == {(1, h, w)} and shapes["vae.decode"] == {(1, h // 8, w // 8)}, where
