"""HunyuanImagePipeline semantics (diffusers ``pipelines/hunyuan_image/pipeline_hunyuanimage.py``), the
HunyuanImage 2.1 formulas' closed forms and the configs they refuse. No torch needed."""

from __future__ import annotations

from pathlib import Path

import pytest

import flopcalc
from flopcalc.flops.estimate import estimate_configs
from flopcalc.engine.errors import ConfigError, FlopcalcError, OptionError, ResolutionError
from flopcalc.engine.pipelines import Settings
from flopcalc.engine.registry import RunShape, assemble
from flopcalc.engine.sources import resolve
from card_support import runs_by_call

REPO = Path(__file__).resolve().parent.parent
CARD = REPO / "model_cards/hunyuanimage-2.1"


def _configs() -> tuple[dict, dict]:
    source = resolve(CARD.name)
    return dict(source.model_index), {name: dict(cfg) for name, cfg in source.components.items()}


def _plan(settings: Settings, *, index: dict | None = None, **overrides):
    base, components = _configs()
    components = {k: {**v, **overrides.get(k, {})} for k, v in components.items()}
    return estimate_configs(index or base, components, settings)


def test_card_defaults_2048_50_steps_one_pass():
    r = flopcalc.estimate("hunyuanimage-2.1")
    s = r.settings
    assert (s.height, s.width, s.steps, s.guidance_scale) == (2048, 2048, 50, None)
    assert r.passes == 1
    assert runs_by_call(r) == {"text_encoder.forward": 1, "transformer.forward": 50, "vae.decode": 1}
    assert r.component("text_encoder").shape == {"seq_len": 1000 + 34}
    assert r.component("transformer").shape == {"latent_height": 64, "latent_width": 64, "text_len": 1000,
                                                "text_len_2": 128}
    assert r.component("vae").shape == {"latent_height": 64, "latent_width": 64}
    assert any("byT5" in n and "quoted text: none assumed" in n for n in r.notes)  # the bundled byT5 is not run


def test_glyph_prompts_run_byt5_once_per_prompt_with_quoted_text():
    """``encode_prompt`` (pipeline_hunyuanimage.py:352-368): byT5 on each prompt with quoted text, batch 1 at the
    128-token ``tokenizer_2_max_length``; not on the negative prompt (taken without quotes), not per image."""
    index, _ = _configs()
    guided = {**index, "guider": ["diffusers", "AdaptiveProjectedMixGuidance"]}
    r = _plan(Settings.make(batch_size=3, num_images_per_prompt=2, glyph_prompts=2), index=guided)
    assert runs_by_call(r)["text_encoder_2.forward"] == 2
    assert runs_by_call(r)["text_encoder.forward"] == 6  # 3 prompts + 3 negative
    assert r.component("text_encoder_2").shape == {"seq_len": 128}
    assert r.component("text_encoder_2").class_name == "T5EncoderModel"
    assert any("quoted text of 2 prompt(s)" in n for n in r.notes)
    with pytest.raises(OptionError, match="more than the batch"):
        _plan(Settings.make(batch_size=1, glyph_prompts=2))
    with pytest.raises(OptionError):  # a pipeline without a byT5 glyph encoder refuses it
        flopcalc.estimate("flux-dev", glyph_prompts=1)


def test_an_ocr_guider_takes_over_when_a_prompt_has_quoted_text():
    """Line 677: non-zero glyph embeddings select ``ocr_guider`` (when the index names one) over ``guider``."""
    index, _ = _configs()
    ocr = {**index, "ocr_guider": ["diffusers", "AdaptiveProjectedMixGuidance"]}
    assert _plan(Settings(), index=ocr).passes == 1  # no quoted text: guider (null here): no guidance
    r = _plan(Settings.make(glyph_prompts=1), index=ocr)
    assert r.passes == 2 and runs_by_call(r)["text_encoder.forward"] == 2


def test_a_named_guider_runs_cfg_and_encodes_the_negative_prompt():
    index, _ = _configs()
    guided = {**index, "guider": ["diffusers", "AdaptiveProjectedMixGuidance"]}
    r = _plan(Settings(batch_size=2), index=guided)
    assert r.passes == 2
    assert runs_by_call(r) == {"text_encoder.forward": 4, "transformer.forward": 50 * 2 * 2, "vae.decode": 2}
    assert any("AdaptiveProjectedMixGuidance" in n and "not read" in n for n in r.notes)
    off = _plan(Settings(guidance_scale=1.0), index=guided)
    assert off.passes == 1


