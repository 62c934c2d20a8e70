"""Live re-measurement of ``WanAnimateTransformer3DModel`` (Wan-Animate), built on the meta device and counted now as
``WanAnimatePipeline`` calls it on one segment (the latent with its reference frame, the pose latent, the face video,
the CLIP and UMT5 tokens): randomized configs (heads, widths, layers and face-adapter spacing, added k/v on or off, motion and face encoder sizes and channel tables) at
random sizes, segment lengths, text lengths (below and above 512, where the context split changes branch) and CLIP
token counts.

The seed is printed; ``FLOPCALC_SEED=N`` replays it. Bar: ``torch`` convention exact (total and every measured
module path), parameters exact, ``thop`` convention exact.
"""

from __future__ import annotations

import pytest

from live_support import SEED, assert_matches_measurement, measure, random_size, write_config  # noqa: E402
from flopcalc.flops.estimate import estimate_configs  # noqa: E402
from flopcalc.engine.pipelines import Settings  # noqa: E402

pytestmark = pytest.mark.live


def _check(folder, cfg: dict, image: dict, h: int, w: int, segment: int, text: int, thop: bool = True):
    settings = Settings(height=h, width=w, num_frames=segment, max_sequence_length=text,
                        steps=1).with_options(segment_frames=segment)
    report = estimate_configs({"_class_name": "WanAnimatePipeline"}, {"transformer": cfg, "image_encoder": image},
                              settings)
    tokens = (image["image_size"] // image["patch_size"]) ** 2 + 1
    fx = measure.measure_component(folder, settings={"height": h, "width": w, "num_frames": segment, "text_len": text,
                                                     "image_tokens": tokens}, with_thop=thop)
    assert_matches_measurement(report.component("transformer"), fx,
                               f"seed {SEED}, {cfg}, {h}x{w}, segment {segment}, L={text}, I={tokens}", thop=thop)


def test_random_configs(rng, tmp_path):
    for i in range(3):
        heads, head_dim = rng.randint(1, 3), rng.choice([12, 18])
        dim = heads * head_dim
        inject = rng.choice([1, 2])
        image = {"architectures": ["CLIPVisionModel"], "model_type": "clip_vision_model",
                 "hidden_size": rng.choice([8, 16]), "intermediate_size": 16, "num_hidden_layers": 1,
                 "num_attention_heads": 2, "image_size": rng.choice([28, 56]), "patch_size": 14}
        size = rng.choice([16, 32])
        cfg = {"_class_name": "WanAnimateTransformer3DModel", "patch_size": [1, 2, 2], "num_attention_heads": heads,
               "attention_head_dim": head_dim, "in_channels": 12, "latent_channels": 4, "out_channels": rng.choice([None, 4]),
               "text_dim": rng.choice([16, 24]), "freq_dim": 16, "ffn_dim": rng.choice([24, 40]),
               "num_layers": inject * rng.randint(1, 2), "cross_attn_norm": rng.random() < 0.5,
               "image_dim": image["hidden_size"], "added_kv_proj_dim": rng.choice([None, dim]), "rope_max_seq_len": 64,
               "motion_encoder_channel_sizes": {str(2 ** k): rng.choice([4, 8]) for k in range(2, 6)},
               "motion_encoder_size": size, "motion_style_dim": rng.choice([8, 12]), "motion_dim": rng.choice([4, 6]),
               "motion_encoder_dim": rng.choice([8, 10]), "face_encoder_hidden_dim": rng.choice([8, 12]),
               "face_encoder_num_heads": rng.randint(1, 3), "inject_face_latents_blocks": inject}
        h, w = random_size(rng, 16, 16, 96), random_size(rng, 16, 16, 96)
        text = rng.choice([rng.randint(1, 40), rng.randint(500, 530)])
        _check(write_config(tmp_path, f"animate{i}", cfg), cfg, image, h, w, 4 * rng.randint(1, 3) + 1, text)
