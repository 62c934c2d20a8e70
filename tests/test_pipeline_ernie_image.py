"""ErnieImagePipeline semantics (diffusers 0.42.1 ``pipelines/ernie_image``) on configs built for the purpose
(validation/configs/ernie-image): defaults, guidance as a doubled batch, the unpadded prompt (``--prompt-tokens``)
and the negative prompt's one token, the ×16 latent and the ×8 decode, refusals; the fixtures against flopcalc;
and the plan against the real ``ErnieImagePipeline.__call__`` run on CPU with tiny random components (a stand-in
tokenizer giving one id per word and no BOS, as the pipeline's Tekken tokenizer does)."""

from __future__ import annotations

import pytest

import flopcalc
from call_support import REPO, Recorder, assert_fixture, card_fixtures, read
from card_support import runs_by_call
from conftest import SEED
from flopcalc.engine.errors import ConfigError, OptionError, ResolutionError
from flopcalc.engine.pipelines import Settings
from flopcalc.flops.estimate import estimate_configs

FOLDER = REPO / "validation/configs/ernie-image"
MODEL = str(FOLDER)
MISTRAL = {"architectures": ["Mistral3Model"], "model_type": "mistral3",
           "text_config": {"model_type": "ministral3", "hidden_size": 16, "intermediate_size": 24,
                           "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 8,
                           "vocab_size": 64},
           "vision_config": {"model_type": "pixtral", "hidden_size": 16, "intermediate_size": 16,
                             "num_hidden_layers": 1, "num_attention_heads": 2, "patch_size": 4}}
VAE = {"_class_name": "AutoencoderKLFlux2", "block_out_channels": [8, 8, 8, 8], "layers_per_block": 1,
       "norm_num_groups": 4, "latent_channels": 4}


