"""Live re-measurement of ``LlavaForConditionalGeneration`` (HunyuanVideo-I2V's text encoder) built on the meta
device and counted now: randomized configs (vision tower depth, width, heads, patch and image size, the feature
layer(s) and select strategy, projector bias; language model depth, width, heads, KV heads, tied embeddings) and
the card's encoder under ``HunyuanVideoImageToVideoPipeline`` at a random ``max_sequence_length``. The one help
the input builder gives the stock forward on meta (``get_placeholder_mask`` without its count check) is checked
against a CPU run of a small random model on real token ids. The seed is printed; ``FLOPCALC_SEED=N`` replays it.
"""

from __future__ import annotations

import json
import random

import pytest

from live_support import (  # noqa: E402  (skips without torch)
    REPO,
    SEED,
    check_plan,
    measure,
    write_config as _write,
)
from flopcalc.engine.pipelines import Settings  # noqa: E402
from flopcalc.engine.pipelines.hunyuan_video_i2v import llava_tokens  # noqa: E402

pytestmark = pytest.mark.live

CARD = REPO / "model_cards/hunyuanvideo-i2v"
INDEX = json.loads((CARD / "model_index.json").read_text())
IMAGE_TOKEN = 999


def _random_llava(rng: random.Random) -> dict:
    vision_heads, vision_head = rng.choice([2, 4]), rng.choice([8, 16])
    patch = rng.choice([7, 14])
    heads, head = rng.choice([2, 4]), rng.choice([8, 16])
    vision = {"model_type": "clip_vision_model", "hidden_size": vision_heads * vision_head,
              "num_attention_heads": vision_heads, "num_hidden_layers": rng.randint(1, 3),
              "intermediate_size": rng.choice([24, 40]), "patch_size": patch, "image_size": patch * rng.randint(1, 4),
              "projection_dim": rng.choice([8, 12])}
    text = {"model_type": "llama", "hidden_size": heads * head, "num_attention_heads": heads,
            "num_key_value_heads": rng.choice([1, heads]), "num_hidden_layers": rng.randint(0, 2),
            "intermediate_size": rng.choice([32, 48]), "vocab_size": 1000, "max_position_embeddings": 4096,
            "tie_word_embeddings": rng.random() < 0.3}
    return {"architectures": ["LlavaForConditionalGeneration"], "model_type": "llava",
            "image_token_index": IMAGE_TOKEN, "pad_token_id": 998, "vision_config": vision, "text_config": text,
            "vision_feature_layer": rng.choice([-1, -2, [-2, -1]]),
            "vision_feature_select_strategy": rng.choice(["default", "full"]),
            "multimodal_projector_bias": rng.random() < 0.7}


def test_random_configs(rng, tmp_path):
    """A text encoder alone on ``seq_len`` tokens and one image, on random configs."""
    for i in range(4):
        cfg = _random_llava(rng)
        folder = _write(tmp_path, f"llava{i}", cfg)
        n = rng.randint(20, 80)
        check_plan(folder, "text_encoder", Settings(max_sequence_length=n), {"seq_len": n})


def test_card_text_encoder_under_the_pipeline(rng):
    """The card's Llava as HunyuanVideoImageToVideoPipeline plans it (max_sequence_length + 103 + 575 tokens)."""
    msl = rng.randint(5, 300)
    check_plan(CARD / "text_encoder", "text_encoder", Settings(max_sequence_length=msl),
               {"seq_len": llava_tokens(msl)}, index=INDEX, thop=False)


def test_meta_help_matches_a_cpu_run(tmp_path):
    """The stock forward on CPU, with real token ids holding the image tokens, counts what the helped meta call
    counts."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode
    from transformers import AutoConfig, LlavaForConditionalGeneration

    from flopcalc.engine.architectures.llava import image_features
    from flopcalc.engine.config import Config
    from flopcalc.engine.architectures.llava import DEFAULTS

    rng = random.Random(SEED)
    for i in range(2):
        cfg = _random_llava(rng)
        folder = _write(tmp_path, f"llava{i}", cfg)
        features = image_features(Config("text_encoder", cfg, DEFAULTS))
        seq = features + rng.randint(5, 30)
        meta = measure.measure_component(folder, settings={"seq_len": seq}, with_thop=False)
        torch.manual_seed(0)
        model = LlavaForConditionalGeneration(AutoConfig.from_pretrained(folder)).eval()
        ids = torch.randint(0, 900, (1, seq))
        start = rng.randint(0, seq - features)
        ids[0, start:start + features] = IMAGE_TOKEN
        size = cfg["vision_config"]["image_size"]
        counter = FlopCounterMode(display=False, custom_mapping=measure._custom_mapping())
        with counter, torch.no_grad():
            model(input_ids=ids, pixel_values=torch.randn(1, 3, size, size), output_hidden_states=True)
        assert counter.get_total_flops() == meta["torch"]["flops"], f"seed {SEED}: {cfg}"
