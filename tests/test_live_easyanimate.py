"""Live re-measurement of EasyAnimate's models, built on the meta device and counted now as the EasyAnimate pipelines
call them: ``EasyAnimateTransformer3DModel`` on randomized configs (heads, head width, layers and how many are MMDiT
blocks, patch, time-embedding width, text normalisation, after-norm, an unused T5 projection, control channels) at
random sizes and frame counts (the pipelines' 256-token prompt); ``AutoencoderKLMagvit``'s decode and encode on randomized configs (block
count and widths, layers) at random sizes and frame counts (the causal cache across the decoder's per-frame calls and
the encoder's chunks of 4).

The seed is printed; ``FLOPCALC_SEED=N`` replays it. Bar: ``torch`` convention exact (total and every measured
module path), parameters exact, ``thop`` convention exact.
"""

from __future__ import annotations

import pytest

from live_support import check_plan, random_size, write_config  # noqa: E402  (skips without torch)
from flopcalc.engine.pipelines import Settings  # noqa: E402

pytestmark = pytest.mark.live


def test_random_transformer_configs(rng, tmp_path):
    for i in range(2):
        heads, head_dim = rng.randint(1, 3), rng.choice([16, 32])  # RoPE splits the head width in 4 + 3 + 3 even parts
        control = rng.random() < 0.5
        layers = rng.randint(1, 3)
        cfg = {"_class_name": "EasyAnimateTransformer3DModel", "num_attention_heads": heads,
               "attention_head_dim": head_dim, "in_channels": 48 if control else 16, "out_channels": 16,
               "patch_size": rng.choice([1, 2]), "num_layers": layers, "mmdit_layers": rng.randint(0, layers),
               "time_embed_dim": rng.choice([8, 24]), "add_norm_text_encoder": rng.random() < 0.5,
               "text_embed_dim": rng.choice([12, 20]), "text_embed_dim_t5": rng.choice([None, 12]),
               "norm_elementwise_affine": rng.random() < 0.5, "after_norm": rng.random() < 0.5}
        if cfg["text_embed_dim_t5"] is not None and cfg["add_norm_text_encoder"]:
            cfg["text_embed_dim_t5"] = cfg["text_embed_dim"]  # the RMSNorm is built on text_embed_dim
        h, w = random_size(rng, 16, 32, 96), random_size(rng, 16, 32, 96)
        f = 4 * rng.randint(0, 3) + 1
        measured = {"height": h, "width": w, "num_frames": f, "text_len": 256}  # the pipelines' fixed prompt length
        if control:
            measured["control"] = 1
        index = {"_class_name": "EasyAnimateControlPipeline" if control else "EasyAnimatePipeline"}
        check_plan(write_config(tmp_path, f"easyanimate{i}", cfg), "transformer",
                   Settings(height=h, width=w, num_frames=f, steps=1), measured, index=index)


def test_random_vae_configs(rng, tmp_path):
    for i in range(2):
        blocks = rng.randint(2, 4)
        width = rng.choice([4, 8])
        downs = ["SpatialDownBlock3D"] + ["SpatialTemporalDownBlock3D"] * (blocks - 1)
        ups = ["SpatialUpBlock3D"] + ["SpatialTemporalUpBlock3D"] * (blocks - 1)
        cfg = {"_class_name": "AutoencoderKLMagvit", "latent_channels": rng.choice([4, 16]),
               "block_out_channels": [width * (1 + (j > 0)) for j in range(blocks)], "down_block_types": downs,
               "up_block_types": ups, "layers_per_block": rng.randint(1, 2), "norm_num_groups": 2}
        s = 2 ** (blocks - 1)
        h, w = random_size(rng, max(s, 16), 16, 64), random_size(rng, max(s, 16), 16, 64)
        f = 2 ** (blocks - 2) * rng.randint(0, 3) + 1
        for call in ("decode", "encode"):
            check_plan(write_config(tmp_path, f"vae{i}{call}", cfg), "vae",
                       Settings(height=h, width=w, num_frames=f, steps=1), {"height": h, "width": w, "num_frames": f},
                       index={"_class_name": "EasyAnimateControlPipeline"}, call=call)
