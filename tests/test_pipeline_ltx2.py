"""LTX2Pipeline semantics (diffusers ``pipelines/ltx2/pipeline_ltx2.py``): defaults, the guidance passes of a step
(CFG on a doubled batch, spatio-temporal guidance, modality isolation) and their options, the audio length, the
refusals; the card's fixtures against the estimate; and the plan against the real ``LTX2Pipeline.__call__`` run on
tiny random components on CPU (which component runs how often, on what shape)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

import flopcalc
from card_support import FIXTURES, Card, runs_by_call
from flopcalc.engine.errors import FlopcalcError, OptionError, ResolutionError
from flopcalc.engine.pipelines import Settings
from flopcalc.flops.estimate import estimate_configs

CARD = Card("ltx-2")


def _plan(**options):
    return flopcalc.estimate("ltx-2", **options)


def _pieces(report, component="transformer"):
    """``{label: count per run}`` of a row made of pieces (or the one run)."""
    comp = report.component(component)
    nodes = comp.tree.children if comp.tree.formula == "pieces" else (comp.tree,)
    return [n.count for n in nodes], comp


# --------------------------------------------------------------------------- defaults and guidance


def test_defaults_are_the_signature_s():
    r = _plan()
    s = r.settings
    assert (s.height, s.width, s.num_frames, s.steps, s.guidance_scale, s.max_sequence_length) == \
        (512, 768, 121, 30, 3.0, 1024)
    assert dict(s.extra) == {"audio_guidance_scale": 7.0, "audio_modality_scale": 3.0, "audio_stg_scale": 1.0,
                             "frame_rate": 24.0, "modality_scale": 3.0, "stg_blocks": ("28",), "stg_scale": 1.0}
    assert r.pipeline == "LTX2Pipeline" and r.passes == 4
    assert runs_by_call(r) == {"text_encoder.forward": 2, "connectors.forward": 2, "transformer.forward": 30,
                               "vae.decode": 1, "audio_vae.decode": 1, "vocoder.forward": 1}
    assert r.component("text_encoder").shape == {"seq_len": 1024}
    assert r.component("connectors").shape == {"seq_len": 1024}
    # 121 frames → 16 latent frames of 512/32 × 768/32; round(121 / 24 · 25) = 126 audio tokens
    assert r.component("transformer").shape == {"latent_height": 16, "latent_width": 24, "latent_frames": 16,
                                                 "text_len": 1024, "seq_len": 126}
    assert r.component("vae", "decode").shape == {"latent_height": 16, "latent_width": 24, "latent_frames": 16}
    assert r.component("audio_vae", "decode").shape == {"seq_len": 126}
    assert r.component("vocoder").shape == {"seq_len": 4 * 126 - 3}
    # one row of two pieces per step: CFG's two rows and the STG call (a plain forward: the card has no
    # perturbed_attn) as 3 plain forwards, and the modality-isolation call
    counts, comp = _pieces(r)
    assert counts == [3, 1] and comp.runs == 30
    plain, isolated = comp.tree.children
    assert isolated.find("transformer_blocks.0.audio_to_video_attn").total.macs() == 0
    assert plain.find("transformer_blocks.0.audio_to_video_attn").total.macs() > 0


def test_audio_guidance_keeps_cfg_on_at_guidance_1():
    # audio_guidance_scale (7.0) keeps do_classifier_free_guidance on; both at 1 turn it off
    assert _plan(guidance_scale=1.0).passes == 4
    r = _plan(guidance_scale=1.0, audio_guidance_scale=1.0)
    assert r.passes == 3
    assert runs_by_call(r)["text_encoder.forward"] == 1 and runs_by_call(r)["connectors.forward"] == 1
    assert _pieces(r)[0] == [2, 1]  # the conditional call + the plain STG call; the isolation call


def test_audio_scales_fall_back_to_the_video_ones():
    # ``audio_x = audio_x or x``: a zero audio scale takes the video one
    r = _plan(stg_scale=0.0)
    assert r.passes == 4 and dict(r.settings.extra)["audio_stg_scale"] == 1.0  # audio STG still on
    r = _plan(stg_scale=0.0, audio_stg_scale=0.0)
    assert r.passes == 3 and _pieces(r)[0] == [2, 1]
    r = _plan(modality_scale=1.0, audio_modality_scale=0.0)
    assert dict(r.settings.extra)["audio_modality_scale"] == 1.0 and r.passes == 3
    counts, comp = _pieces(r)
    assert comp.tree.formula != "pieces" and comp.runs == 30 * 3
    r = _plan(guidance_scale=1.0, audio_guidance_scale=0.0, stg_scale=0.0, audio_stg_scale=0.0,
              modality_scale=0.5, audio_modality_scale=0.5)
    assert r.passes == 1 and runs_by_call(r)["transformer.forward"] == 30


def test_batch_videos_steps_text_length_and_frame_rate():
    r = _plan(batch_size=2, num_images_per_prompt=3, steps=8, max_sequence_length=256, num_frames=49,
              frame_rate=30.0)
    calls = runs_by_call(r)
    assert calls["text_encoder.forward"] == 2 * 2  # prompts and negatives, before the per-video repeat
    assert calls["connectors.forward"] == 6 * 2  # per video and guidance row
    assert calls["transformer.forward"] == 8 * 6 and calls["vae.decode"] == calls["vocoder.forward"] == 6
    assert _pieces(r)[0] == [3, 1]
    assert r.component("transformer").shape["seq_len"] == round(49 / 30 * 25) == 41
    assert r.component("transformer").shape["text_len"] == 256
    assert r.component("vocoder").shape == {"seq_len": 161}


def test_perturbed_attention_makes_the_stg_call_its_own_piece():
    components = CARD.components()
    components["transformer"]["perturbed_attn"] = True
    r = estimate_configs(CARD.index(), components, Settings())
    counts, comp = _pieces(r)
    assert counts == [2, 1, 1]  # CFG rows; the STG call; the isolation call
    plain, stg, _ = comp.tree.children
    assert comp.params == CARD_PARAMS
    for name in ("attn1", "audio_attn1"):  # block 28: value path only (to_v, to_out)
        p, q = plain.find(f"transformer_blocks.28.{name}"), stg.find(f"transformer_blocks.28.{name}")
        assert q.total.params == p.total.params and q.total.attention == 0
        assert q.total.linear == p.find("to_v").total.linear + p.find("to_out.0").total.linear
    assert stg.find("transformer_blocks.27").total == plain.find("transformer_blocks.27").total
    r = estimate_configs(CARD.index(), components, Settings().with_options(stg_blocks=("3", "60")))
    stg = _pieces(r)[1].tree.children[1]
    assert stg.find("transformer_blocks.3.attn1").total.attention == 0  # block 60 does not exist: ignored


CARD_PARAMS = 18_876_174_592


# --------------------------------------------------------------------------- refusals


def test_refusals_name_the_nearest_valid_values():
    with pytest.raises(OptionError, match="--strength does not apply to LTX2Pipeline"):
        _plan(strength=0.5)
    with pytest.raises(ResolutionError, match="width 700 → nearest valid: 672 or 704"):
        _plan(width=700)
    with pytest.raises(ResolutionError, match="num_frames 120 → nearest valid: 113 or 121"):
        _plan(num_frames=120)
    with pytest.raises(ResolutionError, match="128 learnable registers: 1000 → nearest valid: 896 or 1024"):
        _plan(max_sequence_length=1000)
    with pytest.raises(OptionError, match="block indices"):
        _plan(stg_blocks=["last"])
    with pytest.raises(OptionError, match="--vae-tiling / --no-vae-tiling does not apply to "
                                          "LTX2LatentUpsamplePipeline: .*not the tiled encode"):
        flopcalc.estimate("ltx-2-latent-upsampler", vae_tiling=True)
    with pytest.raises(OptionError, match="--stg-scale does not apply to FluxPipeline"):
        flopcalc.estimate("flux-dev", stg_scale=1.0)


def test_no_symbolic_law():
    pytest.importorskip("sympy")
    from flopcalc.flops.symbolic import symbolic_estimate

    with pytest.raises(FlopcalcError, match="no closed-form law"):
        symbolic_estimate("ltx-2")


@pytest.mark.parametrize("height,width,frames", [(544, 544, 9), (512, 768, 17)])
def test_tiled_decode_is_what_the_real_vae_counts_with_tiling_on(height, width, frames):
    """``--vae-tiling``: the decode on overlapping 16-latent tiles every 14 (512 / 448 px over 32), each with all its
    frames, equals FlopCounterMode on the real AutoencoderKLLTX2Video after ``enable_tiling()`` (the card's config,
    meta): 17×17 latents (tiles 16 and 3 each way) and 16×24 (rows 16 and 2, columns 16 and 10)."""
    pytest.importorskip("diffusers")
    from flopcalc.engine.measure.harness import measure_component

    measured = measure_component(REPO / "model_cards" / "ltx-2" / "vae", "AutoencoderKLLTX2Video",
                                 settings={"height": height, "width": width, "num_frames": frames, "vae_tiling": 1},
                                 call="decode")
    r = _plan(height=height, width=width, num_frames=frames, vae_tiling=True)
    decode = r.component("vae", "decode")
    assert 2 * decode.macs == measured["torch"]["flops"]
    assert any("spatial tile(s) per video" in n for n in r.notes)
    whole = _plan(height=height, width=width, num_frames=frames).component("vae", "decode")
    assert whole.macs < decode.macs  # the overlaps are decoded twice


def test_tiled_decode_plan():
    """The default 512×768: a 16×24 latent in 4 tiles (rows 0:16 and 14:16, columns 0:16 and 14:24, as
    ``tiled_decode``'s ``range(0, side, 14)`` cuts it); a latent within one tile decodes whole, with a note; the
    other components are unchanged."""
    from flopcalc.engine.pipelines import plan
    from flopcalc.engine.sources import resolve

    source = resolve("ltx-2")
    decodes = [r for r in plan(source.model_index, source.components, Settings(vae_tiling=True)).runs
               if r.call == "decode" and r.component == "vae"]
    assert {(r.shape.latent_height, r.shape.latent_width): r.runs for r in decodes} == {
        (16, 16): 1, (16, 10): 1, (2, 16): 1, (2, 10): 1}
    assert all(r.shape.latent_frames == 16 for r in decodes)
    tiled, plain = _plan(vae_tiling=True), _plan()
    assert any("4 spatial tile(s) per video" in n for n in tiled.notes)
    for c in plain.components:
        if c.component != "vae":
            assert tiled.component(c.component, c.call).macs == c.macs
    small = _plan(height=512, width=512, vae_tiling=True)
    assert small.component("vae", "decode").macs == _plan(height=512, width=512).component("vae", "decode").macs
    assert any("fits one 16×16 tile" in n for n in small.notes)


def test_bare_transformer_runs_under_the_pipeline():
    r = estimate_configs(None, {"transformer": CARD.config("transformer")}, Settings(num_frames=25))
    assert r.pipeline == "LTX2Pipeline (denoiser only)"
    assert r.component("transformer").shape == {"latent_height": 16, "latent_width": 24, "latent_frames": 4,
                                                "text_len": 1024, "seq_len": 26}
    with pytest.raises(FlopcalcError, match="runs inside its pipeline"):
        estimate_configs(None, {"vocoder": CARD.config("vocoder")}, Settings())


def test_bad_configs_say_why():
    for component, key, value, match in (("transformer", "qk_norm", "rms_norm", "rms_norm_across_heads"),
                                         ("transformer", "cross_attention_dim", 2048, "inner width"),
                                         ("vocoder", "act_fn", "snakebeta", "leaky_relu"),
                                         ("connectors", "video_connector_attention_head_dim", 64, "must equal"),
                                         ("audio_vae", "norm_type", "group", "causality_axis 'none'")):
        components = CARD.components()
        components[component][key] = value
        with pytest.raises(FlopcalcError, match=match):
            estimate_configs(CARD.index(), components, Settings())


# --------------------------------------------------------------------------- the fixtures


REPO = Path(__file__).resolve().parent.parent
#: Each fixture case of the family and what flopcalc estimates it from.
CASES = {"ltx-2": "ltx-2", "ltx-2-text": "ltx-2", "ltx-2-i2v": str(REPO / "validation/configs/ltx-2-i2v"),
         "ltx-2-latent-upsampler": "ltx-2-latent-upsampler"}


@pytest.mark.parametrize("path", [p for case in CASES for p in sorted((FIXTURES / case).glob("*.json"))],
                         ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_fixture_equals_the_estimate(path: Path):
    fx = json.loads(path.read_text())
    s = fx["settings"]
    r = flopcalc.estimate(CASES[path.parent.name], **{k: v for k, v in (
        ("height", s.get("height")), ("width", s.get("width")), ("num_frames", s.get("num_frames"))) if v is not None})
    comp = next(c for c in r.components if c.class_name == fx["class_name"] and c.call == fx["call"])
    for key in ("seq_len", "text_len"):
        if key in s:
            assert comp.shape[key] == s[key]
    if s.get("per_token_timesteps"):
        assert comp.shape["timestep_tokens"] == comp.shape["latent_frames"] * comp.shape["latent_height"] * \
            comp.shape["latent_width"]
    pieces = comp.tree.children if comp.tree.formula == "pieces" else (comp.tree,)
    assert 2 * comp.macs_per_run == fx["torch"]["flops"]
    for module, flops in fx["torch"]["by_module"].items():
        nodes = [(p.count, p if module == "Global" else p.find(module)) for p in pieces]
        assert 2 * sum(n * node.per_item.macs() for n, node in nodes if node is not None) == flops, module
    assert comp.params == fx["params"]
    assert sum(p.count * p.per_item.macs("thop") for p in pieces) == fx["thop"]["macs"]


# --------------------------------------------------------------------------- image to video, conditions


def test_image_to_video_encodes_the_image_and_embeds_every_token():
    r = flopcalc.estimate(CASES["ltx-2-i2v"], num_frames=25)
    assert r.pipeline == "LTX2ImageToVideoPipeline" and r.passes == 4
    assert runs_by_call(r) == {"vae.encode": 1, "transformer.forward": 30, "vae.decode": 1}
    assert [c.component + "." + c.call for c in r.components][0] == "vae.encode"  # before the denoising
    assert r.component("vae", "encode").shape == {"height": 512, "width": 768, "frames": 1}
    assert r.component("transformer").shape["timestep_tokens"] == 4 * 16 * 24
    plain = flopcalc.estimate("ltx-2", num_frames=25).component("transformer")
    time_embed = r.component("transformer").tree.children[0].find("time_embed")
    assert time_embed.total.macs() == 4 * 16 * 24 * plain.tree.children[0].find("time_embed").total.macs()
    with pytest.raises(OptionError, match="--strength does not apply to LTX2ImageToVideoPipeline"):
        flopcalc.estimate(CASES["ltx-2-i2v"], strength=0.5)


def _condition(conditions=None, **options):
    index = {**CARD.index(), "_class_name": "LTX2ConditionPipeline"}
    return estimate_configs(index, CARD.components(), Settings.make(ltx2_conditions=conditions, **options))


def test_conditions_are_encoded_and_keyframes_appended():
    r = _condition()
    assert r.pipeline == "LTX2ConditionPipeline" and "vae.encode" not in runs_by_call(r)
    n = 16 * 16 * 24
    assert r.component("transformer").shape["timestep_tokens"] == n  # one timestep per token, conditions or not
    # an image at 0 (replaces the first tokens), a 17-frame video at latent 2 (frames 9.. : 17 kept, 3 latent
    # frames appended), a 30-frame video at latent 1 (25 kept: 4 latent frames), an image past the last latent frame
    r = _condition([(1, 0), (17, 2), (30, 1), (1, 16)])
    shape = r.component("transformer").shape
    extra = (3 + 4) * 16 * 24
    assert shape["reference_tokens"] == extra and shape["timestep_tokens"] == n + extra
    encodes = [c for c in r.components if c.call == "encode"]
    assert len(encodes) == 1 and sorted(p.name for p in encodes[0].tree.children) == ["piece0", "piece1", "piece2"]
    assert runs_by_call(r)["vae.encode"] == 1  # three one-call pieces: 1, 17 and 25 frames
    assert any("past the last latent frame: skipped" in note for note in r.notes)
    assert r.component("vae", "decode").shape["latent_frames"] == 16  # the appended tokens are not decoded
    with pytest.raises(OptionError, match="--ltx2-condition does not apply to LTX2Pipeline"):
        _plan(ltx2_conditions=[(1, 0)])


def _variant(name, **options):
    index = {**CARD.index(), "_class_name": name}
    return estimate_configs(index, CARD.components(), Settings.make(**options))


def test_in_context_references_and_conditions_are_appended():
    r = _variant("LTX2InContextPipeline")
    assert r.passes == 4 and r.component("transformer").shape["timestep_tokens"] == 16 * 16 * 24
    assert "vae.encode" not in runs_by_call(r)
    r = _variant("LTX2InContextPipeline", ltx2_references=["121", "200"], reference_downscale_factor=2,
                 ltx2_conditions=[(9, 3)])
    shape = r.component("transformer").shape
    extra = 2 * 16 * 24 + 2 * 16 * 8 * 12  # the 9-frame keyframe (2 latent frames); two 121-frame references at half size
    assert shape["reference_tokens"] == extra and shape["timestep_tokens"] == 16 * 16 * 24 + extra
    encode = r.component("vae", "encode")
    assert [p.count for p in encode.tree.children] == [1, 2]  # the keyframe; both references (200 → 121 frames)
    for options, match in (({"ltx2_references": ["20"]}, "8k \\+ 1"), ({"ltx2_references": ["x"]}, "frame counts"),
                           ({"ltx2_references": ["9"], "reference_downscale_factor": 3}, "multiple of 32"),
                           ({"strength": 0.3}, "--strength does not apply")):
        with pytest.raises(FlopcalcError, match=match):
            _variant("LTX2InContextPipeline", **options)


def test_hdr_is_one_call_per_step_with_per_token_cross_modulation_and_no_audio_decode():
    r = _variant("LTX2HDRPipeline")
    s = r.settings
    assert (s.steps, s.guidance_scale, r.passes) == (8, 1.0, 1)
    assert runs_by_call(r) == {"text_encoder.forward": 1, "connectors.forward": 1, "transformer.forward": 8,
                               "vae.decode": 1}
    assert dict(s.extra) == {"frame_rate": 24.0, "modality_scale": 1.0, "stg_scale": 0.0}
    tree = r.component("transformer").tree
    plain = _plan(guidance_scale=1.0, audio_guidance_scale=1.0, stg_scale=0.0, modality_scale=1.0,
                  audio_modality_scale=1.0).component("transformer").tree
    n = 16 * 16 * 24
    for name, rows in (("time_embed", n), ("av_cross_attn_video_scale_shift", n), ("av_cross_attn_video_a2v_gate", n),
                       ("av_cross_attn_audio_scale_shift", 1), ("audio_time_embed", 1)):
        assert tree.find(name).total.macs() == rows * plain.find(name).total.macs(), name
    assert _variant("LTX2HDRPipeline", guidance_scale=4.0, stg_scale=1.0, stg_blocks=["28"]).passes == 3  # CFG, STG
    with pytest.raises(OptionError, match="no STG blocks"):  # check_inputs: STG on needs its blocks
        _variant("LTX2HDRPipeline", stg_scale=1.0)
    with pytest.raises(OptionError, match="--audio-guidance-scale does not apply to LTX2HDRPipeline"):
        _variant("LTX2HDRPipeline", audio_guidance_scale=2.0)


# --------------------------------------------------------------------------- latent upsampling


def test_latent_upsample_encodes_upsamples_and_decodes_at_twice_the_size():
    r = flopcalc.estimate("ltx-2-latent-upsampler", steps=10)
    assert r.pipeline == "LTX2LatentUpsamplePipeline"
    assert [(c.component, c.call, c.runs) for c in r.components] == [
        ("vae", "encode", 1), ("latent_upsampler", "forward", 1), ("vae", "decode", 1)]
    assert r.component("vae", "encode").shape == {"height": 512, "width": 768, "frames": 121}
    assert r.component("latent_upsampler").shape == {"latent_height": 16, "latent_width": 24, "latent_frames": 16}
    assert r.component("vae", "decode").shape == {"latent_height": 32, "latent_width": 48, "latent_frames": 16}
    assert any("steps ignored" in n for n in r.notes)
    assert r.component("vae", "decode").macs == flopcalc.estimate("ltx-2", height=1024, width=1536).component(
        "vae", "decode").macs
    two = flopcalc.estimate("ltx-2-latent-upsampler", batch_size=2)
    assert [c.runs for c in two.components] == [2, 2, 2] and any("one video per call" in n for n in two.notes)
    for options, match in (({"strength": 0.5}, "--strength does not apply"),
                           ({"num_frames": 120}, "nearest valid: 113 or 121"), ({"height": 500}, "multiple of 32"),
                           ({"max_sequence_length": 64}, "--max-sequence-length does not apply")):
        with pytest.raises(FlopcalcError, match=match):
            flopcalc.estimate("ltx-2-latent-upsampler", **options)


# --------------------------------------------------------------------------- the real __call__


class _Batch(dict):
    __getattr__ = dict.__getitem__


class _Tokenizer:
    """Pads every prompt to ``max_length`` (left padding, as the pipeline sets it); the counts depend on that
    length only."""

    model_max_length = 100_000
    eos_token = pad_token = "<pad>"
    padding_side = "left"

    def __call__(self, prompt, padding=None, max_length=None, return_tensors=None, **kwargs):
        import torch

        prompts = [prompt] if isinstance(prompt, str) else prompt
        length = max_length if padding == "max_length" else 3
        return _Batch(input_ids=torch.ones(len(prompts), length, dtype=torch.long),
                      attention_mask=torch.ones(len(prompts), length, dtype=torch.long))


def tiny_components(perturbed: bool = False):
    """Tiny random LTX-2 components (the card's structure: 32×/8× video VAE with residual ×2 upsamplers, 4× audio VAE,
    a two-stage vocoder, Gemma-3 with both attention kinds, 8-register connectors) and their configs."""
    from diffusers import (AutoencoderKLLTX2Audio, AutoencoderKLLTX2Video, FlowMatchEulerDiscreteScheduler,
                           LTX2VideoTransformer3DModel)
    from diffusers.pipelines.ltx2.connectors import LTX2TextConnectors
    from diffusers.pipelines.ltx2.vocoder import LTX2Vocoder
    from transformers import Gemma3Config, Gemma3ForConditionalGeneration

    gemma = Gemma3Config(
        text_config=dict(hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2,
                         num_key_value_heads=1, head_dim=8, vocab_size=64, sliding_window=8,
                         layer_types=["sliding_attention", "full_attention"]),
        vision_config=dict(model_type="siglip_vision_model", hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                           num_attention_heads=2, image_size=28, patch_size=14), mm_tokens_per_image=4)
    models = {
        "text_encoder": Gemma3ForConditionalGeneration(gemma),
        "connectors": LTX2TextConnectors(
            caption_channels=16, text_proj_in_factor=3, video_connector_num_attention_heads=2,
            video_connector_attention_head_dim=8, video_connector_num_layers=1, video_connector_num_learnable_registers=8,
            audio_connector_num_attention_heads=2, audio_connector_attention_head_dim=8, audio_connector_num_layers=1,
            audio_connector_num_learnable_registers=8),
        "vae": AutoencoderKLLTX2Video(
            latent_channels=8, block_out_channels=(8, 8, 8, 8), decoder_block_out_channels=(8, 16, 32),
            layers_per_block=(1, 1, 1, 1, 1), decoder_layers_per_block=(1, 1, 1, 1), spatial_compression_ratio=32,
            temporal_compression_ratio=8),
        "audio_vae": AutoencoderKLLTX2Audio(base_channels=8, ch_mult=(1, 2, 4), num_res_blocks=1, latent_channels=2,
                                            mel_bins=16),
        "vocoder": LTX2Vocoder(in_channels=32, hidden_channels=32, upsample_kernel_sizes=[4, 4], upsample_factors=[2, 2],
                               resnet_kernel_sizes=[3], resnet_dilations=[[1, 3]]),
        "transformer": LTX2VideoTransformer3DModel(
            in_channels=8, out_channels=8, num_attention_heads=2, attention_head_dim=8, cross_attention_dim=16,
            audio_in_channels=8, audio_out_channels=8, audio_num_attention_heads=2, audio_attention_head_dim=4,
            audio_cross_attention_dim=8, num_layers=3, caption_channels=16, perturbed_attn=perturbed),
    }
    for model in models.values():
        model.eval()
    configs = {name: {**m.config, "_class_name": type(m).__name__} for name, m in models.items() if name != "text_encoder"}
    configs["text_encoder"] = {**gemma.to_dict(), "architectures": ["Gemma3ForConditionalGeneration"]}
    return models, configs, FlowMatchEulerDiscreteScheduler()


def _record(models: dict, calls: Counter, shapes: dict) -> None:
    def hook(name):
        def record(module, args, kwargs):
            first = args[0] if args else next(iter(kwargs.values()))
            key = name
            if name == "transformer":
                key += ".isolated" if kwargs.get("isolate_modalities") else (
                    ".stg" if kwargs.get("spatio_temporal_guidance_blocks") else "")
                shapes.setdefault(key, set()).add((tuple(first.shape[1:]),
                                                   tuple(kwargs["audio_hidden_states"].shape[1:]),
                                                   kwargs["encoder_hidden_states"].shape[1]))
            else:
                shapes.setdefault(key, set()).add(tuple(first.shape[1:]))
            calls[key] += first.shape[0]
        return record

    for name in ("text_encoder", "connectors", "transformer", "vocoder"):
        if name in models:
            models[name].register_forward_pre_hook(hook(name), with_kwargs=True)
    for name, call in (("vae", "decode"), ("audio_vae", "decode"), ("vae", "encode")):
        if name not in models:
            continue
        method = getattr(models[name], call)

        def counted(z, *args, _method=method, _key=f"{name}.{call}", **kwargs):
            calls[_key] += z.shape[0]
            shapes.setdefault(_key, set()).add(tuple(z.shape[2:]))
            return _method(z, *args, **kwargs)

        setattr(models[name], call, counted)


def _check_against(report, calls: Counter, where: str) -> None:
    """The plan's batch-1 runs per component call (the transformer's pieces: plain rows, with the STG call when it is a
    plain forward, and the isolation call; a call made in pieces of several shapes: one run per piece) against the
    rows the real call ran."""
    calls = Counter(calls)
    comp = report.component("transformer")
    pieces = comp.tree.children if comp.tree.formula == "pieces" else (comp.tree,)
    real_rows = calls.pop("transformer") + calls.pop("transformer.stg", 0)  # no perturbed_attn: plain forwards
    assert [p.count * comp.runs for p in pieces] == [real_rows] + ([calls.pop("transformer.isolated")]
                                                                   if "transformer.isolated" in calls else []), where
    planned: Counter = Counter()
    for c in report.components:
        if c.component != "transformer":
            count = sum(p.count for p in c.tree.children) if c.tree.formula == "pieces" else 1
            planned[f"{c.component}.{c.call}" if c.call != "forward" else c.component] += c.runs * count
    assert planned == calls, where


def _run(pipeline_class, models, scheduler, **call):
    torch = pytest.importorskip("torch")
    calls: Counter = Counter()
    shapes: dict = {}
    _record(models, calls, shapes)
    pipe = pipeline_class(scheduler=scheduler, tokenizer=_Tokenizer(), **models)
    with torch.no_grad():
        pipe(output_type="np", generator=torch.Generator().manual_seed(0), **call)
    return calls, shapes


def test_the_plan_mirrors_the_real_call(rng):
    pytest.importorskip("torch")
    from diffusers import LTX2Pipeline

    models, configs, scheduler = tiny_components()
    h, w = 64, 32 * rng.randint(2, 3)
    frames, steps, length = 8 * rng.randint(1, 2) + 1, rng.randint(1, 2), 8 * rng.randint(1, 3)
    scales = rng.choice([{}, {"guidance_scale": 1.0, "audio_guidance_scale": 1.0}, {"stg_scale": 0.0},
                         {"stg_scale": 0.0, "audio_stg_scale": 0.0, "modality_scale": 1.0, "audio_modality_scale": 1.0}])
    batch, videos = rng.choice([(1, 1), (2, 1), (1, 2)])
    calls, shapes = _run(LTX2Pipeline, models, scheduler, prompt=["a prompt"] * batch, height=h, width=w,
                         num_frames=frames, num_inference_steps=steps, max_sequence_length=length,
                         num_videos_per_prompt=videos, **scales)
    index = {"_class_name": "LTX2Pipeline", **{name: ["x", "y"] for name in configs}}
    settings = Settings.make(height=h, width=w, num_frames=frames, steps=steps, max_sequence_length=length,
                             batch_size=batch, num_images_per_prompt=videos, **scales)
    report = estimate_configs(index, configs, settings)
    where = f"{h}×{w}, {frames} frames, {steps} steps, L {length}, batch {batch}×{videos}, {scales}"
    _check_against(report, calls, where)
    lat = ((frames - 1) // 8 + 1, h // 32, w // 32)
    audio = round(frames / 24 * 25)
    assert shapes["vae.decode"] == {lat} and shapes["audio_vae.decode"] == {(audio, 4)}, where
    assert shapes["text_encoder"] == {(length,)} and shapes["connectors"] == {(length, 48)}, where
    assert {s for k, v in shapes.items() if k.startswith("transformer") for s in v} == \
        {((lat[0] * lat[1] * lat[2], 8), (audio, 8), length)}, where
    assert shapes["vocoder"] == {(2, 4 * audio - 3, 16)}, where
    run = report.component("transformer")
    assert run.shape["seq_len"] == audio and report.component("vocoder").shape == {"seq_len": 4 * audio - 3}


def test_image_to_video_and_conditions_mirror_the_real_calls():
    """``LTX2ImageToVideoPipeline`` (one image) and ``LTX2ConditionPipeline`` (an image at latent 0, a 9-frame video
    at latent 1, an image past the last latent frame) on tiny components: the encodes, their frame counts, the
    appended keyframe tokens and every count as planned."""
    PIL = pytest.importorskip("PIL.Image")
    from diffusers import LTX2ConditionPipeline, LTX2ImageToVideoPipeline
    from diffusers.pipelines.ltx2.pipeline_ltx2_condition import LTX2VideoCondition

    image = PIL.new("RGB", (96, 64))
    models, configs, scheduler = tiny_components()
    common = dict(prompt="a prompt", height=64, width=96, num_frames=17, num_inference_steps=1, max_sequence_length=8)
    calls, shapes = _run(LTX2ImageToVideoPipeline, models, scheduler, image=image, image_crf=0, **common)
    settings = Settings.make(height=64, width=96, num_frames=17, steps=1, max_sequence_length=8)
    report = estimate_configs({"_class_name": "LTX2ImageToVideoPipeline", **{n: ["x", "y"] for n in configs}}, configs,
                              settings)
    _check_against(report, calls, "image to video")
    assert shapes["vae.encode"] == {(1, 64, 96)}
    assert report.component("transformer").shape["timestep_tokens"] == 3 * 2 * 3

    models, configs, scheduler = tiny_components()
    conditions = [LTX2VideoCondition(frames=image, index=0, crf=0), LTX2VideoCondition(frames=[image] * 9, index=1),
                  LTX2VideoCondition(frames=image, index=5, crf=0)]
    calls, shapes = _run(LTX2ConditionPipeline, models, scheduler, conditions=conditions, **common)
    report = estimate_configs({"_class_name": "LTX2ConditionPipeline", **{n: ["x", "y"] for n in configs}}, configs,
                              settings.with_options(ltx2_conditions=[(1, 0), (9, 1), (1, 5)]))
    _check_against(report, calls, "conditions")
    assert shapes["vae.encode"] == {(1, 64, 96), (9, 64, 96)}
    assert {s[0] for k, v in shapes.items() if k.startswith("transformer") for s in v} == {(3 * 6 + 2 * 6, 8)}
    assert report.component("transformer").shape["reference_tokens"] == 2 * 6


def test_in_context_and_hdr_mirror_the_real_calls():
    """``LTX2InContextPipeline`` (a 9-frame reference video and a keyframe) and ``LTX2HDRPipeline`` (a 9-frame reference)
    on tiny components: the encodes and every count as planned, the appended tokens at the planned length."""
    PIL = pytest.importorskip("PIL.Image")
    from diffusers import LTX2HDRPipeline, LTX2InContextPipeline
    from diffusers.pipelines.ltx2.pipeline_ltx2_condition import LTX2VideoCondition
    from diffusers.pipelines.ltx2.pipeline_ltx2_hdr_lora import LTX2HDRReferenceCondition
    from diffusers.pipelines.ltx2.pipeline_ltx2_ic_lora import LTX2ReferenceCondition

    image = PIL.new("RGB", (96, 64))
    common = dict(prompt="a prompt", height=64, width=96, num_frames=17, num_inference_steps=1, max_sequence_length=8)
    settings = Settings.make(height=64, width=96, num_frames=17, steps=1, max_sequence_length=8)
    for cls, call, options, tokens in (
            (LTX2InContextPipeline, {"reference_conditions": [LTX2ReferenceCondition(frames=[image] * 9)],
                                     "conditions": [LTX2VideoCondition(frames=image, index=2, crf=0)]},
             {"ltx2_references": ["9"], "ltx2_conditions": [(1, 2)]}, 18 + 12 + 6),
            (LTX2HDRPipeline, {"reference_conditions": [LTX2HDRReferenceCondition(frames=[image] * 9)]},
             {"ltx2_references": ["9"]}, 18 + 12)):
        models, configs, scheduler = tiny_components()
        if cls is LTX2HDRPipeline:
            models.pop("vocoder"), models.pop("audio_vae"), configs.pop("vocoder"), configs.pop("audio_vae")
            from diffusers import AutoencoderKLLTX2Audio
            from diffusers.pipelines.ltx2.vocoder import LTX2Vocoder

            models["audio_vae"] = AutoencoderKLLTX2Audio(base_channels=8, ch_mult=(1, 2, 4), num_res_blocks=1,
                                                         latent_channels=2, mel_bins=16).eval()
            models["vocoder"] = LTX2Vocoder(in_channels=32, hidden_channels=32, upsample_kernel_sizes=[4, 4],
                                            upsample_factors=[2, 2], resnet_kernel_sizes=[3],
                                            resnet_dilations=[[1, 3]]).eval()
            configs["audio_vae"] = {**models["audio_vae"].config, "_class_name": "AutoencoderKLLTX2Audio"}
            configs["vocoder"] = {**models["vocoder"].config, "_class_name": "LTX2Vocoder"}
        calls, shapes = _run(cls, models, scheduler, **call, **common)
        index = {"_class_name": cls.__name__, **{n: ["x", "y"] for n in configs}}
        report = estimate_configs(index, configs, settings.with_options(**options))
        _check_against(report, calls, cls.__name__)
        assert {s[0] for k, v in shapes.items() if k.startswith("transformer") for s in v} == {(tokens, 8)}, cls
        assert report.component("transformer").shape["timestep_tokens"] == tokens


def test_latent_upsample_mirrors_the_real_call():
    """``LTX2LatentUpsamplePipeline`` on a tiny VAE and upsampler (a 1.5× rational resampler: the blur downsample
    runs): one encode of the video, one upsample, one decode of the upsampled latent, at the planned shapes."""
    PIL = pytest.importorskip("PIL.Image")
    from diffusers import LTX2LatentUpsamplePipeline
    from diffusers.pipelines.ltx2.latent_upsampler import LTX2LatentUpsamplerModel

    models, configs, _ = tiny_components()
    upsampler = LTX2LatentUpsamplerModel(in_channels=8, mid_channels=32, num_blocks_per_stage=1,
                                         rational_spatial_scale=1.5).eval()
    models = {"vae": models["vae"], "latent_upsampler": upsampler}
    configs = {"vae": configs["vae"], "latent_upsampler": {**upsampler.config, "_class_name": "LTX2LatentUpsamplerModel"}}
    calls: Counter = Counter()
    shapes: dict = {}
    _record(models, calls, shapes)
    upsampler.register_forward_pre_hook(lambda m, a: shapes.update(latent_upsampler=tuple(a[0].shape[2:])))
    pipe = LTX2LatentUpsamplePipeline(**models)
    torch = pytest.importorskip("torch")
    with torch.no_grad():
        pipe(video=[PIL.new("RGB", (128, 64))] * 9, height=64, width=128, output_type="np")
    report = estimate_configs({"_class_name": "LTX2LatentUpsamplePipeline", "vae": ["x", "y"],
                               "latent_upsampler": ["x", "y"]}, configs, Settings(height=64, width=128, num_frames=9))
    assert {f"{c.component}.{c.call}": c.runs for c in report.components} == {
        "vae.encode": 1, "latent_upsampler.forward": 1, "vae.decode": 1} == {**calls, "latent_upsampler.forward": 1}
    assert shapes["vae.encode"] == {(9, 64, 128)} and shapes["latent_upsampler"] == (2, 2, 4)
    assert shapes["vae.decode"] == {(2, 3, 6)}  # ⌊(3·2 − 1)/2⌋ + 1 × ⌊(3·4 − 1)/2⌋ + 1
    assert report.component("vae", "decode").shape == {"latent_height": 3, "latent_width": 6, "latent_frames": 2}


def test_perturbed_attention_runs_as_planned():
    """With ``perturbed_attn`` the STG call's blocks take the value path: the real call (tiny model, 3 blocks, STG on
    block 1) counted by FlopCounterMode equals the plan's STG piece."""
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode

    models, configs, _ = tiny_components(perturbed=True)
    tr = models["transformer"].to("meta")  # on meta, SDPA runs its bmm math, which FlopCounterMode counts
    settings = Settings.make(height=64, width=96, num_frames=9, max_sequence_length=16, stg_blocks=["1"])
    index = {"_class_name": "LTX2Pipeline", "transformer": ["x", "y"]}
    report = estimate_configs(index, {"transformer": configs["transformer"]}, settings)
    plain, stg, isolated = report.component("transformer").tree.children
    n, a, t = 2 * 2 * 3, round(9 / 24 * 25), 16
    meta = {"device": "meta"}
    kwargs = dict(hidden_states=torch.zeros(1, n, 8, **meta), audio_hidden_states=torch.zeros(1, a, 8, **meta),
                  encoder_hidden_states=torch.zeros(1, t, 16, **meta),
                  audio_encoder_hidden_states=torch.zeros(1, t, 16, **meta), timestep=torch.zeros(1, **meta),
                  sigma=torch.zeros(1, **meta), num_frames=2, height=2, width=3, audio_num_frames=a,
                  use_cross_timestep=True)
    for node, extra in ((plain, {}), (stg, {"spatio_temporal_guidance_blocks": [1]}),
                        (isolated, {"isolate_modalities": True})):
        counter = FlopCounterMode(display=False)
        with counter, torch.no_grad():
            tr(**kwargs, **extra)
        assert counter.get_total_flops() == 2 * node.per_item.macs(), extra
    assert stg.per_item.macs() < plain.per_item.macs() and isolated.per_item.macs() < plain.per_item.macs()
