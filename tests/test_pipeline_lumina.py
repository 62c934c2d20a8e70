"""Lumina pipeline semantics (``Lumina2Pipeline`` / ``Lumina2Text2ImgPipeline``, ``LuminaPipeline`` /
``LuminaText2ImgPipeline``) and the closed forms of the Lumina block formulas. No torch needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import flopcalc
from flopcalc.flops.estimate import estimate_configs
from flopcalc.engine.errors import ConfigError, FlopcalcError, ResolutionError
from flopcalc.engine.pipelines import Settings

REPO = Path(__file__).resolve().parent.parent
CARDS = REPO / "model_cards"


def _config(card: str, component: str = "transformer") -> dict:
    return json.loads((CARDS / card / component / "config.json").read_text())


def _index(card: str) -> dict:
    return json.loads((CARDS / card / "model_index.json").read_text())


def _components(card: str) -> dict:
    """The card's configs without the text encoder (another family's class): the plan still
    names it, so the text runs are checked on the plan, not on an estimate."""
    return {name: _config(card, name) for name in ("transformer", "vae")}


def _runs(report):
    return {(c.component, c.call): c for c in report.components}


# --------------------------------------------------------------------------- Lumina-Image-2.0


def test_lumina2_defaults_two_separate_passes_every_step():
    from flopcalc.engine.pipelines.dispatch import plan

    p = plan(_index("lumina-image-2.0"), {**_components("lumina-image-2.0"), "text_encoder": _config(
        "lumina-image-2.0", "text_encoder")}, Settings())
    assert p.pipeline == "Lumina2Text2ImgPipeline"
    s = p.settings
    assert (s.height, s.width, s.steps, s.guidance_scale, s.max_sequence_length) == (1024, 1024, 30, 4.0, 256)
    assert p.passes == 2
    runs = {r.component: r for r in p.runs}
    assert runs["text_encoder"].runs == 2 and runs["text_encoder"].shape.seq_len == 256  # prompt + negative
    t = runs["transformer"]
    assert t.runs == 60 and (t.shape.latent_height, t.shape.latent_width, t.shape.text_len) == (128, 128, 256)
    assert runs["vae"].runs == 1 and runs["vae"].call == "decode"


def test_lumina2_old_and_new_pipeline_names_plan_alike():
    comps = _components("lumina-image-2.0")
    a = estimate_configs({"_class_name": "Lumina2Text2ImgPipeline"}, comps, Settings(height=512, width=768))
    b = estimate_configs({"_class_name": "Lumina2Pipeline"}, comps, Settings(height=512, width=768))
    assert (a.pipeline, b.pipeline) == ("Lumina2Text2ImgPipeline", "Lumina2Pipeline")
    assert a.macs == b.macs and a.passes == b.passes == 2


def test_lumina2_no_guidance_is_one_pass_and_no_negative_prompt():
    from flopcalc.engine.pipelines.dispatch import plan

    comps = {**_components("lumina-image-2.0"), "text_encoder": _config("lumina-image-2.0", "text_encoder")}
    p = plan(_index("lumina-image-2.0"), comps, Settings(guidance_scale=1.0, steps=10, num_images_per_prompt=3))
    runs = {r.component: r for r in p.runs}
    assert p.passes == 1 and runs["text_encoder"].runs == 1
    assert runs["transformer"].runs == 10 * 3 and runs["vae"].runs == 3


def test_lumina2_transformer_alone_runs_under_its_pipeline():
    r = estimate_configs(None, {"transformer": _config("lumina-image-2.0")}, Settings(height=512, width=512))
    c = r.components[0]
    assert r.pipeline == "Lumina2Pipeline (denoiser only)"
    assert c.runs == 60 and c.shape == {"latent_height": 64, "latent_width": 64, "text_len": 256}
    assert 2 * c.macs_per_run == 5_997_828_505_600  # the fixture's FlopCounterMode count at 512²


def test_lumina2_sizes_must_divide_by_16():
    comps = _components("lumina-image-2.0")
    with pytest.raises(ResolutionError, match="multiple of 16.*1000 → nearest valid: 992 or 1008"):
        estimate_configs(_index("lumina-image-2.0"), comps, Settings(height=1000, width=1024))


def test_lumina2_text_length_limits():
    comps = _components("lumina-image-2.0")
    with pytest.raises(FlopcalcError, match="greater than 512"):
        estimate_configs(_index("lumina-image-2.0"), comps, Settings(max_sequence_length=513))
    # the rotary table has axes_lens[0] = 300 caption positions (the image sits at position T)
    with pytest.raises(ConfigError, match="at most 299 tokens"):
        estimate_configs(_index("lumina-image-2.0"), comps, Settings(max_sequence_length=300))
    r = estimate_configs(_index("lumina-image-2.0"), comps, Settings(max_sequence_length=128))
    assert _runs(r)[("transformer", "forward")].shape["text_len"] == 128


def test_lumina2_rope_axes_must_sum_to_the_head_width():
    cfg = {**_config("lumina-image-2.0"), "axes_dim_rope": [32, 32, 16]}
    with pytest.raises(ConfigError, match="axes_dim_rope"):
        estimate_configs(None, {"transformer": cfg}, Settings(height=512, width=512))


# --------------------------------------------------------------------------- Lumina-Next


def test_lumina_next_defaults_doubled_batch():
    from flopcalc.engine.pipelines.dispatch import plan

    comps = {**_components("lumina-next-sft"), "text_encoder": _config("lumina-next-sft", "text_encoder")}
    p = plan(_index("lumina-next-sft"), comps, Settings(batch_size=2))
    assert p.pipeline == "LuminaText2ImgPipeline"
    s = p.settings
    assert (s.height, s.width, s.steps, s.guidance_scale, s.max_sequence_length) == (1024, 1024, 30, 4.0, 256)
    runs = {r.component: r for r in p.runs}
    assert p.passes == 2
    assert runs["text_encoder"].runs == 4  # 2 prompts + 2 negatives, 256 tokens each
    assert runs["transformer"].runs == 30 * 2 * 2 and runs["transformer"].shape.text_len == 256
    assert runs["vae"].runs == 2


def test_lumina_next_old_and_new_pipeline_names_plan_alike():
    comps = _components("lumina-next-sft")
    a = estimate_configs({"_class_name": "LuminaText2ImgPipeline"}, comps, Settings(height=768, width=1344))
    b = estimate_configs({"_class_name": "LuminaPipeline"}, comps, Settings(height=768, width=1344))
    assert a.macs == b.macs and b.pipeline == "LuminaPipeline"


def test_lumina_next_text_is_at_most_256_tokens():
    comps = _components("lumina-next-sft")
    with pytest.raises(FlopcalcError, match="truncates the prompt at 256"):
        estimate_configs(_index("lumina-next-sft"), comps, Settings(max_sequence_length=300))
    r = estimate_configs(_index("lumina-next-sft"), comps, Settings(max_sequence_length=64))
    assert _runs(r)[("transformer", "forward")].shape["text_len"] == 64


def test_lumina_next_limits():
    comps = _components("lumina-next-sft")
    with pytest.raises(ResolutionError, match="multiple of 16"):
        estimate_configs(_index("lumina-next-sft"), comps, Settings(height=1032, width=1024))
    # the pipeline's rotary table covers 384 patches a side: 384 · 2 · 8 = 6144 pixels
    estimate_configs(_index("lumina-next-sft"), comps, Settings(height=6144, width=512))
    with pytest.raises(ResolutionError, match="384×384 rotary"):
        estimate_configs(_index("lumina-next-sft"), comps, Settings(height=6160, width=512))
    cfg = {**_config("lumina-next-sft"), "num_kv_heads": None}
    with pytest.raises(ConfigError, match="qk_norm and num_kv_heads null"):
        estimate_configs(None, {"transformer": cfg}, Settings(height=512, width=512))


def test_lumina_next_thop_counts_the_qk_layer_norms():
    r = estimate_configs(None, {"transformer": _config("lumina-next-sft")}, Settings(height=512, width=512),
                         convention="thop")
    attn1 = r.components[0].tree.find("layers.0.attn1")
    n, d, kv = 1024, 2304, 8 * 72  # image tokens at 512², hidden, K/V heads × head width
    assert attn1.total.thop_extra == 4 * n * d + 4 * n * kv  # affine nn.LayerNorm: 4 · numel each
    assert r.components[0].macs_per_run == 1_515_655_274_496  # thop's own count at 512² (fixture)


def test_card_estimates_name_their_pipelines():
    for card, name in (("lumina-image-2.0", "Lumina2Text2ImgPipeline"), ("lumina-next-sft", "LuminaText2ImgPipeline")):
        try:
            report = flopcalc.estimate(card, height=512, width=512)
        except flopcalc.FlopcalcError as exc:  # the Gemma text encoders are another family's
            pytest.skip(f"text encoder not available yet: {exc}")
        assert report.pipeline == name


# --------------------------------------------------------------------------- closed forms


def _sym():
    sp = pytest.importorskip("sympy")
    return sp, sp.symbols("n m", positive=True, integer=True)


def test_lumina2_block_closed_form():
    from flopcalc.formulas.lumina import lumina2_block

    sp, (n, _m) = _sym()
    d, h, hkv, df = 2304, 24, 8, 9216
    dh, c = d // h, min(d, 1024)
    for modulation in (True, False):
        got = lumina2_block(tokens=n, dim=d, heads=h, kv_heads=hkv, ffn_inner=df, modulation=modulation).total
        stated = n * d * dh * (2 * h + 2 * hkv) + 2 * h * n**2 * dh + 3 * n * d * df + (4 * c * d if modulation else 0)
        assert sp.expand(got.macs("torch") - stated) == 0


def test_lumina_next_block_closed_form():
    from flopcalc.formulas.lumina import lumina_next_block

    sp, (n, m) = _sym()
    d, dc, h, hkv, df = 2304, 2048, 32, 8, 6144
    dh, c = d // h, min(d, 1024)
    got = lumina_next_block(tokens=n, context_tokens=m, dim=d, context_dim=dc, heads=h, kv_heads=hkv,
                            ffn_inner=df, qk_norm=True).total
    stated = (n * d * dh * (h + 2 * hkv) + 2 * h * n**2 * dh + n * d * h * dh + 2 * m * dc * hkv * dh
              + 2 * h * n * m * dh + n * h * dh * d + 3 * n * d * df + 4 * c * d)
    assert sp.expand(got.macs("torch") - stated) == 0


def test_model_closed_forms_with_symbolic_sizes():
    """The architecture module's two stated totals, for the cards' configs, at symbolic latent
    sides and text length."""
    from flopcalc.formulas.lumina import lumina2_block, lumina_next_block
    from flopcalc.engine.registry import RunShape, assemble

    sp = pytest.importorskip("sympy")
    hs, ws, t = sp.symbols("h w T", positive=True, integer=True)
    shape = RunShape(latent_height=2 * hs, latent_width=2 * ws, text_len=t)  # patch 2
    big_n = hs * ws

    cfg = _config("lumina-image-2.0")
    d, p, c_in, c = 2304, 2, 16, 1024
    block = lambda tokens, mod=True: lumina2_block(tokens=tokens, dim=d, heads=24, kv_heads=8, ffn_inner=9216,
                                                   modulation=mod).total.macs("torch")
    stated = (big_n * p * p * c_in * d + (256 * c + c * c) + t * 2304 * d + 2 * (block(t, False) + block(big_n))
              + 26 * block(t + big_n) + c * d + (t + big_n) * d * p * p * c_in)
    got = assemble(cfg, shape, component="transformer").total.macs("torch")
    assert sp.expand(got - stated) == 0

    cfg = _config("lumina-next-sft")
    c_in, dc = 4, 2048
    block = lumina_next_block(tokens=big_n, context_tokens=t, dim=d, context_dim=dc, heads=32, kv_heads=8,
                              ffn_inner=6144, qk_norm=True).total.macs("torch")
    stated = (big_n * p * p * c_in * d + (256 * c + c * c) + dc * c + 24 * block + c * d
              + big_n * d * p * p * 2 * c_in)
    got = assemble(cfg, shape, component="transformer").total.macs("torch")
    assert sp.expand(got - stated) == 0
