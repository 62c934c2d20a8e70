"""Live re-measurement of ``HeliosTransformer3DModel`` (Helios), built on the meta device and counted now as the Helios
pipelines call it: the chunk packed after its three histories, on randomized configs (heads, widths, layers,
``guidance_cross_attn``, ``zero_history_timestep``, ``is_amplify_history`` with either scale mode, ``cross_attn_norm``,
unused added k/v) at random sizes, chunk lengths and text lengths; as ``HeliosPipeline`` plans it, and at a pyramid
stage (the chunk at 1/2 or 1/4 of the histories' grid) as the assembler counts it.

The seed is printed; ``FLOPCALC_SEED=N`` replays it. Bar: ``torch`` convention exact (total and every measured
module path), parameters exact, ``thop`` convention exact.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from live_support import SEED, assert_matches_measurement, measure, random_size, write_config  # noqa: E402
from flopcalc.engine.pipelines import Settings  # noqa: E402
from flopcalc.engine.registry import RunShape, assemble  # noqa: E402
from flopcalc.flops.estimate import estimate_configs  # noqa: E402

pytestmark = pytest.mark.live


def test_random_configs(rng, tmp_path):
    for i in range(3):
        heads, head_dim = rng.randint(1, 3), rng.choice([12, 24])
        cfg = {"_class_name": "HeliosTransformer3DModel", "num_attention_heads": heads,
               "attention_head_dim": head_dim, "in_channels": rng.choice([4, 8]),
               "out_channels": rng.choice([None, 4]), "text_dim": rng.choice([8, 16]), "freq_dim": rng.choice([8, 16]),
               "ffn_dim": rng.choice([24, 40]), "num_layers": rng.randint(1, 2),
               "rope_dim": [4, 4, 4] if head_dim == 12 else rng.choice([[8, 8, 8], [10, 6, 8]]),
               "cross_attn_norm": rng.random() < 0.5, "guidance_cross_attn": rng.random() < 0.5,
               "zero_history_timestep": rng.random() < 0.5, "is_amplify_history": rng.random() < 0.5,
               "history_scale_mode": rng.choice(["scalar", "per_head"]), "added_kv_proj_dim": rng.choice([None, 8])}
        scale = 1 if i == 0 else rng.choice([1, 2, 4])
        h, w = random_size(rng, 16 * scale, 16, 96), random_size(rng, 16 * scale, 16, 96)
        frames, text = 4 * rng.randint(0, 4) + 1, rng.randint(1, 40)
        settings = {"height": h, "width": w, "num_frames": frames, "text_len": text}
        if scale > 1:
            settings["pyramid_scale"] = scale
        fx = measure.measure_component(write_config(tmp_path, f"helios{i}", cfg), settings=settings, with_thop=True)
        where = f"seed {SEED}, {cfg}, {settings}"
        latent_frames = (frames - 1) // 4 + 1
        if scale == 1:
            report = estimate_configs({"_class_name": "HeliosPipeline"}, {"transformer": cfg}, Settings(
                height=h, width=w, num_frames=frames, max_sequence_length=text, steps=1).with_options(
                latent_window_size=latent_frames))
            comp = report.component("transformer")
        else:
            tree = assemble(cfg, RunShape(latent_height=h // 8 // scale, latent_width=w // 8 // scale,
                                          latent_frames=latent_frames, text_len=text, height=h // 8, width=w // 8),
                            component="transformer")
            comp = SimpleNamespace(tree=tree, macs_per_run=tree.total.macs("torch"), params=tree.total.params)
        assert_matches_measurement(comp, fx, where, thop=True)
