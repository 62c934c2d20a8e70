"""CogView3PlusPipeline (diffusers ``pipelines/cogview3/pipeline_cogview3plus.py``) on the cogview3-plus-3b card:
defaults, classifier-free guidance (a doubled batch; the negative prompt encoded only when given), options and
refusals, the components against the card's measured fixtures, the transformer's closed form and its sin-cos table
bound, and the plan against the real ``__call__`` run on tiny random components on the CPU."""

from __future__ import annotations

import pytest

import flopcalc
from flopcalc.engine.errors import OptionError, ResolutionError
from flopcalc.engine.pipelines import Settings
from flopcalc.flops.estimate import estimate_configs
from card_support import Card, runs_by_call

CARD = Card("cogview3-plus-3b")


def _plan(settings: Settings = Settings(), **overrides):
    components = {k: {**v, **overrides.get(k, {})} for k, v in CARD.components().items()}
    return estimate_configs(CARD.index(), components, settings)


def test_defaults_cfg_doubles_the_batch_and_zero_negative_states_skip_the_encoder():
    r = flopcalc.estimate("cogview3-plus-3b")
    s = r.settings
    assert r.pipeline == "CogView3PlusPipeline" and r.passes == 2
    assert (s.height, s.width, s.steps, s.guidance_scale, s.max_sequence_length) == (1024, 1024, 50, 5.0, 224)
    assert runs_by_call(r) == {"text_encoder.forward": 1, "transformer.forward": 100, "vae.decode": 1}
    assert r.component("transformer").shape == {"latent_height": 128, "latent_width": 128, "text_len": 224}
    r = _plan(Settings(negative_prompt=True, batch_size=2))
    assert runs_by_call(r) == {"text_encoder.forward": 4, "transformer.forward": 200, "vae.decode": 2}
    r = _plan(Settings(guidance_scale=1.0, negative_prompt=True))
    assert r.passes == 1 and runs_by_call(r)["text_encoder.forward"] == 1
    assert any("negative prompt is ignored" in n for n in r.notes)


@pytest.mark.parametrize("size", [(1024, 1024), (512, 512), (768, 1344)])
def test_components_equal_the_measured_fixtures(size):
    h, w = size
    r = _plan(Settings(height=h, width=w))
    for name, call, fixture in (("transformer", "forward", f"transformer-{h}x{w}.json"),
                                ("vae", "decode", f"vae-decode-{h}x{w}.json")):
        fx = CARD.fixture(fixture)
        comp = r.component(name, call)
        assert 2 * comp.macs_per_run == fx["torch"]["flops"] and comp.params == fx["params"], fixture
    fx = CARD.fixture("text_encoder-L224.json")
    assert 2 * r.component("text_encoder").macs_per_run == fx["torch"]["flops"]


def test_block_closed_form():
    sp = pytest.importorskip("sympy")
    from flopcalc.formulas.cogview3plus import cogview3plus_block

    n, t = sp.symbols("n t", positive=True, integer=True)
    for dim, heads, time_dim in ((2560, 64, 512), (64, 4, 32)):
        cost = cogview3plus_block(dim=dim, heads=heads, head_dim=dim // heads, time_dim=time_dim, image_tokens=n,
                                  text_tokens=t).total
        s = n + t
        stated = 12 * dim * time_dim + 4 * s * dim**2 + 2 * heads * s**2 * (dim // heads) + 8 * s * dim**2
        assert sp.expand(cost.macs("torch") - stated) == 0


def test_sizes_and_refusals():
    with pytest.raises(ResolutionError, match="multiple of 16"):
        _plan(Settings(height=1000, width=1024))
    with pytest.raises(ResolutionError, match="exceeds the sin-cos table of pos_embed_max_size 128"):
        _plan(Settings(height=2064, width=1024))
    with pytest.raises(OptionError, match="--true-cfg-scale does not apply to CogView3PlusPipeline"):
        _plan(Settings(true_cfg_scale=3.0))
    r = _plan(Settings(max_sequence_length=64, steps=10))
    assert r.component("text_encoder").shape == {"seq_len": 64} and r.component("transformer").runs == 20


def test_the_plan_mirrors_the_real_call(rng):
    from pipeline_call_support import Tokenizer, configs_of, planned, record

    import torch
    from diffusers import AutoencoderKL, CogVideoXDDIMScheduler, CogView3PlusPipeline, CogView3PlusTransformer2DModel
    from transformers import T5Config, T5EncoderModel

    models = {
        "text_encoder": T5EncoderModel(T5Config(d_model=16, d_ff=32, d_kv=8, num_heads=2, num_layers=1,
                                                vocab_size=50)),
        "transformer": CogView3PlusTransformer2DModel(in_channels=4, out_channels=4, num_layers=1,
                                                      attention_head_dim=8, num_attention_heads=2, text_embed_dim=16,
                                                      time_embed_dim=8, condition_dim=4, pos_embed_max_size=32,
                                                      sample_size=8),
        "vae": AutoencoderKL(latent_channels=4, block_out_channels=[8, 8, 8, 8], norm_num_groups=4,
                             down_block_types=["DownEncoderBlock2D"] * 4, up_block_types=["UpDecoderBlock2D"] * 4),
    }
    for m in models.values():
        m.eval()
    configs = configs_of(models)
    calls, shapes = record(models, ("text_encoder", "transformer"))
    pipe = CogView3PlusPipeline(scheduler=CogVideoXDDIMScheduler(), tokenizer=Tokenizer(), **models)
    h, w = 16 * rng.randint(2, 5), 16 * rng.randint(2, 5)
    steps, guidance, images = rng.randint(1, 2), rng.choice([1.0, 5.0]), rng.randint(1, 2)
    negative, length = rng.random() < 0.5, rng.choice([8, 30])
    with torch.no_grad():
        pipe("a prompt", negative_prompt="bad" if negative else None, height=h, width=w, num_inference_steps=steps,
             guidance_scale=guidance, num_images_per_prompt=images, max_sequence_length=length, output_type="np")
    index = {"_class_name": "CogView3PlusPipeline", **{n: ["x", "y"] for n in models}}
    report = estimate_configs(index, configs, Settings(height=h, width=w, steps=steps, guidance_scale=guidance,
                                                        num_images_per_prompt=images, negative_prompt=negative,
                                                        max_sequence_length=length))
    where = f"{h}×{w}, {steps} steps, guidance {guidance}, {images} images, negative {negative}, {length} tokens"
    assert planned(report) == dict(calls), where
    assert shapes["text_encoder"] == {(length,)} and shapes["transformer"] == {(4, h // 8, w // 8)}, where
    assert shapes["vae.decode"] == {(h // 8, w // 8)}, where
