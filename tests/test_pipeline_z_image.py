"""ZImagePipeline semantics (diffusers ``pipelines/z_image/pipeline_z_image.py``, Z-Image-Turbo's model
card settings) and the Z-Image / Qwen3 formulas' closed forms. No torch needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import flopcalc
from flopcalc.flops.estimate import estimate_configs
from flopcalc.engine.errors import ConfigError, OptionError, ResolutionError
from flopcalc.engine.pipelines import Settings
from flopcalc.engine.sources import resolve
from card_support import runs_by_call

REPO = Path(__file__).resolve().parent.parent
CARD = REPO / "model_cards/z-image-turbo"
FIXTURES = REPO / "validation/fixtures/z-image-turbo"


def _configs() -> tuple[dict, dict]:
    source = resolve(CARD.name)
    return dict(source.model_index), {name: dict(cfg) for name, cfg in source.components.items()}


def _plan(settings: Settings, *, index_class: str = "ZImagePipeline", **overrides):
    index, components = _configs()
    components = {k: {**v, **overrides.get(k, {})} for k, v in components.items()}
    return estimate_configs({**index, "_class_name": index_class}, components, settings)


def test_defaults_are_the_turbo_model_card_settings_one_pass():
    r = flopcalc.estimate("z-image-turbo")
    s = r.settings
    assert r.pipeline == "ZImagePipeline"
    assert (s.height, s.width, s.steps, s.guidance_scale, s.max_sequence_length) == (1024, 1024, 9, 0.0, 512)
    assert r.passes == 1
    assert runs_by_call(r) == {"text_encoder.forward": 1, "transformer.forward": 9, "vae.decode": 1}
    assert r.component("text_encoder").shape == {"seq_len": 512}
    assert r.component("transformer").shape == {"latent_height": 128, "latent_width": 128, "text_len": 512}
    assert any("Z-Image-Turbo's settings" in n for n in r.notes)


def test_any_positive_guidance_runs_cfg_on_a_doubled_batch_with_the_negative_prompt():
    """``do_classifier_free_guidance`` is ``guidance_scale > 0``: 1.0 already doubles the batch."""
    for scale in (1.0, 5.0):
        r = _plan(Settings(guidance_scale=scale, steps=50))
        assert r.passes == 2 and not any("Turbo" in n for n in r.notes)
        assert runs_by_call(r) == {"text_encoder.forward": 2, "transformer.forward": 100, "vae.decode": 1}


def test_negative_prompt_without_guidance_is_ignored():
    r = _plan(Settings(negative_prompt=True))
    assert r.passes == 1 and any("negative prompt is ignored" in n for n in r.notes)


@pytest.mark.parametrize("pipeline", ["ZImagePipeline", "ZImageImg2ImgPipeline"])
def test_true_cfg_scale_is_refused_guidance_scale_runs_cfg(pipeline):
    with pytest.raises(OptionError, match=f"--true-cfg-scale does not apply to {pipeline}: .*guidance_scale > 0"):
        _plan(Settings(true_cfg_scale=4.0), index_class=pipeline)


def test_max_sequence_length_sets_the_encoder_and_caption_lengths():
    r = _plan(Settings(max_sequence_length=128))
    assert r.component("text_encoder").shape == {"seq_len": 128} and r.component("transformer").shape["text_len"] == 128


def test_batch_and_images_per_prompt():
    r = _plan(Settings(batch_size=2, num_images_per_prompt=3, guidance_scale=2.0))
    assert runs_by_call(r) == {"text_encoder.forward": 4, "transformer.forward": 9 * 2 * 6, "vae.decode": 6}


def test_sizes_must_divide_by_16():
    with pytest.raises(ResolutionError, match="1000 → nearest valid: 992 or 1008"):
        _plan(Settings(height=1000, width=1024))


def test_text_encoder_is_built_as_model_index_names_it():
    """``model_index.json`` loads ``Qwen3Model`` (no ``lm_head``); the bare config is ``Qwen3ForCausalLM``,
    whose ``lm_head`` (tied to the embedding: no parameters of its own) runs on every token."""
    fixture = json.loads((FIXTURES / "text_encoder-L512.json").read_text())
    r = flopcalc.estimate("z-image-turbo")
    enc = r.component("text_encoder")
    assert enc.class_name == fixture["class_name"] == "Qwen3Model"
    assert 2 * enc.macs_per_run == fixture["torch"]["flops"] and enc.params == fixture["params"]
    _, components = _configs()
    bare = estimate_configs(None, {"text_encoder": components["text_encoder"]}, Settings(max_sequence_length=512))
    lm = bare.component("text_encoder")
    assert lm.class_name == "Qwen3ForCausalLM" and lm.params == enc.params
    assert lm.macs_per_run - enc.macs_per_run == 512 * 2560 * 151936


def test_kaplan_on_the_qwen3_encoder_misses_the_av_matmul_and_counts_the_norm_gains():
    """Kaplan's row for ``Qwen3Model``: d_attn = heads · head_dim (not hidden_size); with no biases it
    misses exactly the A·V matmul and counts every RMSNorm gain (two per layer, q/k norms, the final
    norm) as a multiplied weight."""
    from flopcalc.flops.kaplan import kaplan_rows

    (row,) = kaplan_rows("z-image-turbo")
    cfg = json.loads((CARD / "text_encoder/config.json").read_text())
    d, head = cfg["hidden_size"], cfg["head_dim"]
    assert (row.class_name, row.n_ctx, row.n_layer) == ("Qwen3Model", 512, cfg["num_hidden_layers"])
    assert row.d_attn == cfg["num_attention_heads"] * head != d
    gains = row.n_layer * (2 * d + 2 * head) + d
    assert row.exact_flops - row.kaplan_flops == 2 * row.n_layer * row.n_ctx**2 * row.d_attn - 2 * row.n_ctx * gains


def test_transformer_pads_image_and_caption_tokens_to_32():
    """272×400: 17·25 = 425 image tokens, padded to 448; a 40-token caption to 64: measured in full."""
    fixture = json.loads((FIXTURES / "transformer-272x400.json").read_text())
    r = _plan(Settings(height=272, width=400))
    assert 2 * r.component("transformer").macs_per_run == fixture["torch"]["flops"]
    short = _plan(Settings(max_sequence_length=40)).component("transformer").macs_per_run
    assert short == _plan(Settings(max_sequence_length=64)).component("transformer").macs_per_run
    assert short < _plan(Settings(max_sequence_length=65)).component("transformer").macs_per_run


def test_transformer_parameters():
    """6,154,908,736 (``sum(p.numel())`` on the real module, fixture ``transformer-512x512.json``)."""
    fixture = json.loads((FIXTURES / "transformer-512x512.json").read_text())
    assert flopcalc.estimate("z-image-turbo").component("transformer").params == fixture["params"] == 6_154_908_736


def test_transformer_alone_runs_under_its_pipeline():
    _, components = _configs()
    r = estimate_configs(None, {"transformer": components["transformer"]}, Settings())
    assert r.pipeline == "ZImagePipeline (denoiser only)" and r.component("transformer").runs == 9


def test_config_checks():
    with pytest.raises(ConfigError, match="sum\\(axes_dims\\)"):
        _plan(Settings(), transformer={"axes_dims": [32, 48, 40]})
    with pytest.raises(ConfigError, match="patch_size 2 with f_patch_size 1"):
        _plan(Settings(), transformer={"all_patch_size": [1], "all_f_patch_size": [1]})


# --------------------------------------------------------------------------- closed forms


def test_block_closed_form():
    sp = pytest.importorskip("sympy")
    from flopcalc.formulas.z_image import feed_forward_width, z_image_block

    n = sp.Symbol("n", positive=True, integer=True)
    for dim, heads in ((3840, 30), (64, 4)):
        d_f, a = feed_forward_width(dim), min(dim, 256)
        for modulation in (False, True):
            cost = z_image_block(tokens=n, dim=dim, heads=heads, qk_norm=True, modulation=modulation).total
            stated = (4 * n * dim**2 + 2 * heads * n**2 * (dim // heads) + 3 * n * dim * d_f
                      + (4 * a * dim if modulation else 0))
            assert sp.expand(cost.macs("torch") - stated) == 0


def test_symbolic_padding_is_a_ceiling():
    sp = pytest.importorskip("sympy")
    from flopcalc.formulas.z_image import padded_length

    x = sp.Symbol("x", positive=True, integer=True)
    assert all(padded_length(x).subs(x, v) == padded_length(v) for v in (1, 31, 32, 33, 425))


def test_crossover_of_the_padded_law_is_where_attention_overtakes_linear():
    """The law holds ceilings (the padding to 32 tokens); the crossover solves it without them, and
    the exact counts either side of that square side agree."""
    pytest.importorskip("sympy")
    from flopcalc.flops.symbolic import symbolic_estimate
    from flopcalc.flops.symbolic_report import crossover

    (t,) = [c for c in crossover(symbolic_estimate("z-image-turbo")) if c.component == "transformer"]
    side = round(t.side / 16) * 16
    below = flopcalc.estimate("z-image-turbo", height=side - 64, width=side - 64).component("transformer").per_run
    above = flopcalc.estimate("z-image-turbo", height=side + 64, width=side + 64).component("transformer").per_run
    assert below.attention < below.linear and above.attention > above.linear


def test_image_to_image_encodes_the_input_and_skips_the_first_steps():
    r = _plan(Settings(), index_class="ZImageImg2ImgPipeline")
    assert r.pipeline == "ZImageImg2ImgPipeline" and r.settings.strength == 0.6
    # get_timesteps: t_start = int(max(9 − 9·0.6, 0)) = 3 → 6 steps run.
    assert runs_by_call(r) == {"text_encoder.forward": 1, "vae.encode": 1, "transformer.forward": 6, "vae.decode": 1}
    assert r.component("vae", "encode").shape == {"height": 1024, "width": 1024}
