"""The bundled PixArt-Σ card (model_cards/pixart-sigma-xl-2-1024-ms): it resolves by its aliases, plans
``PixArtSigmaPipeline`` with the pipeline's defaults, and each planned run of its components costs what the meta-device
measurement of that component counts (validation/fixtures/pixart-sigma-xl-2-1024-ms, build_fixtures.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import flopcalc

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "validation" / "fixtures" / "pixart-sigma-xl-2-1024-ms"
CARD = "pixart-sigma-xl-2-1024-ms"


def _fixture(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", [CARD, "pixart-sigma", "pixart-sigma-1024"])
def test_card_and_aliases_plan_the_sigma_pipeline_with_its_defaults(name):
    r = flopcalc.estimate(name)
    assert r.model == CARD
    s = r.settings
    # pipeline_pixart_sigma.py: max_sequence_length 300, 20 steps, sample_size 128 x 8 = 1024 px
    assert (s.max_sequence_length, s.steps, s.height, s.width) == (300, 20, 1024, 1024)
    assert r.component("transformer").class_name == "PixArtTransformer2DModel"


@pytest.mark.parametrize("height, width", [(1024, 1024), (768, 1344)])
def test_each_run_costs_what_the_measurement_counts(height, width):
    r = flopcalc.estimate(CARD, height=height, width=width)
    transformer = r.component("transformer")
    assert transformer.shape == {"latent_height": height // 8, "latent_width": width // 8, "text_len": 300}
    assert transformer.runs == 40  # 20 steps x 2 classifier-free-guidance passes
    assert transformer.flops == 40 * _fixture(f"transformer-{height}x{width}")["torch"]["flops"]
    assert transformer.params == _fixture(f"transformer-{height}x{width}")["params"]
    encoder = r.component("text_encoder")
    assert encoder.flops == encoder.runs * _fixture("text_encoder-L300")["torch"]["flops"]
    vae = r.component("vae")
    assert (vae.call, vae.runs) == ("decode", 1)
    assert vae.flops == _fixture(f"vae-decode-{height}x{width}")["torch"]["flops"]
