"""Live re-measurement of FLUX.2 [klein] KV caching (``Flux2KleinKVPipeline``): ``Flux2Transformer2DModel`` with the
pipeline's KV attention processors, measured on meta in both modes (step 0, ``kv_cache_mode="extract"``: the
references' rows first, cached as they run; a later step, ``"cached"``: the latent alone with a ``Flux2KVCache`` of
the references' keys and values), against the pieces of flopcalc's ``Flux2KleinKVPipeline`` plan: the
flux2-klein-9b card at a random size and reference count, and randomized configs (widths, heads, depths, MLP ratio,
channels, text width).

No fixture files: the fixture test plans a folder with one setting per fixture, and a KV generation's transformer
row holds two kinds of forward. The seed is printed; ``FLOPCALC_SEED=N`` replays it. Bar: ``torch`` convention
exact (total and every measured module path), parameters exact.
"""

from __future__ import annotations

import json

import pytest

from live_support import REPO, SEED, assert_matches_measurement, measure, random_size, write_config  # noqa: E402
from flopcalc.engine.pipelines import Settings  # noqa: E402
from flopcalc.flops.estimate import estimate_configs  # noqa: E402

pytestmark = pytest.mark.live

CARD = REPO / "model_cards/flux2-klein-9b"


def _check(folder, h: int, w: int, text: int, refs: int, where: str) -> None:
    cfg = json.loads((folder / "config.json").read_text())
    index = {"_class_name": "Flux2KleinKVPipeline", "transformer": ["diffusers", "Flux2Transformer2DModel"]}
    report = estimate_configs(index, {"transformer": cfg}, Settings.make(
        height=h, width=w, max_sequence_length=text, steps=2, reference_images=refs), convention="torch")
    comp = report.component("transformer")
    extract, cached = comp.tree.children
    for mode, piece in ((1, extract), (2, cached)):
        fx = measure.measure_component(folder, settings={"height": h, "width": w, "text_len": text,
                                                         "reference_images": refs, "kv_cache": mode},
                                       with_thop=False)
        row = type("Row", (), {"macs_per_run": piece.per_item.macs("torch"), "tree": piece, "params": comp.params})
        assert_matches_measurement(row, fx, f"seed {SEED}, {where}, kv_cache {mode}", thop=False)


def test_card_transformer_both_modes(rng):
    h, w = random_size(rng, 16, 64, 384), random_size(rng, 16, 64, 384)
    refs, text = rng.randint(1, 2), rng.randint(1, 64)
    _check(CARD / "transformer", h, w, text, refs, f"card at {h}×{w}, {refs} refs, {text} tokens")


def test_random_transformer_configs_both_modes(rng, tmp_path):
    for i in range(3):
        heads, axes = rng.randint(1, 3), [rng.choice([2, 4]) for _ in range(4)]
        cfg = {
            "_class_name": "Flux2Transformer2DModel", "in_channels": rng.choice([8, 16]),
            "out_channels": rng.choice([None, 4]), "num_layers": rng.randint(1, 2),
            "num_single_layers": rng.randint(1, 2), "attention_head_dim": sum(axes), "num_attention_heads": heads,
            "joint_attention_dim": rng.choice([24, 40]), "timestep_guidance_channels": rng.choice([16, 32]),
            "mlp_ratio": rng.choice([2.0, 3.0, 2.5]), "axes_dims_rope": axes, "guidance_embeds": False,
        }
        h, w = random_size(rng, 16, 64, 128), random_size(rng, 16, 64, 128)
        refs, text = rng.randint(1, 2), rng.randint(1, 20)
        _check(write_config(tmp_path, f"flux2kv{i}", cfg), h, w, text, refs, f"{cfg} at {h}×{w}, {refs} refs")
