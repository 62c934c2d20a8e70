"""NucleusMoEImagePipeline semantics (diffusers 0.42.1 ``pipelines/nucleusmoe_image``) on configs built for the purpose
(validation/configs/nucleusmoe-image): defaults, the prompt and the negative prompt encoded and denoised as separate
batch-1 passes, the text padded to a multiple of 8, sizes floored to 16, refusals; the fixtures against flopcalc; and
the plan against the real ``NucleusMoEImagePipeline.__call__`` run on CPU with tiny random components (a stand-in
processor that gives every prompt the token count asked for, padded as the real one pads)."""

from __future__ import annotations

import pytest

import flopcalc
from call_support import REPO, Recorder, assert_fixture, card_fixtures, read
from card_support import runs_by_call
from conftest import SEED
from flopcalc.engine.errors import ConfigError, FlopcalcError, OptionError
from flopcalc.engine.pipelines import Settings
from flopcalc.flops.estimate import estimate_configs
from flopcalc.formulas.nucleusmoe_image import expert_capacity

FOLDER = REPO / "validation/configs/nucleusmoe-image"
MODEL = str(FOLDER)
QWEN3VL = {"architectures": ["Qwen3VLForConditionalGeneration"], "model_type": "qwen3_vl",
           "text_config": {"hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 8, "num_attention_heads": 2,
                           "num_key_value_heads": 1, "head_dim": 8, "vocab_size": 64},
           "vision_config": {"depth": 1, "hidden_size": 16, "intermediate_size": 16, "num_heads": 2,
                             "out_hidden_size": 16, "deepstack_visual_indexes": [0], "num_position_embeddings": 16}}
VAE = {"_class_name": "AutoencoderKLQwenImage", "base_dim": 8, "z_dim": 4, "dim_mult": [1, 1, 1, 1],
       "num_res_blocks": 1, "attn_scales": [], "temperal_downsample": [False, True, True],
       "latents_mean": [0.0] * 4, "latents_std": [1.0] * 4}


def _configs() -> tuple[dict, dict]:
    return read(FOLDER / "model_index.json"), {n: read(FOLDER / n / "config.json")
                                                for n in ("text_encoder", "transformer", "vae")}


@pytest.mark.parametrize("path", card_fixtures("nucleusmoe-image"), ids=lambda p: p.stem)
def test_fixtures_are_exact(path):
    fixture = read(path)
    s = fixture["settings"]
    assert_fixture(flopcalc.estimate(MODEL, height=s.get("height"), width=s.get("width")), fixture)


def test_defaults_and_separate_guidance_passes():
    r = flopcalc.estimate(MODEL)
    s = r.settings
    assert (r.pipeline, s.height, s.width, s.steps, s.guidance_scale, s.max_sequence_length) == (
        "NucleusMoEImagePipeline", 1024, 1024, 50, 4.0, 1024)
    assert r.passes == 2
    assert runs_by_call(r) == {"text_encoder.forward": 2, "transformer.forward": 100, "vae.decode": 1}
    assert r.component("text_encoder").shape == {"seq_len": 1024}
    assert r.component("transformer").shape == {"latent_height": 128, "latent_width": 128, "text_len": 1024}
    off = flopcalc.estimate(MODEL, guidance_scale=1.0, steps=4, num_images_per_prompt=2, batch_size=3,
                            max_sequence_length=77, height=1000, width=1344)
    assert off.passes == 1
    assert runs_by_call(off) == {"text_encoder.forward": 3, "transformer.forward": 24, "vae.decode": 6}
    assert (off.settings.height, off.settings.width) == (992, 1344)  # floored to 16, as prepare_latents does
    assert off.component("text_encoder").shape == {"seq_len": 80}  # padded to a multiple of 8
    assert off.component("transformer").shape == {"latent_height": 124, "latent_width": 168, "text_len": 80}
    assert any("floored to 992×1344" in n for n in off.notes)


def test_expert_capacity_and_moe_layers():
    """The routed work is E·C rows of an expert, C = max(1, ceil(γ·N/E)); 20 of the 24 default blocks are MoE."""
    assert [expert_capacity(n, 128, 8.0) for n in (1, 16, 17, 4096)] == [1, 1, 2, 256]
    tree = flopcalc.estimate(MODEL).component("transformer").tree
    experts = tree.find("transformer_blocks.3.img_mlp.experts")
    assert experts is not None and tree.find("transformer_blocks.2.img_mlp.experts") is None
    assert tree.find("transformer_blocks.23.img_mlp.experts") is None
    assert 2 * experts.per_item.macs("torch") == 2 * 3 * 128 * 256 * 2048 * 1344


