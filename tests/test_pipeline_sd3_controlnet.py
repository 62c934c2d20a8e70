"""SD3 ControlNet pipelines (``StableDiffusion3ControlNetPipeline``, ``StableDiffusion3ControlNetInpaintingPipeline``),
hand-checked against diffusers 0.42.1's ``__call__``. No torch needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from card_support import Card

import flopcalc
from flopcalc.engine.errors import OptionError
from flopcalc.engine.pipelines import Settings
from flopcalc.engine.pipelines.dispatch import plan

REPO = Path(__file__).resolve().parent.parent
SD3 = Card("sd3-medium")
CN, INPAINT = "StableDiffusion3ControlNetPipeline", "StableDiffusion3ControlNetInpaintingPipeline"


def _controlnet(case: str) -> dict:
    return json.loads((REPO / "validation" / "configs" / case / "controlnet" / "config.json").read_text())


def _plan(pipeline: str, case: str, **settings):
    comps = {**SD3.components(), "controlnet": _controlnet(case)}
    return plan({**SD3.index(), "_class_name": pipeline}, comps, Settings(**settings))


def _runs(p) -> dict[str, int]:
    return {f"{r.component}.{r.call}": r.runs for r in p.runs}


def test_controlnet_pipeline_defaults():
    p = _plan(CN, "sd3-controlnet")
    s = p.settings
    assert (s.height, s.width, s.steps, s.guidance_scale, s.max_sequence_length) == (1024, 1024, 28, 7.0, 256)
    # the ControlNet on the doubled CFG batch every step; the control image repeated for CFG, then encoded
    assert _runs(p) == {"text_encoder.forward": 2, "text_encoder_2.forward": 2, "text_encoder_3.forward": 2,
                        "vae.encode": 2, "controlnet.forward": 56, "transformer.forward": 56, "vae.decode": 1}
    cn = next(r for r in p.runs if r.component == "controlnet")
    assert (cn.role, cn.shape.latent_height, cn.shape.latent_width, cn.shape.text_len) == ("controlnet", 128, 128, 333)
    enc = next(r for r in p.runs if r.call == "encode")
    assert (enc.shape.height, enc.shape.width) == (1024, 1024)


def test_inpainting_pipeline_encodes_the_masked_image_once_per_image():
    p = _plan(INPAINT, "sd3-controlnet-inpainting", batch_size=2, num_images_per_prompt=3, steps=10,
              max_sequence_length=77, height=768, width=1344)
    assert _runs(p) == {"text_encoder.forward": 4, "text_encoder_2.forward": 4, "text_encoder_3.forward": 4,
                        "vae.encode": 6, "controlnet.forward": 10 * 2 * 6, "transformer.forward": 10 * 2 * 6,
                        "vae.decode": 6}
    assert next(r for r in p.runs if r.component == "controlnet").shape.text_len == 77 + 77


def test_without_cfg_one_pass_and_one_encode_per_image():
    p = _plan(CN, "sd3-controlnet", guidance_scale=1.0, batch_size=2)
    assert _runs(p)["controlnet.forward"] == 28 * 2 and _runs(p)["vae.encode"] == 2


def test_strength_and_tiling_are_refused():
    with pytest.raises(OptionError, match="takes no strength"):
        _plan(CN, "sd3-controlnet", strength=0.5)
    with pytest.raises(OptionError, match="--vae-tiling"):
        _plan(INPAINT, "sd3-controlnet-inpainting", vae_tiling=True)


def test_estimate_equals_the_fixture():
    r = flopcalc.estimate(str(REPO / "validation" / "configs" / "sd3-controlnet"), height=768, width=1344)
    fx = json.loads((REPO / "validation" / "fixtures" / "sd3-controlnet" / "controlnet-768x1344.json").read_text())
    assert r.pipeline == CN and r.component("controlnet").runs == 56
    assert 2 * r.component("controlnet").macs_per_run == fx["torch"]["flops"]
    assert r.component("controlnet").params == fx["params"]


def test_sd35_large_controlnet_runs_without_text_and_with_the_grafted_pos_embed():
    # diffusers' scripts/convert_sd3_controlnet_to_diffusers.py: no pos_embed (the transformer's is grafted on),
    # no context embedder, 19 single blocks on the image tokens
    folder = REPO / "validation" / "configs" / "sd35-large-controlnet"
    r = flopcalc.estimate(str(folder), height=768, width=1344)
    fx = json.loads((REPO / "validation" / "fixtures" / "sd35-large-controlnet" / "controlnet-768x1344.json").read_text())
    cn = r.component("controlnet")
    assert 2 * cn.macs_per_run == fx["torch"]["flops"] and cn.params == fx["params"]
    assert cn.tree.find("context_embedder") is None and cn.tree.find("pos_embed.proj") is not None
    # the text length does not change its work
    short = flopcalc.estimate(str(folder), height=768, width=1344, max_sequence_length=77)
    assert short.component("controlnet").macs_per_run == cn.macs_per_run


def test_the_law_matches_the_exact_count():
    from flopcalc.flops.symbolic import symbolic_estimate

    law = symbolic_estimate(str(REPO / "validation" / "configs" / "sd3-controlnet"))
    exact = flopcalc.estimate(str(REPO / "validation" / "configs" / "sd3-controlnet"), height=768, width=512,
                              steps=20, batch_size=2)
    assert law.at(H=768, W=512, S=20, B=2, P=2, L=256) == exact.flops
