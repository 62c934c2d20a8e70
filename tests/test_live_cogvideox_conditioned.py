"""Live re-measurement of CogVideoX image-to-video and video-to-video as flopcalc plans them: the
CogVideoX-5b-I2V card's transformer at a random frame count, the CogVideoX 1.5 I2V transformer at a random
size and frame count (its latent frames padded to ``patch_size_t``), randomized image-to-video transformers
(twice the latent channels, ``ofs``, ``patch_size_t``), and the VAE's one-frame image encode and the
video-to-video encode at random sizes, each planned by the pipeline and measured on the meta device now.

The seed is printed; ``FLOPCALC_SEED=N`` replays it. Bar: ``torch`` convention exact (total and every
measured module), parameters exact, ``thop`` convention exact.
"""

from __future__ import annotations

import json

import pytest

from live_support import REPO, SEED, assert_runs_match, check_plan, measure, random_size, write_config
from flopcalc.engine.pipelines import Settings, plan  # noqa: E402
from flopcalc.engine.registry import assemble, component_params  # noqa: E402
from test_live_cogvideox import _random_transformer

pytestmark = pytest.mark.live

CARD = REPO / "model_cards/cogvideox-5b-i2v"
I2V = {"_class_name": "CogVideoXImageToVideoPipeline"}
V2V = {"_class_name": "CogVideoXVideoToVideoPipeline"}
I2V15 = REPO / "validation/configs/cogvideox1.5-5b-i2v-transformer"


def test_card_transformer_at_a_random_frame_count(rng):
    frames = 4 * rng.randint(0, 12) + 1
    check_plan(CARD / "transformer", "transformer", Settings(num_frames=frames),
               {"height": 480, "width": 720, "num_frames": frames, "text_len": 226}, index=I2V)


def test_cogvideox_15_i2v_transformer_at_a_random_size_and_frame_count(rng):
    h, w = random_size(rng, 16, 256, 768), random_size(rng, 16, 256, 1360)
    frames = 4 * rng.randint(0, 20) + 1  # odd and even latent frame counts: both paddings
    check_plan(I2V15, "transformer", Settings(height=h, width=w, num_frames=frames),
               {"height": h, "width": w, "num_frames": frames, "text_len": 226}, index=I2V, module_depth=2)


def test_random_image_to_video_transformers(rng, tmp_path):
    for i in range(4):
        cfg = _random_transformer(rng)
        cfg.update(in_channels=2 * cfg["out_channels"], use_learned_positional_embeddings=False,
                   use_rotary_positional_embeddings=True, temporal_compression_ratio=4)
        p = cfg["patch_size"]
        h, w = 8 * p * rng.randint(1, 8 // p), 8 * p * rng.randint(1, 8 // p)
        frames = 4 * rng.randint(0, 4) + 1
        check_plan(write_config(tmp_path, f"i2v{i}", cfg), "transformer", Settings(height=h, width=w, num_frames=frames),
                   {"height": h, "width": w, "num_frames": frames, "text_len": 226}, index=I2V)


@pytest.mark.parametrize("index, frames", [(I2V, None), (V2V, "random")])
def test_vae_encode_as_planned_at_a_random_size(rng, index, frames):
    """The image-to-video image (one frame) and the video-to-video input video (``num_frames`` frames)."""
    h, w = random_size(rng, 16, 128, 720), random_size(rng, 16, 128, 1024)
    num_frames = 4 * rng.randint(0, 6) + 1 if frames else 1
    cfg = json.loads((CARD / "vae/config.json").read_text())
    settings = Settings(height=h, width=w, num_frames=num_frames)
    (run,) = [r for r in plan(index, {"vae": cfg}, settings).runs if r.call == "encode"]
    assert run.shape.frames == (num_frames if index is V2V else 1)
    fx = measure.measure_component(CARD / "vae", call="encode",
                                   settings={"height": h, "width": w, "num_frames": run.shape.frames, "vae_tiling": 0})
    assert_runs_match([(1, assemble(cfg, run.shape, component="vae", call="encode"))],
                      component_params(cfg, component="vae"), fx, f"seed {SEED}, {index} {h}x{w}x{num_frames}")


def test_random_fun_control_transformers(rng, tmp_path):
    """CogVideoX-Fun control: 2 × the latent channels, no ofs, latent frames a multiple of patch_size_t."""
    fun = {"_class_name": "CogVideoXFunControlPipeline"}
    for i in range(3):
        cfg = _random_transformer(rng)
        cfg.update(in_channels=2 * cfg["out_channels"], ofs_embed_dim=None, temporal_compression_ratio=4)
        p = cfg["patch_size"]
        if cfg["use_learned_positional_embeddings"]:
            h, w = 8 * cfg["sample_height"], 8 * cfg["sample_width"]
        else:
            h, w = 8 * p * rng.randint(1, 8 // p), 8 * p * rng.randint(1, 8 // p)
        latent = (cfg["patch_size_t"] or 1) * rng.randint(1, 2)
        frames = 4 * (latent - 1) + 1
        uses_table = not cfg["use_rotary_positional_embeddings"] or cfg["use_learned_positional_embeddings"]
        text = cfg["max_text_seq_length"] if uses_table else rng.randint(1, 24)
        check_plan(write_config(tmp_path, f"fun{i}", cfg), "transformer",
                   Settings(height=h, width=w, num_frames=frames, max_sequence_length=text),
                   {"height": h, "width": w, "num_frames": frames, "text_len": text}, index=fun)
