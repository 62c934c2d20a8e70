"""OvisImagePipeline semantics (diffusers 0.42.1 ``pipelines/ovis_image``): defaults, guidance, the text lengths
(the encoder's 256 + 28 template tokens, the transformer's 256), refusals; the card's fixtures against flopcalc;
and the plan against the real ``OvisImagePipeline.__call__`` run on CPU with tiny random components (a stand-in
tokenizer that pads to the length asked for)."""

from __future__ import annotations

import pytest

import flopcalc
from call_support import Recorder, assert_fixture, card_fixtures, read
from card_support import Card, runs_by_call
from conftest import SEED
from flopcalc.engine.errors import ConfigError, FlopcalcError, OptionError, ResolutionError
from flopcalc.engine.pipelines import Settings
from flopcalc.flops.estimate import estimate_configs

CARD = Card("ovis-image-7b")
QWEN3 = {"architectures": ["Qwen3Model"], "model_type": "qwen3", "hidden_size": 16, "intermediate_size": 24,
         "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 8, "vocab_size": 64}
VAE = {"_class_name": "AutoencoderKL", "in_channels": 3, "out_channels": 3, "latent_channels": 4,
       "block_out_channels": [8, 8, 8, 8], "layers_per_block": 1, "norm_num_groups": 4,
       "down_block_types": ["DownEncoderBlock2D"] * 4, "up_block_types": ["UpDecoderBlock2D"] * 4,
       "scaling_factor": 0.3611, "shift_factor": 0.1159}


def _plan(settings: Settings, **overrides):
    components = {"transformer": {**CARD.config("transformer"), **overrides}, "text_encoder": QWEN3, "vae": VAE}
    return estimate_configs(CARD.index(), components, settings)


@pytest.mark.parametrize("path", card_fixtures("ovis-image-7b"), ids=lambda p: p.stem)
def test_fixtures_are_exact(path):
    fixture = read(path)
    s = fixture["settings"]
    assert_fixture(flopcalc.estimate("ovis-image-7b", height=s["height"], width=s["width"]), fixture)


def test_defaults_and_the_missing_configs():
    r = flopcalc.estimate("ovis-image-7b")
    s = r.settings
    assert (r.pipeline, s.height, s.width, s.steps, s.guidance_scale, s.max_sequence_length) == (
        "OvisImagePipeline", 1024, 1024, 50, 5.0, 256)
    assert r.passes == 2 and runs_by_call(r) == {"transformer.forward": 100}
    assert r.component("transformer").shape == {"latent_height": 128, "latent_width": 128, "text_len": 256}
    missing = [n for n in r.notes if "not counted" in n]
    assert any("text_encoder" in n for n in missing) and any("vae" in n for n in missing)


def test_text_lengths_guidance_and_batches():
    r = _plan(Settings(max_sequence_length=100, batch_size=2, num_images_per_prompt=3, steps=4))
    assert runs_by_call(r) == {"text_encoder.forward": 4, "transformer.forward": 4 * 2 * 6, "vae.decode": 6}
    assert r.component("text_encoder").shape == {"seq_len": 128}  # 100 + the 28 template tokens
    assert r.component("text_encoder").class_name == "Qwen3Model"
    assert r.component("transformer").shape["text_len"] == 100
    off = _plan(Settings(guidance_scale=1.0, negative_prompt=True))
    assert off.passes == 1 and runs_by_call(off)["text_encoder.forward"] == 1
    assert any("negative prompt is ignored" in n for n in off.notes)


def test_refusals():
    with pytest.raises(FlopcalcError, match="cannot be greater than 256"):
        flopcalc.estimate("ovis-image-7b", max_sequence_length=257)
    with pytest.raises(OptionError, match="--strength does not apply to OvisImagePipeline"):
        flopcalc.estimate("ovis-image-7b", strength=0.5)
    with pytest.raises(OptionError, match="--true-cfg-scale does not apply"):
        flopcalc.estimate("ovis-image-7b", true_cfg_scale=3.0)
    with pytest.raises(ResolutionError, match="multiple of 16"):
        flopcalc.estimate("ovis-image-7b", width=1000)
    with pytest.raises(ConfigError, match="sum\\(axes_dims_rope\\)"):
        _plan(Settings(), axes_dims_rope=[16, 56, 48])


def test_transformer_alone_runs_under_its_pipeline():
    r = estimate_configs(None, {"transformer": CARD.config("transformer")}, Settings())
    assert r.pipeline == "OvisImagePipeline (denoiser only)" and r.component("transformer").runs == 100


@pytest.mark.live
def test_the_plan_mirrors_the_real_call(rng):
    pytest.importorskip("diffusers")
    import torch
    from diffusers import AutoencoderKL, FlowMatchEulerDiscreteScheduler, OvisImagePipeline, OvisImageTransformer2DModel
    from transformers import Qwen3Config, Qwen3Model

    class Batch(dict):
        __getattr__ = dict.__getitem__

    class Tokenizer:
        def apply_chat_template(self, message, **kwargs):
            return message[0]["content"]

        def __call__(self, texts, padding=None, max_length=None, **kwargs):
            return Batch(input_ids=torch.ones(len(texts), max_length, dtype=torch.long),
                         attention_mask=torch.ones(len(texts), max_length, dtype=torch.long))

    tcfg = dict(in_channels=16, out_channels=None, num_layers=1, num_single_layers=1, attention_head_dim=8,
                num_attention_heads=2, joint_attention_dim=16, axes_dims_rope=[2, 2, 4])
    transformer = OvisImageTransformer2DModel(**tcfg).eval()
    encoder = Qwen3Model(Qwen3Config(**{k: v for k, v in QWEN3.items() if k not in ("architectures", "model_type")}))
    vae = AutoencoderKL(**{k: v for k, v in VAE.items() if k != "_class_name"}).eval()
    pipe = OvisImagePipeline(scheduler=FlowMatchEulerDiscreteScheduler(), vae=vae, text_encoder=encoder.eval(),
                             tokenizer=Tokenizer(), transformer=transformer)
    rec = Recorder()
    rec.hook(transformer, "transformer", "hidden_states", extra=lambda kw: (kw["encoder_hidden_states"].shape[1],))
    rec.hook(encoder, "text_encoder", "input_ids")
    rec.wrap(vae, "decode", "vae.decode")
    h, w = 16 * rng.randint(2, 8), 16 * rng.randint(2, 8)
    steps, guidance, length = rng.randint(1, 2), rng.choice([1.0, 5.0]), rng.randint(1, 40)
    with torch.no_grad():
        pipe("a prompt", height=h, width=w, num_inference_steps=steps, guidance_scale=guidance,
             max_sequence_length=length, output_type="np")
    report = estimate_configs(CARD.index(), {"transformer": {**tcfg, "_class_name": "OvisImageTransformer2DModel"},
                                             "text_encoder": QWEN3, "vae": VAE},
                              Settings(height=h, width=w, steps=steps, guidance_scale=guidance,
                                       max_sequence_length=length))
    where = f"seed {SEED}: {h}×{w}, {steps} steps, guidance {guidance}, max_sequence_length {length}"
    assert rec.planned_calls(report) == dict(rec.calls), where
    assert rec.shapes["text_encoder"] == {(length + 28,)}, where
    assert rec.shapes["transformer"] == {((h // 16) * (w // 16), 16, length)}, where
    assert rec.shapes["vae.decode"] == {(4, h // 8, w // 8)}, where
