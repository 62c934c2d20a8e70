"""SanaControlNetPipeline (diffusers ``pipelines/sana/pipeline_sana_controlnet.py``): SanaPipeline plus the
``SanaControlNetModel`` row (every step on the CFG batch) and the control image's DC-AE encode (repeated per
image, doubled under CFG). No torch needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import flopcalc
from flopcalc.flops.estimate import estimate_configs
from flopcalc.engine.errors import OptionError
from flopcalc.engine.pipelines import Settings

from card_support import Card, runs_by_call

REPO = Path(__file__).resolve().parent.parent
CONTROLNET = json.loads((REPO / "validation/configs/sana-controlnet-hed-1.6b/config.json").read_text())
SANA = Card("sana-1.6b-512")


def _pipeline(**settings):
    components = {**SANA.components(), "controlnet": CONTROLNET,
                  "transformer": dict(SANA.config("transformer"), sample_size=32)}  # the 1024px SANA 1.6B
    return estimate_configs({**SANA.index(), "_class_name": "SanaControlNetPipeline"}, components,
                            Settings.make(**settings))


def test_defaults_controlnet_every_step_on_the_cfg_batch():
    r = _pipeline()
    assert r.pipeline == "SanaControlNetPipeline"
    assert (r.settings.height, r.settings.width, r.settings.steps, r.passes) == (1024, 1024, 20, 2)
    assert runs_by_call(r) == {"text_encoder.forward": 2, "controlnet.forward": 40, "transformer.forward": 40,
                        "vae.encode": 2, "vae.decode": 1}
    assert r.component("controlnet").shape == r.component("transformer").shape


def test_control_image_encodes_follow_images_and_guidance():
    r = _pipeline(batch_size=2, num_images_per_prompt=3, guidance_scale=1.0, steps=4)
    assert runs_by_call(r) == {"text_encoder.forward": 2, "controlnet.forward": 24, "transformer.forward": 24,
                        "vae.encode": 6, "vae.decode": 6}


def test_controlnet_is_seven_sana_blocks_and_their_projections():
    """Its blocks are the transformer's (no q/k norms); plus the second patch embedding, input_block and
    one D × D controlnet_block per block, on N tokens."""
    r = _pipeline()
    net, transformer = r.component("controlnet"), r.component("transformer")
    block = transformer.tree.find("transformer_blocks.0").per_item.macs("torch")
    n, d = 32 * 32, 2240
    patch = 32 * d * n
    assert net.macs_per_run == 7 * block + 2 * patch + 8 * n * d * d + (256 * d + d * d + d * 6 * d) \
        + (2304 * d + d * d) * 300


def test_strength_is_refused_and_a_bare_controlnet_runs_under_its_pipeline():
    with pytest.raises(OptionError, match="--strength does not apply to SanaControlNetPipeline"):
        _pipeline(strength=0.5)
    r = flopcalc.estimate(str(REPO / "validation/configs/sana-controlnet-hed-1.6b"), resolution_binning=False)
    assert r.pipeline == "SanaControlNetPipeline (denoiser only)"
