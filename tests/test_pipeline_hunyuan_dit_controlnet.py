"""HunyuanDiTControlNetPipeline (diffusers ``pipelines/controlnet_hunyuandit``) and ``HunyuanDiT2DControlNetModel``:
the plan on the hunyuandit-v1.2 card with the ControlNet of ``validation/configs/hunyuandit-v1.2-controlnet`` (its
measured fixtures), defaults, options, refusals, the block count, and the plan against the real ``__call__`` run on
tiny random components on the CPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import flopcalc
from flopcalc.engine.errors import OptionError
from flopcalc.engine.pipelines import Settings
from flopcalc.flops.estimate import estimate_configs
from card_support import Card, runs_by_call

REPO = Path(__file__).resolve().parent.parent
CARD = Card("hunyuandit-v1.2")
FOLDER = REPO / "validation/configs/hunyuandit-v1.2-controlnet"
FIXTURES = REPO / "validation/fixtures/hunyuandit-v1.2-controlnet"


def _plan(settings: Settings = Settings()):
    components = {**CARD.components(), "controlnet": json.loads((FOLDER / "controlnet/config.json").read_text())}
    return estimate_configs({**CARD.index(), "_class_name": "HunyuanDiTControlNetPipeline"}, components, settings)


def test_defaults_the_controlnet_runs_on_both_passes_and_the_control_image_is_encoded_twice():
    r = _plan()
    assert r.pipeline == "HunyuanDiTControlNetPipeline" and r.passes == 2
    assert (r.settings.height, r.settings.width, r.settings.steps, r.settings.guidance_scale) == (1024, 1024, 50, 5.0)
    assert runs_by_call(r) == {"text_encoder.forward": 2, "text_encoder_2.forward": 2, "vae.encode": 2,
                               "controlnet.forward": 100, "transformer.forward": 100, "vae.decode": 1}
    assert r.component("controlnet").shape == {"latent_height": 128, "latent_width": 128, "text_len": 333}
    assert [c.component for c in r.components].index("controlnet") < [c.component for c in r.components].index(
        "transformer")


@pytest.mark.parametrize("size", [(1024, 1024), (768, 1344)])
def test_controlnet_equals_its_fixture(size):
    h, w = size
    fx = json.loads((FIXTURES / f"controlnet-{h}x{w}.json").read_text())
    comp = _plan(Settings(height=h, width=w, resolution_binning=False)).component("controlnet")
    assert 2 * comp.macs_per_run == fx["torch"]["flops"] and comp.params == fx["params"]
    assert comp.tree.find("blocks") is not None and len(fx["params_by_module"]) > 0
    for path, params in fx["params_by_module"].items():
        assert comp.tree.find(path).total.params == params, path


def test_the_folder_alone_and_options():
    r = flopcalc.estimate(str(FOLDER), guidance_scale=1.0, batch_size=2, steps=10)
    assert r.pipeline == "HunyuanDiTControlNetPipeline" and r.passes == 1
    assert runs_by_call(r) == {"controlnet.forward": 20}
    r = _plan(Settings(guidance_scale=1.0, num_images_per_prompt=3))
    assert runs_by_call(r)["vae.encode"] == 3 and runs_by_call(r)["controlnet.forward"] == 150
    with pytest.raises(OptionError, match="--strength does not apply to HunyuanDiTControlNetPipeline"):
        _plan(Settings(strength=0.5))
    with pytest.raises(OptionError, match="--max-sequence-length does not apply to HunyuanDiTControlNetPipeline"):
        _plan(Settings(max_sequence_length=128))


def test_block_count_is_half_the_transformer_minus_one():
    from flopcalc.engine.architectures.controlnet_hunyuan import control_blocks

    assert [control_blocks(n) for n in (40, 28, 4, 2, 1)] == [19, 13, 1, 0, 0]
    fx = json.loads((FIXTURES / "controlnet-1024x1024.json").read_text())
    assert {p.split(".")[1] for p in fx["torch"]["by_module"] if p.startswith("blocks.")} == {str(i) for i in range(19)}


def test_the_plan_mirrors_the_real_call(rng):
    from pipeline_call_support import Tokenizer, configs_of, planned, record

    import torch
    from diffusers import (AutoencoderKL, DDPMScheduler, HunyuanDiT2DControlNetModel, HunyuanDiT2DModel,
                           HunyuanDiTControlNetPipeline)
    from transformers import BertConfig, BertModel, T5Config, T5EncoderModel

    common = dict(num_attention_heads=2, attention_head_dim=8, in_channels=4, patch_size=2, hidden_size=16,
                  cross_attention_dim=16, cross_attention_dim_t5=16, pooled_projection_dim=8, sample_size=8,
                  use_style_cond_and_image_meta_size=False)
    models = {
        "text_encoder": BertModel(BertConfig(hidden_size=16, intermediate_size=32, num_attention_heads=2,
                                             num_hidden_layers=1, vocab_size=50, max_position_embeddings=128)),
        "text_encoder_2": T5EncoderModel(T5Config(d_model=16, d_ff=32, d_kv=8, num_heads=2, num_layers=1,
                                                  vocab_size=50)),
        "transformer": HunyuanDiT2DModel(**common, num_layers=4),
        "controlnet": HunyuanDiT2DControlNetModel(**common, transformer_num_layers=4),
        "vae": AutoencoderKL(latent_channels=4, block_out_channels=[8, 8, 8, 8], norm_num_groups=4,
                             down_block_types=["DownEncoderBlock2D"] * 4, up_block_types=["UpDecoderBlock2D"] * 4),
    }
    for m in models.values():
        m.eval()
    configs = configs_of(models)
    calls, shapes = record(models, ("text_encoder", "text_encoder_2", "transformer", "controlnet"))
    pipe = HunyuanDiTControlNetPipeline(scheduler=DDPMScheduler(), tokenizer=Tokenizer(), tokenizer_2=Tokenizer(),
                                        safety_checker=None, feature_extractor=None, requires_safety_checker=False,
                                        **models)
    h, w = 16 * rng.randint(2, 5), 16 * rng.randint(2, 5)
    steps, guidance, images = rng.randint(1, 2), rng.choice([1.0, 5.0]), rng.randint(1, 2)
    with torch.no_grad():
        pipe("a prompt", control_image=torch.rand(1, 3, h, w), height=h, width=w, num_inference_steps=steps,
             guidance_scale=guidance, num_images_per_prompt=images, use_resolution_binning=False, output_type="np")
    index = {"_class_name": "HunyuanDiTControlNetPipeline", **{n: ["x", "y"] for n in models}}
    report = estimate_configs(index, configs, Settings(height=h, width=w, steps=steps, guidance_scale=guidance,
                                                        num_images_per_prompt=images, resolution_binning=False))
    where = f"{h}×{w}, {steps} steps, guidance {guidance}, {images} images"
    assert planned(report) == dict(calls), where
    assert shapes["controlnet"] == shapes["transformer"] == {(4, h // 8, w // 8)}, where
    assert shapes["text_encoder"] == {(77,)} and shapes["text_encoder_2"] == {(256,)}, where
    assert shapes["vae.encode"] == {(h, w)}, where
