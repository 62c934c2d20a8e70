"""Live re-measurement for Cosmos 1.0, built on the meta device and counted now: ``CosmosTransformer3DModel`` as
``CosmosTextToWorldPipeline`` (the whole latent, one timestep per sample) and ``CosmosVideoToWorldPipeline`` (plus
the condition-mask channel) call it, on randomized configs (heads, widths, layers, patch sizes, padding mask and
learnable position embedding on or off) at random sizes, frame counts and text lengths; and the tokenizer
``AutoencoderKLCosmos`` (decode and encode) on randomized configs (block count and widths, layers, Haar or rearrange
patching of 1, 2 or 4, spatial and temporal ratios, attention resolutions) at random sizes and frame counts.

The seed is printed; ``FLOPCALC_SEED=N`` replays it. Bar: ``torch`` convention exact (total and every measured
module path), parameters exact, ``thop`` convention exact.
"""

from __future__ import annotations

import pytest

from live_support import check_plan, random_size, write_config  # noqa: E402  (skips without torch)
from flopcalc.engine.pipelines import Settings  # noqa: E402

pytestmark = pytest.mark.live

PIPELINES = {1: "CosmosTextToWorldPipeline", 2: "CosmosVideoToWorldPipeline"}


def test_random_transformer_configs(rng, tmp_path):
    for i in range(2):
        world = rng.choice([1, 2])
        cfg = {"_class_name": "CosmosTransformer3DModel", "in_channels": rng.choice([4, 16]) + (world == 2),
               "out_channels": rng.choice([4, 16]), "num_attention_heads": rng.randint(1, 3),
               "attention_head_dim": rng.choice([12, 24]), "num_layers": rng.randint(1, 2),
               "mlp_ratio": rng.choice([2.0, 4.0]), "text_embed_dim": rng.choice([16, 40]),
               "adaln_lora_dim": rng.choice([8, 32]), "max_size": [8, 64, 64],
               "patch_size": [1, rng.choice([1, 2]), rng.choice([1, 2])], "rope_scale": [2.0, 1.0, 1.0],
               "concat_padding_mask": rng.random() < 0.5, "extra_pos_embed_type": rng.choice([None, "learnable"])}
        h, w, t, f = random_size(rng, 16, 16, 128), random_size(rng, 16, 16, 128), rng.randint(1, 64), \
            8 * rng.randint(0, 3) + 1
        check_plan(write_config(tmp_path, f"transformer{i}", cfg), "transformer",
                   Settings(height=h, width=w, num_frames=f, max_sequence_length=t, steps=1),
                   {"height": h, "width": w, "text_len": t, "num_frames": f, "world": world},
                   index={"_class_name": PIPELINES[world]})


def test_random_vae_configs(rng, tmp_path):
    for i in range(2):
        blocks = rng.randint(3, 4)
        patch = rng.choice([1, 2, 4])
        spatial = patch * 2 ** rng.randint(0, blocks - 2)
        temporal = patch * 2 ** rng.randint(0, blocks - 2)
        resolution = 64
        cfg = {"_class_name": "AutoencoderKLCosmos", "latent_channels": rng.choice([4, 8]),
               "encoder_block_out_channels": [rng.choice([4, 8]) for _ in range(blocks)],
               "decode_block_out_channels": [rng.choice([4, 8]) for _ in range(blocks)],
               "attention_resolutions": [resolution // patch // 2 ** rng.randint(0, blocks - 2)],
               "resolution": resolution, "num_layers": rng.randint(1, 2), "patch_size": patch,
               "patch_type": rng.choice(["haar", "rearrange"]), "spatial_compression_ratio": spatial,
               "temporal_compression_ratio": temporal, "latents_mean": None, "latents_std": None}
        h, w = random_size(rng, max(16, spatial), 16, 64), random_size(rng, max(16, spatial), 16, 64)
        f = temporal * rng.randint(0, 2) + 1
        for call, world in (("decode", 1), ("encode", 2)):
            check_plan(write_config(tmp_path, f"vae{i}{call}", cfg), "vae",
                       Settings(height=h, width=w, num_frames=f, steps=1), {"height": h, "width": w, "num_frames": f},
                       index={"_class_name": PIPELINES[world]}, call=call)
