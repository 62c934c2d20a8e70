"""EasyAnimate pipelines (diffusers ``pipelines/easyanimate/``) on the bundled Control card: the Control plan's
defaults, the text-to-video and inpaint plans on the same weights with their transformers' input channels, the closed
forms of both block kinds and the causal VAE's frame counts, refusals, the fixtures; and the Control plan against the
real ``__call__`` on tiny random components (skipped without torch)."""

from __future__ import annotations

import pytest

import flopcalc
from flopcalc.engine.errors import ConfigError, FlopcalcError, OptionError, ResolutionError
from flopcalc.engine.pipelines import Settings
from flopcalc.engine.settings import Counting
from flopcalc.flops.estimate import estimate_configs
from flopcalc.formulas.magvit import encode_chunks, temporal_out
from flopcalc.engine.sources import resolve
from card_support import runs_by_call
from fixture_support import assert_fixture, fixtures

CARD = "easyanimate-v5.1-7b-zh-control"


def _plan(settings: Settings, pipeline: str | None = None, **overrides):
    source = resolve(CARD)
    components = {k: {**v, **overrides.get(k, {})} for k, v in source.components.items()}
    index = {**source.model_index, **({"_class_name": pipeline} if pipeline else {})}
    return estimate_configs(index, components, settings)


def test_control_defaults():
    r = flopcalc.estimate(CARD)
    s = r.settings
    assert (s.height, s.width, s.num_frames, s.steps, s.guidance_scale) == (512, 512, 49, 50, 5.0)
    assert r.pipeline == "EasyAnimateControlPipeline" and r.passes == 2
    assert runs_by_call(r) == {"text_encoder.forward": 2, "vae.encode": 1, "transformer.forward": 100,
                               "vae.decode": 1}
    assert r.component("transformer").shape == {"latent_height": 64, "latent_width": 64, "text_len": 256,
                                                "latent_frames": 13}
    assert r.component("text_encoder").shape == {"seq_len": 256}
    assert r.component("vae", "encode").shape == {"height": 512, "width": 512, "frames": 49}


def test_text_to_video_and_inpaint_plans():
    t2v = _plan(Settings(), "EasyAnimatePipeline", transformer={"in_channels": 16})
    assert runs_by_call(t2v) == {"text_encoder.forward": 2, "transformer.forward": 100, "vae.decode": 1}
    inpaint = _plan(Settings(strength=0.7), "EasyAnimateInpaintPipeline", transformer={"in_channels": 33})
    # int(50 · 0.7) = 35 steps; the masked video and (strength < 1) the input video encoded once each
    assert runs_by_call(inpaint) == {"text_encoder.forward": 2, "vae.encode": 2, "transformer.forward": 70,
                                     "vae.decode": 1}
    full = _plan(Settings(), "EasyAnimateInpaintPipeline", transformer={"in_channels": 33})
    assert runs_by_call(full)["vae.encode"] == 1 and runs_by_call(full)["transformer.forward"] == 100
    with pytest.raises(ConfigError, match="in_channels 48 is not what this pipeline"):
        _plan(Settings(), "EasyAnimatePipeline")
    with pytest.raises(ConfigError, match="a text-to-video transformer"):
        _plan(Settings(), "EasyAnimateInpaintPipeline", transformer={"in_channels": 16})


def test_block_closed_forms():
    """MMDiT block: norms 2·(c·6d), attention 4Nd² + 4Td² + 2h(N+T)²d_h, ff 8Nd², txt_ff 8Td². Shared-weight block:
    to_q/k/v on N+T, to_out on N, attention as above, ff on N+T."""
    r = flopcalc.estimate(CARD, height=256, width=256, num_frames=1, steps=1)
    tree = r.component("transformer").tree
    d, h, dh, c, n, t = 3072, 48, 64, 512, 16 * 16, 256
    att = 2 * h * (n + t) ** 2 * dh
    mmdit = 2 * c * 6 * d + 4 * n * d * d + 4 * t * d * d + att + 8 * n * d * d + 8 * t * d * d
    shared = 2 * c * 6 * d + 3 * (n + t) * d * d + n * d * d + att + 8 * (n + t) * d * d
    assert tree.find("transformer_blocks.0").per_item.macs("torch") == mmdit
    assert tree.find("transformer_blocks.35").per_item.macs("torch") == shared


