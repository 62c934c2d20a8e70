"""Z-Image's inpainting and ControlNet pipelines (diffusers ``pipelines/z_image``): ``ZImageInpaintPipeline``,
``ZImageControlNetPipeline`` and ``ZImageControlNetInpaintPipeline`` on the z-image-turbo and
z-image-turbo-controlnet-union-2.1 cards: defaults, CFG, encodes, the ControlNet's fixtures (its own parameters only:
the transformer's modules it runs count by their work), refusals, and each plan against the real ``__call__`` run on
tiny random components on the CPU."""

from __future__ import annotations

import pytest

import flopcalc
from flopcalc.engine.errors import ConfigError, OptionError
from flopcalc.engine.pipelines import Settings
from flopcalc.flops.estimate import estimate_configs
from card_support import Card, runs_by_call

CARD = Card("z-image-turbo-controlnet-union-2.1")


def _plan(pipeline: str, settings: Settings = Settings(), drop: tuple[str, ...] = (), **overrides):
    components = {k: {**v, **overrides.get(k, {})} for k, v in CARD.components().items() if k not in drop}
    return estimate_configs({**CARD.index(), "_class_name": pipeline}, components, settings)


def test_controlnet_card_defaults_turbo_settings():
    r = flopcalc.estimate("z-image-turbo-controlnet-union-2.1")
    s = r.settings
    assert r.pipeline == "ZImageControlNetPipeline" and r.passes == 1
    assert (s.height, s.width, s.steps, s.guidance_scale) == (1024, 1024, 9, 0.0)
    assert runs_by_call(r) == {"text_encoder.forward": 1, "vae.encode": 1, "controlnet.forward": 9,
                               "transformer.forward": 9, "vae.decode": 1}
    assert r.component("controlnet").shape == {"latent_height": 128, "latent_width": 128, "text_len": 512}
    assert any("from_transformer" in n for n in r.notes)


def test_cfg_runs_the_controlnet_on_both_halves_and_inpainting_encodes_the_masked_image():
    r = _plan("ZImageControlNetInpaintPipeline", Settings(guidance_scale=5.0, steps=50, num_images_per_prompt=2))
    assert r.passes == 2
    assert runs_by_call(r) == {"text_encoder.forward": 2, "vae.encode": 4, "controlnet.forward": 200,
                               "transformer.forward": 200, "vae.decode": 2}


@pytest.mark.parametrize("size", [(1024, 1024), (272, 400)])
def test_controlnet_equals_its_fixture(size):
    """Its own parameters (the transformer's modules it runs hold none here) and the work of all it runs."""
    h, w = size
    fx = CARD.fixture(f"controlnet-{h}x{w}.json")
    comp = _plan("ZImageControlNetPipeline", Settings(height=h, width=w)).component("controlnet")
    assert 2 * comp.macs_per_run == fx["torch"]["flops"] and comp.params == fx["params"]
    assert comp.tree.find("noise_refiner").total.params == 0 < comp.tree.find("noise_refiner").total.macs("torch")
    assert set(fx["params_by_module"]) == {"control_all_x_embedder", "control_layers", "control_noise_refiner"}


def test_the_controlnet_is_sized_by_the_transformer_it_runs():
    base = _plan("ZImageControlNetPipeline").component("controlnet")
    wider = _plan("ZImageControlNetPipeline", transformer={"cap_feat_dim": 4096}).component("controlnet")
    assert wider.params == base.params and wider.macs_per_run > base.macs_per_run
    r = _plan("ZImageControlNetPipeline", drop=("transformer",))
    assert "controlnet.forward" not in runs_by_call(r) and any("absent transformer" in n for n in r.notes)


def test_refusals():
    with pytest.raises(ConfigError, match="feeds 33 control channels .* got control_in_dim 16"):
        _plan("ZImageControlNetInpaintPipeline", controlnet={"control_in_dim": 16})
    with pytest.raises(ConfigError, match="feeds 16 control channels .* got control_in_dim 8"):
        _plan("ZImageControlNetPipeline", controlnet={"control_in_dim": 8})
    with pytest.raises(ConfigError, match="0 among them"):
        _plan("ZImageControlNetPipeline", controlnet={"control_layers_places": [1, 2]})
    with pytest.raises(OptionError, match="--strength does not apply to ZImageControlNetPipeline"):
        _plan("ZImageControlNetPipeline", Settings(strength=0.5))


