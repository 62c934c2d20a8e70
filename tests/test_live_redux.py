"""Live re-measurement of FLUX.1 Redux's prior: randomized ``SiglipVisionModel`` (widths, depth, image and patch
size, with and without the pooling head) and ``ReduxImageEncoder`` configs planned together under
``FluxPriorReduxPipeline``, against the real modules on meta. Same seed and bar as ``test_live.py``."""

from __future__ import annotations

import random

import pytest

from live_support import SEED, assert_matches_measurement, measure, write_config  # noqa: E402  (skips without torch)
from flopcalc.flops.estimate import estimate_configs  # noqa: E402
from flopcalc.engine.pipelines import Settings  # noqa: E402

pytestmark = pytest.mark.live


def test_random_redux_priors(tmp_path):
    rng = random.Random(SEED)
    for i in range(3):
        heads = rng.choice([1, 2, 4])
        d = 8 * heads * rng.randint(1, 3)
        patch = rng.choice([7, 14, 16])
        encoder = {"architectures": ["SiglipVisionModel"], "model_type": "siglip_vision_model", "hidden_size": d,
                   "intermediate_size": rng.choice([32, 48, 96]), "num_hidden_layers": rng.randint(1, 3),
                   "num_attention_heads": heads, "image_size": patch * rng.randint(2, 9), "patch_size": patch,
                   "num_channels": rng.choice([1, 3]), "vision_use_head": rng.random() < 0.7}
        embedder = {"_class_name": "ReduxImageEncoder", "redux_dim": d, "txt_in_features": rng.choice([16, 40])}
        folders = {"image_encoder": write_config(tmp_path, f"image_encoder{i}", encoder),
                   "image_embedder": write_config(tmp_path, f"image_embedder{i}", embedder)}
        batch = rng.randint(1, 3)
        report = estimate_configs({"_class_name": "FluxPriorReduxPipeline"},
                                  {"image_encoder": encoder, "image_embedder": embedder}, Settings(batch_size=batch))
        tokens = (encoder["image_size"] // patch) ** 2
        for name, folder in folders.items():
            comp = next(c for c in report.components if c.component == name)
            assert comp.runs == batch and comp.shape["seq_len"] == tokens
            fx = measure.measure_component(folder, settings={"seq_len": tokens})
            assert_matches_measurement(comp, fx, f"seed {SEED}, {name} {tokens} tokens: {encoder} {embedder}")


def test_defaults_are_the_class_signatures():
    import inspect

    from transformers import SiglipVisionConfig

    from flopcalc.engine.pipelines.flux_prior_redux import flux_prior_redux_pipeline  # noqa: F401  (registers)
    from flopcalc.engine.registry import lookup

    config = SiglipVisionConfig()
    for key, value in lookup("SiglipVisionModel").defaults.items():
        assert getattr(config, key) == value, key
    from diffusers.pipelines.flux.modeling_flux import ReduxImageEncoder

    signature = inspect.signature(ReduxImageEncoder.__init__)
    for key, value in lookup("ReduxImageEncoder").defaults.items():
        assert signature.parameters[key].default == value, key
