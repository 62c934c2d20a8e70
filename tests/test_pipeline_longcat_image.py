"""LongCatImagePipeline semantics (diffusers 0.42.1 ``pipelines/longcat_image``) on configs built for the purpose
(validation/configs/longcat-image): defaults, guidance, the encoder's 36 + 512 + 5 tokens, refusals; the fixtures
against flopcalc; and the plan against the real ``LongCatImagePipeline.__call__`` run on CPU with tiny random
components (a stand-in tokenizer giving the template strings the Qwen2 token counts LongCat-Image's own pipeline
states, and one id per word of the prompt)."""

from __future__ import annotations

from pathlib import Path

import pytest

import flopcalc
from call_support import REPO, Recorder, assert_fixture, card_fixtures, read
from card_support import runs_by_call
from conftest import SEED
from flopcalc.engine.errors import ConfigError, OptionError, ResolutionError
from flopcalc.engine.pipelines import Settings
from flopcalc.engine.pipelines.longcat_image import PREFIX_TOKENS, SUFFIX_TOKENS
from flopcalc.flops.estimate import estimate_configs

FOLDER = REPO / "validation/configs/longcat-image"
MODEL = str(FOLDER)
QWEN = {"architectures": ["Qwen2_5_VLForConditionalGeneration"], "model_type": "qwen2_5_vl",
        "text_config": {"hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 1, "num_attention_heads": 2,
                        "num_key_value_heads": 1, "vocab_size": 64, "rope_scaling": {"type": "mrope",
                                                                                      "mrope_section": [1, 1, 2]}},
        "vision_config": {"depth": 1, "hidden_size": 16, "intermediate_size": 16, "num_heads": 2, "out_hidden_size": 16,
                          "fullatt_block_indexes": [0]}}
VAE = {"_class_name": "AutoencoderKL", "in_channels": 3, "out_channels": 3, "latent_channels": 16,
       "block_out_channels": [8, 8, 8, 8], "layers_per_block": 1, "norm_num_groups": 4,
       "down_block_types": ["DownEncoderBlock2D"] * 4, "up_block_types": ["UpDecoderBlock2D"] * 4,
       "scaling_factor": 0.3611, "shift_factor": 0.1159}


def _configs() -> tuple[dict, dict]:
    index = read(FOLDER / "model_index.json")
    return index, {name: read(FOLDER / name / "config.json") for name in ("text_encoder", "transformer", "vae")}


@pytest.mark.parametrize("path", card_fixtures("longcat-image"), ids=lambda p: p.stem)
def test_fixtures_are_exact(path: Path):
    fixture = read(path)
    s = fixture["settings"]
    assert_fixture(flopcalc.estimate(MODEL, height=s.get("height"), width=s.get("width")), fixture)


def test_defaults():
    r = flopcalc.estimate(MODEL)
    s = r.settings
    assert (r.pipeline, s.height, s.width, s.steps, s.guidance_scale) == ("LongCatImagePipeline", 1024, 1024, 50, 4.5)
    assert r.passes == 2
    assert runs_by_call(r) == {"text_encoder.forward": 2, "transformer.forward": 100, "vae.decode": 1}
    assert r.component("text_encoder").shape == {"seq_len": 36 + 512 + 5}
    assert r.component("transformer").shape == {"latent_height": 128, "latent_width": 128, "text_len": 512}
    assert any("prompt rewrite" in n and "not counted" in n for n in r.notes)


def test_guidance_off_and_images_per_prompt():
    r = flopcalc.estimate(MODEL, guidance_scale=1.0, num_images_per_prompt=3, steps=4, negative_prompt=True)
    assert r.passes == 1
    assert runs_by_call(r) == {"text_encoder.forward": 1, "transformer.forward": 12, "vae.decode": 3}
    assert any("negative prompt is ignored" in n for n in r.notes)