@pytest.mark.parametrize("path", card_fixtures("ernie-image") + card_fixtures("ernie-image-text-encoder"),
                         ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_fixtures_are_exact(path):
    fixture = read(path)
    s = fixture["settings"]
    model = MODEL if path.parent.name == "ernie-image" else str(REPO / "validation/configs/ernie-image-text-encoder")
    assert_fixture(flopcalc.estimate(model, height=s.get("height"), width=s.get("width")), fixture)


def test_defaults():
    r = flopcalc.estimate(MODEL)
    s = r.settings
    assert (r.pipeline, s.height, s.width, s.steps, s.guidance_scale) == ("ErnieImagePipeline", 1024, 1024, 50, 4.0)
    assert r.passes == 2
    comp = r.component("text_encoder")
    assert sorted((p.per_item.macs("torch") > 0, p.count) for p in comp.tree.children) == [(True, 1), (True, 1)]
    assert runs_by_call(r)["transformer.forward"] == 100 and runs_by_call(r)["vae.decode"] == 1
    assert r.component("transformer").shape == {"latent_height": 64, "latent_width": 64, "text_len": 128}
    assert r.component("vae", "decode").shape == {"latent_height": 128, "latent_width": 128}
    assert any("assumed" in n and "--prompt-tokens" in n for n in r.notes)


def test_prompt_tokens_negative_and_guidance():
    r = flopcalc.estimate(MODEL, prompt_tokens=40, negative_prompt=True, height=512, width=768)
    assert r.component("transformer").shape == {"latent_height": 32, "latent_width": 48, "text_len": 40}
    shapes = sorted(p.name for p in r.component("text_encoder").tree.children)
    assert len(shapes) == 2  # the prompt and the given negative prompt, both at 40 tokens: one piece each
    off = flopcalc.estimate(MODEL, guidance_scale=1.0, batch_size=2, num_images_per_prompt=2, steps=3)
    assert off.passes == 1
    assert runs_by_call(off) == {"text_encoder.forward": 2, "transformer.forward": 12, "vae.decode": 4}


def test_refusals():
    with pytest.raises(OptionError, match="--strength does not apply to ErnieImagePipeline"):
        flopcalc.estimate(MODEL, strength=0.5)
    with pytest.raises(OptionError, match="--max-sequence-length does not apply"):
        flopcalc.estimate(MODEL, max_sequence_length=64)
    with pytest.raises(ResolutionError, match="multiple of 16"):
        flopcalc.estimate(MODEL, height=1000)
    index = read(FOLDER / "model_index.json")
    components = {n: read(FOLDER / n / "config.json") for n in ("text_encoder", "transformer", "vae")}
    with pytest.raises(ConfigError, match="qk_layernorm false cannot be built"):
        estimate_configs(index, {**components, "transformer": {**components["transformer"], "qk_layernorm": False}},
                         Settings())
    with pytest.raises(OptionError, match="--prompt-tokens does not apply to BriaPipeline"):
        flopcalc.estimate("bria-3.2", prompt_tokens=20)


@pytest.mark.live
def test_the_plan_mirrors_the_real_call(rng):
    pytest.importorskip("diffusers")
    import torch
    from diffusers import (AutoencoderKLFlux2, ErnieImagePipeline, ErnieImageTransformer2DModel,
                           FlowMatchEulerDiscreteScheduler)
    from transformers import Mistral3Config, Mistral3Model

    class Tokenizer:
        bos_token_id = 1

        def __call__(self, text, **kwargs):
            return {"input_ids": [5] * len(text.split())}

    tcfg = dict(hidden_size=16, num_attention_heads=2, num_layers=1, ffn_hidden_size=24, in_channels=16,
                out_channels=16, patch_size=1, text_in_dim=16, rope_axes_dim=[2, 2, 4])
    transformer = ErnieImageTransformer2DModel(**tcfg).eval()
    encoder = Mistral3Model(Mistral3Config(**{k: v for k, v in MISTRAL.items()
                                              if k not in ("architectures", "model_type")})).eval()
    vae = AutoencoderKLFlux2(**{k: v for k, v in VAE.items() if k != "_class_name"}).eval()
    pipe = ErnieImagePipeline(transformer=transformer, vae=vae, text_encoder=encoder, tokenizer=Tokenizer(),
                              scheduler=FlowMatchEulerDiscreteScheduler())
    rec = Recorder()
    rec.hook(transformer, "transformer", "hidden_states", extra=lambda kw: (kw["text_bth"].shape[1],))
    rec.hook(encoder, "text_encoder", "input_ids")
    rec.wrap(vae, "decode", "vae.decode")
    h, w = 16 * rng.randint(2, 6), 16 * rng.randint(2, 6)
    steps, guidance, per_prompt, words = rng.randint(1, 2), rng.choice([1.0, 4.0]), rng.randint(1, 2), rng.randint(1, 9)
    with torch.no_grad():
        pipe(" ".join(["word"] * words), height=h, width=w, num_inference_steps=steps, guidance_scale=guidance,
             num_images_per_prompt=per_prompt, output_type="np")
    index = read(FOLDER / "model_index.json")
    report = estimate_configs(index, {"transformer": {**tcfg, "_class_name": "ErnieImageTransformer2DModel"},
                                      "text_encoder": MISTRAL, "vae": VAE},
                              Settings(height=h, width=w, steps=steps, guidance_scale=guidance,
                                       num_images_per_prompt=per_prompt).with_options(prompt_tokens=words))
    where = f"seed {SEED}: {h}×{w}, {steps} steps, guidance {guidance}, {per_prompt} per prompt, {words} tokens"
    assert rec.planned_calls(report) == dict(rec.calls), where
    assert rec.shapes["text_encoder"] == ({(words,), (1,)} if guidance > 1 else {(words,)}), where
    assert rec.shapes["transformer"] == {(16, h // 16, w // 16, words)}, where
    assert rec.shapes["vae.decode"] == {(4, h // 8, w // 8)}, where
