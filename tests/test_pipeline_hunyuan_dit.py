"""HunyuanDiTPipeline semantics (no torch): defaults, CFG passes, which encoders run how often
and on how many tokens, the size floor and resolution binning, the errors; and the HunyuanDiT
block and attention-pool closed forms stated in formulas/hunyuan_dit.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import flopcalc
from flopcalc.flops.estimate import estimate_configs
from flopcalc.engine.errors import ConfigError, FlopcalcError
from flopcalc.engine.pipelines import Settings, plan
from flopcalc.engine.pipelines.hunyuan_dit import hunyuan_binned_size, hunyuan_dit_pipeline

REPO = Path(__file__).resolve().parent.parent
CARD = REPO / "model_cards" / "hunyuandit-v1.2"


def _components() -> dict[str, dict]:
    index = json.loads((CARD / "model_index.json").read_text())
    names = [k for k, v in index.items() if isinstance(v, list) and v[0] is not None and k not in
             ("scheduler", "tokenizer", "tokenizer_2")]
    return {name: json.loads((CARD / name / "config.json").read_text()) for name in names}


def _plan(**settings):
    index = json.loads((CARD / "model_index.json").read_text())
    return plan(index, _components(), Settings(**settings))


def _runs(p) -> dict[str, tuple[int, dict]]:
    return {r.component: (r.runs, {k: v for k, v in vars(r.shape).items() if v is not None}) for r in p.runs}


def test_defaults_are_the_pipelines():
    p = _plan()
    s = p.settings
    assert (s.height, s.width, s.steps, s.guidance_scale, p.passes) == (1024, 1024, 50, 5.0, 2)
    assert _runs(p) == {
        "text_encoder": (2, {"seq_len": 77}),       # BERT: prompt + negative ("")
        "text_encoder_2": (2, {"seq_len": 256}),    # mT5: prompt + negative
        "transformer": (100, {"latent_height": 128, "latent_width": 128, "text_len": 333}),
        "vae": (1, {"latent_height": 128, "latent_width": 128}),
    }
    assert p.notes == ()


def test_no_guidance_means_one_pass_and_no_negative_prompt():
    p = _plan(guidance_scale=1.0, steps=20)
    runs = _runs(p)
    assert p.passes == 1
    assert runs["text_encoder"][0] == runs["text_encoder_2"][0] == 1
    assert runs["transformer"][0] == 20


def test_batch_and_images_per_prompt():
    runs = _runs(_plan(batch_size=2, num_images_per_prompt=3, steps=10))
    assert runs["text_encoder"][0] == runs["text_encoder_2"][0] == 4  # 2 prompts + 2 negatives, repeated not re-encoded
    assert runs["transformer"][0] == 10 * 2 * 6
    assert runs["vae"][0] == 6


@pytest.mark.parametrize(("asked", "generated"), [
    ((512, 512), (1024, 1024)),       # not supported: nearest area of ratio 1:1
    ((768, 1344), (768, 1280)),       # 1.75 → 16:9, (w, h) = (1280, 768)
    ((1344, 768), (1280, 768)),       # 9:16
    ((864, 1152), (864, 1152)),       # supported (height, width): unchanged
    ((1280, 1280), (1280, 1280)),
    ((2048, 2048), (1280, 1280)),
    ((1000, 1400), (960, 1280)),      # ratio 1.4 → 4:3, area nearest 1280×960
])
def test_resolution_binning(asked, generated):
    assert hunyuan_binned_size(*asked) == generated
    p = _plan(height=asked[0], width=asked[1])
    assert (p.settings.height, p.settings.width) == generated
    assert bool(p.notes) == (asked != generated)


def test_sizes_floor_to_16_then_bin_or_not():
    p = _plan(height=1000, width=1000, resolution_binning=False)
    assert (p.settings.height, p.settings.width) == (992, 992)
    assert any("floored to 992×992" in n for n in p.notes)
    assert _runs(p)["transformer"][1]["latent_height"] == 124
    p = _plan(height=1000, width=1000)
    assert (p.settings.height, p.settings.width) == (1024, 1024)
    p = _plan(height=768, width=1344, resolution_binning=False)  # a multiple of 16: taken as is
    assert (p.settings.height, p.settings.width) == (768, 1344) and p.notes == ()
    with pytest.raises(flopcalc.FlopcalcError, match="at least 16"):
        _plan(height=8, width=512)


def test_max_sequence_length_is_not_an_argument():
    with pytest.raises(FlopcalcError, match="fixed 77 BERT and 256 mT5"):
        _plan(max_sequence_length=128)


def test_transformer_text_lengths_must_be_the_pipelines():
    components = _components()
    components["transformer"] = {**components["transformer"], "text_len": 32}
    with pytest.raises(ConfigError, match="always encodes 77 BERT and 256 mT5"):
        plan(json.loads((CARD / "model_index.json").read_text()), components, Settings())
    # alone, the transformer runs at the lengths it accepts, with a note
    report = estimate_configs(None, {"transformer": components["transformer"]}, Settings(steps=1))
    assert report.component("transformer").shape["text_len"] == 32 + 256
    alone = hunyuan_dit_pipeline({"transformer": components["transformer"]}, Settings(steps=1))
    assert any("288 text tokens" in n for n in alone.notes)


def test_denoiser_alone_runs_under_its_pipeline():
    cfg = _components()["transformer"]
    report = estimate_configs(None, {"transformer": cfg}, Settings())
    assert report.pipeline == "HunyuanDiTPipeline (denoiser only)"
    full = flopcalc.estimate(str(CARD))
    assert report.component("transformer").macs_per_run == full.component("transformer").macs_per_run


def test_bad_configs_are_config_errors():
    cfg = _components()["transformer"]
    for bad in ({"num_layers": 3}, {"hidden_size": 1152}, {"cross_attention_dim_t5": 2044},
                {"activation_fn": "relu"}):
        with pytest.raises(ConfigError):
            estimate_configs(None, {"transformer": {**cfg, **bad}}, Settings(steps=1))


def test_v12_has_no_style_or_size_conditioning_and_v11_does():
    cfg = _components()["transformer"]
    v12 = estimate_configs(None, {"transformer": cfg}, Settings(steps=1)).component("transformer").tree
    v11 = estimate_configs(None, {"transformer": {**cfg, "use_style_cond_and_image_meta_size": True}},
                           Settings(steps=1)).component("transformer").tree
    assert v12.find("time_extra_emb.style_embedder") is None
    assert v11.find("time_extra_emb.style_embedder").total.params == 1408
    extra = 6 * 256 + 1408  # image meta sizes (6 sinusoids of 256) and the style embedding
    assert (v11.find("time_extra_emb.extra_embedder.linear_1").total.linear
            - v12.find("time_extra_emb.extra_embedder.linear_1").total.linear) == extra * 4 * 1408


def test_long_skips_are_in_the_second_half():
    tree = flopcalc.estimate(str(CARD)).component("transformer").tree
    assert [(c.name, c.count) for c in tree.find("blocks").children] == [("0-20", 21), ("21-39", 19)]
    assert tree.find("blocks.20.skip_linear") is None and tree.find("blocks.21.skip_linear") is not None


# --------------------------------------------------------------------------- closed forms

def test_block_closed_form():
    sp = pytest.importorskip("sympy")
    from flopcalc.formulas.hunyuan_dit import hunyuan_dit_block

    n, t, dh, c, f, h = sp.symbols("N T d_h C f h", positive=True, integer=True)
    d = h * dh
    for activation, g in (("gelu-approximate", 1), ("geglu", 2)):
        for skip in (False, True):
            ours = hunyuan_dit_block(dim=d, heads=h, tokens=n, context_tokens=t, context_dim=c, ff_inner_dim=f,
                                     activation=activation, skip=skip).total.macs("torch")
            stated = (d**2 + 4 * n * d**2 + 2 * h * n**2 * dh + 2 * n * d**2 + 2 * t * c * d + 2 * h * n * t * dh
                      + (g + 1) * n * d * f + (2 * n * d**2 if skip else 0))
            assert sp.expand(ours - stated) == 0, (activation, skip)


def test_attention_pool_closed_form():
    sp = pytest.importorskip("sympy")
    from flopcalc.formulas.hunyuan_dit import hunyuan_attention_pool

    s, dd, p = sp.symbols("S D P", positive=True, integer=True)
    cost = hunyuan_attention_pool("pooler", tokens=s, dim=dd, out_dim=p).cost
    assert sp.expand(cost.macs("torch") - (dd**2 + 2 * (s + 1) * dd**2 + 2 * (s + 1) * dd + dd * p)) == 0
    assert cost.macs("thop") == 0


def test_the_plan_reads_the_transformers_class_defaults_not_its_own():
    """The plan sees the config with the class defaults the assembler uses: HunyuanDiT2DModel has
    no patch size (``None``), so a config without one is refused instead of assumed 2."""
    components = _components()
    components["transformer"] = {k: v for k, v in components["transformer"].items() if k != "patch_size"}
    with pytest.raises(ConfigError, match="patch_size"):
        plan(json.loads((CARD / "model_index.json").read_text()), components, Settings())
    del components["transformer"]["sample_size"]  # the class default, 32 (× 8 = 256²), as the assembler reads it
    components["transformer"]["patch_size"] = 2
    p = plan(json.loads((CARD / "model_index.json").read_text()), components, Settings(resolution_binning=False))
    assert (p.settings.height, p.settings.width) == (256, 256)
