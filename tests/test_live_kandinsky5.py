"""Live re-measurement of ``Kandinsky5Transformer3DModel`` (diffusers ``models/transformers/transformer_kandinsky.py``)
built on the meta device from randomized small configs (every structural key the assembler reads: widths, block
counts, the rotary axes, ``visual_cond``, the patch) and counted now, against flopcalc's plan under the video
(``Kandinsky5T2VPipeline``) and the image (``Kandinsky5T2IPipeline``) pipelines.

The seed is printed; ``FLOPCALC_SEED=N`` replays it. Bar: ``torch`` convention exact (total and every measured
module), parameters exact, ``thop`` convention exact.
"""

from __future__ import annotations

import random

import pytest
from live_support import SEED, check_plan, write_config  # noqa: E402  (skips without torch)

from flopcalc.engine.errors import ConfigError
from flopcalc.engine.pipelines import Settings
from flopcalc.engine.registry import RunShape, assemble

pytestmark = pytest.mark.live

#: One transformer call per step (no CFG), one step: the row is one forward.
ONE = {"guidance_scale": 1.0, "steps": 1}


def _random_transformer(rng: random.Random, video: bool) -> dict:
    axes = [2 * rng.randint(1, 4) for _ in range(3)]
    heads = rng.randint(1, 2)
    return {"_class_name": "Kandinsky5Transformer3DModel", "in_visual_dim": rng.choice([4, 8, 16]),
            "out_visual_dim": rng.choice([4, 8, 16]), "in_text_dim": rng.choice([8, 24]),
            "in_text_dim2": rng.choice([8, 12]), "time_dim": rng.choice([8, 16]),
            "patch_size": [1, 2, 2] if video or rng.random() < 0.7 else [1, 1, 1],
            "model_dim": heads * sum(axes), "ff_dim": rng.choice([16, 40]), "num_text_blocks": rng.randint(0, 2),
            "num_visual_blocks": rng.randint(0, 2), "axes_dims": axes, "visual_cond": rng.random() < 0.5}


def test_random_video_transformer(rng, tmp_path):
    for i in range(2):
        cfg = _random_transformer(rng, video=True)
        folder = write_config(tmp_path, f"v{i}", cfg)
        h, w = 16 * rng.randint(1, 3), 16 * rng.randint(1, 3)
        frames, text = 4 * rng.randint(0, 3) + 1, rng.randint(1, 12)
        check_plan(folder, "transformer", Settings.make(height=h, width=w, num_frames=frames, max_sequence_length=text,
                                                        **ONE),
                   {"height": h, "width": w, "num_frames": frames, "text_len": text},
                   index={"_class_name": "Kandinsky5T2VPipeline", "transformer": ["x", "y"]})


def test_random_image_transformer(rng, tmp_path):
    """The image pipelines' one latent frame (the transformer measured without ``num_frames``), at a size of the
    pipeline's list (the plan snaps any other) — and ``RunShape`` sizes off that list through ``assemble``."""
    from live_support import measure

    for i in range(2):
        cfg = _random_transformer(rng, video=False)
        folder = write_config(tmp_path, f"i{i}", cfg)
        text = rng.randint(1, 12)
        h, w = rng.choice([(1024, 1024), (768, 1280), (1152, 896)])
        check_plan(folder, "transformer", Settings.make(height=h, width=w, max_sequence_length=text, **ONE),
                   {"height": h, "width": w, "text_len": text},
                   index={"_class_name": "Kandinsky5T2IPipeline", "transformer": ["x", "y"]})
        h, w = 16 * rng.randint(1, 3), 16 * rng.randint(1, 3)
        tree = assemble(cfg, RunShape(latent_height=h // 8, latent_width=w // 8, text_len=text), component="transformer")
        fx = measure.measure_component(folder, settings={"height": h, "width": w, "text_len": text})
        assert 2 * tree.total.macs() == fx["torch"]["flops"], f"seed {SEED}: {cfg} at {h}×{w}"
        for path, flops in fx["torch"]["by_module"].items():
            node = tree if path == "Global" else tree.find(path)
            assert 2 * node.total.macs() == flops, f"{path}: seed {SEED}: {cfg} at {h}×{w}"
        assert tree.total.macs("thop") == fx["thop"]["macs"], f"seed {SEED}: {cfg}"


def test_configs_the_real_module_cannot_run_are_refused():
    base = {"_class_name": "Kandinsky5Transformer3DModel", "model_dim": 24, "axes_dims": [4, 4, 4]}
    shape = RunShape(latent_height=4, latent_width=4, latent_frames=1, text_len=4)
    assemble(base, shape, component="transformer")
    for bad, why in (({"model_dim": 20}, "multiple of the head width"), ({"axes_dims": [3, 5, 4]}, "even"),
                     ({"attention_type": "nabla"}, "nabla")):
        with pytest.raises(ConfigError, match=why):
            assemble({**base, **bad}, shape, component="transformer")
