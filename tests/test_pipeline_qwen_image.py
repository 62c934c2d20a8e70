"""QwenImagePipeline semantics (diffusers ``pipelines/qwenimage/pipeline_qwenimage.py``) and the
Qwen-Image block formulas' closed forms. No torch needed."""

from __future__ import annotations

from pathlib import Path

import pytest

import flopcalc
from flopcalc.flops.estimate import estimate_configs
from flopcalc.engine.errors import FlopcalcError, ResolutionError
from flopcalc.engine.pipelines import Settings
from flopcalc.engine.sources import resolve
from card_support import runs_by_call

REPO = Path(__file__).resolve().parent.parent
CARD = REPO / "model_cards/qwen-image"


def _configs() -> tuple[dict, dict]:
    """The card's ``model_index.json`` and component configs, as flopcalc reads them."""
    source = resolve(CARD.name)
    return dict(source.model_index), {name: dict(cfg) for name, cfg in source.components.items()}


def _plan(settings: Settings, *, index_class: str = "QwenImagePipeline", **overrides):
    """The plan for the card's transformer and VAE (the text encoder belongs to another module)."""
    index, components = _configs()
    components = {k: {**v, **overrides.get(k, {})} for k, v in components.items() if k != "text_encoder"}
    return estimate_configs({**index, "_class_name": index_class}, components, settings)


def test_defaults_one_pass_without_a_negative_prompt():
    r = _plan(Settings())
    s = r.settings
    assert (s.height, s.width, s.steps, s.true_cfg_scale, s.max_sequence_length) == (1024, 1024, 50, 4.0, 512)
    assert s.guidance_scale is None
    assert r.passes == 1
    assert runs_by_call(r) == {"transformer.forward": 50, "vae.decode": 1}
    assert r.component("transformer").shape == {"latent_height": 128, "latent_width": 128, "text_len": 512}
    assert r.component("vae").shape == {"latent_height": 128, "latent_width": 128}
    assert any("no effect without a negative prompt" in n for n in r.notes)
    assert any("text_encoder is absent" in n for n in r.notes)


@pytest.mark.skipif(not (REPO / "flopcalc/engine/architectures/llm_encoders.py").exists(),
                    reason="the Qwen2.5-VL text encoder module is not there yet")
def test_card_text_encoder_sees_the_template_tokens_too():
    r = flopcalc.estimate("model_cards/qwen-image")
    assert r.component("text_encoder").shape == {"seq_len": 512 + 34}
    assert r.component("text_encoder").runs == 1
    neg = flopcalc.estimate("model_cards/qwen-image", negative_prompt=True, max_sequence_length=100)
    assert neg.component("text_encoder").shape == {"seq_len": 134}
    assert neg.component("text_encoder").runs == 2


def test_true_cfg_needs_a_negative_prompt_and_runs_two_forwards():
    r = _plan(Settings(negative_prompt=True))
    assert r.passes == 2
    assert runs_by_call(r) == {"transformer.forward": 100, "vae.decode": 1}
    off = _plan(Settings(negative_prompt=True, true_cfg_scale=1.0))
    assert off.passes == 1 and any("negative prompt is ignored" in n for n in off.notes)


def test_cfg_encodes_the_negative_prompt():
    index, components = _configs()
    minimal = {"text_encoder": {"architectures": ["Qwen2_5_VLForConditionalGeneration"]}}
    from flopcalc.engine.pipelines import plan

    p = plan(index, {**minimal, "transformer": components["transformer"]}, Settings(negative_prompt=True,
                                                                                  batch_size=3))
    text = next(r for r in p.runs if r.component == "text_encoder")
    assert text.runs == 6 and text.shape.seq_len == 546
    assert next(r for r in p.runs if r.component == "transformer").runs == 50 * 2 * 3


def test_max_sequence_length_sets_the_transformer_text_and_is_capped_at_1024():
    r = _plan(Settings(max_sequence_length=256))
    assert r.component("transformer").shape["text_len"] == 256
    assert _plan(Settings(max_sequence_length=1024)).component("transformer").shape["text_len"] == 1024
    with pytest.raises(FlopcalcError, match="greater than 1024"):
        _plan(Settings(max_sequence_length=1025))


def test_sizes_must_divide_by_16():
    with pytest.raises(ResolutionError, match="1000 → nearest valid: 992 or 1008"):
        _plan(Settings(height=1000, width=1024))
    r = _plan(Settings(height=768, width=1344))
    assert r.component("transformer").shape == {"latent_height": 96, "latent_width": 168, "text_len": 512}


def test_batch_and_images_per_prompt():
    r = _plan(Settings(batch_size=2, num_images_per_prompt=3, steps=10, negative_prompt=True))
    assert runs_by_call(r) == {"transformer.forward": 10 * 2 * 6, "vae.decode": 6}


