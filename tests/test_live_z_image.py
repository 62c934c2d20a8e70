"""Live re-measurement of the Z-Image family: ``ZImageTransformer2DModel`` and the Qwen3 text encoders
(``Qwen3Model``, ``Qwen3ForCausalLM``) built on the meta device and counted now, on the card at a random
size and text length (the text encoder built as ``Qwen3Model``, the class ``model_index.json`` loads)
and on randomized configs (every structural key the assemblers read: width, heads, rotary axes, layer
and refiner counts, q/k norms, patch-size sets, channels, caption width, the SigLIP branch; Qwen3
widths, heads, key/value heads, head width, layers, vocabulary, biases, tied embeddings), with image
and caption lengths that are and are not multiples of the model's 32-token padding.

The seed is printed; ``FLOPCALC_SEED=N`` replays it. Bar: ``torch`` convention exact (total and every
measured module path), parameters exact, ``thop`` convention exact.
"""

from __future__ import annotations

import json

import pytest

from live_support import (  # noqa: E402  (skips without torch)
    REPO,
    SEED,
    assert_matches_measurement,
    check_plan,
    measure,
    random_size,
    write_config,
)
from flopcalc.flops.estimate import estimate, estimate_configs  # noqa: E402
from flopcalc.engine.errors import ConfigError  # noqa: E402
from flopcalc.engine.pipelines import Settings  # noqa: E402

pytestmark = pytest.mark.live

CARD = REPO / "model_cards/z-image-turbo"
INDEX = json.loads((CARD / "model_index.json").read_text())


# --------------------------------------------------------------------------- the card


def test_card_transformer_at_random_size(rng):
    h, w, t = random_size(rng, 16, 128, 1024), random_size(rng, 16, 128, 1024), rng.randint(1, 512)
    check_plan(CARD / "transformer", "transformer", Settings(height=h, width=w, max_sequence_length=t),
               {"height": h, "width": w, "text_len": t}, index=INDEX, thop=False)


def test_card_text_encoder_as_the_pipeline_loads_it(rng):
    """``model_index.json`` names ``Qwen3Model``: built from the ``Qwen3ForCausalLM`` config without
    ``lm_head``, as ``DiffusionPipeline.from_pretrained`` loads it."""
    seq = rng.randint(1, 512)
    cfg = json.loads((CARD / "text_encoder/config.json").read_text())
    report = estimate_configs(INDEX, {"text_encoder": cfg}, Settings(max_sequence_length=seq), convention="torch")
    comp = report.component("text_encoder")
    assert comp.class_name == "Qwen3Model"
    fx = measure.measure_component(CARD / "text_encoder", "Qwen3Model", settings={"seq_len": seq}, with_thop=False)
    assert_matches_measurement(comp, fx, f"seed {SEED}, Qwen3Model at {seq} tokens", thop=False)


# --------------------------------------------------------------------------- randomized configs


def test_random_z_image_transformer_configs(rng, tmp_path):
    for i in range(4):
        heads, head_dim = rng.randint(1, 3), rng.choice([16, 32])
        patches = rng.choice([([2], [1]), ([1, 2], [1, 1]), ([2, 2], [1, 2])])
        cfg = {
            "_class_name": "ZImageTransformer2DModel",
            "all_patch_size": patches[0],
            "all_f_patch_size": patches[1],
            "in_channels": rng.choice([4, 16]),
            "dim": heads * head_dim,
            "n_layers": rng.randint(0, 2),
            "n_refiner_layers": rng.randint(0, 2),
            "n_heads": heads,
            "n_kv_heads": heads,
            "qk_norm": rng.random() < 0.5,
            "cap_feat_dim": rng.choice([24, 40]),
            "siglip_feat_dim": rng.choice([None, 12]),
            "axes_dims": [head_dim // 4, 3 * head_dim // 8, 3 * head_dim // 8],
            "axes_lens": [1024, 512, 512],
        }
        h, w, t = random_size(rng, 16, 32, 256), random_size(rng, 16, 32, 256), rng.randint(1, 70)
        check_plan(write_config(tmp_path, f"zimage{i}", cfg), "transformer",
                   Settings(height=h, width=w, max_sequence_length=t), {"height": h, "width": w, "text_len": t},
                   index=INDEX)


def test_random_qwen3_configs(rng, tmp_path):
    for i in range(4):
        kv = rng.randint(1, 3)
        cfg = {
            "architectures": [rng.choice(["Qwen3Model", "Qwen3ForCausalLM"])],
            "model_type": "qwen3",
            "hidden_size": rng.choice([24, 40]),
            "intermediate_size": rng.choice([16, 56]),
            "num_hidden_layers": rng.randint(0, 3),
            "num_attention_heads": kv * rng.randint(1, 3),
            "num_key_value_heads": kv,
            "head_dim": rng.choice([8, 16]),
            "vocab_size": rng.choice([50, 300]),
            "attention_bias": rng.random() < 0.5,
            "tie_word_embeddings": rng.random() < 0.5,
        }
        seq = rng.randint(1, 60)
        folder = write_config(tmp_path, f"qwen3_{i}", cfg)
        if cfg["num_hidden_layers"] == 0 and cfg["architectures"] == ["Qwen3Model"]:  # no layer, no lm_head: no MACs
            with pytest.raises(ConfigError, match="0 MACs per run"):  # the count check refuses a component doing no work
                estimate(str(folder), max_sequence_length=seq)
            continue
        check_plan(folder, "text_encoder", Settings(max_sequence_length=seq), {"seq_len": seq})
