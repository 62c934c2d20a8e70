"""HiDreamImagePipeline semantics (diffusers ``pipelines/hidream_image/pipeline_hidream_image.py``) and the
HiDream formulas' closed forms. No torch needed; ``tests/test_live_hidream.py`` measures the modules and
``tests/test_live_hidream_pipeline.py`` runs the real pipeline."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import flopcalc
from flopcalc.flops.estimate import estimate_configs
from flopcalc.engine.errors import ConfigError, FlopcalcError, OptionError
from flopcalc.formulas.hidream import expert_params, swiglu_width
from flopcalc.engine.pipelines import Settings
from flopcalc.engine.pipelines.hidream_image import run_size
from flopcalc.engine.sources import resolve
from card_support import runs_by_call

REPO = Path(__file__).resolve().parent.parent
CARD = "hidream-i1-full"
SNAPSHOT = REPO.parent.parent / "shared" / "hub-snapshots" / "HiDream-ai" / "HiDream-I1-Full"
if not SNAPSHOT.is_dir():
    SNAPSHOT = Path("/work/shared/hub-snapshots/HiDream-ai/HiDream-I1-Full")


def _configs() -> tuple[dict, dict]:
    source = resolve(CARD)
    return dict(source.model_index), {name: dict(cfg) for name, cfg in source.components.items()}


def _clip(positions: int, width: int) -> dict:
    """A CLIP text config of the card's model-index class (test data: only the position count matters here)."""
    return {"architectures": ["CLIPTextModelWithProjection"], "hidden_size": width, "intermediate_size": 4 * width,
            "max_position_embeddings": positions, "num_attention_heads": width // 64, "num_hidden_layers": 2,
            "projection_dim": width, "vocab_size": 49408}


def _plan(settings: Settings, **extra):
    index, components = _configs()
    return estimate_configs(index, {**components, **extra}, settings)


def test_defaults_are_hidream_i1_full_two_passes():
    r = flopcalc.estimate(CARD)
    s = r.settings
    assert r.pipeline == "HiDreamImagePipeline"
    assert (s.height, s.width, s.steps, s.guidance_scale, s.max_sequence_length) == (1024, 1024, 50, 5.0, 128)
    assert r.passes == 2
    assert runs_by_call(r) == {"text_encoder_3.forward": 2, "text_encoder_4.forward": 2, "transformer.forward": 100,
                               "vae.decode": 1}
    assert r.component("text_encoder_3").shape == {"seq_len": 128}
    assert r.component("text_encoder_4").shape == {"seq_len": 128}
    assert r.component("transformer").shape == {"latent_height": 128, "latent_width": 128, "text_len": 128,
                                                "text_len_2": 128}
    assert r.component("vae").shape == {"latent_height": 128, "latent_width": 128}
    # the CLIP encoders are not bundled: named, not counted
    assert sum("text_encoder (CLIPTextModelWithProjection)" in n or "text_encoder_2 (" in n for n in r.notes) == 2