def test_inpaint_defaults_strength_one_and_two_encodes():
    r = estimate_configs({**Card("z-image-turbo").index(), "_class_name": "ZImageInpaintPipeline"},
                         Card("z-image-turbo").components(), Settings(batch_size=2))
    assert r.pipeline == "ZImageInpaintPipeline" and r.settings.strength == 1.0
    assert runs_by_call(r) == {"text_encoder.forward": 2, "vae.encode": 4, "transformer.forward": 18,
                               "vae.decode": 2}


# --------------------------------------------------------------------------- the real calls


def _tiny(rng):
    from diffusers import AutoencoderKL, ZImageTransformer2DModel
    from transformers import Qwen3Config, Qwen3Model

    models = {
        "text_encoder": Qwen3Model(Qwen3Config(hidden_size=16, intermediate_size=32, num_attention_heads=2,
                                               num_key_value_heads=1, head_dim=8, num_hidden_layers=2,
                                               vocab_size=50)),
        "transformer": ZImageTransformer2DModel(in_channels=4, dim=32, n_layers=2, n_refiner_layers=1, n_heads=2,
                                                n_kv_heads=2, cap_feat_dim=16, axes_dims=[4, 6, 6],
                                                axes_lens=[256, 64, 64]),
        "vae": AutoencoderKL(latent_channels=4, block_out_channels=[8, 8, 8, 8], norm_num_groups=4,
                             down_block_types=["DownEncoderBlock2D"] * 4, up_block_types=["UpDecoderBlock2D"] * 4,
                             shift_factor=0.1159, scaling_factor=0.3611),
    }
    return models


def _controlnet(rng, control_in: int):
    from diffusers import ZImageControlNetModel

    mode = rng.choice([None, "control_layers", "control_noise_refiner"])
    return ZImageControlNetModel(control_layers_places=[0, 1], control_refiner_layers_places=[0],
                                 control_in_dim=control_in, add_control_noise_refiner=mode, dim=32,
                                 n_refiner_layers=1, n_heads=2, n_kv_heads=2), mode


@pytest.mark.parametrize("pipeline", ["ZImageInpaintPipeline", "ZImageControlNetPipeline",
                                      "ZImageControlNetInpaintPipeline"])
def test_the_plans_mirror_the_real_calls(rng, pipeline):
    from pipeline_call_support import Tokenizer, configs_of, index_of, planned, record

    import torch
    import diffusers

    models = _tiny(rng)
    controlled = "ControlNet" in pipeline
    mode = None
    if controlled:
        models["controlnet"], mode = _controlnet(rng, 9 if "Inpaint" in pipeline else rng.choice([4, 6]))
    for m in models.values():
        m.eval()
    configs = configs_of(models)
    calls, shapes = record(models, [n for n in ("text_encoder", "transformer", "controlnet") if n in models])
    pipe = getattr(diffusers, pipeline)(scheduler=diffusers.FlowMatchEulerDiscreteScheduler(),
                                        tokenizer=Tokenizer(), **models)
    h, w = 16 * rng.randint(2, 5), 16 * rng.randint(2, 5)
    steps, guidance, images = rng.randint(1, 2), rng.choice([0.0, 3.0]), rng.randint(1, 2)
    length = rng.choice([8, 40])
    kwargs = dict(height=h, width=w, num_inference_steps=steps, guidance_scale=guidance,
                  num_images_per_prompt=images, max_sequence_length=length, output_type="np")
    if controlled:
        kwargs["control_image"] = torch.rand(1, 3, h, w)
    if "Inpaint" in pipeline:  # the ControlNet inpainting call concatenates the mask unrepeated: one per image
        kwargs.update(image=torch.rand(1, 3, h, w), mask_image=torch.ones(images if controlled else 1, 1, h, w))
    with torch.no_grad():
        pipe("a prompt", **kwargs)
    report = estimate_configs(index_of(pipeline, models), configs, Settings(
        height=h, width=w, steps=steps, guidance_scale=guidance, num_images_per_prompt=images,
        max_sequence_length=length))
    where = f"{pipeline} ({mode}) {h}×{w}, {steps} steps, guidance {guidance}, {images} images, {length} tokens"
    assert planned(report) == dict(calls), where
    assert shapes["text_encoder"] == {(length,)}, where
    assert shapes["transformer"] == {(4, 1, h // 8, w // 8)}, where
    if controlled:
        assert shapes["controlnet"] == {(4, 1, h // 8, w // 8)}, where
    assert shapes["vae.encode"] == {(h, w)} and shapes["vae.decode"] == {(h // 8, w // 8)}, where
