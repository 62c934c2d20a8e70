"""Live re-measurement of the Chroma family: ``ChromaTransformer2DModel`` built on the meta device and
counted now, on the card at a random size and text length (the T5 encoder and the ``AutoencoderKL``
too, as ``ChromaPipeline`` plans them) and on randomized configs (every structural key the assembler
reads: heads, head width, double- and single-stream layer counts, channels in and out, patch size,
text width, approximator input width, hidden width and depth).

The seed is printed; ``FLOPCALC_SEED=N`` replays it. Bar: ``torch`` convention exact (total and every
measured module path), parameters exact, ``thop`` convention exact.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from live_support import (  # noqa: E402  (skips without torch)
    REPO,
    check_plan,
    random_size,
    write_config,
)
from flopcalc.engine.pipelines import Settings  # noqa: E402

pytestmark = [
    pytest.mark.live,
    # diffusers 0.42.1's own transformer_chroma.py imports the deprecated embeddings.FluxPosEmbed
    pytest.mark.filterwarnings("ignore:`FluxPosEmbed` is deprecated:FutureWarning"),
]

CARD = REPO / "model_cards/chroma1-hd"
INDEX = json.loads((CARD / "model_index.json").read_text())


def _check(config_dir: Path, name: str, settings: Settings, measure_settings: dict, call: str = "forward",
           thop: bool = True) -> None:
    """flopcalc's plan for ``name`` under ``ChromaPipeline`` against a fresh measurement."""
    check_plan(config_dir, name, settings, measure_settings, index=INDEX, call=call, thop=thop)


# --------------------------------------------------------------------------- the card


def test_card_transformer_at_random_size(rng):
    h, w, t = random_size(rng, 16, 128, 1024), random_size(rng, 16, 128, 1024), rng.randint(1, 512)
    _check(CARD / "transformer", "transformer", Settings(height=h, width=w, max_sequence_length=t),
           {"height": h, "width": w, "text_len": t}, thop=False)


def test_card_text_encoder_and_vae_at_random_settings(rng):
    t = rng.randint(1, 512)
    _check(CARD / "text_encoder", "text_encoder", Settings(max_sequence_length=t), {"seq_len": t})
    h, w = random_size(rng, 16, 64, 512), random_size(rng, 16, 64, 512)
    _check(CARD / "vae", "vae", Settings(height=h, width=w), {"height": h, "width": w}, call="decode")
    _check(CARD / "vae", "vae", Settings(height=h, width=w, strength=1.0), {"height": h, "width": w}, call="encode")


# --------------------------------------------------------------------------- randomized configs


def test_random_chroma_transformer_configs(rng, tmp_path):
    for i in range(4):
        heads, head_dim = rng.randint(1, 4), rng.choice([16, 32])
        cfg = {
            "_class_name": "ChromaTransformer2DModel",
            "num_attention_heads": heads,
            "attention_head_dim": head_dim,
            "num_layers": rng.randint(0, 3),
            "num_single_layers": rng.randint(0, 3),
            "patch_size": rng.choice([1, 2]),
            "in_channels": 4 * rng.choice([4, 16]),
            "out_channels": rng.choice([None, 4, 16]),
            "joint_attention_dim": rng.choice([24, 40]),
            "axes_dims_rope": [head_dim // 4, 3 * head_dim // 8, 3 * head_dim // 8],
            "approximator_num_channels": 4 * rng.randint(1, 12),
            "approximator_hidden_dim": rng.choice([8, 24, 48]),
            "approximator_layers": rng.randint(0, 3),
        }
        h, w, t = random_size(rng, 16, 32, 256), random_size(rng, 16, 32, 256), rng.randint(1, 40)
        _check(write_config(tmp_path, f"chroma{i}", cfg), "transformer",
               Settings(height=h, width=w, max_sequence_length=t), {"height": h, "width": w, "text_len": t})
