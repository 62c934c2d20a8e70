"""Live re-measurement of the Z-Image ControlNet (``ZImageControlNetModel``), built as ``ZImageControlNetPipeline``
builds it (``from_transformer``: the transformer's embedders and refiners run inside it), against flopcalc's plan:
the z-image-turbo-controlnet-union-2.1 card at a random size and caption length, and randomized ControlNet and
transformer configs (the three ``add_control_noise_refiner`` modes, control places, control channels, refiner depths
of each, widths, heads, q/k norms, the transformer's channels and caption width, patch-size sets), with image and
caption lengths that are and are not multiples of the 32-token padding. Bar: ``torch`` convention exact (total and
every measured module path), parameters exact (the ControlNet's own), ``thop`` exact. The seed is printed;
``FLOPCALC_SEED=N`` replays it."""

from __future__ import annotations

import json

import pytest

from live_support import REPO, SEED, assert_matches_measurement, measure, random_size  # noqa: E402
from flopcalc.engine.pipelines import Settings  # noqa: E402
from flopcalc.flops.estimate import estimate_configs  # noqa: E402

pytestmark = pytest.mark.live

INDEX = {"_class_name": "ZImageControlNetPipeline", "transformer": ["diffusers", "ZImageTransformer2DModel"],
         "controlnet": ["diffusers", "ZImageControlNetModel"]}


def _check(folder, h: int, w: int, text: int, *, thop: bool = True) -> None:
    configs = {name: json.loads((folder / name / "config.json").read_text()) for name in ("transformer", "controlnet")}
    report = estimate_configs(INDEX, configs, Settings(height=h, width=w, max_sequence_length=text, steps=1))
    comp = report.component("controlnet")
    fx = measure.measure_component(folder / "controlnet", settings={"height": h, "width": w, "text_len": text},
                                   with_thop=thop)
    assert_matches_measurement(comp, fx, f"seed {SEED}, {h}x{w}, {text} tokens: {configs}", thop=thop)


def test_card_controlnet_at_random_size(rng):
    h, w, text = random_size(rng, 16, 128, 512), random_size(rng, 16, 128, 512), rng.randint(1, 512)
    _check(REPO / "model_cards/z-image-turbo-controlnet-union-2.1", h, w, text, thop=False)


def test_random_controlnet_configs(rng, tmp_path):
    for i in range(3):
        heads, head_dim = rng.randint(1, 2), rng.choice([16, 32])
        dim, patches = heads * head_dim, rng.choice([([2], [1]), ([1, 2], [1, 1])])
        qk_norm, latent = rng.random() < 0.5, rng.choice([4, 16])
        mode = rng.choice([None, "control_layers", "control_noise_refiner"])
        places = sorted({0, *rng.sample(range(1, 6), rng.randint(0, 2))})
        transformer = {
            "_class_name": "ZImageTransformer2DModel", "all_patch_size": patches[0], "all_f_patch_size": patches[1],
            "in_channels": latent, "dim": dim, "n_layers": 6, "n_refiner_layers": rng.randint(1, 2),
            "n_heads": heads, "n_kv_heads": heads, "qk_norm": qk_norm, "cap_feat_dim": rng.choice([24, 40]),
            "axes_dims": [head_dim // 4, 3 * head_dim // 8, 3 * head_dim // 8], "axes_lens": [1024, 512, 512],
        }
        controlnet = {
            "_class_name": "ZImageControlNetModel", "control_layers_places": places,
            "control_refiner_layers_places": [0], "control_in_dim": rng.choice([latent, 2 * latent + 1]),
            "add_control_noise_refiner": mode, "all_patch_size": patches[0], "all_f_patch_size": patches[1],
            "dim": dim, "n_refiner_layers": rng.randint(1, 2), "n_heads": heads, "n_kv_heads": heads,
            "qk_norm": qk_norm,
        }
        folder = tmp_path / f"zcn{i}"
        for name, cfg in (("transformer", transformer), ("controlnet", controlnet)):
            (folder / name).mkdir(parents=True)
            (folder / name / "config.json").write_text(json.dumps(cfg))
        h, w, text = random_size(rng, 16, 32, 192), random_size(rng, 16, 32, 192), rng.randint(1, 70)
        _check(folder, h, w, text)
