"""Live re-measurement of ``HunyuanVideoFramepackTransformer3DModel`` (FramePack), built on the meta device and
counted now as ``HunyuanVideoFramepackPipeline`` calls it (one section's window, the packed history, SigLIP tokens,
the text): randomized configs (heads, head width, dual/single/refiner layers, MLP ratio, qk norm, guidance embedder,
text/pooled/image widths) at random sizes (latent sides that do not divide by 4 or 8 too: the history convs pad
them), windows, text lengths and image-token counts.

The seed is printed; ``FLOPCALC_SEED=N`` replays it. Bar: ``torch`` convention exact (total and every measured
module path), parameters exact, ``thop`` convention exact.
"""

from __future__ import annotations

import pytest

from live_support import SEED, assert_matches_measurement, measure, random_size, write_config  # noqa: E402
from flopcalc.flops.estimate import estimate_configs  # noqa: E402
from flopcalc.engine.pipelines import Settings  # noqa: E402

pytestmark = pytest.mark.live

INDEX = {"_class_name": "HunyuanVideoFramepackPipeline"}


def _check(folder, cfg: dict, image: dict, h: int, w: int, window: int, text: int, loaded_as: str | None = None):
    settings = Settings(height=h, width=w, num_frames=(window - 1) * 4 + 1, max_sequence_length=text,
                        steps=1).with_options(latent_window_size=window)
    report = estimate_configs(INDEX, {"transformer": cfg, "image_encoder": image}, settings)
    tokens = (image["image_size"] // image["patch_size"]) ** 2
    fx = measure.measure_component(folder, loaded_as, settings={
        "height": h, "width": w, "num_frames": (window - 1) * 4 + 1, "text_len": text, "image_tokens": tokens})
    assert_matches_measurement(report.component("transformer"), fx,
                               f"seed {SEED}, {cfg}, {h}x{w}, window {window}, L={text}, I={tokens}")


def _siglip(rng, hidden: int = 12) -> dict:
    return {"architectures": ["SiglipVisionModel"], "model_type": "siglip_vision_model", "hidden_size": hidden,
            "intermediate_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
            "image_size": rng.choice([28, 42, 56]), "patch_size": 14}


def test_random_configs(rng, tmp_path):
    for i in range(3):
        heads, head_dim = rng.randint(1, 3), rng.choice([8, 12, 16])
        image = _siglip(rng, hidden=rng.choice([12, 24]))
        rope = [2 * (head_dim // 8), 2 * (head_dim // 8), head_dim - 4 * (head_dim // 8)]  # even, summing to d_h
        cfg = {"_class_name": "HunyuanVideoFramepackTransformer3DModel", "in_channels": rng.choice([4, 16]),
               "out_channels": rng.choice([None, 4]), "num_attention_heads": heads, "attention_head_dim": head_dim,
               "num_layers": rng.randint(0, 2), "num_single_layers": rng.randint(0, 2),
               "num_refiner_layers": rng.randint(1, 2), "mlp_ratio": rng.choice([2.0, 4.0]),
               "patch_size": 2, "patch_size_t": 1,  # the only patches the history embedder matches "qk_norm": rng.choice(["rms_norm", "layer_norm"]),
               "guidance_embeds": rng.random() < 0.5, "text_embed_dim": rng.choice([16, 24]),
               "pooled_projection_dim": rng.choice([8, 12]), "rope_axes_dim": rope, "has_image_proj": True,
               "image_proj_dim": image["hidden_size"], "has_clean_x_embedder": True}
        h, w = random_size(rng, 16, 16, 144), random_size(rng, 16, 16, 144)
        _check(write_config(tmp_path, f"framepack{i}", cfg), cfg, image, h, w, rng.randint(1, 3), rng.randint(1, 20))
