"""Live re-measurement of the HunyuanVideo 1.5 / HunyuanImage 2.1 text and image encoders, built on the meta
device and counted now:

* ``Qwen2_5_VLTextModel`` (HunyuanVideo 1.5's ``text_encoder``, Qwen2.5-VL-7B's language model alone):
  randomized configs (layers, widths, heads, key/value heads, MLP width, vocabulary, mRoPE sections, sliding
  windows) under ``HunyuanVideo15Pipeline``'s plan (1000 + 108 tokens) and alone at a random text length;
* the cards' byT5 glyph encoder (``T5EncoderModel``, the reconstructed ``text_encoder_2``) as the plans run it
  with ``glyph_prompts``: 256 tokens (HunyuanVideo 1.5) and 128 (HunyuanImage 2.1);
* the SigLIP ``image_encoder`` of ``HunyuanVideo15ImageToVideoPipeline`` (FLUX.1-Redux-dev's) as its plan runs
  it, against the measured fixture (no torch needed for that one);
* the padding masks the pipelines pass (Qwen's, byT5's as floats) leave the count unchanged (tiny CPU copies).

The seed is printed; ``FLOPCALC_SEED=N`` replays it. Bar: ``torch`` convention exact (total and every measured
module path), parameters exact, ``thop`` convention exact.
"""

from __future__ import annotations

import json
import random

import pytest

from live_support import REPO, SEED, assert_matches_measurement, check_plan, measure, write_config  # noqa: E402
from flopcalc.flops.estimate import estimate_configs  # noqa: E402
from flopcalc.engine.pipelines import Settings  # noqa: E402

HV15 = REPO / "model_cards/hunyuanvideo-1.5-480p"
HY_IMAGE = REPO / "model_cards/hunyuanimage-2.1"
HV15_INDEX = json.loads((HV15 / "model_index.json").read_text())
HY_IMAGE_INDEX = json.loads((HY_IMAGE / "model_index.json").read_text())


def _random_text_model(rng: random.Random) -> dict:
    """A random ``Qwen2_5_VLTextConfig``: query heads a multiple of the key/value heads, an even head width
    split into three mRoPE sections."""
    kv = rng.choice([1, 2])
    heads = kv * rng.choice([1, 2, 3])
    head_dim = rng.choice([8, 12, 16])
    half = head_dim // 2
    t = rng.randint(0, half)
    h = rng.randint(0, half - t)
    return {
        "architectures": ["Qwen2_5_VLTextModel"],
        "model_type": "qwen2_5_vl_text",
        "hidden_size": heads * head_dim,
        "num_attention_heads": heads,
        "num_key_value_heads": kv,
        "intermediate_size": rng.choice([20, 48]),
        "num_hidden_layers": rng.randint(1, 3),
        "vocab_size": rng.choice([100, 300]),
        "rope_scaling": {"rope_type": "default", "mrope_section": [t, h, half - t - h]},
        "use_sliding_window": rng.random() < 0.3,
        "sliding_window": 8,
        "max_window_layers": 1,
    }


@pytest.mark.live
def test_random_qwen2_5_vl_text_models_under_the_plan_and_alone(rng, tmp_path):
    for i in range(3):
        cfg = _random_text_model(rng)
        folder = write_config(tmp_path, f"text_encoder_{i}", cfg)
        # under HunyuanVideo15Pipeline: the padded 1000 + 108 tokens
        check_plan(folder, "text_encoder", Settings(steps=1, num_frames=1, height=16, width=16),
                   {"seq_len": 1108}, index=HV15_INDEX)
        seq = rng.randint(1, 64)
        report = estimate_configs(None, {"text_encoder": cfg}, Settings(max_sequence_length=seq), convention="torch")
        (comp,) = report.components
        fx = measure.measure_component(folder, settings={"seq_len": seq})
        assert_matches_measurement(comp, fx, f"seed {SEED}, seq {seq}: {cfg}")


@pytest.mark.live
@pytest.mark.parametrize("card, index, tokens", [(HV15, HV15_INDEX, 256), (HY_IMAGE, HY_IMAGE_INDEX, 128)],
                         ids=["hunyuanvideo-1.5", "hunyuanimage-2.1"])
def test_the_glyph_encoder_as_the_plans_run_it(card, index, tokens):
    """The reconstructed byT5 (d_model 1472, 6 heads × 64, gated-GELU, vocabulary 1510) at the pipeline's
    ``tokenizer_2_max_length``, one forward per prompt with quoted text."""
    settings = Settings.make(steps=1, glyph_prompts=1, **({"num_frames": 1} if card == HV15 else {}),
                             height=64 if card == HY_IMAGE else 16, width=64 if card == HY_IMAGE else 16)
    check_plan(card / "text_encoder_2", "text_encoder_2", settings, {"seq_len": tokens}, index=index)


def test_the_image_to_video_image_encoder_is_the_measured_siglip():
    """``HunyuanVideo15ImageToVideoPipeline``'s ``image_encoder`` run (384² pixels, 729 tokens, once per call)
    against the fixture measured for FLUX.1-Redux-dev's SigLIP (validation/fixtures/flux1-redux-dev)."""
    fx = json.loads((REPO / "validation/fixtures/flux1-redux-dev/image_encoder-L729.json").read_text())
    siglip = json.loads((REPO / fx["config_dir"] / "config.json").read_text())
    index = {**HV15_INDEX, "_class_name": "HunyuanVideo15ImageToVideoPipeline",
             "image_encoder": ["transformers", "SiglipVisionModel"],
             "feature_extractor": ["transformers", "SiglipImageProcessor"]}
    report = estimate_configs(index, {"image_encoder": siglip}, Settings(batch_size=2), convention="torch")
    (comp,) = report.components
    assert comp.runs == 1
    assert_matches_measurement(comp, fx, "HunyuanVideo 1.5 I2V image_encoder vs flux1-redux-dev/image_encoder-L729")


@pytest.mark.live
def test_the_pipelines_padding_masks_do_not_change_the_count(rng):
    """HunyuanVideo 1.5 passes the Qwen tokenizer's padding mask to ``Qwen2_5_VLTextModel`` and byT5's as floats
    (``attention_mask.float()``, pipeline_hunyuan_video1_5.py:319); the fixtures are measured without: tiny
    real-weight CPU copies counted both ways."""
    import torch
    from transformers import Qwen2_5_VLTextConfig, Qwen2_5_VLTextModel, T5Config, T5EncoderModel

    qwen = Qwen2_5_VLTextModel(Qwen2_5_VLTextConfig(
        hidden_size=32, num_attention_heads=4, num_key_value_heads=2, intermediate_size=48, num_hidden_layers=2,
        vocab_size=100, rope_scaling={"rope_type": "default", "mrope_section": [2, 1, 1]})).eval()
    byt5 = T5EncoderModel(T5Config(d_model=24, d_kv=8, num_heads=2, d_ff=40, num_layers=2, vocab_size=100,
                                   feed_forward_proj="gated-gelu")).eval()
    seq = rng.randint(4, 40)
    ids = torch.randint(0, 100, (1, seq))
    mask = torch.ones(1, seq, dtype=torch.int64)
    mask[0, rng.randint(1, seq - 1):] = 0  # right padding, as both tokenizers pad
    for model, given in ((qwen, mask), (byt5, mask.float())):
        plain = measure.count_torch(model, {"input_ids": ids})["flops"]
        masked = measure.count_torch(model, {"input_ids": ids, "attention_mask": given})["flops"]
        assert plain == masked, f"seed {SEED}: {type(model).__name__} seq {seq}"
