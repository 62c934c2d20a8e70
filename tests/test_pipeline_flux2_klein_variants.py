"""FLUX.2 [klein] inpainting (``Flux2KleinInpaintPipeline``, diffusers
``pipelines/flux2/pipeline_flux2_klein_inpaint.py``) and KV caching (``Flux2KleinKVPipeline``) on the flux2-klein-9b
card: defaults (the step-distilled card and a base model), the image's own latent as a reference,
``image_reference``, the 1024²-pixel resize, the cached references, refusals, the transformer against the card's
measured reference fixtures, and the plans against the real ``__call__`` run on tiny random components on the CPU."""

from __future__ import annotations

import pytest

from flopcalc.engine.errors import OptionError, ResolutionError
from flopcalc.engine.pipelines import Settings
from flopcalc.flops.estimate import estimate_configs
from card_support import Card, runs_by_call

CARD = Card("flux2-klein-9b")


def _plan(settings: Settings = Settings(), pipeline: str = "Flux2KleinInpaintPipeline", **index):
    return estimate_configs({**CARD.index(), "_class_name": pipeline, **index}, CARD.components(), settings)


def test_inpaint_defaults_on_the_distilled_card():
    r = _plan()
    s = r.settings
    assert r.pipeline == "Flux2KleinInpaintPipeline"
    # 4 steps (is_distilled), strength 0.8: init 3.2, t_start int(0.8) = 0, all 4 run; guidance ignored (one pass)
    assert (s.height, s.width, s.steps, s.strength, s.guidance_scale, r.passes) == (1024, 1024, 4, 0.8, 8.0, 1)
    assert runs_by_call(r) == {"text_encoder.forward": 1, "vae.encode": 1, "transformer.forward": 4,
                               "vae.decode": 1}
    assert r.component("transformer").shape == {"latent_height": 128, "latent_width": 128, "text_len": 512,
                                                 "reference_tokens": 4096}


def test_inpaint_base_model_runs_cfg_with_guidance_8():
    r = _plan(Settings(batch_size=2), is_distilled=False)
    # 50 steps at strength 0.8: t_start = int(10) = 10, 40 run; two passes (guidance 8 > 1)
    assert r.passes == 2 and r.settings.steps == 50
    assert runs_by_call(r) == {"text_encoder.forward": 4, "vae.encode": 2, "transformer.forward": 160,
                               "vae.decode": 2}


