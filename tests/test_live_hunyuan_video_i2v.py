"""Live re-measurement of what ``HunyuanVideoImageToVideoPipeline`` adds to HunyuanVideo: the image-conditioned
transformers (the card's 16-channel token_replace one, the 33-channel latent_concat one) at the pipeline's text
length (image features + prompt tokens) and the VAE's one-frame image encode, at a random size, frame count and
``max_sequence_length``, built on the meta device and counted now. (The Llava text encoder: test_live_llava.py.)
The seed is printed; ``FLOPCALC_SEED=N`` replays it."""

from __future__ import annotations

import json

import pytest

from live_support import REPO, check_plan, random_size  # noqa: E402  (skips without torch)
from flopcalc.engine.pipelines import Settings  # noqa: E402
from flopcalc.engine.pipelines.hunyuan_video_i2v import text_tokens  # noqa: E402

pytestmark = pytest.mark.live

CARD = REPO / "model_cards/hunyuanvideo-i2v"
CONCAT = REPO / "validation/configs/hunyuanvideo-i2v-33ch"
INDEX = json.loads((CARD / "model_index.json").read_text())


@pytest.mark.parametrize("folder, kind", [(CARD, "token_replace"), (CONCAT, "latent_concat")])
def test_transformer(rng, folder, kind):
    h, w = random_size(rng, 16, 128, 768), random_size(rng, 16, 128, 768)
    frames, msl = 4 * rng.randint(0, 12) + 1, rng.randint(5, 300)
    check_plan(folder / "transformer", "transformer", Settings(height=h, width=w, num_frames=frames,
                                                                max_sequence_length=msl),
               {"height": h, "width": w, "num_frames": frames, "text_len": text_tokens(msl, kind)}, index=INDEX,
               thop=False)


def test_one_frame_image_encode(rng):
    h, w = random_size(rng, 16, 128, 1024), random_size(rng, 16, 128, 1024)
    check_plan(CARD / "vae", "vae", Settings(height=h, width=w), {"height": h, "width": w, "num_frames": 1},
               index=INDEX, call="encode", thop=False)