def test_every_size_is_rescaled_to_the_area_of_1024_squared():
    """pipeline_hidream_image.py:810-817: ``scale = sqrt(S_max / (w·h))``, sides floored to multiples of 16."""
    for (h, w), expected in {(512, 512): (1024, 1024), (2048, 2048): (1024, 1024), (768, 1344): (768, 1344),
                             (2048, 1024): (1440, 720), (1000, 1000): (1024, 1024)}.items():
        assert run_size(h, w, 8) == expected
        r = _plan(Settings(height=h, width=w))
        assert (r.settings.height, r.settings.width) == expected
        assert r.component("transformer").shape["latent_height"] == expected[0] // 8
        assert r.component("vae").shape == {"latent_height": expected[0] // 8, "latent_width": expected[1] // 8}
        assert any("rescales" in n for n in r.notes) == ((h, w) != expected)
    for h, w in ((1024, 1024), (512, 4096), (832, 1248)):
        rh, rw = run_size(h, w, 8)
        assert rh % 16 == rw % 16 == 0 and rh * rw <= 1024 * 1024
        assert abs(rh / rw - h / w) < 0.05 * h / w


def test_the_transformer_runs_on_4096_patches_square_or_not():
    """Square: (1024/16)² = 4096 patches; a non-square latent is padded to max_seq = 128·128/4 = 4096."""
    square, wide = (_plan(Settings(height=h, width=w)).component("transformer") for h, w in ((1024, 1024), (768, 1344)))
    assert square.macs_per_run == wide.macs_per_run
    assert any("padded" in n for n in _plan(Settings(height=768, width=1344)).notes)


def test_guidance_at_most_one_runs_one_pass_and_encodes_no_negative_prompt():
    """``do_classifier_free_guidance`` is ``guidance_scale > 1`` (:659-660): HiDream-I1-Dev / -Fast run at 0."""
    for scale, passes in ((0.0, 1), (1.0, 1), (1.5, 2)):
        r = _plan(Settings(guidance_scale=scale, steps=28))
        assert r.passes == passes
        assert runs_by_call(r) == {"text_encoder_3.forward": passes, "text_encoder_4.forward": passes,
                                   "transformer.forward": 28 * passes, "vae.decode": 1}


def test_batch_and_images_per_prompt():
    r = _plan(Settings(batch_size=2, num_images_per_prompt=3, steps=10))
    assert runs_by_call(r) == {"text_encoder_3.forward": 4, "text_encoder_4.forward": 4, "transformer.forward": 120,
                               "vae.decode": 6}


def test_max_sequence_length_sets_t5_llama_and_clip_tokens():
    """CLIP on ``min(max_sequence_length, 218)`` tokens (:256), T5 and Llama on ``max_sequence_length``."""
    clips = {"text_encoder": _clip(248, 768), "text_encoder_2": _clip(248, 1280)}
    for length, clip in ((64, 64), (300, 218)):
        r = _plan(Settings(max_sequence_length=length), **clips)
        assert r.component("text_encoder").shape == r.component("text_encoder_2").shape == {"seq_len": clip}
        assert r.component("text_encoder").runs == 2
        assert r.component("text_encoder_3").shape == r.component("text_encoder_4").shape == {"seq_len": length}
        t = r.component("transformer").shape
        assert (t["text_len"], t["text_len_2"]) == (length, length)


def test_a_clip_with_fewer_positions_than_the_pipeline_feeds_is_refused():
    """The shared snapshot's reconstructed CLIPs (SD3.5's, 77 positions) cannot take 128 tokens: diffusers fails too."""
    if not SNAPSHOT.is_dir():
        pytest.skip("../shared/hub-snapshots is not beside the checkout")
    with pytest.raises(ConfigError, match="max_position_embeddings 77 is below the 128 tokens"):
        flopcalc.estimate(str(SNAPSHOT))
    r = flopcalc.estimate(str(SNAPSHOT), max_sequence_length=77)  # what fits is counted
    assert r.component("text_encoder").shape == {"seq_len": 77}


def test_options_it_does_not_take_are_refused():
    with pytest.raises(OptionError, match="--strength does not apply to HiDreamImagePipeline"):
        flopcalc.estimate(CARD, strength=0.5)
    for option in ({"true_cfg_scale": 4.0}, {"vae_tiling": True}, {"num_frames": 9}):
        with pytest.raises(OptionError, match="does not apply to HiDreamImagePipeline"):
            flopcalc.estimate(CARD, **option)


def test_no_symbolic_law():
    from flopcalc.flops.symbolic import symbolic_estimate

    with pytest.raises(FlopcalcError, match="rescales every size.*no closed-form law"):
        symbolic_estimate(CARD)


def test_the_transformer_alone_runs_under_its_pipeline():
    cfg = json.loads((REPO / "model_cards" / CARD / "transformer" / "config.json").read_text())
    r = estimate_configs(None, {"transformer": cfg}, Settings(height=768, width=1344))
    assert r.pipeline == "HiDreamImagePipeline (denoiser only)"
    assert r.component("transformer").runs == 100


def test_swiglu_widths_and_the_active_parameters():
    """``HiDreamImageFeedForwardSwiGLU`` (:29-33) at d = 2560: routed 4d → 6912, shared 2d → 3584; of 17.1B
    parameters, the 2 unpicked of 4 routed experts in each of the 48 MoE layers are idle per token."""
    assert swiglu_width(4 * 2560) == 6912 and swiglu_width(2 * 2560) == 3584
    assert swiglu_width(10) == 256  # int(20/3) = 6, rounded up to 256
    r = flopcalc.estimate(CARD)
    t = r.component("transformer")
    assert t.per_run.idle_params == 48 * 2 * expert_params(2560) == 48 * 2 * 3 * 2560 * 6912
    d = r.to_dict(per_block=False)
    active = next(c for c in d["components"] if c["component"] == "transformer")["active_params"]
    assert active == t.params - t.per_run.idle_params
    assert "active" not in next(c for c in d["components"] if c["component"] == "vae")


def test_moe_routed_work_is_k_of_e_experts_per_token():
    """The routed experts' MACs per MoE layer: 3·k·n·d·f_r, whatever the routing; plus the gate n·d·E and
    the shared expert 3·n·d·f_s."""
    r = flopcalc.estimate(CARD)
    tree = r.component("transformer").tree
    n, d = 4096, 2560
    experts = tree.find("double_stream_blocks.0.block.ff_i.experts")
    assert experts.per_item.macs("torch") == 3 * 2 * n * d * 6912
    gate = tree.find("double_stream_blocks.0.block.ff_i.gate")
    assert gate.per_item.macs("torch") == n * d * 4 and gate.per_item.macs("thop") == 0  # F.linear: no thop hook
    shared = tree.find("double_stream_blocks.0.block.ff_i.shared_experts")
    assert shared.per_item.macs("torch") == 3 * n * d * 3584
    single = tree.find("single_stream_blocks.0.block.ff_i.experts")
    assert single.per_item.macs("torch") == 3 * 2 * (n + 128 + 2 * 128) * d * 6912
    assert math.isclose(r.component("transformer").params / 1e9, 17.1, abs_tol=0.01)