def test_the_image_and_reference_tokens_equal_the_measured_reference_fixture():
    """The transformer on N generated + N image-latent + N reference tokens is the card's measurement with two
    references of the generated size (``flux2-klein-9b-ref2``)."""
    for h, w in ((512, 512), (768, 1344)):
        fx = Card("flux2-klein-9b-ref2").fixture(f"transformer-{h}x{w}.json")
        r = _plan(Settings.make(height=h, width=w, reference_images=1))
        comp = r.component("transformer")
        assert comp.shape["reference_tokens"] == 2 * (h // 16) * (w // 16)
        assert 2 * comp.macs_per_run == fx["torch"]["flops"] and comp.params == fx["params"]
        assert runs_by_call(r)["vae.encode"] == 2 and r.component("vae", "encode").shape == {"height": h, "width": w}


def test_an_image_above_1024_squared_pixels_is_resized_and_sets_the_size():
    r = _plan(Settings(height=1536, width=2048))
    # int(1536·s) = 886 and int(2048·s) = 1182, floored to 16
    assert (r.settings.height, r.settings.width) == (880, 1168)
    assert r.component("vae", "encode").shape == {"height": 880, "width": 1168}
    assert any("resized to about 1048576 pixels" in n for n in r.notes)


def test_refusals():
    with pytest.raises(ResolutionError, match="multiple of 16"):
        _plan(Settings(height=1000, width=1024))
    with pytest.raises(OptionError, match="--true-cfg-scale does not apply to Flux2KleinInpaintPipeline"):
        _plan(Settings(true_cfg_scale=2.0))


def _tiny_klein():
    from diffusers import AutoencoderKLFlux2, Flux2Transformer2DModel
    from transformers import Qwen3Config, Qwen3ForCausalLM

    models = {
        "text_encoder": Qwen3ForCausalLM(Qwen3Config(hidden_size=16, intermediate_size=32, num_attention_heads=2,
                                                     num_key_value_heads=1, head_dim=8, num_hidden_layers=2,
                                                     vocab_size=50)),
        "transformer": Flux2Transformer2DModel(in_channels=16, num_layers=1, num_single_layers=1,
                                               attention_head_dim=16, num_attention_heads=2, joint_attention_dim=48,
                                               timestep_guidance_channels=16, axes_dims_rope=(4, 4, 4, 4),
                                               guidance_embeds=False),
        "vae": AutoencoderKLFlux2(latent_channels=4, block_out_channels=[8, 8, 8, 8], norm_num_groups=4,
                                  layers_per_block=1),
    }
    for m in models.values():
        m.eval()
    return models


def test_inpaint_plan_mirrors_the_real_call(rng):
    from pipeline_call_support import Tokenizer, configs_of, planned, record

    import torch
    from diffusers import FlowMatchEulerDiscreteScheduler, Flux2KleinInpaintPipeline

    models = _tiny_klein()
    configs = configs_of(models)
    calls, shapes = record(models, ("text_encoder", "transformer"))
    distilled = rng.random() < 0.3
    pipe = Flux2KleinInpaintPipeline(scheduler=FlowMatchEulerDiscreteScheduler(), tokenizer=Tokenizer(),
                                     is_distilled=distilled, **models)
    h, w = 16 * rng.randint(4, 6), 16 * rng.randint(4, 6)
    steps, guidance, strength = rng.randint(2, 4), rng.choice([1.0, 3.0]), rng.choice([0.6, 1.0])
    length, refs = rng.choice([8, 20]), rng.randint(0, 1)
    with torch.no_grad():
        pipe("a prompt", image=torch.rand(1, 3, h, w), mask_image=torch.ones(1, 1, h, w),
             image_reference=torch.rand(1, 3, h, w) if refs else None, num_inference_steps=steps,
             guidance_scale=guidance, strength=strength, max_sequence_length=length,
             text_encoder_out_layers=(0, 1, 2), output_type="np")
    index = {"_class_name": "Flux2KleinInpaintPipeline", "is_distilled": distilled,
             **{n: ["x", "y"] for n in models}}
    report = estimate_configs(index, configs, Settings.make(
        height=h, width=w, steps=steps, guidance_scale=guidance, strength=strength, max_sequence_length=length,
        reference_images=refs or None))
    where = f"{h}×{w}, {steps} steps, guidance {guidance}, strength {strength}, {refs} refs, distilled {distilled}"
    assert planned(report) == dict(calls), where
    n = (h // 16) * (w // 16)
    assert shapes["transformer"] == {((2 + refs) * n, 16)}, where
    assert report.component("transformer").shape["reference_tokens"] == (1 + refs) * n, where
    assert shapes["text_encoder"] == {(length,)}, where
    assert shapes["vae.encode"] == {(h, w)} and shapes["vae.decode"] == {(h // 8, w // 8)}, where


# --------------------------------------------------------------------------- Flux2KleinKVPipeline


def test_kv_defaults_without_references_are_plain_forwards():
    r = _plan(pipeline="Flux2KleinKVPipeline")
    s = r.settings
    assert r.pipeline == "Flux2KleinKVPipeline" and r.passes == 1
    assert (s.height, s.width, s.steps, s.guidance_scale) == (1024, 1024, 4, None)
    assert runs_by_call(r) == {"text_encoder.forward": 1, "transformer.forward": 4, "vae.decode": 1}
    fx = CARD.fixture("transformer-1024x1024.json")
    assert 2 * r.component("transformer").macs_per_run == fx["torch"]["flops"]


def test_kv_references_run_once_then_come_from_the_cache():
    """Step 0 runs the reference tokens (and caches their keys and values), the later steps the latent alone: each
    later step costs less than the plain forward on latent + references (``Flux2KleinPipeline``'s), more than the
    plain forward on the latent."""
    r = _plan(Settings.make(reference_images=2, batch_size=2, steps=5), pipeline="Flux2KleinKVPipeline")
    comp = r.component("transformer")
    extract, cached = comp.tree.children
    assert (comp.runs, extract.count, cached.count) == (2, 1, 4)  # 2 images: 1 extract + 4 cached steps each
    assert runs_by_call(r) == {"text_encoder.forward": 2, "vae.encode": 2, "transformer.forward": 2,
                               "vae.decode": 2}
    assert comp.shape["reference_tokens"] == 2 * 64 * 64
    klein = _plan(Settings.make(reference_images=2), pipeline="Flux2KleinPipeline", is_distilled=True)
    plain = _plan(Settings(), pipeline="Flux2KleinKVPipeline").component("transformer").macs_per_run
    full = klein.component("transformer").macs_per_run
    assert plain < cached.per_item.macs("torch") < full
    assert extract.per_item.macs("torch") < full  # the references attend to themselves only


def test_kv_refusals():
    with pytest.raises(OptionError, match="--strength does not apply to Flux2KleinKVPipeline"):
        _plan(Settings(strength=0.5), pipeline="Flux2KleinKVPipeline")
    with pytest.raises(OptionError, match="--guidance-scale does not apply to Flux2KleinKVPipeline"):
        _plan(Settings(guidance_scale=3.0), pipeline="Flux2KleinKVPipeline")


def test_kv_plan_mirrors_the_real_call(rng):
    from PIL import Image
    from pipeline_call_support import Tokenizer, configs_of, planned, record

    import torch
    from diffusers import FlowMatchEulerDiscreteScheduler, Flux2KleinKVPipeline

    models = _tiny_klein()
    configs = configs_of(models)
    calls, shapes = record(models, ("text_encoder", "transformer"))
    pipe = Flux2KleinKVPipeline(scheduler=FlowMatchEulerDiscreteScheduler(), tokenizer=Tokenizer(), **models)
    h, w = 16 * rng.randint(4, 6), 16 * rng.randint(4, 6)
    steps, refs, length = rng.randint(1, 3), rng.randint(0, 2), rng.choice([8, 20])
    images = [Image.new("RGB", (w, h)) for _ in range(refs)]
    with torch.no_grad():
        pipe(prompt="a prompt", image=images or None, height=h, width=w, num_inference_steps=steps,
             max_sequence_length=length, text_encoder_out_layers=(0, 1, 2), output_type="np")
    index = {"_class_name": "Flux2KleinKVPipeline", **{n: ["x", "y"] for n in models}}
    report = estimate_configs(index, configs, Settings.make(height=h, width=w, steps=steps, max_sequence_length=length,
                                                            reference_images=refs or None))
    where = f"{h}×{w}, {steps} steps, {refs} refs"
    runs = planned(report)
    tree = report.component("transformer").tree
    if tree.formula == "pieces":  # one report row of extract and cached pieces: a forward per step
        runs["transformer"] = sum(p.count for p in tree.children)
    assert runs == dict(calls), where
    n = (h // 16) * (w // 16)
    assert shapes["transformer"] == ({((1 + refs) * n, 16)} | ({(n, 16)} if steps > 1 else set())
                                     if refs else {(n, 16)}), where
    assert shapes.get("vae.encode", set()) == ({(h, w)} if refs else set()), where