def test_causal_vae_frames():
    assert encode_chunks(49) == [1] + [4] * 12 and encode_chunks(9) == [1, 4, 4]
    assert [temporal_out(f, 2, True) for f in (1, 2, 4)] == [1, 1, 2]
    assert [temporal_out(f, 2, False) for f in (1, 2, 4)] == [0, 1, 2]
    with pytest.raises(ResolutionError, match="leaves no latent frame"):
        flopcalc.estimate(CARD, num_frames=47)
    # the decoder: one call on the first latent frame (stays one frame), a call per later frame (grows to 4)
    one = flopcalc.estimate(CARD, num_frames=1).component("vae", "decode").tree.find("decoder").total.macs("torch")
    two = flopcalc.estimate(CARD, num_frames=5).component("vae", "decode").tree.find("decoder").total.macs("torch")
    three = flopcalc.estimate(CARD, num_frames=9).component("vae", "decode").tree.find("decoder").total.macs("torch")
    assert three - two == two - one > one > 0  # a later call runs 2 and 4 frames after the temporal up-samplers


def test_refusals():
    with pytest.raises(OptionError, match="--strength does not apply"):
        flopcalc.estimate(CARD, strength=0.5)
    with pytest.raises(OptionError, match="one video"):
        flopcalc.estimate(CARD, batch_size=2)
    with pytest.raises(ResolutionError, match="multiple of 16"):
        flopcalc.estimate(CARD, height=504)
    with pytest.raises(OptionError, match="--max-sequence-length"):
        flopcalc.estimate(CARD, max_sequence_length=128)
    pytest.importorskip("sympy")
    from flopcalc.flops.symbolic import symbolic_estimate

    with pytest.raises(FlopcalcError, match="no closed-form law"):
        symbolic_estimate(CARD)


@pytest.mark.parametrize("path", fixtures(CARD), ids=lambda p: p.stem)
def test_fixture(path):
    assert_fixture(path)


