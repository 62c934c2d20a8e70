"""Live re-measurement of ``CosmosTransformer3DModel``, built on the meta device and counted now, as
``Cosmos2TextToImagePipeline`` (one-frame latent, 1-D timestep, padding mask) and ``Cosmos2VideoToWorldPipeline``
(a ``T``-frame latent with the condition-mask channel and a per-frame timestep) call it: on the cards at a random
size, frame count and text length, and on randomized configs (heads, head width, layers, MLP ratio, adaLN-LoRA
width, text width, channels, patch sizes, padding mask on or off, learnable position embedding on or off).

The seed is printed; ``FLOPCALC_SEED=N`` replays it. Bar: ``torch`` convention exact (total and every measured
module path), parameters exact, ``thop`` convention exact.
"""

from __future__ import annotations

import json

import pytest

from live_support import REPO, check_plan, random_size, write_config  # noqa: E402  (skips without torch)
from flopcalc.engine.pipelines import Settings  # noqa: E402

pytestmark = pytest.mark.live

T2I = REPO / "model_cards/cosmos-predict2-2b-text2image"
V2W = REPO / "model_cards/cosmos-predict2-2b-video2world"


def _index(card) -> dict:
    return json.loads((card / "model_index.json").read_text())


def test_text_to_image_card_at_random_size(rng):
    h, w, t = random_size(rng, 16, 32, 512), random_size(rng, 16, 32, 512), rng.randint(1, 512)
    check_plan(T2I / "transformer", "transformer", Settings(height=h, width=w, max_sequence_length=t),
               {"height": h, "width": w, "text_len": t}, index=_index(T2I))


def test_video_to_world_card_at_random_size_and_frames(rng):
    h, w, t, f = random_size(rng, 16, 32, 256), random_size(rng, 16, 32, 256), rng.randint(1, 128), rng.randint(1, 25)
    check_plan(V2W / "transformer", "transformer", Settings(height=h, width=w, num_frames=f, max_sequence_length=t),
               {"height": h, "width": w, "text_len": t, "num_frames": f}, index=_index(V2W))


def test_random_configs(rng, tmp_path):
    for i in range(4):
        video = rng.random() < 0.5
        patch = [1 if video else rng.choice([1, 2]), rng.choice([1, 2]), rng.choice([1, 2])]
        cfg = {
            "_class_name": "CosmosTransformer3DModel",
            "in_channels": rng.choice([4, 16]) + (1 if video else 0),
            "out_channels": rng.choice([4, 16]),
            "num_attention_heads": rng.randint(1, 4),
            "attention_head_dim": rng.choice([12, 24]),  # RoPE splits the head width in sixths
            "num_layers": rng.randint(1, 3),
            "mlp_ratio": rng.choice([2.0, 4.0, 1.5]),
            "text_embed_dim": rng.choice([16, 40]),
            "adaln_lora_dim": rng.choice([8, 32]),
            "max_size": [8, 64, 64],
            "patch_size": patch,
            "rope_scale": [1.0, rng.choice([1.0, 3.0]), 3.0],
            "concat_padding_mask": rng.random() < 0.5,
            "extra_pos_embed_type": rng.choice([None, "learnable"]),
        }
        h, w, t = random_size(rng, 16, 16, 128), random_size(rng, 16, 16, 128), rng.randint(1, 40)
        measured = {"height": h, "width": w, "text_len": t}
        settings = Settings(height=h, width=w, max_sequence_length=t)
        if video:
            f = 4 * rng.randint(0, 3) + 1
            measured["num_frames"] = f
            settings = Settings(height=h, width=w, max_sequence_length=t, num_frames=f)
        if not video and patch[0] > 1:
            cfg["patch_size"][0] = 1  # one frame: a temporal patch of 2 would leave no token
        check_plan(write_config(tmp_path, f"cosmos{i}", cfg), "transformer", settings, measured,
                   index=_index(V2W if video else T2I))
