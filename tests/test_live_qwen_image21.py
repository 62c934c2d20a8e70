"""Live re-measurement of Qwen-Image 2.1's classes: ``QwenImage21Transformer2DModel`` (randomized width, heads, rotary
axes, depth, MLP ratio, channels, patch size, text width, ``causal_condition``) in its three calls — a forward
without a cache, the first denoising step (``kv_cache_mode="extract"``) and a later one (``"cached"``: the target
tokens alone with the text's cached keys and values) — and ``AutoencoderKLQwenImage21`` (randomized widths, levels,
residual blocks, temporal flags, channels, ``is_residual``) decode and encode, built on the meta device and counted
now, against the plan's pieces.

No fixture of a cached step: it holds a cache object a fixture cannot record (the fixtures are the full forward).
The seed is printed; ``FLOPCALC_SEED=N`` replays it. Bar: ``torch`` convention exact (total and every measured module
path), parameters exact, ``thop`` convention exact.
"""

from __future__ import annotations

import pytest
from live_support import (
    REPO,
    SEED,
    assert_matches_measurement,
    check_plan,
    measure,
    random_size,
    write_config,
)

from flopcalc.engine.pipelines import Settings
from flopcalc.flops.estimate import estimate_configs

pytestmark = pytest.mark.live

INDEX = {"_class_name": "QwenImage21Pipeline", "transformer": ["diffusers", "QwenImage21Transformer2DModel"],
         "vae": ["diffusers", "AutoencoderKLQwenImage21"]}


def _check_transformer(folder, cfg: dict, h: int, w: int, words: int, where: str) -> None:
    """The plan's two pieces (step 0 and a later step, with the cache) and its uncached forward, each against the
    real module measured in that mode."""
    import json

    config = json.loads((folder / "config.json").read_text())
    settings = Settings(height=h, width=w, steps=2).with_options(prompt_tokens=words)
    text = words + 8
    cached = estimate_configs(INDEX, {"transformer": config}, settings, convention="torch").component("transformer")
    plain = estimate_configs(INDEX, {"transformer": config}, settings.with_options(use_kv_cache=0),
                             convention="torch").component("transformer")
    if config.get("causal_condition", True):
        extract, later = cached.tree.children
        pieces = ((1, extract), (2, later))
    else:  # no cache: both steps are full forwards
        pieces = ()
        assert cached.runs == 2 and cached.macs_per_run == plain.macs_per_run, where
    for mode, piece in pieces:
        fx = measure.measure_component(folder, settings={"height": h, "width": w, "text_len": text, "kv_cache": mode})
        row = type("Row", (), {"macs_per_run": piece.per_item.macs("torch"), "tree": piece, "params": cached.params})
        assert_matches_measurement(row, fx, f"seed {SEED}, {where}, kv_cache {mode}")
    fx = measure.measure_component(folder, settings={"height": h, "width": w, "text_len": text})
    assert_matches_measurement(plain, fx, f"seed {SEED}, {where}, no cache")


def test_card_transformer_all_modes(rng):
    h, w = random_size(rng, 32, 64, 512), random_size(rng, 32, 64, 512)
    words = rng.randint(1, 80)
    _check_transformer(REPO / "model_cards/qwen-image-2.1/transformer", {}, h, w, words,
                       f"card at {h}×{w}, {words} prompt tokens")


def test_random_transformer_configs(rng, tmp_path):
    for i in range(2):
        heads = rng.randint(1, 3)
        axes = [2 * rng.randint(1, 2), 2 * rng.randint(1, 3), 2 * rng.randint(1, 3)]
        patch = rng.choice([1, 1, 2])
        cfg = {
            "_class_name": "QwenImage21Transformer2DModel", "patch_size": patch, "in_channels": rng.choice([4, 8]),
            "out_channels": rng.choice([None, 4, 8]), "num_layers": rng.randint(1, 2),
            "attention_head_dim": sum(axes), "num_attention_heads": heads, "context_in_dim": rng.choice([12, 24]),
            "mlp_ratio": rng.randint(1, 4), "axes_dims_rope": axes, "causal_condition": rng.random() < 0.7,
        }
        folder = write_config(tmp_path, f"qwen21_{i}", cfg)
        h, w = random_size(rng, 32, 32, 160), random_size(rng, 32, 32, 160)
        words = rng.randint(1, 20)
        where = f"{h}×{w}, {words} prompt tokens: {cfg}"
        if patch == 1:
            _check_transformer(folder, cfg, h, w, words, where)
        else:  # the pipeline refuses it; the class itself is measured as a bare forward on (H/16)(W/16) tokens
            from flopcalc.engine.registry import RunShape, assemble

            tree = assemble(cfg, RunShape(latent_height=h // 16, latent_width=w // 16, text_len=words + 8),
                            component="transformer")
            fx = measure.measure_component(folder, settings={"height": h, "width": w, "text_len": words + 8})
            row = type("Row", (), {"macs_per_run": tree.total.macs("torch"), "tree": tree, "params": tree.total.params})
            assert_matches_measurement(row, fx, f"seed {SEED}, {where}")


def test_random_vae_configs(rng, tmp_path):
    for i in range(2):
        levels = rng.randint(2, 5)
        cfg = {
            "_class_name": "AutoencoderKLQwenImage21", "base_dim": rng.choice([4, 8]),
            "decoder_base_dim": rng.choice([None, 6, 12]), "z_dim": rng.choice([4, 8]),
            "dim_mult": sorted(rng.randint(1, 2) for _ in range(levels - 1)), "num_res_blocks": rng.randint(1, 2),
            "temperal_downsample": [rng.random() < 0.5 for _ in range(levels - 1)],
            "is_residual": rng.random() < 0.7, "in_channels": rng.choice([3, 4]), "out_channels": rng.choice([3, 4]),
        }
        cfg["dim_mult"].append(cfg["dim_mult"][-1])  # the last level keeps its width: its shortcut regroups nothing
        cfg["latents_mean"], cfg["latents_std"] = [0.0] * cfg["z_dim"], [1.0] * cfg["z_dim"]
        if not cfg["is_residual"]:  # Wan 2.1's halving decoder: widths must stay even
            cfg["dim_mult"] = [2 * m for m in cfg["dim_mult"]]
        folder = write_config(tmp_path, f"qwen21_vae_{i}", cfg)
        h, w = random_size(rng, 32, 32, 160), random_size(rng, 32, 32, 160)
        check_plan(folder, "vae", Settings(height=h, width=w), {"height": h, "width": w}, index=INDEX, call="decode")
        from flopcalc.engine.registry import RunShape, assemble

        tree = assemble(cfg, RunShape(height=h, width=w), component="vae", call="encode")
        fx = measure.measure_component(folder, settings={"height": h, "width": w}, call="encode")
        decode = assemble(cfg, RunShape(latent_height=h // 16, latent_width=w // 16), component="vae", call="decode")
        row = type("Row", (), {"macs_per_run": tree.total.macs("torch"), "tree": tree,
                               "params": tree.total.params + decode.total.params})
        assert_matches_measurement(row, fx, f"seed {SEED}, encode {h}×{w}: {cfg}")
