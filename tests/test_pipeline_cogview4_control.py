"""CogView4ControlPipeline (diffusers ``pipelines/cogview4/pipeline_cogview4_control.py``): the plan on the
cogview4-6b card's components with the 32-channel control transformer of ``validation/configs/cogview4-6b-control``
(its measured fixtures), defaults, options, refusals, and the plan against the real ``__call__`` on tiny random
components on the CPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flopcalc.engine.errors import ConfigError, OptionError, ResolutionError
from flopcalc.engine.pipelines import Settings
from flopcalc.flops.estimate import estimate_configs
from card_support import Card, runs_by_call

REPO = Path(__file__).resolve().parent.parent
CARD = Card("cogview4-6b")
CONTROL = REPO / "validation/configs/cogview4-6b-control"
FIXTURES = REPO / "validation/fixtures/cogview4-6b-control"


def _plan(settings: Settings = Settings(), **overrides):
    components = {**CARD.components(), "transformer": json.loads((CONTROL / "transformer/config.json").read_text())}
    components = {k: {**v, **overrides.get(k, {})} for k, v in components.items()}
    return estimate_configs({**CARD.index(), "_class_name": "CogView4ControlPipeline"}, components, settings)


def test_defaults_and_one_control_encode_per_image():
    r = _plan()
    s = r.settings
    assert r.pipeline == "CogView4ControlPipeline"
    assert (s.height, s.width, s.steps, s.guidance_scale, s.max_sequence_length, s.strength) == (
        1024, 1024, 50, 5.0, 1024, None)
    assert r.passes == 2
    assert runs_by_call(r) == {"text_encoder.forward": 2, "vae.encode": 1, "transformer.forward": 100,
                               "vae.decode": 1}
    assert r.component("vae", "encode").shape == {"height": 1024, "width": 1024}
    assert not any("image-to-image" in n for n in r.notes)


@pytest.mark.parametrize("size", [(1024, 1024), (768, 1344)])
def test_control_transformer_equals_its_fixture(size):
    h, w = size
    fx = json.loads((FIXTURES / f"transformer-{h}x{w}.json").read_text())
    comp = _plan(Settings(height=h, width=w)).component("transformer")
    assert 2 * comp.macs_per_run == fx["torch"]["flops"] and comp.params == fx["params"]
    for path, flops in fx["torch"]["by_module"].items():
        node = comp.tree if path == "Global" else comp.tree.find(path)
        assert 2 * node.per_item.macs("torch") == flops, path


def test_options_and_refusals():
    r = _plan(Settings(guidance_scale=1.0, batch_size=2, num_images_per_prompt=3, steps=4, max_sequence_length=64))
    assert runs_by_call(r) == {"text_encoder.forward": 2, "vae.encode": 6, "transformer.forward": 24,
                               "vae.decode": 6}
    assert r.component("transformer").shape["text_len"] == 64
    with pytest.raises(OptionError, match="--strength does not apply to CogView4ControlPipeline"):
        _plan(Settings(strength=0.5))
    with pytest.raises(ResolutionError, match="multiple of 16"):
        _plan(Settings(height=1000, width=1024))
    with pytest.raises(ConfigError, match="in_channels must be 32, got 16"):
        _plan(transformer={"in_channels": 16})


def test_the_plan_mirrors_the_real_call(rng):
    from pipeline_call_support import Tokenizer, configs_of, planned, record

    import torch
    from diffusers import AutoencoderKL, CogView4ControlPipeline, CogView4Transformer2DModel, \
        FlowMatchEulerDiscreteScheduler
    from transformers import GlmConfig, GlmModel

    models = {
        "text_encoder": GlmModel(GlmConfig(hidden_size=16, intermediate_size=32, num_attention_heads=2,
                                           num_key_value_heads=1, head_dim=8, num_hidden_layers=1, vocab_size=50,
                                           pad_token_id=0)),
        "transformer": CogView4Transformer2DModel(in_channels=8, out_channels=4, num_layers=1, attention_head_dim=8,
                                                  num_attention_heads=2, text_embed_dim=16, time_embed_dim=8,
                                                  condition_dim=4, rope_axes_dim=(4, 4), sample_size=8),
        "vae": AutoencoderKL(latent_channels=4, block_out_channels=[8, 8, 8, 8], norm_num_groups=4,
                             down_block_types=["DownEncoderBlock2D"] * 4, up_block_types=["UpDecoderBlock2D"] * 4),
    }
    for m in models.values():
        m.eval()
    configs = configs_of(models)
    calls, shapes = record(models, ("text_encoder", "transformer"))
    pipe = CogView4ControlPipeline(scheduler=FlowMatchEulerDiscreteScheduler(), tokenizer=Tokenizer(), **models)
    h, w = 16 * rng.randint(2, 5), 16 * rng.randint(2, 5)
    steps, guidance, images = rng.randint(1, 3), rng.choice([1.0, 4.0]), rng.randint(1, 2)
    with torch.no_grad():
        pipe("a prompt", control_image=torch.rand(1, 3, h, w), height=h, width=w, num_inference_steps=steps,
             guidance_scale=guidance, num_images_per_prompt=images, output_type="np")
    index = {"_class_name": "CogView4ControlPipeline", **{n: ["x", "y"] for n in models}}
    # the stand-in tokenizer gives 3 prompt tokens, left-padded to 16
    report = estimate_configs(index, configs, Settings(height=h, width=w, steps=steps, guidance_scale=guidance,
                                                        num_images_per_prompt=images, max_sequence_length=16))
    where = f"{h}×{w}, {steps} steps, guidance {guidance}, {images} images"
    assert planned(report) == dict(calls), where
    assert shapes["text_encoder"] == {(16,)}, where
    assert shapes["transformer"] == {(8, h // 8, w // 8)}, where
    assert shapes["vae.encode"] == {(h, w)} and shapes["vae.decode"] == {(h // 8, w // 8)}, where