def test_refusals():
    with pytest.raises(OptionError, match="--strength does not apply to NucleusMoEImagePipeline"):
        flopcalc.estimate(MODEL, strength=0.5)
    with pytest.raises(FlopcalcError, match="no closed-form law"):
        from flopcalc.flops.symbolic import symbolic_estimate

        symbolic_estimate(MODEL)
    index, components = _configs()
    t = components["transformer"]
    with pytest.raises(ConfigError, match="joint_attention_dim 4096"):
        estimate_configs(index, {**components, "transformer": {**t, "joint_attention_dim": 4096}}, Settings())
    with pytest.raises(ConfigError, match="patch_size \\(4\\) be 2"):
        estimate_configs(index, {**components, "transformer": {**t, "patch_size": 4}}, Settings())
    with pytest.raises(ConfigError, match="z_dim is 16"):
        estimate_configs(index, {**components, "transformer": {**t, "in_channels": 32, "out_channels": 8}}, Settings())
    with pytest.raises(ConfigError, match="set out_channels 16"):
        estimate_configs(index, {**components, "transformer": {**t, "out_channels": None}}, Settings())
    with pytest.raises(ConfigError, match="more than the"):
        estimate_configs(index, {**components, "transformer": {**t, "capacity_factors": 200.0}}, Settings())
    with pytest.raises(ConfigError, match="capacity_factors has 2 entries for 24 blocks"):
        estimate_configs(index, {**components, "transformer": {**t, "capacity_factors": [8.0, 8.0]}}, Settings())
    with pytest.raises(ConfigError, match="use_grouped_mm true"):
        estimate_configs(index, {**components, "transformer": {**t, "use_grouped_mm": True}}, Settings())
    with pytest.raises(ConfigError, match="must be a multiple of num_key_value_heads"):
        estimate_configs(index, {**components, "transformer": {**t, "num_key_value_heads": 5}}, Settings())
    with pytest.raises(ConfigError, match="text tokens do not fit"):
        estimate_configs(index, components, Settings(height=8192, width=8192, max_sequence_length=4000))


@pytest.mark.live
def test_the_plan_mirrors_the_real_call(rng):
    pytest.importorskip("diffusers")
    import torch
    from diffusers import (AutoencoderKLQwenImage, FlowMatchEulerDiscreteScheduler, NucleusMoEImagePipeline,
                           NucleusMoEImageTransformer2DModel)
    from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration

    length = rng.randint(1, 30)

    class Batch(dict):
        __getattr__ = dict.__getitem__

        def to(self, device=None, **kwargs):
            return self

    class Processor:
        def apply_chat_template(self, messages, **kwargs):
            return str(messages)

        def __call__(self, text, padding=None, pad_to_multiple_of=None, max_length=None, **kwargs):
            n = min(length, max_length)
            n = -(-n // pad_to_multiple_of) * pad_to_multiple_of
            return Batch(input_ids=torch.ones(len(text), n, dtype=torch.long),
                         attention_mask=torch.ones(len(text), n, dtype=torch.long))

    tcfg = dict(in_channels=16, out_channels=4, num_layers=rng.randint(1, 5), attention_head_dim=24, num_attention_heads=2,
                num_key_value_heads=rng.choice([1, 2]), joint_attention_dim=16, axes_dims_rope=[4, 10, 10],
                num_experts=4, moe_intermediate_dim=8, capacity_factors=2.0,
                dense_moe_strategy=rng.choice(["leave_first_block_dense", "all_moe", "all_dense"]))
    transformer = NucleusMoEImageTransformer2DModel(**tcfg).eval()
    encoder = Qwen3VLForConditionalGeneration(Qwen3VLConfig(**{k: v for k, v in QWEN3VL.items()
                                                               if k not in ("architectures", "model_type")})).eval()
    vae = AutoencoderKLQwenImage(**{k: v for k, v in VAE.items() if k != "_class_name"}).eval()
    pipe = NucleusMoEImagePipeline(transformer=transformer, scheduler=FlowMatchEulerDiscreteScheduler(), vae=vae,
                                   text_encoder=encoder, processor=Processor())
    rec = Recorder()
    rec.hook(transformer, "transformer", "hidden_states", extra=lambda kw: tuple(kw["encoder_hidden_states"].shape[1:]))
    rec.hook(encoder, "text_encoder", "input_ids")
    rec.wrap(vae, "decode", "vae.decode")
    h, w = 16 * rng.randint(2, 5) + rng.choice([0, 8]), 16 * rng.randint(2, 5)
    steps, guidance, per_prompt = rng.randint(1, 2), rng.choice([1.0, 4.0]), rng.randint(1, 2)
    with torch.no_grad():
        pipe("a prompt", height=h, width=w, num_inference_steps=steps, guidance_scale=guidance,
             num_images_per_prompt=per_prompt, max_sequence_length=length, output_type="np")
    index, _ = _configs()
    report = estimate_configs(index, {"transformer": {**tcfg, "_class_name": "NucleusMoEImageTransformer2DModel"},
                                      "text_encoder": QWEN3VL, "vae": VAE},
                              Settings(height=h, width=w, steps=steps, guidance_scale=guidance,
                                       num_images_per_prompt=per_prompt, max_sequence_length=length))
    where = f"seed {SEED}: {h}×{w}, {steps} steps, guidance {guidance}, {length} tokens, {per_prompt} per prompt"
    padded = -(-length // 8) * 8
    assert rec.planned_calls(report) == dict(rec.calls), where
    assert rec.shapes["text_encoder"] == {(padded,)}, where
    assert rec.shapes["transformer"] == {((h // 16) * (w // 16), 16, padded, 16)}, where
    assert rec.shapes["vae.decode"] == {(4, 1, h // 16 * 2, w // 16 * 2)}, where
