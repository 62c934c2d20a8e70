"""ChromaPipeline / ChromaImg2ImgPipeline semantics (diffusers ``pipelines/chroma``) and the Chroma
formulas' closed forms. No torch needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import flopcalc
from flopcalc.flops.estimate import estimate_configs
from flopcalc.engine.errors import ConfigError, FlopcalcError, OptionError, ResolutionError
from flopcalc.engine.pipelines import Settings
from flopcalc.engine.sources import resolve
from card_support import runs_by_call

REPO = Path(__file__).resolve().parent.parent
CARD = REPO / "model_cards/chroma1-hd"


def _configs() -> tuple[dict, dict]:
    """The card's ``model_index.json`` and component configs, as flopcalc reads them."""
    source = resolve(CARD.name)
    return dict(source.model_index), {name: dict(cfg) for name, cfg in source.components.items()}


def _plan(settings: Settings, *, index_class: str = "ChromaPipeline", **overrides):
    index, components = _configs()
    components = {k: {**v, **overrides.get(k, {})} for k, v in components.items()}
    return estimate_configs({**index, "_class_name": index_class}, components, settings)


def test_defaults_run_cfg_as_two_forwards_and_encode_the_negative_prompt():
    r = flopcalc.estimate("chroma")
    s = r.settings
    assert r.pipeline == "ChromaPipeline"
    assert (s.height, s.width, s.steps, s.guidance_scale, s.max_sequence_length) == (1024, 1024, 35, 5.0, 512)
    assert r.passes == 2
    assert runs_by_call(r) == {"text_encoder.forward": 2, "transformer.forward": 70, "vae.decode": 1}
    assert r.component("text_encoder").shape == {"seq_len": 512}
    assert r.component("transformer").shape == {"latent_height": 128, "latent_width": 128, "text_len": 512}
    assert r.component("vae").shape == {"latent_height": 128, "latent_width": 128}
    assert not r.notes


def test_guidance_off_is_one_pass_and_no_negative_prompt():
    r = _plan(Settings(guidance_scale=1.0, negative_prompt=True))
    assert r.passes == 1
    assert runs_by_call(r) == {"text_encoder.forward": 1, "transformer.forward": 35, "vae.decode": 1}
    assert any("negative prompt is ignored" in n for n in r.notes)


@pytest.mark.parametrize("pipeline", ["ChromaPipeline", "ChromaImg2ImgPipeline"])
def test_true_cfg_scale_is_refused_guidance_scale_runs_cfg(pipeline):
    with pytest.raises(OptionError, match=f"--true-cfg-scale does not apply to {pipeline}: .*guidance_scale > 1"):
        _plan(Settings(true_cfg_scale=4.0), index_class=pipeline)


def test_batch_and_images_per_prompt():
    r = _plan(Settings(batch_size=2, num_images_per_prompt=3, steps=10))
    assert runs_by_call(r) == {"text_encoder.forward": 4, "transformer.forward": 10 * 2 * 6, "vae.decode": 6}


def test_max_sequence_length_is_capped_at_512():
    r = _plan(Settings(max_sequence_length=128))
    assert r.component("transformer").shape["text_len"] == 128 and r.component("text_encoder").shape == {"seq_len": 128}
    with pytest.raises(FlopcalcError, match="greater than 512"):
        _plan(Settings(max_sequence_length=513))


def test_sizes_must_divide_by_16():
    with pytest.raises(ResolutionError, match="1000 → nearest valid: 992 or 1008"):
        _plan(Settings(height=1000, width=1024))
    r = _plan(Settings(height=768, width=1344))
    assert r.component("transformer").shape == {"latent_height": 96, "latent_width": 168, "text_len": 512}


def test_image_to_image_encodes_the_input_and_skips_the_first_steps():
    r = _plan(Settings(), index_class="ChromaImg2ImgPipeline")
    assert r.pipeline == "ChromaImg2ImgPipeline" and r.settings.strength == 0.9
    # get_timesteps: t_start = int(max(35 − 35·0.9, 0)) = 3 → 32 steps run.
    assert runs_by_call(r) == {"text_encoder.forward": 2, "vae.encode": 1, "transformer.forward": 64, "vae.decode": 1}
    assert r.component("vae", "encode").shape == {"height": 1024, "width": 1024}


def test_transformer_alone_runs_under_its_pipeline():
    _, components = _configs()
    r = estimate_configs(None, {"transformer": components["transformer"]}, Settings())
    assert r.pipeline == "ChromaPipeline (denoiser only)"
    assert r.passes == 2 and r.component("transformer").runs == 70


def test_parameters_match_the_measured_modules():
    """8,899,983,424 for the transformer (``sum(p.numel())`` on the real module, fixture
    ``chroma1-hd/transformer-512x512.json``): FLUX.1's 11.9B less every adaLN linear, plus the
    approximator."""
    fixture = json.loads((REPO / "validation/fixtures/chroma1-hd/transformer-512x512.json").read_text())
    r = flopcalc.estimate("chroma")
    assert r.component("transformer").params == fixture["params"] == 8_899_983_424
    assert r.component("transformer").tree.find("distilled_guidance_layer").total.params == \
        fixture["params_by_module"]["distilled_guidance_layer"]


def test_approximator_input_width_must_divide_by_4():
    with pytest.raises(ConfigError, match="approximator_num_channels"):
        _plan(Settings(), transformer={"approximator_num_channels": 66})


# --------------------------------------------------------------------------- closed forms


def test_pruned_blocks_are_the_flux_blocks_less_their_modulation_linears():
    sp = pytest.importorskip("sympy")
    from flopcalc.formulas.mmdit_joint_block import mmdit_joint_block
    from flopcalc.formulas.single_stream_block import single_stream_block

    h, dh, n, t = sp.symbols("h d_h N T", positive=True, integer=True)
    d = h * dh
    kw = {"dim": d, "heads": h, "head_dim": dh, "image_tokens": n, "text_tokens": t, "qk_norm": "rms_norm"}
    full, pruned = mmdit_joint_block(**kw).total, mmdit_joint_block(**kw, pruned=True).total
    assert sp.expand(full.macs("torch") - pruned.macs("torch") - 12 * d**2) == 0
    assert sp.expand(full.params - pruned.params - 12 * (d**2 + d)) == 0
    full = single_stream_block(dim=d, heads=h, head_dim=dh, tokens=n + t).total
    pruned = single_stream_block(dim=d, heads=h, head_dim=dh, tokens=n + t, pruned=True).total
    assert sp.expand(full.macs("torch") - pruned.macs("torch") - 3 * d**2) == 0


def test_approximator_closed_form():
    sp = pytest.importorskip("sympy")
    from flopcalc.formulas.chroma import chroma_approximator

    m, c, e, d = sp.symbols("M c e d", positive=True, integer=True)
    for k in (0, 1, 5):
        cost = chroma_approximator("a", vectors=m, in_dim=c, hidden_dim=e, out_dim=d, layers=k).total
        assert sp.expand(cost.macs("torch") - m * (c * e + 2 * k * e**2 + e * d)) == 0
