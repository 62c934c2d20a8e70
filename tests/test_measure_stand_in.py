"""``estimate --measure`` counts a component of a planned pipeline whose class has no formula, planned and fed as
the class the pipeline expects there (issue 24.2, :mod:`flopcalc.engine.measure.stand_in`); ``flopcalc coverage``
calls measurable only what it counts, and the refusal without ``--measure`` advertises it only there."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("diffusers")

from flopcalc.engine.errors import MeasureError, UnknownArchitectureError  # noqa: E402
from flopcalc.engine.measure import harness  # noqa: E402
from flopcalc.engine.measure.stand_in import (  # noqa: E402
    builder_classes,
    expected_class,
    measurable_in_slot,
    why_not,
)
from flopcalc.flops.coverage import coverage, measurable_classes  # noqa: E402
from flopcalc.flops.estimate import estimate  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
TAESD = REPO / "validation/configs/sd2.1-base-taesd"


def test_a_tiny_vae_is_planned_as_the_autoencoder_kl_and_measured():
    r = estimate(str(TAESD), measure=True)
    vae = r.component("vae")
    assert (vae.class_name, vae.call, vae.method, vae.shape) == ("AutoencoderTiny", "decode", "measured",
                                                                 {"latent_height": 64, "latent_width": 64})
    model = harness.build_model(TAESD / "vae")
    fx = harness.measure_model(model, {"x": harness.TensorSpec((1, 4, 64, 64))}, call="decode", with_thop=False)
    assert 2 * vae.macs_per_run == fx["torch"]["flops"]
    assert vae.params == fx["params"]
    # the rest of the pipeline is the sd2.1-base card's, counted by formula
    card = estimate("sd2.1-base")
    assert r.component("unet").macs_per_run == card.component("unet").macs_per_run
    assert any("fed as the AutoencoderKL StableDiffusionPipeline expects there" in n for n in r.notes)


def test_without_measure_the_refusal_advertises_it_in_one_line():
    with pytest.raises(UnknownArchitectureError) as err:
        estimate(str(TAESD))
    text = str(err.value)
    assert "AutoencoderTiny" in text and "--measure" in text and "\n" not in text


def test_classes_it_would_refuse_are_not_advertised():
    # a class from a pipeline's own module (no model builder), and one whose call cannot run on meta
    assert expected_class("LTX2Pipeline", "vocoder") == "LTX2Vocoder"
    assert "not export" in why_not("LTX2Pipeline", "vocoder", "LTX2VocoderWithBWE")
    assert "meta" in why_not("LTX2Pipeline", "text_encoder", "Gemma4UnifiedForConditionalGeneration")
    assert not measurable_in_slot("LTX2Pipeline", "vocoder", "LTX2VocoderWithBWE")
    assert measurable_in_slot("StableDiffusionPipeline", "vae", "AutoencoderTiny")


def test_a_vae_the_pipeline_branches_on_is_refused(tmp_path):
    folder = tmp_path / "inpaint"
    shutil.copytree(REPO / "model_cards/sd2-inpainting", folder)
    vae = json.loads((folder / "vae/config.json").read_text())
    (folder / "vae/config.json").write_text(json.dumps({**vae, "_class_name": "AsymmetricAutoencoderKL"}))
    with pytest.raises(MeasureError, match="branches on the class of its vae") as err:
        estimate(str(folder), measure=True)
    assert "\n" not in str(err.value)


def test_coverage_calls_measurable_only_what_is_counted():
    """Beyond the classes with an input builder, the measurable ones are those checked here end to end; a class
    added to that set needs a test like the tiny VAE's above."""
    assert measurable_classes() - builder_classes() == {"AutoencoderTiny"}
    status = {c.name: c.status for c in coverage().models}
    assert status["AutoencoderTiny"] == "measurable"
    assert status["LTX2VocoderWithBWE"] == "missing"
    assert status["Gemma4UnifiedForConditionalGeneration"] == "missing"


def test_a_key_the_plan_reads_that_the_real_config_lacks_is_refused_not_defaulted():
    from flopcalc.engine.measure.stand_in import StandIn, plan_view

    config = json.loads((TAESD / "vae/config.json").read_text())  # as written: no block_out_channels registered
    view = plan_view(StandIn("vae", "StableDiffusionPipeline", "AutoencoderTiny", "AutoencoderKL", config))
    assert view["latent_channels"] == 4 and view["_class_name"] == "AutoencoderKL"
    with pytest.raises(MeasureError, match="reads 'block_out_channels' of the AutoencoderKL.*has no such key") as err:
        view["block_out_channels"]
    assert "\n" not in str(err.value) and len(str(err.value)) <= 300
