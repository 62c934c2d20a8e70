"""Live re-measurement of the Cosmos 2.5 models, built on the meta device and counted now, as the Cosmos 2.5
pipelines call them: ``CosmosTransformer3DModel`` with the cross-attention projection (Qwen2.5-VL's concatenated
states) and, for Transfer, the image-context branch, and ``CosmosControlNetModel``, on randomized configs (heads,
head width, layers, MLP ratio, adaLN-LoRA width, text and image-context widths and lengths, block counts, padding
mask, learnable position embedding) at random sizes, frame counts and text lengths.

The seed is printed; ``FLOPCALC_SEED=N`` replays it. Bar: ``torch`` convention exact (total and every measured
module path), parameters exact, ``thop`` convention exact.
"""

from __future__ import annotations

import pytest

from live_support import SEED, assert_matches_measurement, measure, random_size, write_config  # noqa: E402
from flopcalc.flops.estimate import estimate_configs  # noqa: E402
from flopcalc.engine.pipelines import Settings  # noqa: E402

pytestmark = pytest.mark.live


def _common(rng) -> dict:
    heads, head_dim = rng.randint(1, 3), rng.choice([12, 24])  # RoPE splits the head width in sixths
    dim = heads * head_dim
    return {"num_attention_heads": heads, "attention_head_dim": head_dim, "mlp_ratio": rng.choice([2.0, 4.0, 1.5]),
            "text_embed_dim": dim if rng.random() < 0.5 else rng.choice([16, 40]),
            "adaln_lora_dim": rng.choice([8, 32]), "max_size": [8, 64, 64], "patch_size": [1, rng.choice([1, 2]), 2],
            "rope_scale": [1.0, 3.0, 3.0], "extra_pos_embed_type": rng.choice([None, "learnable"]),
            "use_crossattn_projection": True, "crossattn_proj_in_channels": rng.choice([24, 64])}


@pytest.mark.parametrize("pipeline", ["Cosmos2_5_PredictBasePipeline", "Cosmos2_5_TransferPipeline"])
def test_random_configs(rng, tmp_path, pipeline):
    transfer = pipeline == "Cosmos2_5_TransferPipeline"
    for i in range(2):
        common = _common(rng)
        common["encoder_hidden_states_channels"] = common["text_embed_dim"]
        dim = common["num_attention_heads"] * common["attention_head_dim"]
        image = {"img_context_dim_in": rng.choice([8, 20]), "img_context_dim_out": dim} if transfer else {}
        transformer = {"_class_name": "CosmosTransformer3DModel", "in_channels": rng.choice([5, 17]),
                       "out_channels": rng.choice([4, 16]), "num_layers": rng.randint(1, 2),
                       "concat_padding_mask": rng.random() < 0.5, "img_context_num_tokens": rng.randint(1, 9),
                       "controlnet_block_every_n": 1 if transfer else None, **common, **image}
        configs = {"transformer": transformer}
        if transfer:
            configs["controlnet"] = {"_class_name": "CosmosControlNetModel", "n_controlnet_blocks": rng.randint(1, 2),
                                     "in_channels": rng.choice([20, 130]), "latent_channels": 18,
                                     "model_channels": dim, **common, **image}
        h, w, t = random_size(rng, 16, 16, 128), random_size(rng, 16, 16, 128), rng.randint(1, 40)
        f = 4 * rng.randint(1 if transfer else 0, 3) + 1  # a Transfer chunk has at least 5 frames
        settings = Settings(height=h, width=w, max_sequence_length=t, num_frames=f, steps=1)
        if transfer:
            settings = settings.with_options(chunk_frames=f)
        report = estimate_configs({"_class_name": pipeline}, configs, settings)
        measured = {"height": h, "width": w, "text_len": t, "num_frames": f}
        if transfer:
            measured["image_tokens"] = transformer["img_context_num_tokens"]
        for name, cfg in configs.items():
            fx = measure.measure_component(write_config(tmp_path, f"{name}{i}", cfg), settings=measured)
            assert_matches_measurement(report.component(name), fx, f"seed {SEED}, {pipeline} {name}: {cfg}, {measured}")