def test_guidance_distilled_transformer_needs_guidance_scale_and_adds_no_pass():
    with pytest.raises(FlopcalcError, match="guidance_scale is required"):
        _plan(Settings(), transformer={"guidance_embeds": True})
    r = _plan(Settings(guidance_scale=3.0), transformer={"guidance_embeds": True})
    assert r.passes == 1 and not any("guidance_scale is ignored" in n for n in r.notes)
    assert any("guidance_scale is ignored" in n for n in _plan(Settings(guidance_scale=3.0)).notes)


def test_image_to_image_encodes_the_input_and_skips_the_first_steps():
    r = _plan(Settings(), index_class="QwenImageImg2ImgPipeline")
    assert r.pipeline == "QwenImageImg2ImgPipeline" and r.settings.strength == 0.6
    # get_timesteps: t_start = int(max(50 − 50·0.6, 0)) = 20 → 30 steps run.
    assert runs_by_call(r) == {"vae.encode": 1, "transformer.forward": 30, "vae.decode": 1}
    assert r.component("vae", "encode").shape == {"height": 1024, "width": 1024}


def test_vae_parameters_are_the_whole_model():
    """``decode`` holds post_quant_conv + decoder, ``encode`` encoder + quant_conv; the component
    counts both (126,892,531 for Qwen-Image, as ``sum(p.numel())`` on the real module)."""
    r = _plan(Settings(strength=1.0))
    dec, enc = r.component("vae", "decode"), r.component("vae", "encode")
    assert dec.params == enc.params == dec.tree.total.params + enc.tree.total.params == 126_892_531
    assert r.component("transformer").params == 20_430_401_088


def test_transformer_alone_runs_under_its_pipeline():
    _, components = _configs()
    r = estimate_configs(None, {"transformer": components["transformer"]}, Settings())
    assert r.pipeline == "QwenImagePipeline (denoiser only)"
    assert r.component("transformer").shape == {"latent_height": 128, "latent_width": 128, "text_len": 512}


# --------------------------------------------------------------------------- closed forms


def test_block_closed_form():
    sp = pytest.importorskip("sympy")
    from flopcalc.formulas.qwen_image import qwen_image_block

    h, dh, n, t = sp.symbols("h d_h N T", positive=True, integer=True)
    d = h * dh
    for rows in (1, 2):
        cost = qwen_image_block(dim=d, heads=h, head_dim=dh, image_tokens=n, text_tokens=t,
                                image_mod_rows=rows).total
        stated = 6 * (rows + 1) * d**2 + 4 * (n + t) * d**2 + 2 * h * (n + t) ** 2 * dh + 8 * (n + t) * d**2
        assert sp.expand(cost.macs("torch") - stated) == 0
        # thop: every nn.Linear, plus 2 ops per element of the four affine-free nn.LayerNorms.
        assert sp.expand(cost.macs("thop") - (stated - 2 * h * (n + t) ** 2 * dh) - 2 * 2 * (n + t) * d) == 0


def test_causal_blocks_closed_forms():
    sp = pytest.importorskip("sympy")
    from flopcalc.formulas.causal_vae import attention_block, residual_block

    ci, co, c, hh, ww = sp.symbols("C_i C_o C H W", positive=True, integer=True)
    res = residual_block(ci, co, (1,), hh, ww).total
    assert sp.expand(res.macs("torch") - hh * ww * (27 * co * ci + 27 * co**2 + co * ci)) == 0
    assert res.macs("thop") == 0  # causal Conv3d subclasses: thop matches exact types only
    att = attention_block(c, (2,), hh, ww).total
    assert sp.expand(att.macs("torch") - 2 * (4 * hh * ww * c**2 + 2 * (hh * ww) ** 2 * c)) == 0
    assert sp.expand(att.macs("thop") - 2 * 4 * hh * ww * c**2) == 0  # to_qkv and proj are nn.Conv2d


def test_image_decode_is_quadratic_in_latent_area_with_attention_as_the_square_term():
    sp = pytest.importorskip("sympy")
    from flopcalc.engine.registry import RunShape, assemble

    _, components = _configs()
    h, w = sp.symbols("h w", positive=True, integer=True)
    tree = assemble(components["vae"], RunShape(latent_height=h, latent_width=w), component="vae", call="decode")
    poly = sp.Poly(sp.expand(tree.total.macs("torch")), h, w)
    top = 96 * 4  # base_dim · dim_mult[-1]: the mid block's width
    assert poly.coeff_monomial(h**2 * w**2) == 2 * top
    assert set(poly.monoms()) == {(2, 2), (1, 1)}
