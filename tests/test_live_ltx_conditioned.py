"""Live re-measurement of LTX-Video 0.9.5 and LTXImageToVideoPipeline as flopcalc plans them: the transformer
with one timestep per token at a random size and frame count, the 0.9.5 VAE (timestep-conditioned decoder)
decoding and encoding at a random size and frame count, and the one-frame image encode, each planned by the
pipeline and measured on the meta device now.

The seed is printed; ``FLOPCALC_SEED=N`` replays it. Bar: ``torch`` convention exact (total and every
measured module), parameters exact, ``thop`` convention exact.
"""

from __future__ import annotations

import json

import pytest

from live_support import REPO, check_plan, random_size

from flopcalc.pipelines import Settings  # noqa: E402

pytestmark = pytest.mark.live

CARD = REPO / "model_cards/ltx-video-0.9.5"
INDEX = json.loads((CARD / "model_index.json").read_text())
I2V = {**INDEX, "_class_name": "LTXImageToVideoPipeline"}


def _frames(rng) -> int:
    return 8 * rng.randint(0, 8) + 1


def test_i2v_transformer_at_a_random_size_and_frame_count(rng):
    h, w, f = random_size(rng, 32, 128, 768), random_size(rng, 32, 128, 1024), _frames(rng)
    check_plan(CARD / "transformer", "transformer", Settings(height=h, width=w, num_frames=f),
               {"height": h, "width": w, "num_frames": f, "text_len": 128, "per_token_timesteps": 1}, index=I2V)


@pytest.mark.parametrize("call", ["decode", "encode"])
def test_0_9_5_vae_at_a_random_size_and_frame_count(rng, call):
    h, w, f = random_size(rng, 32, 128, 640), random_size(rng, 32, 128, 768), _frames(rng)
    settings = Settings(height=h, width=w, num_frames=f, strength=1.0 if call == "encode" else None)
    check_plan(CARD / "vae", "vae", settings, {"height": h, "width": w, "num_frames": f}, index=INDEX, call=call)


def test_i2v_image_encode_at_a_random_size(rng):
    h, w = random_size(rng, 32, 128, 768), random_size(rng, 32, 128, 1024)
    check_plan(CARD / "vae", "vae", Settings(height=h, width=w, num_frames=_frames(rng)),
               {"height": h, "width": w, "num_frames": 1}, index=I2V, call="encode")
