"""Live re-measurement of ``ChronoEditTransformer3DModel`` (ChronoEdit), built on the meta device and counted now as
``ChronoEditPipeline`` calls it: randomized configs (heads, widths, layers, temporal patch, added k/v on or off,
rotary skip lengths) on the 2-frame latent of an edit (ChronoEditRotaryPosEmbed's two-frame path) and on longer
temporal-reasoning latents, at random sizes, text lengths (below and above 512, where the context split changes
branch) and CLIP token counts.

The seed is printed; ``FLOPCALC_SEED=N`` replays it. Bar: ``torch`` convention exact (total and every measured
module path), parameters exact, ``thop`` convention exact.
"""

from __future__ import annotations

import pytest

from live_support import SEED, assert_matches_measurement, measure, random_size, write_config  # noqa: E402
from flopcalc.flops.estimate import estimate_configs  # noqa: E402
from flopcalc.engine.pipelines import Settings  # noqa: E402

pytestmark = pytest.mark.live


def test_random_configs(rng, tmp_path):
    for i in range(3):
        heads, head_dim = rng.randint(1, 3), rng.choice([12, 18])
        pt = 1 if i == 0 else rng.choice([1, 2])
        cfg = {"_class_name": "ChronoEditTransformer3DModel", "patch_size": [pt, 2, 2], "num_attention_heads": heads,
               "attention_head_dim": head_dim, "in_channels": 12, "out_channels": rng.choice([None, 4]),
               "text_dim": rng.choice([16, 24]), "freq_dim": 16, "ffn_dim": rng.choice([24, 40]),
               "num_layers": rng.randint(1, 2), "cross_attn_norm": rng.random() < 0.5, "image_dim": rng.choice([8, 16]),
               "added_kv_proj_dim": rng.choice([None, heads * head_dim]), "rope_max_seq_len": 64,
               "rope_temporal_skip_len": rng.randint(1, 10)}
        image = {"architectures": ["CLIPVisionModel"], "model_type": "clip_vision_model",
                 "hidden_size": cfg["image_dim"], "intermediate_size": 16, "num_hidden_layers": 1,
                 "num_attention_heads": 2, "image_size": rng.choice([14, 28]), "patch_size": 14}
        h, w = random_size(rng, 16, 16, 96), random_size(rng, 16, 16, 96)
        # the edit (5 frames: 2 latent frames, which need p_t = 1) or a temporal-reasoning video (every step on it)
        frames = 5 if pt == 1 and rng.random() < 0.6 else 4 * rng.choice([2, 3, 5]) + 1
        text = rng.choice([rng.randint(1, 40), rng.randint(500, 530)])
        settings = Settings(height=h, width=w, num_frames=frames, max_sequence_length=text, steps=1)
        report = estimate_configs({"_class_name": "ChronoEditPipeline"}, {"transformer": cfg, "image_encoder": image},
                                  settings.with_options(temporal_reasoning_steps=None if frames == 5 else 1))
        tokens = (image["image_size"] // 14) ** 2 + 1
        fx = measure.measure_component(write_config(tmp_path, f"chrono{i}", cfg), settings={
            "height": h, "width": w, "num_frames": frames, "text_len": text, "image_tokens": tokens}, with_thop=True)
        assert_matches_measurement(report.component("transformer"), fx,
                                   f"seed {SEED}, {cfg}, {h}x{w}, {frames} frames, L={text}, I={tokens}", thop=True)
