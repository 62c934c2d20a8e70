"""Live re-measurement of the SD3 ControlNet: randomized ``SD3ControlNetModel`` configs (widths, depth, extra
conditioning channels, RMS q/k norms, MMDiT-X dual-attention blocks, patch size) planned under
``StableDiffusion3ControlNetPipeline`` / ``...InpaintingPipeline``, against the real module on meta. Same seed
and bar as ``test_live.py``."""

from __future__ import annotations

import random

import pytest

from live_support import SEED, check_plan, random_size, write_config  # noqa: E402  (skips without torch)
from flopcalc.engine.pipelines import Settings  # noqa: E402

pytestmark = pytest.mark.live


def test_random_sd3_controlnet_configs(tmp_path):
    rng = random.Random(SEED)
    for i in range(4):
        heads, head_dim = rng.randint(1, 4), rng.choice([8, 16])
        layers = rng.randint(1, 3)
        patch = rng.choice([1, 2])
        extra = rng.choice([0, 1, 3])
        cfg = {
            "_class_name": "SD3ControlNetModel",
            "num_attention_heads": heads, "attention_head_dim": head_dim, "caption_projection_dim": heads * head_dim,
            "num_layers": layers, "patch_size": patch, "in_channels": rng.choice([4, 16]),
            "joint_attention_dim": rng.choice([24, 40]), "pooled_projection_dim": rng.choice([16, 32]),
            "pos_embed_max_size": 48, "sample_size": 16, "extra_conditioning_channels": extra,
            "qk_norm": rng.choice([None, "rms_norm"]),
            "dual_attention_layers": sorted(rng.sample(range(layers), rng.randint(0, layers))),
        }
        measured = {}
        if i == 3:  # an SD3.5 Large-style net: no pos_embed (the transformer's grafted on), no context, single blocks
            cfg.update(use_pos_embed=False, joint_attention_dim=None, pos_embed_type=None, pos_embed_max_size=None,
                       dual_attention_layers=[], qk_norm=None)
            measured = {"pos_embed_max_size": 48}
        pipeline = ("StableDiffusion3ControlNetInpaintingPipeline" if extra else "StableDiffusion3ControlNetPipeline")
        # sides divide by the pipeline's vae_scale_factor × transformer patch size (2 without a transformer: 16);
        # the patch grid stays within pos_embed_max_size
        h, w = random_size(rng, 16, 16, 48 * patch * 4), random_size(rng, 16, 16, 48 * patch * 4)
        seq = rng.randint(1, 40)
        check_plan(write_config(tmp_path, f"controlnet{i}", cfg), "controlnet",
                   Settings(height=h, width=w, max_sequence_length=seq),
                   {"height": h, "width": w, "text_len": 77 + seq, **measured}, index={"_class_name": pipeline})


def test_defaults_are_the_class_signature():
    import inspect

    import diffusers

    from flopcalc.engine.registry import lookup

    signature = inspect.signature(diffusers.SD3ControlNetModel.__init__)
    for key, value in lookup("SD3ControlNetModel").defaults.items():
        default = signature.parameters[key].default
        assert (list(default) if isinstance(default, tuple) else default) == \
            (list(value) if isinstance(value, tuple) else value), key
