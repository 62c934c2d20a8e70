"""Live re-measurement of IP-Adapter UNets against flopcalc.

Randomized ``UNet2DConditionModel`` configs (SD-like and SDXL-like: text-time embedding, per-block heads,
transformer depths, linear or convolutional projections, plain or cross-attention mid block) with an
IP-Adapter of random image-embedding width installed as ``load_ip_adapter`` does
(:mod:`flopcalc.engine.measure.ip_adapter`: ``IPAdapterAttnProcessor2_0`` in every ``attn2``,
``MultiIPAdapterImageProjection([ImageProjection])``, or a plus adapter's Resampler of random width on a random
number of hidden states), random sizes; FlopCounterMode on the real module
built on meta equals flopcalc's tree in total, for every module path, in parameters and under thop. Then
the same with the UNet planned under StableDiffusionPipeline / StableDiffusionXLPipeline with a bundled
layout (``--ip-adapter``). The seed is printed; ``FLOPCALC_SEED=N`` replays it.
"""

from __future__ import annotations

import random

import pytest

from live_support import SEED, assert_runs_match, check_plan, measure, random_size, write_config  # noqa: E402
from test_live_sd_addons import _encoder_config  # noqa: E402  (the UNet-encoder keys, at random small sizes)
from flopcalc.engine.pipelines import Settings  # noqa: E402
from flopcalc.engine.pipelines.ip_adapter import LAYOUTS  # noqa: E402
from flopcalc.engine.registry import RunShape, assemble  # noqa: E402

pytestmark = pytest.mark.live


def _unet(rng: random.Random, text_time: bool, cross_attention_dim: int | None = None) -> dict:
    nb = rng.randint(2, 3)
    cfg = {"_class_name": "UNet2DConditionModel", **_encoder_config(rng, nb, text_time),
           "up_block_types": [rng.choice(["CrossAttnUpBlock2D", "UpBlock2D"]) for _ in range(nb)],
           "layers_per_block": rng.choice([1, 2]), "in_channels": 4, "out_channels": 4, "sample_size": 16}
    cfg["down_block_types"][0] = "CrossAttnDownBlock2D"  # at least one cross-attention to carry the adapter
    if cross_attention_dim is not None:
        cfg["cross_attention_dim"] = cross_attention_dim
    return cfg


def test_random_unets_with_an_ip_adapter(rng, tmp_path):
    import json

    for i in range(4):
        cfg = _unet(rng, rng.random() < 0.5)
        folder = write_config(tmp_path, f"unet{i}", cfg)
        h, w, embed = random_size(rng, 8, 64, 160), random_size(rng, 8, 64, 160), rng.choice([8, 16, 24, 1024])
        # a plus adapter half the time: a Resampler of 64 · heads width on a random count of hidden states
        plus = rng.choice([None, 64, 128]) if i % 2 else None
        tokens = rng.randint(1, 40)
        model = measure.build_model(folder)
        settings = {"height": h, "width": w, "text_len": 77, "ip_adapter": embed}
        if plus:
            settings.update(ip_adapter_plus=plus, ip_adapter_tokens=tokens)
        inputs, _ = measure.build_inputs(model, settings)
        fx = measure.measure_model(model, inputs, module_depth=9)
        # every module to the attentions, and the adapter's processor projections (attn2.processor.to_k_ip,
        # depth 9); attn1's projections below depth 6 are folded into attn1 in flopcalc's tree
        by_module = fx["torch"]["by_module"]
        assert any(".attn2.processor.to_k_ip" in path for path in by_module)
        fx["torch"]["by_module"] = {p: f for p, f in by_module.items() if p.count(".") < 6 or ".processor." in p}
        tree = assemble(json.loads(folder.joinpath("config.json").read_text()),
                        RunShape(latent_height=h // 8, latent_width=w // 8, text_len=77, ip_image_embed_dim=embed,
                                 ip_resampler=(tokens, 16, plus, plus // 64) if plus else None),
                        component="unet")
        assert tree.find("encoder_hid_proj.image_projection_layers.0." + ("proj_in" if plus else "image_embeds"))
        assert_runs_match([(1, tree)], tree.total.params, fx, f"seed {SEED}, {h}x{w} embed {embed} plus {plus}: {cfg}")


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_planned_unets_with_each_layout(name, rng, tmp_path):
    ip = LAYOUTS[name]
    sdxl = ip.cross_attention_dim == 2048
    cfg = _unet(rng, sdxl, ip.cross_attention_dim)
    h, w = random_size(rng, 8, 64, 128), random_size(rng, 8, 64, 128)
    pipeline = "StableDiffusionXLPipeline" if sdxl else "StableDiffusionPipeline"
    check_plan(write_config(tmp_path, "unet", cfg), "unet", Settings.make(height=h, width=w, ip_adapter=(name,)),
               {"height": h, "width": w, "text_len": 77, "ip_adapter": ip.image_embed_dim,
                **({"ip_adapter_plus": ip.resampler[0], "ip_adapter_tokens": 257} if ip.resampler else {})},
               index={"_class_name": pipeline}, module_depth=6)
