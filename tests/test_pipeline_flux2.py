"""Flux2Pipeline / Flux2KleinPipeline semantics (diffusers ``pipelines/flux2``) and the FLUX.2 formulas'
closed forms. No torch needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import flopcalc
from flopcalc.api import estimate_configs
from flopcalc.errors import ConfigError, OptionError, ResolutionError
from flopcalc.pipelines import Settings
from flopcalc.sources import resolve
from card_support import runs_by_call

REPO = Path(__file__).resolve().parent.parent


def _configs(card: str) -> tuple[dict, dict]:
    """The card's ``model_index.json`` and component configs, as flopcalc reads them."""
    source = resolve(card)
    return dict(source.model_index), {name: dict(cfg) for name, cfg in source.components.items()}


def _plan(settings: Settings, card: str = "flux2-dev", index: dict | None = None, **overrides):
    model_index, components = _configs(card)
    components = {k: {**v, **overrides.get(k, {})} for k, v in components.items()}
    return estimate_configs({**model_index, **(index or {})}, components, settings)


# --------------------------------------------------------------------------- Flux2Pipeline


def test_dev_defaults_one_embedded_guidance_pass():
    r = flopcalc.estimate("flux2-dev")
    s = r.settings
    assert r.pipeline == "Flux2Pipeline"
    assert (s.height, s.width, s.steps, s.guidance_scale, s.max_sequence_length) == (1024, 1024, 50, 4.0, 512)
    assert r.passes == 1
    assert runs_by_call(r) == {"text_encoder.forward": 1, "transformer.forward": 50, "vae.decode": 1}
    assert r.component("text_encoder").shape == {"seq_len": 512}
    assert r.component("transformer").shape == {"latent_height": 128, "latent_width": 128, "text_len": 512}
    assert r.component("vae").shape == {"latent_height": 128, "latent_width": 128}
    assert not r.notes


def test_dev_guidance_and_negative_prompt_add_no_pass():
    r = _plan(Settings(guidance_scale=7.0, negative_prompt=True))
    assert r.passes == 1 and runs_by_call(r) == {"text_encoder.forward": 1, "transformer.forward": 50, "vae.decode": 1}
    assert any("takes no negative prompt" in n for n in r.notes)


@pytest.mark.parametrize("card", ["flux2-dev", "flux2-klein-9b"])
def test_true_cfg_scale_is_refused(card):
    pipeline = _configs(card)[0]["_class_name"]
    with pytest.raises(OptionError, match=f"--true-cfg-scale does not apply to {pipeline}: .*guidance_scale"):
        _plan(Settings(true_cfg_scale=4.0), card)


def test_batch_images_per_prompt_and_text_length():
    r = _plan(Settings(batch_size=2, num_images_per_prompt=3, steps=10, max_sequence_length=128))
    assert runs_by_call(r) == {"text_encoder.forward": 2, "transformer.forward": 10 * 6, "vae.decode": 6}
    assert r.component("transformer").shape["text_len"] == 128 and r.component("text_encoder").shape == {"seq_len": 128}


def test_sizes_must_divide_by_16():
    with pytest.raises(ResolutionError, match="1000 → nearest valid: 992 or 1008"):
        _plan(Settings(height=1000, width=1024))
    r = _plan(Settings(height=768, width=1344))
    assert r.component("transformer").shape == {"latent_height": 96, "latent_width": 168, "text_len": 512}


def test_strength_is_estimated_as_image_to_image_with_a_note():
    r = _plan(Settings(strength=0.5))
    assert runs_by_call(r) == {"text_encoder.forward": 1, "vae.encode": 1, "transformer.forward": 25, "vae.decode": 1}
    assert any("no image-to-image mode" in n for n in r.notes)


def test_transformer_alone_runs_under_flux2_pipeline():
    _, components = _configs("flux2-dev")
    r = estimate_configs(None, {"transformer": components["transformer"]}, Settings())
    assert r.pipeline == "Flux2Pipeline (denoiser only)"
    assert r.passes == 1 and r.component("transformer").runs == 50


