"""ChromaInpaintPipeline (diffusers ``pipelines/chroma/pipeline_chroma_inpainting.py``): the plan's defaults,
options and refusals on the chroma1-hd card, its component counts against the card's measured fixtures, and the
plan against the real ``__call__`` run on tiny random components on the CPU."""

from __future__ import annotations

import pytest

from flopcalc.engine.errors import FlopcalcError, OptionError, ResolutionError
from flopcalc.engine.pipelines import Settings
from flopcalc.flops.estimate import estimate_configs
from card_support import Card, runs_by_call

CARD = Card("chroma1-hd")


def _plan(settings: Settings = Settings()):
    return estimate_configs({**CARD.index(), "_class_name": "ChromaInpaintPipeline"}, CARD.components(), settings)


def test_defaults_strength_steps_guidance_and_two_encodes_per_image():
    r = _plan()
    s = r.settings
    assert r.pipeline == "ChromaInpaintPipeline"
    assert (s.height, s.width, s.steps, s.guidance_scale, s.strength, s.max_sequence_length) == (
        1024, 1024, 28, 7.0, 0.6, 256)
    # get_timesteps: init 28·0.6 = 16.8, t_start = int(11.2) = 11: 17 of 28 steps, two passes (CFG)
    assert r.passes == 2
    assert runs_by_call(r) == {"text_encoder.forward": 2, "vae.encode": 2, "transformer.forward": 34,
                               "vae.decode": 1}
    assert r.component("text_encoder").shape == {"seq_len": 256}
    assert r.component("transformer").shape == {"latent_height": 128, "latent_width": 128, "text_len": 256}
    assert r.component("vae", "encode").shape == {"height": 1024, "width": 1024}
    assert any("guidance_embeds" in n and "AttributeError" in n for n in r.notes)


def test_component_counts_equal_the_measured_fixtures():
    """The transformer's and VAE's per-run counts are those measured for the card (768×1344 on 512 tokens)."""
    r = _plan(Settings(height=768, width=1344, max_sequence_length=512))
    for name, call, fixture in (("transformer", "forward", "transformer-768x1344.json"),
                                ("vae", "encode", "vae-encode-768x1344.json"),
                                ("vae", "decode", "vae-decode-768x1344.json")):
        fx = CARD.fixture(fixture)
        comp = r.component(name, call)
        assert 2 * comp.macs_per_run == fx["torch"]["flops"] and comp.params == fx["params"], fixture


def test_options():
    r = _plan(Settings(strength=1.0, steps=10, guidance_scale=1.0, batch_size=2, num_images_per_prompt=3))
    assert r.passes == 1
    assert runs_by_call(r) == {"text_encoder.forward": 2, "vae.encode": 4, "transformer.forward": 60,
                               "vae.decode": 6}
    with pytest.raises(FlopcalcError, match="greater than 512"):
        _plan(Settings(max_sequence_length=513))
    with pytest.raises(ResolutionError, match="1000 → nearest valid: 992 or 1008"):
        _plan(Settings(height=1000, width=1024))
    with pytest.raises(OptionError, match="--true-cfg-scale does not apply to ChromaInpaintPipeline: .*never reads it"):
        _plan(Settings(true_cfg_scale=4.0))


def test_the_plan_mirrors_the_real_call(rng):
    from pipeline_call_support import Tokenizer, configs_of, planned, record

    import torch
    from diffusers import AutoencoderKL, ChromaInpaintPipeline, ChromaTransformer2DModel, \
        FlowMatchEulerDiscreteScheduler
    from transformers import T5Config, T5EncoderModel

    models = {
        "text_encoder": T5EncoderModel(T5Config(d_model=16, d_ff=32, d_kv=8, num_heads=2, num_layers=1,
                                                vocab_size=50)),
        "transformer": ChromaTransformer2DModel(in_channels=16, num_layers=1, num_single_layers=1,
                                                attention_head_dim=8, num_attention_heads=2, joint_attention_dim=16,
                                                axes_dims_rope=(2, 2, 4), approximator_num_channels=8,
                                                approximator_hidden_dim=16, approximator_layers=1),
        "vae": AutoencoderKL(latent_channels=4, block_out_channels=[8, 8, 8, 8], norm_num_groups=4,
                             down_block_types=["DownEncoderBlock2D"] * 4, up_block_types=["UpDecoderBlock2D"] * 4,
                             shift_factor=0.1159, scaling_factor=0.3611),
    }
    for m in models.values():
        m.eval()
    configs = configs_of(models)
    # diffusers 0.42.1 reads transformer.config.guidance_embeds (line 1060), which ChromaTransformer2DModel does not
    # have: the stock call raises AttributeError; a user registers the key (False: Chroma embeds no guidance)
    models["transformer"].register_to_config(guidance_embeds=False)
    calls, shapes = record(models, ("text_encoder", "transformer"))
    pipe = ChromaInpaintPipeline(scheduler=FlowMatchEulerDiscreteScheduler(), tokenizer=Tokenizer(), **models)
    h, w = 16 * rng.randint(2, 5), 16 * rng.randint(2, 5)
    steps, guidance, strength = rng.randint(2, 4), rng.choice([1.0, 4.0]), rng.choice([0.5, 0.8, 1.0])
    length, images = rng.choice([8, 20]), rng.randint(1, 2)
    image = torch.rand(1, 3, h, w)
    with torch.no_grad():
        pipe("a prompt", image=image, mask_image=torch.ones(1, 1, h, w), height=h, width=w,
             num_inference_steps=steps, guidance_scale=guidance, strength=strength, max_sequence_length=length,
             num_images_per_prompt=images, output_type="np")
    index = {"_class_name": "ChromaInpaintPipeline", **{n: ["x", "y"] for n in models}}
    report = estimate_configs(index, configs, Settings(
        height=h, width=w, steps=steps, guidance_scale=guidance, strength=strength, max_sequence_length=length,
        num_images_per_prompt=images))
    where = f"{h}×{w}, {steps} steps, guidance {guidance}, strength {strength}, {length} tokens, {images} images"
    assert planned(report) == dict(calls), where
    assert shapes["text_encoder"] == {(length,)}, where
    assert shapes["transformer"] == {((h // 16) * (w // 16), 16)}, where
    assert shapes["vae.encode"] == {(h, w)} and shapes["vae.decode"] == {(h // 8, w // 8)}, where
