"""Live re-measurement of the Stable Diffusion add-ons: randomized ``ControlNetModel`` and ``T2IAdapter`` configs (under
``StableDiffusion(XL)ControlNetPipeline``) and randomized inpainting UNets (9 input channels, under
``StableDiffusion(XL)InpaintPipeline``), against the real modules on meta. Same seed and bar as
``test_live.py``."""

from __future__ import annotations

import random

import pytest

from live_support import SEED, check_plan, random_size, write_config  # noqa: E402  (skips without torch)
from flopcalc.engine.pipelines import Settings  # noqa: E402

pytestmark = pytest.mark.live


@pytest.fixture
def rng() -> random.Random:
    return random.Random(SEED)


def _encoder_config(rng: random.Random, nb: int, text_time: bool) -> dict:
    """The UNet-encoder keys a ControlNet and a UNet share, at random small sizes."""
    cfg = {
        "block_out_channels": [32 * rng.randint(1, 3) for _ in range(nb)],
        "down_block_types": [rng.choice(["CrossAttnDownBlock2D", "DownBlock2D"]) for _ in range(nb)],
        "mid_block_type": rng.choice(["UNetMidBlock2DCrossAttn", "UNetMidBlock2D"]),
        "transformer_layers_per_block": rng.choice([1, [rng.randint(1, 2) for _ in range(nb)]]),
        "attention_head_dim": [rng.choice([1, 2, 4]) for _ in range(nb)],
        "cross_attention_dim": rng.choice([24, 40]),
        "use_linear_projection": rng.random() < 0.5,
        "resnet_time_scale_shift": rng.choice(["default", "scale_shift"]),
        "downsample_padding": rng.choice([0, 1]),
    }
    if text_time:
        cfg.update(addition_embed_type="text_time", addition_time_embed_dim=8,
                   projection_class_embeddings_input_dim=16 + 6 * 8)
    return cfg


def test_random_controlnet_configs(rng, tmp_path):
    for i in range(4):
        nb = rng.randint(2, 3)
        text_time = rng.random() < 0.5
        cfg = {
            "_class_name": "ControlNetModel",
            **_encoder_config(rng, nb, text_time),
            "layers_per_block": rng.randint(1, 2),
            "conditioning_channels": rng.choice([1, 3, 6]),
            # four widths: three stride-2 convs take the 8× control image to the latent size (the residual add)
            "conditioning_embedding_out_channels": [8 * rng.randint(1, 4) for _ in range(4)],
            "global_pool_conditions": rng.random() < 0.3,
            "in_channels": 4,
        }
        pipeline = "StableDiffusionXLControlNetPipeline" if text_time else "StableDiffusionControlNetPipeline"
        h, w = random_size(rng, 8, 64, 200), random_size(rng, 8, 64, 200)
        check_plan(write_config(tmp_path, f"controlnet{i}", cfg), "controlnet", Settings(height=h, width=w),
                   {"height": h, "width": w, "text_len": 77}, index={"_class_name": pipeline}, module_depth=5)


def test_random_inpainting_unets(rng, tmp_path):
    for i in range(3):
        nb = rng.randint(2, 3)
        text_time = rng.random() < 0.5
        cfg = {
            "_class_name": "UNet2DConditionModel",
            **_encoder_config(rng, nb, text_time),
            "up_block_types": [rng.choice(["CrossAttnUpBlock2D", "UpBlock2D"]) for _ in range(nb)],
            "layers_per_block": rng.choice([1, 2]),
            "in_channels": 9,
            "out_channels": 4,
            "sample_size": 16,
        }
        pipeline = "StableDiffusionXLInpaintPipeline" if text_time else "StableDiffusionInpaintPipeline"
        h, w = random_size(rng, 8, 64, 200), random_size(rng, 8, 64, 200)
        check_plan(write_config(tmp_path, f"unet{i}", cfg), "unet", Settings(height=h, width=w),
                   {"height": h, "width": w, "text_len": 77}, index={"_class_name": pipeline}, module_depth=5)


def test_random_t2i_adapters(rng, tmp_path):
    for i, kind in enumerate(["full_adapter", "full_adapter_xl", "light_adapter", rng.choice(["full_adapter",
                                                                                              "light_adapter"])]):
        n = 4 if kind == "full_adapter_xl" else rng.randint(2, 4)
        widths = [8 * rng.randint(1, 4) for _ in range(n)]
        if kind == "full_adapter_xl":
            widths[3] = widths[2]  # FullAdapterXL's fourth block takes the third's output unchanged
        d = rng.choice([4, 8, 16])
        cfg = {"_class_name": "T2IAdapter", "adapter_type": kind, "channels": widths,
               "num_res_blocks": rng.randint(1, 3), "downscale_factor": d, "in_channels": rng.choice([1, 3])}
        pipeline = "StableDiffusionXLAdapterPipeline" if kind == "full_adapter_xl" else "StableDiffusionAdapterPipeline"
        h, w = random_size(rng, max(d, 8), 64, 400), random_size(rng, max(d, 8), 64, 400)
        check_plan(write_config(tmp_path, f"adapter{i}", cfg), "adapter", Settings(height=h, width=w),
                   {"height": h, "width": w}, index={"_class_name": pipeline}, module_depth=5)


@pytest.mark.parametrize("class_name", ["ControlNetModel", "T2IAdapter"])
def test_defaults_are_the_class_signature(class_name):
    import inspect

    import diffusers

    from flopcalc.engine.registry import lookup

    signature = inspect.signature(getattr(diffusers, class_name).__init__)
    for key, value in lookup(class_name).defaults.items():
        default = signature.parameters[key].default
        assert (list(default) if isinstance(default, tuple) else default) == value, key