def test_parameters_match_the_measured_modules():
    """``sum(p.numel())`` on the real modules (fixtures ``flux2-dev/*``): the transformer's
    32,223,281,152 and the text encoder's 23,340,272,640 (``lm_head`` tied to the token embedding, as
    ``Mistral3Config``'s default ``tie_word_embeddings`` builds it from this config)."""
    r = flopcalc.estimate("flux2-dev")
    for component, fixture in (("transformer", "transformer-512x512"), ("text_encoder", "text_encoder-L512"),
                               ("vae", "vae-decode-512x512")):
        measured = json.loads((REPO / f"validation/fixtures/flux2-dev/{fixture}.json").read_text())
        assert r.component(component).params == measured["params"]
    assert r.component("transformer").params == 32_223_281_152


def test_rotary_axes_must_fill_the_head():
    with pytest.raises(ConfigError, match="axes_dims_rope"):
        _plan(Settings(), transformer={"axes_dims_rope": [32, 32, 32]})


# --------------------------------------------------------------------------- Flux2KleinPipeline


def test_klein_distilled_defaults_four_steps_one_pass():
    r = flopcalc.estimate("flux2-klein-9b")
    assert r.pipeline == "Flux2KleinPipeline"
    assert (r.settings.steps, r.settings.max_sequence_length) == (4, 512) and r.passes == 1
    assert runs_by_call(r) == {"text_encoder.forward": 1, "transformer.forward": 4, "vae.decode": 1}
    assert r.component("text_encoder").class_name == "Qwen3ForCausalLM"
    assert any("step-distilled" in n for n in r.notes)


def test_klein_base_runs_cfg_as_two_forwards_and_encodes_the_empty_negative_prompt():
    r = _plan(Settings(), "flux2-klein-9b", index={"is_distilled": False})
    assert (r.settings.steps, r.settings.guidance_scale, r.passes) == (50, 4.0, 2)
    assert runs_by_call(r) == {"text_encoder.forward": 2, "transformer.forward": 100, "vae.decode": 1}
    r = _plan(Settings(guidance_scale=1.0), "flux2-klein-9b", index={"is_distilled": False})
    assert r.passes == 1 and runs_by_call(r)["text_encoder.forward"] == 1


def test_klein_refuses_what_it_cannot_count_exactly():
    with pytest.raises(ConfigError, match="guidance_embeds"):
        _plan(Settings(), "flux2-klein-9b", transformer={"guidance_embeds": True})
    with pytest.raises(ConfigError, match="is_distilled"):
        _plan(Settings(), "flux2-klein-9b", index={"is_distilled": "yes"})


# --------------------------------------------------------------------------- closed forms


def test_block_closed_forms():
    sp = pytest.importorskip("sympy")
    from flopcalc.formulas.flux2 import flux2_double_block, flux2_modulation, flux2_single_block

    n, t = sp.symbols("N T", positive=True, integer=True)
    h, dh, ratio = 6, 128, 3.0
    d, f = h * dh, int(h * dh * ratio)
    double = flux2_double_block(dim=d, heads=h, head_dim=dh, image_tokens=n, text_tokens=t, mlp_ratio=ratio).total
    assert sp.expand(double.macs("torch") - (4 * (n + t) * d**2 + 2 * h * (n + t) ** 2 * dh + 3 * (n + t) * d * f)) == 0
    assert double.params == 8 * d**2 + 6 * d * f + 4 * dh  # no biases; four RMSNorm(d_h)
    single = flux2_single_block(dim=d, heads=h, head_dim=dh, tokens=n + t, mlp_ratio=ratio).total
    big_l = n + t
    assert sp.expand(single.macs("torch") - (big_l * d * (3 * d + 2 * f) + 2 * h * big_l**2 * dh
                                             + big_l * (d + f) * d)) == 0
    assert flux2_modulation("m", d, 2).total.macs("torch") == 6 * d**2
