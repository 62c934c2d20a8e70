"""Live re-measurement of ``AnimateDiffPAGPipeline``'s ``UNetMotionModel`` under perturbed-attention guidance:
randomized motion UNets (``test_live_animatediff``'s generator: motion mid block or not, per-block depths and heads)
at random sizes and frame counts, random ``pag_applied_layers`` cut from the real self-attention names (spatial
``attn1`` and both attentions of the motion modules), the 3-row (CFG) or 2-row batch; diffusers' own ``PAGMixin``
installs the processors on the real module built on meta and flopcalc's plan (original rows + perturbed row)
equals it in total, for every module path, in parameters and under thop (``test_live_pag._check``). And the
pipeline's default ``"mid_block.*attn1"``, which flopcalc spells as simple ids, picks the very layers diffusers'
regular-expression search picks, and measures equal. Same seed and bar as ``test_live.py``."""

from __future__ import annotations

import random

import pytest

from live_support import SEED, assert_runs_match, measure, random_size, write_config  # noqa: E402  (skips without torch)
from test_live_animatediff import _motion_unet_config  # noqa: E402
from test_live_pag import _check  # noqa: E402
from flopcalc.engine.perturbed_attention import PerturbedAttention  # noqa: E402
from flopcalc.engine.pipelines import Settings  # noqa: E402
from flopcalc.engine.pipelines.pag import _animatediff_mid_attn1  # noqa: E402
from flopcalc.flops.estimate import estimate_configs  # noqa: E402

pytestmark = pytest.mark.live


@pytest.fixture
def rng() -> random.Random:
    return random.Random(SEED)


def _small(rng: random.Random) -> dict:
    cfg = _motion_unet_config(rng)
    cfg["down_block_types"][0] = "CrossAttnDownBlockMotion"  # at least one spatial self-attention
    return cfg


def test_random_motion_unets_with_pag(rng, tmp_path):
    for i in range(2):
        cfg = _small(rng)
        h, w = random_size(rng, 8, 32, 96), random_size(rng, 8, 32, 96)
        frames = rng.randint(1, 6)
        _check(write_config(tmp_path, f"unet{i}", cfg), "unet", "AnimateDiffPAGPipeline",
               {"height": h, "width": w, "num_frames": frames},
               {"height": h, "width": w, "num_frames": frames, "text_len": 77}, rng, module_depth=5)


def test_default_layers_are_the_regular_expression(rng, tmp_path):
    import re

    from diffusers.models.attention_processor import Attention

    from flopcalc.engine.measure.perturbed import perturb

    for i in range(2):
        cfg = {**_small(rng), "use_motion_mid_block": i == 0}
        folder = write_config(tmp_path, f"unet{i}", cfg)
        model = measure.build_model(folder)
        names = [n for n, m in model.named_modules() if isinstance(m, Attention) and not m.is_cross_attention]
        ids = _animatediff_mid_attn1({"unet": cfg})
        ours = {n for n in names if PerturbedAttention(ids, True).applies(n)}
        assert ours == {n for n in names if re.search("mid_block.*attn1", n)} != set(), f"seed {SEED}: {cfg}"
        assert any(".motion_modules." in n for n in ours) == (i == 0)
        h, w, frames = random_size(rng, 8, 32, 64), random_size(rng, 8, 32, 64), rng.randint(1, 4)
        inputs, _ = measure.build_inputs(model, {"height": h, "width": w, "num_frames": frames, "text_len": 77})
        fx = measure.measure_model(model, perturb(model, 3, inputs), module_depth=5)  # the pipeline's default layers
        comp = estimate_configs({"_class_name": "AnimateDiffPAGPipeline"}, {"unet": cfg},
                                Settings(height=h, width=w, num_frames=frames)).component("unet")
        assert [p.count for p in comp.tree.children] == [2, 1]
        assert_runs_match([(p.count, p) for p in comp.tree.children], comp.params, fx, f"seed {SEED}: {cfg}")
