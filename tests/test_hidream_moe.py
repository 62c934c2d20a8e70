"""The MoE routing stand-in of the HiDream harness (``flopcalc.measure.inputs.hidream.even_moe_infer``) is
exact: a tiny random ``HiDreamImageTransformer2DModel`` run on CPU with real random tensors and its own
routing (``MOEFeedForwardSwiGLU.moe_infer``: ``bincount().cpu()``, whatever the gate picks) counts the same
FLOPs under FlopCounterMode as the same config built on meta with the stand-in, in total and at every module
path down to the MoE's ``experts`` (depth 5), and thop counts the same MACs. The experts' own split differs
(the real gate is not even), which is why no fixture records it.

The seed is printed; ``FLOPCALC_SEED=N`` replays it.
"""

from __future__ import annotations

import pytest

from live_support import SEED, measure, write_config  # noqa: E402  (skips without torch)

pytestmark = pytest.mark.live

#: Module depth of the comparison: ``double_stream_blocks.0.block.ff_i.experts`` (the routed experts' sum).
DEPTH = 5


def _random_config(rng, sparse: bool) -> dict:
    """``sparse``: fewer experts per token than experts (k < E), so that the real gate's split can be uneven."""
    heads, axes = rng.randint(1, 3), rng.choice([[8, 4, 4], [4, 6, 6]])
    dual, single = rng.randint(1, 2), rng.randint(0, 2)
    routed = rng.randint(2, 5) if sparse else rng.randint(1, 5)
    return {
        "_class_name": "HiDreamImageTransformer2DModel",
        "patch_size": rng.choice([1, 2]),
        "in_channels": rng.choice([4, 8]),
        "out_channels": None,
        "num_layers": dual,
        "num_single_layers": single,
        "attention_head_dim": sum(axes),
        "num_attention_heads": heads,
        "caption_channels": [rng.choice([8, 12]), rng.choice([10, 16])],
        "text_emb_dim": rng.choice([6, 20]),
        "num_routed_experts": routed,
        "num_activated_experts": rng.randint(1, routed - 1) if sparse else rng.randint(1, routed),
        "axes_dims_rope": axes,
        "max_resolution": [16, 16],
        "llama_layers": [rng.randint(0, 2) for _ in range(dual + single)],
    }


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
        cfg = _random_config(rng, sparse=i < 3)
        folder = write_config(tmp_path, f"transformer{i}", cfg)
        side = cfg["max_resolution"][0]  # latent pixels: a non-square latent is padded to max_resolution's patches
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
