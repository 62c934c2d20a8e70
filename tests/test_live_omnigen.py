"""Live re-measurement of ``OmniGenTransformer2DModel``: randomized configs (width, heads, feed-forward width,
layers, vocabulary, patch size, channels, timestep width, rotary factors) built on the meta device and counted
now, against the plan's rows: a text-only row at a random condition length, and, with input images, the rows
that patch-embed them and the negative row padded to the same length.

The seed is printed; ``FLOPCALC_SEED=N`` replays it. Bar: ``torch`` convention exact (total and every measured
module path), parameters exact, ``thop`` convention exact.
"""

from __future__ import annotations

import pytest

from live_support import SEED, assert_matches_measurement, check_plan, measure, random_size, write_config  # noqa: E402
from flopcalc.engine.errors import ConfigError  # noqa: E402
from flopcalc.engine.pipelines import Settings  # noqa: E402
from flopcalc.flops.estimate import estimate_configs  # noqa: E402

pytestmark = pytest.mark.live

INDEX = {"_class_name": "OmniGenPipeline", "transformer": ["diffusers", "OmniGenTransformer2DModel"]}


def _config(rng) -> dict:
    heads = rng.randint(1, 3)
    head_dim = rng.choice([8, 14, 16])
    factors = rng.choice([1, head_dim // 2])
    return {
        "_class_name": "OmniGenTransformer2DModel",
        "hidden_size": heads * head_dim,
        "num_attention_heads": heads,
        "num_key_value_heads": heads,
        "intermediate_size": rng.choice([24, 40]),
        "num_layers": rng.randint(0, 2),
        "vocab_size": rng.choice([40, 90]),
        "pad_token_id": rng.choice([0, 3, None]),
        "in_channels": rng.choice([4, 16]),
        "patch_size": rng.choice([1, 2]),
        "pos_embed_max_size": 48,
        "time_step_dim": rng.choice([32, 256]),
        "rope_scaling": {"short_factor": [1.0] * factors, "long_factor": [2.0] * factors, "type": "su"},
    }


def test_random_text_only_rows(rng, tmp_path):
    for i in range(2):
        cfg = _config(rng)
        h, w, t = random_size(rng, 16, 32, 256), random_size(rng, 16, 32, 256), rng.randint(1, 60)
        if cfg["hidden_size"] % 4:  # the real class cannot build its 2-D sin-cos table
            with pytest.raises(ValueError, match="divisible by 2"):
                measure.build_model(write_config(tmp_path, f"omnigen_odd{i}", cfg))
            with pytest.raises(ConfigError, match="multiple of 4"):
                estimate_configs(INDEX, {"transformer": cfg}, Settings(height=h, width=w))
            continue
        check_plan(write_config(tmp_path, f"omnigen{i}", cfg), "transformer",
                   Settings(height=h, width=w).with_options(prompt_tokens=t), {"height": h, "width": w, "text_len": t},
                   index=INDEX)


def test_random_rows_with_input_images(rng, tmp_path):
    """``--input-images k``: two rows per step patch-embed the k images (their tokens after the text), one
    negative row is as long without them; each piece of the folded run against its own measurement."""
    for i in range(1):
        cfg = _config(rng)
        while cfg["hidden_size"] % 4:  # a width the real class builds
            cfg = _config(rng)
        cfg["patch_size"] = 2  # the processor's 16-pixel crop makes whole 2×2 patches of the image latents
        folder = write_config(tmp_path, f"omnigen_edit{i}", cfg)
        h, w, t, k = random_size(rng, 16, 32, 192), random_size(rng, 16, 32, 192), rng.randint(1, 30), rng.randint(1, 2)
        report = estimate_configs(INDEX, {"transformer": cfg}, Settings(height=h, width=w, steps=1)
                                  .with_options(prompt_tokens=t, input_images=k), convention="torch")
        comp = report.component("transformer")
        pieces = {p.count: p for p in comp.tree.children}  # 2 rows with the images, 1 without
        image_tokens = k * (h // 16) * (w // 16)
        where = f"seed {SEED}, {h}×{w}, {t} tokens, {k} image(s): {cfg}"
        for rows, settings in ((2, {"text_len": t, "input_images": k, "input_height": h, "input_width": w}),
                               (1, {"text_len": t + image_tokens})):
            fx = measure.measure_component(folder, settings={"height": h, "width": w, **settings})
            piece = pieces[rows]
            assert 2 * piece.per_item.macs("torch") == fx["torch"]["flops"], where
            for path, flops in fx["torch"]["by_module"].items():
                node = piece if path == "Global" else piece.find(path)
                assert (0 if node is None else 2 * node.per_item.macs("torch")) == flops, f"{path}: {where}"
            assert piece.per_item.params == fx["params"] == comp.params, where
            assert piece.per_item.macs("thop") == fx["thop"]["macs"], where


def test_card_transformer_at_random_size_and_length(rng):
    from live_support import REPO

    h, w, t = random_size(rng, 16, 128, 768), random_size(rng, 16, 128, 768), rng.randint(1, 300)
    check_plan(REPO / "model_cards/omnigen-v1/transformer", "transformer",
               Settings(height=h, width=w).with_options(prompt_tokens=t), {"height": h, "width": w, "text_len": t},
               index=INDEX, thop=False)


__all__ = ["assert_matches_measurement"]