def test_without_a_guider_guidance_and_negative_prompt_add_no_pass():
    r = _plan(Settings(guidance_scale=5.0, negative_prompt=True))
    assert r.passes == 1
    assert any("guidance_scale is ignored" in n for n in r.notes)
    assert any("negative prompt is ignored" in n for n in r.notes)


def test_distilled_transformer_takes_the_distilled_guidance_scale():
    r = _plan(Settings(), transformer={"guidance_embeds": True})
    assert r.settings.guidance_scale == 3.25 and r.passes == 1
    tree = r.component("transformer").tree
    assert tree.find("time_guidance_embed.guidance_embedder") is not None


def test_size_must_be_a_multiple_of_64():
    with pytest.raises(ResolutionError, match="multiple of 64"):
        flopcalc.estimate("hunyuanimage-2.1", height=1000, width=1024)


def test_options_it_does_not_apply_are_refused():
    for option in ({"max_sequence_length": 256}, {"true_cfg_scale": 4.0}, {"num_frames": 5}, {"vae_tiling": True}):
        with pytest.raises(OptionError):
            flopcalc.estimate("hunyuanimage-2.1", **option)


def test_steps_and_strength():
    r = _plan(Settings(steps=20, strength=0.5, height=1024, width=1024))
    assert runs_by_call(r) == {"text_encoder.forward": 1, "transformer.forward": 10, "vae.encode": 1, "vae.decode": 1}
    assert any("no HunyuanImage image-to-image pipeline" in n for n in r.notes)


def _transformer() -> dict:
    return _configs()[1]["transformer"]


def test_transformer_closed_form():
    """Per step: the HunyuanVideo blocks on N image tokens and T = T₁ + T₂ text tokens, the refiner on
    T₁, the byT5 projection on T₂ (transformer_hunyuanimage.py)."""
    cfg = _transformer()
    d, h, hd, m = 3584, 28, 128, 4 * 3584
    n, t1, t2 = 64 * 64, 1000, 128
    t = t1 + t2
    tree = assemble(cfg, RunShape(latent_height=64, latent_width=64, text_len=t1, text_len_2=t2),
                    component="transformer")
    dual = 12 * d * d + 4 * (n + t) * d * d + 2 * h * (n + t) ** 2 * hd + 2 * (n + t) * d * m
    single = 3 * d * d + 3 * (n + t) * d * d + (n + t) * d * m + 2 * h * (n + t) ** 2 * hd + (n + t) * (d + m) * d
    refiner = 12 * t1 * d * d + 2 * h * t1 ** 2 * hd + 2 * d * d
    byt5 = t2 * (1472 * 2048 + 2048 * 2048 + 2048 * d)
    embed = (256 * d + d * d) * 2 + 3584 * d + d * d + t1 * 3584 * d  # timesteps (twice), pooled text, proj_in
    out = 2 * d * d + n * d * 64
    x_embedder = n * 64 * d
    expected = 20 * dual + 40 * single + 2 * refiner + byt5 + embed + out + x_embedder
    assert tree.total.macs("torch") == expected


def test_no_glyph_stream_without_text_embed_2_dim():
    cfg = {**_transformer(), "text_embed_2_dim": None}
    tree = assemble(cfg, RunShape(latent_height=8, latent_width=8, text_len=10, text_len_2=128), component="transformer")
    assert tree.find("context_embedder_2") is None
    with_glyphs = assemble(_transformer(), RunShape(latent_height=8, latent_width=8, text_len=10, text_len_2=128),
                           component="transformer")
    assert with_glyphs.total.macs("torch") > tree.total.macs("torch")


def test_vae_refuses_what_the_real_class_cannot_run():
    vae = _configs()[1]["vae"]
    bad = {**vae, "downsample_match_channel": False}  # a ResNet would change channels: the real class fails
    with pytest.raises(ConfigError, match="ResNet"):
        assemble(bad, RunShape(height=256, width=256), component="vae", call="encode")
    with pytest.raises(ConfigError):
        assemble({**vae, "block_out_channels": [128, 256, 512, 512, 1024, 1000]}, RunShape(latent_height=4,
                 latent_width=4), component="vae", call="decode")


def test_transformer_refuses_a_3d_patch_under_the_image_pipeline():
    with pytest.raises(FlopcalcError, match="patch_size"):
        assemble({**_transformer(), "patch_size": [1, 2, 2]}, RunShape(latent_height=8, latent_width=8, text_len=4),
                 component="transformer")
