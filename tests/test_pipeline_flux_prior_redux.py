"""FLUX.1 Redux prior (``FluxPriorReduxPipeline``), hand-checked against diffusers 0.42.1's ``__call__``. No torch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from card_support import Card

import flopcalc
from flopcalc.engine.errors import FlopcalcError, OptionError
from flopcalc.engine.pipelines import Settings
from flopcalc.engine.pipelines.dispatch import plan

REPO = Path(__file__).resolve().parent.parent
FOLDER = REPO / "validation" / "configs" / "flux1-redux-dev"


def _config(name: str) -> dict:
    return json.loads((FOLDER / name / "config.json").read_text())


def _runs(p) -> dict[str, int]:
    return {f"{r.component}.{r.call}": r.runs for r in p.runs}


def test_redux_dev_runs_each_image_once_and_no_text_encoder():
    r = flopcalc.estimate(str(FOLDER), batch_size=2)
    assert r.pipeline == "FluxPriorReduxPipeline"
    assert {f"{c.component}.{c.call}": c.runs for c in r.components} == {"image_encoder.forward": 2,
                                                                           "image_embedder.forward": 2}
    assert r.component("image_encoder").shape == {"seq_len": 729, "height": 384, "width": 384}
    assert r.component("image_embedder").shape == {"seq_len": 729}
    assert any("512 + 729 = 1241 text tokens" in n for n in r.notes)
    fx = json.loads((REPO / "validation" / "fixtures" / "flux1-redux-dev" / "image_embedder-L729.json").read_text())
    assert 2 * r.component("image_embedder").macs_per_run == fx["torch"]["flops"]


def test_with_text_encoders_the_prompt_is_encoded_too():
    flux = Card("flux-dev")
    comps = {"image_encoder": _config("image_encoder"), "image_embedder": _config("image_embedder"),
             "text_encoder": flux.config("text_encoder"), "text_encoder_2": flux.config("text_encoder_2")}
    p = plan({"_class_name": "FluxPriorReduxPipeline"}, comps, Settings(batch_size=3))
    assert _runs(p) == {"text_encoder.forward": 3, "text_encoder_2.forward": 3, "image_encoder.forward": 3,
                        "image_embedder.forward": 3}
    assert {r.component: r.shape.seq_len for r in p.runs if r.role == "text_encoder"} == {
        "text_encoder": 77, "text_encoder_2": 512}


@pytest.mark.parametrize("option", [{"height": 512}, {"steps": 10}, {"guidance_scale": 2.0}, {"strength": 0.5},
                                    {"num_images_per_prompt": 2}])
def test_generation_options_are_refused(option):
    with pytest.raises(OptionError, match="does not apply to FluxPriorReduxPipeline"):
        flopcalc.estimate(str(FOLDER), **option)
    with pytest.raises(OptionError, match="--max-sequence-length does not apply"):
        flopcalc.estimate(str(FOLDER), max_sequence_length=256)


def test_an_embedder_alone_is_refused_with_a_clear_line():
    with pytest.raises(FlopcalcError, match="runs inside its pipeline"):
        flopcalc.estimate(str(FOLDER / "image_embedder" / "config.json"))


WITH_FLUX = REPO / "validation" / "configs" / "flux1-redux-dev-with-flux"


def test_a_folder_with_the_flux_transformer_plans_the_flux_run_on_1241_text_tokens():
    r = flopcalc.estimate(str(WITH_FLUX), batch_size=2, num_images_per_prompt=2)
    s = r.settings
    assert (s.height, s.width, s.steps, s.guidance_scale) == (1024, 1024, 28, 3.5)
    # the prior on 2 images; their embeddings summed into one prompt; FLUX on 1 prompt × 2 images, 1 pass
    assert {f"{c.component}.{c.call}": c.runs for c in r.components} == {
        "image_encoder.forward": 2, "image_embedder.forward": 2, "transformer.forward": 28 * 2, "vae.decode": 2}
    assert r.component("transformer").shape["text_len"] == 512 + 729
    fx = json.loads((REPO / "validation" / "fixtures" / "flux1-redux-dev-with-flux" /
                     "transformer-1024x1024.json").read_text())
    assert 2 * r.component("transformer").macs_per_run == fx["torch"]["flops"]
    with pytest.raises(OptionError, match="--strength does not apply"):
        flopcalc.estimate(str(WITH_FLUX), strength=0.5)


def test_the_law_of_the_prior_and_flux_run():
    from flopcalc.flops.symbolic import symbolic_estimate

    law = symbolic_estimate(str(WITH_FLUX))
    exact = flopcalc.estimate(str(WITH_FLUX), height=768, width=512, steps=20, batch_size=3)
    assert law.at(H=768, W=512, S=20, B=3, P=1) == exact.flops
