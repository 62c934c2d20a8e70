"""Live re-measurement of the Lumina transformers (``Lumina2Transformer2DModel``,
``LuminaNextDiT2DModel``) against flopcalc's formulas, on randomized configs and on the bundled
cards at a random valid size and text length.

One seed for the session (printed; ``FLOPCALC_SEED=N`` replays it), as in ``tests/test_live.py``.
Bar: ``torch`` convention exact for the total and every measured module path, parameters exact
(total and per top-level module), ``thop`` convention exact.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from live_support import (  # noqa: E402  (skips without torch)
    REPO,
    SEED,
    assert_matches_measurement,
    measure,
    write_config as _write,
)
from flopcalc.flops.estimate import estimate_configs  # noqa: E402
from flopcalc.engine.pipelines import Settings  # noqa: E402

pytestmark = pytest.mark.live



def _check(config_dir: Path, h: int, w: int, t: int, *, with_thop: bool = True) -> None:
    """flopcalc's transformer at ``h × w`` pixels and ``t`` caption tokens against a fresh
    measurement of the real module: total, every module path, parameters, thop."""
    cfg = json.loads((config_dir / "config.json").read_text())
    settings = Settings(height=h, width=w, max_sequence_length=t)
    comp = estimate_configs(None, {"transformer": cfg}, settings, convention="torch").components[0]
    fx = measure.measure_component(config_dir, settings={"height": h, "width": w, "text_len": t},
                                   with_thop=with_thop)
    where = f"seed {SEED}, {config_dir.name} {h}x{w} text {t}: {cfg}"
    assert comp.shape["text_len"] == t, where
    assert_matches_measurement(comp, fx, where, thop=with_thop)



def _size(rng: random.Random, multiple: int, lo: int, hi: int) -> int:
    return multiple * rng.randint(max(1, lo // multiple), hi // multiple)


def _ffn_multiplier(rng: random.Random) -> float | None:
    return rng.choice([None, None, 0.5, 1.3, 2.0 / 3.0])


# --------------------------------------------------------------------------- bundled cards


def test_lumina2_card_at_random_size(rng):
    h, w, t = _size(rng, 16, 256, 1024), _size(rng, 16, 256, 1024), rng.randint(1, 299)
    _check(REPO / "model_cards/lumina-image-2.0/transformer", h, w, t, with_thop=False)


def test_lumina_next_card_at_random_size(rng):
    h, w, t = _size(rng, 16, 256, 1024), _size(rng, 16, 256, 1024), rng.randint(1, 256)
    _check(REPO / "model_cards/lumina-next-sft/transformer", h, w, t, with_thop=False)


# --------------------------------------------------------------------------- randomized configs


def test_random_lumina2_configs(rng, tmp_path):
    for i in range(4):
        heads = rng.randint(1, 4) if i else 4
        kv_heads = rng.choice([d for d in range(1, heads + 1) if heads % d == 0])
        # each axis an even width; their sum is the head width (config 0: hidden > 1024, so the
        # conditioning width min(hidden, 1024) is below it)
        axes = [2 * rng.randint(1, 4) for _ in range(3)] if i else [2 * rng.randint(40, 48) for _ in range(3)]
        head_dim = sum(axes)
        hidden = heads * head_dim + rng.choice([0, 0, rng.randint(1, heads - 1)] if heads > 1 else [0])
        patch = rng.choice([1, 2])
        t = rng.randint(1, 40)
        cfg = {
            "_class_name": "Lumina2Transformer2DModel",
            "patch_size": patch,
            "in_channels": rng.choice([4, 16]),
            "out_channels": rng.choice([None, 4, 8]),
            "hidden_size": hidden,
            "num_layers": rng.randint(0, 2),
            "num_refiner_layers": rng.randint(0, 2),
            "num_attention_heads": heads,
            "num_kv_heads": kv_heads if rng.random() < 0.8 else None,
            "multiple_of": rng.choice([16, 64, 256]),
            "ffn_dim_multiplier": _ffn_multiplier(rng),
            "axes_dim_rope": axes,
            "axes_lens": [t + rng.randint(1, 20), 64, 64],
            "cap_feat_dim": rng.choice([24, 40]),
        }
        h, w = _size(rng, 16, 32, 256), _size(rng, 16, 32, 256)
        _check(_write(tmp_path, f"lumina2_{i}", cfg), h, w, t)


def test_random_lumina_next_configs(rng, tmp_path):
    for i in range(4):
        heads = rng.randint(1, 4) if i else 16
        kv_heads = rng.choice([d for d in range(1, heads + 1) if heads % d == 0])
        # the 2-D rope needs a head width divisible by 4 (config 0: hidden > 1024)
        head_dim = 4 * (rng.randint(2, 6) if i else rng.randint(17, 20))
        hidden = heads * head_dim + rng.choice([0, 0, rng.randint(1, heads - 1)] if heads > 1 else [0])
        patch = rng.choice([1, 2])
        cfg = {
            "_class_name": "LuminaNextDiT2DModel",
            "patch_size": patch,
            "in_channels": rng.choice([4, 16]),
            "hidden_size": hidden,
            "num_layers": rng.randint(0, 2),
            "num_attention_heads": heads,
            "num_kv_heads": kv_heads,
            "multiple_of": rng.choice([16, 64, 256]),
            "ffn_dim_multiplier": _ffn_multiplier(rng),
            "learn_sigma": rng.random() < 0.5,
            "qk_norm": rng.random() < 0.6,
            "cross_attention_dim": rng.choice([24, 40]),
        }
        if not cfg["qk_norm"] and rng.random() < 0.5:
            cfg["num_kv_heads"] = None  # as many K/V heads as query heads (diffusers needs a number with qk_norm)
        h, w, t = _size(rng, 16, 32, 256), _size(rng, 16, 32, 256), rng.randint(1, 40)
        _check(_write(tmp_path, f"lumina_next_{i}", cfg), h, w, t)