def test_control_plan_is_the_real_call(rng):
    vcs = pytest.importorskip("video_call_support")
    import torch
    from diffusers import (AutoencoderKLMagvit, EasyAnimateControlPipeline, EasyAnimateTransformer3DModel,
                           FlowMatchEulerDiscreteScheduler)
    from transformers import Qwen2VLConfig, Qwen2VLForConditionalGeneration

    torch.manual_seed(vcs.SEED % 2**31)
    models = {
        "text_encoder": Qwen2VLForConditionalGeneration(Qwen2VLConfig(
            text_config=dict(hidden_size=16, intermediate_size=32, num_attention_heads=2, num_key_value_heads=1,
                             num_hidden_layers=2, vocab_size=64, rope_scaling={"type": "mrope", "mrope_section": [2, 1, 1]}),
            vision_config=dict(depth=1, embed_dim=16, hidden_size=16, num_heads=2))),
        "transformer": EasyAnimateTransformer3DModel(
            num_attention_heads=2, attention_head_dim=16, in_channels=12, out_channels=4, patch_size=2, num_layers=2,
            mmdit_layers=1, time_embed_dim=8, add_norm_text_encoder=True, text_embed_dim=16),
        "vae": AutoencoderKLMagvit(latent_channels=4, block_out_channels=[8, 8, 8, 8], layers_per_block=1,
                                   norm_num_groups=4),
    }
    for m in models.values():
        m.eval()
    configs = {name: vcs.config_dict(m) for name, m in models.items()}
    rec = vcs.Recorder()
    rec.forward("text_encoder", models["text_encoder"], key="input_ids")
    rec.forward("transformer", models["transformer"])
    rec.method("vae.decode", models["vae"], "decode")
    rec.method("vae.encode", models["vae"], "encode")
    pipe = EasyAnimateControlPipeline(tokenizer=vcs.Tokenizer(), scheduler=FlowMatchEulerDiscreteScheduler(), **models)
    # diffusers 0.42.1's __call__ passes encode_prompt a text_encoder_index it does not take (TypeError): drop it
    encode = pipe.encode_prompt
    pipe.encode_prompt = lambda text_encoder_index=None, **kwargs: encode(**kwargs)
    h, w = rng.choice([(32, 48), (48, 32)])
    frames, guidance = rng.choice([1, 5, 9]), rng.choice([1.0, 5.0])
    with torch.no_grad():
        pipe(prompt="a prompt", negative_prompt="bad", num_frames=frames, height=h, width=w,
             control_video=torch.rand(1, 3, frames, h, w),
             num_inference_steps=1, guidance_scale=guidance, output_type="latent",  # no decode_latents in 0.42.1
             generator=torch.Generator().manual_seed(vcs.SEED % 2**31))
    settings = Settings(height=h, width=w, num_frames=frames, steps=1, guidance_scale=guidance)
    index = {"_class_name": "EasyAnimateControlPipeline", **{name: ["x", "y"] for name in configs}}
    where = f"seed {vcs.SEED}: {h}×{w}×{frames}, guidance {guidance}"
    planned = vcs.plan_runs(index, configs, settings)
    assert planned.pop("vae.decode") == 1
    assert planned == dict(rec.calls), where
    lat = ((frames - 1) // 4 + 1, h // 8, w // 8)
    assert rec.shapes["transformer"] == {(4, *lat)}, where
    assert rec.shapes["vae.encode"] == {(3, frames, h, w)} and rec.shapes["text_encoder"] == {(256,)}, where


@pytest.mark.parametrize("call,height,width,frames", [("decode", 576, 640, 5), ("encode", 448, 1024, 9)])
def test_tiled_vae_is_what_the_real_vae_counts_with_tiling_on(call, height, width, frames):
    """``--vae-tiling``: the decode on overlapping 64-latent tiles every 56 (512 / 448 px over 8) and the control
    video's encode on 512-px tiles every 448, each tile over all frames, equal FlopCounterMode on the real
    AutoencoderKLMagvit after ``enable_tiling()`` (the card's config, meta): a 72×80 latent (tiles 64 and 16 each way)
    and a 448×1024 video (one row: the height within a tile; columns of 512, 512 and 128 px)."""
    pytest.importorskip("diffusers")
    from pathlib import Path

    from flopcalc.engine.measure.harness import measure_component

    measured = measure_component(Path(__file__).resolve().parents[1] / "model_cards" / CARD / "vae",
                                 "AutoencoderKLMagvit", call=call,
                                 settings={"height": height, "width": width, "num_frames": frames, "vae_tiling": 1})
    r = flopcalc.estimate(CARD, height=height, width=width, num_frames=frames, vae_tiling=True)
    assert 2 * r.component("vae", call).macs == measured["torch"]["flops"]


def test_tiled_vae_plan():
    """768×1344 (a 96×168 latent): decoded in 2 × 3 latent tiles (rows 64 and 40, columns 64, 64 and 56), the control
    video encoded in 2 × 3 pixel tiles (rows 512 and 320, columns 512, 512 and 448); the transformer unchanged; at the
    default 512×512 the latent fits one tile and both calls run whole, as the VAE runs them; tiled, no symbolic law."""
    from flopcalc.engine.pipelines import plan

    source = resolve(CARD)
    runs = plan(source.model_index, source.components, Settings(height=768, width=1344, vae_tiling=True)).runs
    big = _plan(Settings(height=768, width=1344, vae_tiling=True))
    assert {(r.shape.latent_height, r.shape.latent_width): r.runs
            for r in runs if r.call == "decode"} == {(64, 64): 2, (64, 56): 1, (40, 64): 2, (40, 56): 1}
    assert {(r.shape.height, r.shape.width): r.runs
            for r in runs if r.call == "encode"} == {(512, 512): 2, (512, 448): 1, (320, 512): 2,
                                                              (320, 448): 1}
    plain = _plan(Settings(height=768, width=1344))
    assert big.component("transformer", "forward").macs == plain.component("transformer", "forward").macs
    assert big.component("vae", "decode").macs > plain.component("vae", "decode").macs  # overlaps counted in full
    assert any("6 tile(s) per video" in n for n in big.notes)
    small = _plan(Settings(vae_tiling=True))
    assert small.component("vae", "decode").macs == _plan(Settings()).component("vae", "decode").macs
    assert small.component("vae", "encode").macs == _plan(Settings()).component("vae", "encode").macs
    assert any("fits one tile" in n for n in small.notes)
    with pytest.raises(FlopcalcError, match="no closed-form law"):
        _plan(Settings(height=768, width=1344, vae_tiling=True, counting=Counting(symbolic=True)), "EasyAnimatePipeline",
              transformer={"in_channels": 16})
