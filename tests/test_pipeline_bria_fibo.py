"""BriaFiboPipeline semantics (diffusers 0.42.1 ``pipelines/bria_fibo``) on configs built for the purpose
(validation/configs/bria-fibo): defaults, guidance as a doubled batch, the unpadded prompt counted at
``max_sequence_length`` (the upper bound), the negative prompt's one token, one token per ×16 latent pixel,
refusals; the fixtures against flopcalc; and the plan against the real ``BriaFiboPipeline.__call__`` run on CPU with
tiny random components (a stand-in tokenizer giving one id per word, truncated at ``max_length``)."""

from __future__ import annotations

import pytest

import flopcalc
from call_support import REPO, Recorder, assert_fixture, card_fixtures, read
from card_support import runs_by_call
from conftest import SEED
from flopcalc.engine.errors import ConfigError, FlopcalcError, OptionError, ResolutionError
from flopcalc.engine.pipelines import Settings
from flopcalc.flops.estimate import estimate_configs

FOLDER = REPO / "validation/configs/bria-fibo"
MODEL = str(FOLDER)
SMOL = {"architectures": ["SmolLM3ForCausalLM"], "model_type": "smollm3", "hidden_size": 16, "intermediate_size": 24,
        "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1, "vocab_size": 128256,
        "tie_word_embeddings": True}
#: A ×16 Wan 2.2-style VAE (patchified, residual), as FIBO's hard-coded vae_scale_factor 16 assumes.
VAE = {"_class_name": "AutoencoderKLWan", "base_dim": 8, "decoder_base_dim": 8, "z_dim": 4, "dim_mult": [1, 1, 1, 1],
       "num_res_blocks": 1, "attn_scales": [], "temperal_downsample": [False, True, True], "is_residual": True,
       "patch_size": 2, "in_channels": 12, "out_channels": 12, "scale_factor_spatial": 16,
       "latents_mean": [0.0] * 4, "latents_std": [1.0] * 4}


def _components() -> tuple[dict, dict]:
    return read(FOLDER / "model_index.json"), {n: read(FOLDER / n / "config.json")
                                                for n in ("text_encoder", "transformer", "vae")}


