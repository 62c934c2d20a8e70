"""Live re-measurement of Allegro's models, built on the meta device and counted now as ``AllegroPipeline`` calls them:
``AllegroTransformer3DModel`` on randomized configs (heads, head width, layers, patch, biases, affine norms, caption
width) at random sizes, frame counts (even and odd: the latent frame rule differs) and text lengths, and
``AutoencoderKLAllegro``'s tiled decode on randomized configs (block widths and counts, layers, temporal up-sampling
blocks) at random latent sizes (partial tiles left undecoded).

The seed is printed; ``FLOPCALC_SEED=N`` replays it. Bar: ``torch`` convention exact (total and every measured
module path), parameters exact, ``thop`` convention exact.
"""

from __future__ import annotations

import pytest

from live_support import check_plan, random_size, write_config  # noqa: E402  (skips without torch)
from flopcalc.engine.pipelines import Settings  # noqa: E402

pytestmark = pytest.mark.live

INDEX = {"_class_name": "AllegroPipeline"}


def test_random_transformer_configs(rng, tmp_path):
    for i in range(2):
        heads, head_dim = rng.randint(1, 3), rng.choice([6, 12])
        dim = heads * head_dim
        p = rng.choice([1, 2])
        cfg = {"_class_name": "AllegroTransformer3DModel", "patch_size": p, "num_attention_heads": heads,
               "attention_head_dim": head_dim, "in_channels": rng.choice([4, 8]), "out_channels": rng.choice([4, 8]),
               "num_layers": rng.randint(0, 2), "cross_attention_dim": dim, "attention_bias": rng.random() < 0.5,
               "norm_elementwise_affine": rng.random() < 0.5, "caption_channels": rng.choice([12, 20])}
        h, w = random_size(rng, 8 * p, 16, 96), random_size(rng, 8 * p, 16, 96)
        f, t = rng.randint(1, 14), rng.randint(1, 30)
        if h == w == 8 * p and f < 5:  # one latent token: the real block squeezes it away (refused: see below)
            f = 5
        check_plan(write_config(tmp_path, f"allegro{i}", cfg), "transformer",
                   Settings(height=h, width=w, num_frames=f, max_sequence_length=t, steps=1),
                   {"height": h, "width": w, "num_frames": f, "text_len": t}, index=INDEX)


def test_random_vae_configs(rng, tmp_path):
    for i in range(2):
        blocks = rng.randint(2, 4)
        width = rng.choice([4, 8])
        ups = [False] * blocks  # two temporal up-samplers: the decoded tile must fill 24 frames (ratio 4)
        for j in rng.sample(range(blocks), 2):
            ups[j] = True
        cfg = {"_class_name": "AutoencoderKLAllegro", "block_out_channels": [width * (1 + (j > 0)) for j in range(blocks)],
               "down_block_types": ["AllegroDownBlock3D"] * blocks, "up_block_types": ["AllegroUpBlock3D"] * blocks,
               "temporal_downsample_blocks": [rng.random() < 0.5 for _ in range(blocks)],
               "temporal_upsample_blocks": ups, "latent_channels": rng.choice([4, 6]),
               "layers_per_block": rng.randint(1, 2), "norm_num_groups": 2, "sample_size": 160}
        f = 2 ** (blocks - 1)
        # at least one tile on each axis (the harness wants the decoder's attention to run), a dozen at most
        h, w = random_size(rng, max(f, 8), 160, 200), random_size(rng, max(f, 8), 160, 240)
        frames = rng.choice([24, 40, 41])
        check_plan(write_config(tmp_path, f"vae{i}", cfg), "vae",
                   Settings(height=h, width=w, num_frames=frames, steps=1),
                   {"height": h, "width": w, "num_frames": frames}, index=INDEX, call="decode")


def test_a_one_token_sequence_is_refused(tmp_path):
    """The real AllegroTransformerBlock squeezes dim 1 of its input (transformer_allegro.py:132): with one latent
    token attn1 gets a 2-D tensor and fails; flopcalc refuses the run in one line."""
    import flopcalc
    from flopcalc.engine.errors import FlopcalcError

    cfg = {"_class_name": "AllegroTransformer3DModel", "patch_size": 2, "num_attention_heads": 1,
           "attention_head_dim": 6, "in_channels": 4, "out_channels": 4, "num_layers": 1, "cross_attention_dim": 6,
           "caption_channels": 12}
    folder = write_config(tmp_path, "allegro", cfg)
    with pytest.raises(FlopcalcError, match="one latent token") as err:
        flopcalc.estimate(str(folder), height=16, width=16, num_frames=1)
    assert "\n" not in str(err.value) and len(str(err.value)) <= 280