def test_refusals():
    with pytest.raises(OptionError, match="--strength does not apply to LongCatImagePipeline"):
        flopcalc.estimate(MODEL, strength=0.5)
    with pytest.raises(OptionError, match="--max-sequence-length does not apply"):
        flopcalc.estimate(MODEL, max_sequence_length=128)
    with pytest.raises(ResolutionError, match="multiple of 16"):
        flopcalc.estimate(MODEL, height=1000)
    index, components = _configs()
    components["transformer"]["axes_dims_rope"] = [16, 56, 48]
    with pytest.raises(ConfigError, match="sum\\(axes_dims_rope\\)"):
        estimate_configs(index, components, Settings())


@pytest.mark.live
def test_the_plan_mirrors_the_real_call(rng):
    pytest.importorskip("diffusers")
    import torch
    from diffusers import (AutoencoderKL, FlowMatchEulerDiscreteScheduler, LongCatImagePipeline,
                           LongCatImageTransformer2DModel)
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    class Batch(dict):
        __getattr__ = dict.__getitem__

    class Tokenizer:
        def __call__(self, text, add_special_tokens=False, **kwargs):
            if text.startswith("<|im_start|>system"):
                return Batch(input_ids=[7] * PREFIX_TOKENS)
            if text.startswith("<|im_end|>"):
                return Batch(input_ids=[7] * SUFFIX_TOKENS)
            return Batch(input_ids=[5] * len(text.split()))

        def pad(self, batch, max_length=None, **kwargs):
            ids = [row + [0] * (max_length - len(row)) for row in batch["input_ids"]]
            return Batch(input_ids=torch.tensor(ids), attention_mask=torch.ones(len(ids), max_length, dtype=torch.long))

    tcfg = dict(in_channels=64, num_layers=1, num_single_layers=1, attention_head_dim=8, num_attention_heads=2,
                joint_attention_dim=16, pooled_projection_dim=16, axes_dims_rope=[2, 2, 4])
    transformer = LongCatImageTransformer2DModel(**tcfg).eval()
    encoder = Qwen2_5_VLForConditionalGeneration(
        Qwen2_5_VLConfig(**{k: v for k, v in QWEN.items() if k not in ("architectures", "model_type")})).eval()
    vae = AutoencoderKL(**{k: v for k, v in VAE.items() if k != "_class_name"}).eval()
    pipe = LongCatImagePipeline(scheduler=FlowMatchEulerDiscreteScheduler(), vae=vae, text_encoder=encoder,
                                tokenizer=Tokenizer(), text_processor=None, transformer=transformer)
    rec = Recorder()
    rec.hook(transformer, "transformer", "hidden_states", extra=lambda kw: (kw["encoder_hidden_states"].shape[1],))
    rec.hook(encoder, "text_encoder", "input_ids")
    rec.wrap(vae, "decode", "vae.decode")
    h, w = 16 * rng.randint(2, 6), 16 * rng.randint(2, 6)
    steps, guidance, per_prompt = rng.randint(1, 2), rng.choice([1.0, 4.5]), rng.randint(1, 2)
    with torch.no_grad():
        pipe("a red cat", height=h, width=w, num_inference_steps=steps, guidance_scale=guidance,
             num_images_per_prompt=per_prompt, enable_prompt_rewrite=False, output_type="np")
    index, _ = _configs()
    report = estimate_configs(index, {"transformer": {**tcfg, "_class_name": "LongCatImageTransformer2DModel"},
                                      "text_encoder": QWEN, "vae": VAE},
                              Settings(height=h, width=w, steps=steps, guidance_scale=guidance,
                                       num_images_per_prompt=per_prompt))
    where = f"seed {SEED}: {h}×{w}, {steps} steps, guidance {guidance}, {per_prompt} per prompt"
    assert rec.planned_calls(report) == dict(rec.calls), where
    assert rec.shapes["text_encoder"] == {(PREFIX_TOKENS + 512 + SUFFIX_TOKENS,)}, where
    assert rec.shapes["transformer"] == {((h // 16) * (w // 16), 64, 512)}, where
    assert rec.shapes["vae.decode"] == {(16, h // 8, w // 8)}, where