@pytest.mark.parametrize("path", card_fixtures("bria-fibo") + card_fixtures("bria-fibo-text-encoder"),
                         ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_fixtures_are_exact(path):
    fixture = read(path)
    s = fixture["settings"]
    model = MODEL if path.parent.name == "bria-fibo" else str(REPO / "validation/configs/bria-fibo-text-encoder")
    assert_fixture(flopcalc.estimate(model, height=s.get("height"), width=s.get("width")), fixture)


def test_defaults():
    r = flopcalc.estimate(MODEL)
    s = r.settings
    assert (r.pipeline, s.height, s.width, s.steps, s.guidance_scale, s.max_sequence_length) == (
        "BriaFiboPipeline", 1024, 1024, 30, 5.0, 3000)
    assert r.passes == 2
    calls = runs_by_call(r)
    assert (calls["transformer.forward"], calls["vae.decode"]) == (60, 1)
    assert r.component("transformer").shape == {"latent_height": 64, "latent_width": 64, "text_len": 3000}
    assert r.component("vae", "decode").shape == {"latent_height": 64, "latent_width": 64}
    assert sorted(p.count for p in r.component("text_encoder").tree.children) == [1, 1]


def test_options():
    r = flopcalc.estimate(MODEL, max_sequence_length=700, guidance_scale=1.0, batch_size=2, num_images_per_prompt=2,
                          steps=3, height=512, width=768)
    assert r.passes == 1
    assert runs_by_call(r) == {"text_encoder.forward": 2, "transformer.forward": 12, "vae.decode": 4}
    assert r.component("text_encoder").shape == {"seq_len": 700}
    assert r.component("transformer").shape == {"latent_height": 32, "latent_width": 48, "text_len": 700}


def test_refusals():
    with pytest.raises(FlopcalcError, match="cannot be greater than 3000"):
        flopcalc.estimate(MODEL, max_sequence_length=3001)
    with pytest.raises(OptionError, match="--strength does not apply to BriaFiboPipeline"):
        flopcalc.estimate(MODEL, strength=0.5)
    with pytest.raises(ResolutionError, match="multiple of 16"):
        flopcalc.estimate(MODEL, width=1000)
    index, components = _components()
    components["transformer"]["attention_head_dim"] = 127
    components["transformer"]["axes_dims_rope"] = [15, 56, 56]
    components["transformer"]["num_attention_heads"] = 1
    with pytest.raises(ConfigError, match="must be even"):
        estimate_configs(index, components, Settings())


@pytest.mark.live
def test_the_plan_mirrors_the_real_call(rng):
    pytest.importorskip("diffusers")
    import torch
    from diffusers import AutoencoderKLWan, BriaFiboPipeline, BriaFiboTransformer2DModel, FlowMatchEulerDiscreteScheduler
    from transformers import SmolLM3Config, SmolLM3ForCausalLM

    class Batch(dict):
        __getattr__ = dict.__getitem__

    class Tokenizer:
        def __call__(self, prompts, max_length=None, **kwargs):
            length = min(max(len(p.split()) for p in prompts), max_length)
            return Batch(input_ids=torch.ones(len(prompts), length, dtype=torch.long),
                         attention_mask=torch.ones(len(prompts), length, dtype=torch.long))

    tcfg = dict(in_channels=4, num_layers=1, num_single_layers=1, attention_head_dim=8, num_attention_heads=2,
                joint_attention_dim=32, axes_dims_rope=[0, 4, 4], text_encoder_dim=16)
    transformer = BriaFiboTransformer2DModel(**tcfg).eval()
    encoder = SmolLM3ForCausalLM(SmolLM3Config(**{k: v for k, v in SMOL.items()
                                                  if k not in ("architectures", "model_type")})).eval()
    vae = AutoencoderKLWan(**{k: v for k, v in VAE.items() if k != "_class_name"}).eval()
    pipe = BriaFiboPipeline(transformer=transformer, scheduler=FlowMatchEulerDiscreteScheduler(), vae=vae,
                            text_encoder=encoder, tokenizer=Tokenizer())
    rec = Recorder()
    rec.hook(transformer, "transformer", "hidden_states", extra=lambda kw: (kw["encoder_hidden_states"].shape[1],))
    rec.hook(encoder, "text_encoder", "input_ids")
    rec.wrap(vae, "decode", "vae.decode")
    h, w = 16 * rng.randint(2, 6), 16 * rng.randint(2, 6)
    steps, guidance, length = rng.randint(1, 2), rng.choice([1.0, 5.0]), rng.randint(2, 20)
    with torch.no_grad():
        pipe(" ".join(["word"] * 30), height=h, width=w, num_inference_steps=steps, guidance_scale=guidance,
             max_sequence_length=length, output_type="np")
    index, _ = _components()
    report = estimate_configs(index, {"transformer": {**tcfg, "_class_name": "BriaFiboTransformer2DModel"},
                                      "text_encoder": SMOL, "vae": VAE},
                              Settings(height=h, width=w, steps=steps, guidance_scale=guidance,
                                       max_sequence_length=length))
    where = f"seed {SEED}: {h}×{w}, {steps} steps, guidance {guidance}, {length} tokens"
    assert rec.planned_calls(report) == dict(rec.calls), where
    assert rec.shapes["text_encoder"] == ({(length,), (1,)} if guidance > 1 else {(length,)}), where
    assert rec.shapes["transformer"] == {((h // 16) * (w // 16), 4, length)}, where
    assert rec.shapes["vae.decode"] == {(4, 1, h // 16, w // 16)}, where


# --------------------------------------------------------------------------- FIBO Edit


def _edit(settings: Settings):
    _, components = _components()
    return estimate_configs({"_class_name": "BriaFiboEditPipeline"}, components, settings)


def test_edit_references_and_output_size():
    from flopcalc.engine.pipelines.bria_fibo import preferred_edit_size, vae_safe_dims

    assert vae_safe_dims(1344, 768) == (1344, 768) and vae_safe_dims(2048, 2048) == (1024, 1024)
    assert vae_safe_dims(1000, 600) == (992, 608)  # 62.5 → 62 (round half to even), 37.5 → 38
    assert preferred_edit_size(768, 1344) == (768, 1360)  # aspect 1.75: (1360, 768) is the nearest
    r = _edit(Settings(height=768, width=1344).with_options(reference_images=2))
    assert (r.settings.height, r.settings.width) == (768, 1360)
    assert runs_by_call(r)["vae.encode"] == 2 and runs_by_call(r)["transformer.forward"] == 60
    assert r.component("transformer").shape == {"latent_height": 48, "latent_width": 85, "text_len": 3000,
                                                "reference_tokens": 2 * 48 * 84}
    as_given = _edit(Settings(height=768, width=1344, resolution_binning=False))
    assert (as_given.settings.height, as_given.settings.width) == (768, 1344)
    with pytest.raises(OptionError, match="--strength does not apply to BriaFiboEditPipeline"):
        _edit(Settings(strength=0.5))


def test_edit_table_and_rounding_are_diffusers_own():
    edit = pytest.importorskip("diffusers.pipelines.bria_fibo.pipeline_bria_fibo_edit")
    from flopcalc.engine.pipelines.bria_fibo import PREFERRED_EDIT_RESOLUTIONS, vae_safe_dims

    assert tuple(edit.PREFERRED_RESOLUTION[1024 * 1024]) == PREFERRED_EDIT_RESOLUTIONS
    for size in ((1000, 600), (4000, 3000), (17, 33), (1344, 768), (1500, 1499)):
        assert vae_safe_dims(*size) == edit._vae_safe_dims(*size)


@pytest.mark.live
def test_the_edit_plan_mirrors_the_real_call(rng):
    pytest.importorskip("diffusers")
    import numpy as np
    import torch
    from diffusers import AutoencoderKLWan, BriaFiboEditPipeline, BriaFiboTransformer2DModel, FlowMatchEulerDiscreteScheduler
    from PIL import Image
    from transformers import SmolLM3Config, SmolLM3ForCausalLM

    class Batch(dict):
        __getattr__ = dict.__getitem__

    class Tokenizer:
        def __call__(self, prompts, max_length=None, **kwargs):
            length = min(max(len(p.split()) for p in prompts), max_length)
            return Batch(input_ids=torch.ones(len(prompts), length, dtype=torch.long),
                         attention_mask=torch.ones(len(prompts), length, dtype=torch.long))

    tcfg = dict(in_channels=4, num_layers=1, num_single_layers=1, attention_head_dim=8, num_attention_heads=2,
                joint_attention_dim=32, axes_dims_rope=[0, 4, 4], text_encoder_dim=16)
    transformer = BriaFiboTransformer2DModel(**tcfg).eval()
    encoder = SmolLM3ForCausalLM(SmolLM3Config(**{k: v for k, v in SMOL.items()
                                                  if k not in ("architectures", "model_type")})).eval()
    vae = AutoencoderKLWan(**{k: v for k, v in VAE.items() if k != "_class_name"}).eval()
    pipe = BriaFiboEditPipeline(transformer=transformer, scheduler=FlowMatchEulerDiscreteScheduler(), vae=vae,
                                text_encoder=encoder, tokenizer=Tokenizer())
    rec = Recorder()
    rec.hook(transformer, "transformer", "hidden_states", extra=lambda kw: (kw["encoder_hidden_states"].shape[1],))
    rec.hook(encoder, "text_encoder", "input_ids")
    rec.wrap(vae, "decode", "vae.decode")
    rec.wrap(vae, "encode", "vae.encode")
    h, w, refs = 16 * rng.randint(2, 6), 16 * rng.randint(2, 6), rng.randint(1, 2)
    steps, guidance, length = 1, rng.choice([1.0, 5.0]), rng.randint(2, 12)
    images = [Image.fromarray(np.zeros((h, w, 3), dtype=np.uint8)) for _ in range(refs)]
    prompt = '{"edit_instruction": "' + " ".join(["word"] * 20) + '"}'
    with torch.no_grad():
        pipe(prompt, image=images, num_inference_steps=steps, guidance_scale=guidance, max_sequence_length=length,
             output_type="np")
    _, components = _components()
    report = estimate_configs({"_class_name": "BriaFiboEditPipeline"},
                              {"transformer": {**tcfg, "_class_name": "BriaFiboTransformer2DModel"},
                               "text_encoder": SMOL, "vae": VAE},
                              Settings(height=h, width=w, steps=steps, guidance_scale=guidance,
                                       max_sequence_length=length).with_options(reference_images=refs))
    where = f"seed {SEED}: references {refs} × {h}×{w}, guidance {guidance}, {length} tokens"
    s = report.settings
    assert rec.planned_calls(report) == dict(rec.calls), where
    assert rec.shapes["vae.encode"] == {(3, 1, h, w)}, where
    tokens = (s.height // 16) * (s.width // 16) + refs * (h // 16) * (w // 16)
    assert rec.shapes["transformer"] == {(tokens, 4, length)}, where
    assert rec.shapes["vae.decode"] == {(4, 1, s.height // 16, s.width // 16)}, where
