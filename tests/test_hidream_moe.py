"""The MoE routing stand-in of the HiDream harness (``flopcalc.engine.measure.inputs.hidream.even_moe_infer``) is
exact: a tiny random ``HiDreamImageTransformer2DModel`` run on CPU with real random tensors and its own
routing (``MOEFeedForwardSwiGLU.moe_infer``: ``bincount().cpu()``, whatever the gate picks) counts the same
FLOPs under FlopCounterMode as the same config built on meta with the stand-in, in total and at every module
path down to the MoE's ``experts`` (depth 5), and thop counts the same MACs. The experts' own split differs
(the real gate is not even), which is why no fixture records it.

The seed is printed; ``FLOPCALC_SEED=N`` replays it.
"""

from __future__ import annotations

import pytest

import test_live_hidream as live  # noqa: E402  (a module, so that pytest collects its tests there only)
from live_support import SEED, measure, write_config  # noqa: E402  (skips without torch)

pytestmark = pytest.mark.live

#: Module depth of the comparison: ``double_stream_blocks.0.block.ff_i.experts`` (the routed experts' sum).
DEPTH = 5


def _real_inputs(model, fixture_inputs: dict) -> dict:
    import torch

    g = torch.Generator().manual_seed(SEED % 2**31)
    return {name: torch.randn(shape, generator=g) if name != "timesteps" else torch.rand(shape, generator=g) * 1000
            for name, shape in fixture_inputs.items()}


def test_even_routing_counts_what_the_real_routing_counts(rng, tmp_path):
    import torch
    from diffusers import HiDreamImageTransformer2DModel

    uneven = 0
    for i in range(4):
        cfg = live.random_transformer(rng, sparse=i < 3, dual_min=1)
        folder = write_config(tmp_path, f"transformer{i}", cfg)
        side = min(cfg["max_resolution"])  # latent pixels: a non-square latent is padded to max_resolution's patches
        h, w = rng.choice([(side, side), (side, side // 2), (side // 2, side), (side // 2, side // 2)])
        settings = {"height": 8 * h, "width": 8 * w, "text_len": rng.randint(1, 6),
                    "text_len_2": rng.randint(1, 6)}
        where = f"seed {SEED}, {settings}: {cfg}"
        stand_in = measure.measure_component(folder, settings=settings, module_depth=DEPTH)

        torch.manual_seed(SEED % 2**31 + i)
        real = HiDreamImageTransformer2DModel.from_config(HiDreamImageTransformer2DModel.load_config(str(folder))).eval()
        inputs = _real_inputs(real, stand_in["inputs"])
        counted = measure.count_torch(real, inputs, module_depth=DEPTH)
        assert counted["flops"] == stand_in["torch"]["flops"], where
        assert counted["by_module"] == stand_in["torch"]["by_module"], where
        assert measure.count_thop(real, inputs)["macs"] == stand_in["thop"]["macs"], where

        # the real gate's split among the experts is its own: the stand-in matches it only in sum
        deep = measure.count_torch(real, inputs, module_depth=DEPTH + 1)["by_module"]
        model = measure.build_model(folder)
        even = measure.count_torch(model, {k: v.to("meta") for k, v in inputs.items()}, module_depth=DEPTH + 1)
        experts = [k for k in deep if ".experts." in k]
        uneven += any(deep[k] != even["by_module"].get(k, 0) for k in experts)
    assert uneven, f"seed {SEED}: the real routing was even in every case; the test proved nothing about routing"
