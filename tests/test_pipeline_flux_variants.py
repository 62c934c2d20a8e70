"""FLUX.1 variant pipelines against diffusers 0.42.1's ``__call__`` (``pipelines/flux``), read by
hand: defaults, steps run, guidance passes, text lengths, latent geometry, the VAE encodes, and the
tokens or channels the conditioning adds. No torch needed (one check reads diffusers' own table
when diffusers is installed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import flopcalc
from flopcalc.flops.estimate import estimate_configs
from flopcalc.engine.errors import OptionError, ResolutionError
from flopcalc.engine.pipelines import Settings
from flopcalc.engine.pipelines.flux_kontext import PREFERRED_KONTEXT_RESOLUTIONS, max_area_size, preferred_resolution
from flopcalc.engine.sources import resolve
from card_support import runs_by_call


def _as(card: str, pipeline: str, **settings):
    """``card``'s configs run under another pipeline class (the siblings without a bundled card)."""
    source = resolve(card)
    return estimate_configs({**source.model_index, "_class_name": pipeline},
                            {k: dict(v) for k, v in source.components.items()}, Settings(**settings))


# --------------------------------------------------------------------------- Kontext


def test_kontext_defaults():
    r = flopcalc.estimate("flux-kontext-dev")
    s = r.settings
    assert (s.height, s.width, s.steps, s.guidance_scale, s.max_sequence_length) == (1024, 1024, 28, 3.5, 512)
    assert r.pipeline == "FluxKontextPipeline" and r.passes == 1
    assert runs_by_call(r) == {"text_encoder.forward": 1, "text_encoder_2.forward": 1, "vae.encode": 1,
                        "transformer.forward": 28, "vae.decode": 1}
    # 64×64 packed tokens generated + 64×64 of the 1024² input image, in one sequence
    assert r.component("transformer").shape == {"latent_height": 128, "latent_width": 128, "text_len": 512,
                                                "reference_tokens": 64 * 64}
    assert r.component("vae", "encode").shape == {"height": 1024, "width": 1024}
    assert r.component("text_encoder").shape == {"seq_len": 77}


def test_kontext_output_at_max_area_and_reference_at_preferred_resolution():
    # 768×1344 (aspect 1.75): width round(√(2²⁰·1.75)) = 1355 → 1344, height round(774.1) = 774 → 768;
    # nearest preferred: 1328/800 = 1.66 (off 0.09) beats 1392/752 = 1.851 (off 0.101).
    r = flopcalc.estimate("flux-kontext-dev", height=768, width=1344)
    assert (r.settings.height, r.settings.width) == (768, 1344)
    assert r.component("transformer").shape["reference_tokens"] == (800 // 16) * (1328 // 16)
    assert r.component("vae", "encode").shape == {"height": 800, "width": 1328}
    # 512² asks for a square: generated at 1024² all the same
    small = flopcalc.estimate("flux-kontext-dev", height=512, width=512)
    assert (small.settings.height, small.settings.width) == (1024, 1024)
    assert small.flops == flopcalc.estimate("flux-kontext-dev").flops
    # 1:2: width round(1448.2) → 1440, height round(724.1) → 720; reference 1456×720 (2.022)
    assert max_area_size(512, 1024, 16) == (720, 1440)
    assert preferred_resolution(512, 1024, 16) == (720, 1456)


def test_kontext_resizes_any_asked_size():
    # diffusers resizes whatever is asked: 1000×1000 is generated at 1024², the reference at 1024²
    r = flopcalc.estimate("flux-kontext-dev", height=1000, width=1000)
    assert (r.settings.height, r.settings.width) == (1024, 1024)
    assert r.flops == flopcalc.estimate("flux-kontext-dev").flops
    with pytest.raises(ResolutionError, match="multiple of 16"):
        flopcalc.estimate("flux-kontext-dev", height=1000, width=1000, resolution_binning=False)


def test_kontext_without_binning_uses_the_sizes_as_given():
    r = flopcalc.estimate("flux-kontext-dev", height=512, width=768, resolution_binning=False)
    assert (r.settings.height, r.settings.width) == (512, 768)
    assert r.component("transformer").shape["reference_tokens"] == 32 * 48
    assert r.component("vae", "encode").shape == {"height": 512, "width": 768}


def test_kontext_transformer_runs_on_both_latents():
    """At equal sizes the transformer's work is the FLUX.1-dev transformer's at twice the tokens."""
    kontext = flopcalc.estimate("flux-kontext-dev", height=1024, width=1024).component("transformer")
    twice = flopcalc.estimate("flux-dev", height=1024, width=2048).component("transformer")
    assert kontext.macs_per_run == twice.macs_per_run


def test_kontext_true_cfg_and_batches():
    r = flopcalc.estimate("flux-kontext-dev", true_cfg_scale=4.0, negative_prompt=True, batch_size=2,
                          num_images_per_prompt=3)
    assert r.passes == 2
    # prompts and negatives encoded; one input image per prompt encoded, then repeated per image
    assert runs_by_call(r) == {"text_encoder.forward": 4, "text_encoder_2.forward": 4, "vae.encode": 2,
                        "transformer.forward": 28 * 2 * 6, "vae.decode": 6}


def test_kontext_strength():
    assert flopcalc.estimate("flux-kontext-dev", strength=1.0).flops == flopcalc.estimate("flux-kontext-dev").flops
    with pytest.raises(OptionError, match="FluxKontextPipeline"):
        flopcalc.estimate("flux-kontext-dev", strength=0.5)


def test_kontext_table_is_diffusers_own():
    kontext = pytest.importorskip("diffusers.pipelines.flux.pipeline_flux_kontext")
    assert tuple(kontext.PREFERRED_KONTEXT_RESOLUTIONS) == PREFERRED_KONTEXT_RESOLUTIONS


def test_kontext_inpaint():
    # the image resized to its preferred resolution, and the output with it (max_area overwritten)
    r = _as("flux-kontext-dev", "FluxKontextInpaintPipeline", height=768, width=1344, batch_size=2)
    assert (r.settings.height, r.settings.width, r.settings.steps, r.settings.strength) == (800, 1328, 28, 1.0)
    assert runs_by_call(r) == {"text_encoder.forward": 2, "text_encoder_2.forward": 2, "vae.encode": 4,
                        "transformer.forward": 56, "vae.decode": 2}
    assert r.component("vae", "encode").shape == {"height": 800, "width": 1328}
    assert r.component("transformer").shape == {"latent_height": 100, "latent_width": 166, "text_len": 512,
                                                "reference_tokens": 50 * 83}
    half = _as("flux-kontext-dev", "FluxKontextInpaintPipeline", strength=0.5)
    assert half.component("transformer").runs == 14  # get_timesteps: 28 − int(28 − 14)


# --------------------------------------------------------------------------- Fill and inpainting


def test_fill_defaults_and_encodes():
    r = flopcalc.estimate("flux-fill-dev", batch_size=2, num_images_per_prompt=2)
    s = r.settings
    assert (s.height, s.width, s.steps, s.guidance_scale, s.strength) == (1024, 1024, 50, 30.0, 1.0)
    assert r.passes == 1
    # the image and the masked image, each encoded once per input image
    assert runs_by_call(r) == {"text_encoder.forward": 2, "text_encoder_2.forward": 2, "vae.encode": 4,
                        "transformer.forward": 50 * 4, "vae.decode": 4}
    assert r.component("transformer").shape == {"latent_height": 128, "latent_width": 128, "text_len": 512}
    x = r.component("transformer").tree.find("x_embedder")
    assert x.total.linear == 64 * 64 * 384 * 3072  # 4096 tokens × in_channels 384 → 3072


def test_fill_strength_negative_prompt_and_true_cfg():
    r = flopcalc.estimate("flux-fill-dev", strength=0.5, negative_prompt=True)
    assert r.component("transformer").runs == 25  # get_timesteps: 50 − int(50 − 25)
    assert r.passes == 1 and r.component("text_encoder").runs == 1
    assert any("takes no negative prompt" in n for n in r.notes)
    with pytest.raises(OptionError, match="--true-cfg-scale does not apply to FluxFillPipeline"):
        flopcalc.estimate("flux-fill-dev", true_cfg_scale=4.0)


def test_inpaint_defaults():
    r = _as("flux-dev", "FluxInpaintPipeline")
    s = r.settings
    assert (s.steps, s.guidance_scale, s.strength) == (28, 7.0, 0.6)
    # get_timesteps: 28 − int(28 − 16.8) = 17 steps; image and masked image encoded
    assert runs_by_call(r) == {"text_encoder.forward": 1, "text_encoder_2.forward": 1, "vae.encode": 2,
                        "transformer.forward": 17, "vae.decode": 1}
    cfg = _as("flux-dev", "FluxInpaintPipeline", true_cfg_scale=2.0, negative_prompt=True, strength=1.0)
    assert cfg.passes == 2 and cfg.component("transformer").runs == 56 and cfg.component("text_encoder").runs == 2


# --------------------------------------------------------------------------- Control


def test_control_defaults_and_encodes():
    r = flopcalc.estimate("flux-depth-dev", batch_size=2, num_images_per_prompt=3)
    s = r.settings
    assert (s.height, s.width, s.steps, s.guidance_scale, s.strength) == (1024, 1024, 28, 3.5, None)
    # prepare_image repeats the control image to all 6 images before vae.encode
    assert runs_by_call(r) == {"text_encoder.forward": 2, "text_encoder_2.forward": 2, "vae.encode": 6,
                        "transformer.forward": 28 * 6, "vae.decode": 6}
    x = r.component("transformer").tree.find("x_embedder")
    assert x.total.linear == 64 * 64 * 128 * 3072
    with pytest.raises(OptionError, match="FluxControlImg2ImgPipeline takes one"):
        flopcalc.estimate("flux-depth-dev", strength=0.5)
    with pytest.raises(OptionError, match="--true-cfg-scale does not apply to FluxControlPipeline"):
        flopcalc.estimate("flux-depth-dev", true_cfg_scale=2.0)


def test_control_img2img():
    r = _as("flux-depth-dev", "FluxControlImg2ImgPipeline", num_images_per_prompt=2)
    s = r.settings
    assert (s.steps, s.guidance_scale, s.strength) == (28, 7.0, 0.6)
    # 2 control images (repeated before encoding) + 1 input image
    assert runs_by_call(r) == {"text_encoder.forward": 1, "text_encoder_2.forward": 1, "vae.encode": 3,
                        "transformer.forward": 17 * 2, "vae.decode": 2}


def test_control_inpaint():
    r = _as("flux-depth-dev", "FluxControlInpaintPipeline", batch_size=2)
    assert (r.settings.steps, r.settings.guidance_scale, r.settings.strength) == (28, 7.0, 0.6)
    # 2 control images + 2 × (image, masked image)
    assert runs_by_call(r) == {"text_encoder.forward": 2, "text_encoder_2.forward": 2, "vae.encode": 6,
                        "transformer.forward": 17 * 2, "vae.decode": 2}


# --------------------------------------------------------------------------- ControlNet

CONFIGS = Path(__file__).resolve().parent.parent / "validation/configs"


def _controlnet_pipeline(net: str, pipeline: str = "FluxControlNetPipeline", **settings):
    """FLUX.1-dev's components with a ControlNet from validation/configs, as ``pipeline``."""
    source = resolve("flux-dev")
    components = {k: dict(v) for k, v in source.components.items()}
    components["controlnet"] = json.loads((CONFIGS / net / "config.json").read_text())
    return estimate_configs({**source.model_index, "_class_name": pipeline}, components, Settings(**settings))


def test_controlnet_runs_once_per_step_and_image():
    r = _controlnet_pipeline("flux-controlnet-union", true_cfg_scale=3.0, negative_prompt=True, num_images_per_prompt=2)
    s = r.settings
    assert (s.height, s.width, s.steps, s.guidance_scale) == (1024, 1024, 28, 7.0)
    assert r.passes == 2
    # the negative pass reuses the ControlNet's residuals; the control image is encoded per image
    assert runs_by_call(r) == {"text_encoder.forward": 2, "text_encoder_2.forward": 2, "vae.encode": 2,
                        "controlnet.forward": 28 * 2, "transformer.forward": 28 * 2 * 2, "vae.decode": 2}
    assert r.component("controlnet").shape == {"latent_height": 128, "latent_width": 128, "text_len": 512}
    assert any("ControlNet-Union" in n for n in r.notes)
    with pytest.raises(OptionError, match="FluxControlNetPipeline"):
        _controlnet_pipeline("flux-controlnet-union", strength=0.5)


def test_controlnet_union_mode_token_and_blocks():
    net = flopcalc.estimate(str(CONFIGS / "flux-controlnet-union"), max_sequence_length=100).component("model")
    tree = net.tree
    # 5 dual-stream blocks on 4096 image + (100 + 1 mode) text tokens; 10 residual linears each side
    assert tree.find("transformer_blocks").count == 1 and tree.find("transformer_blocks.0-4").count == 5
    assert tree.find("context_embedder").total.linear == 100 * 4096 * 3072
    assert tree.find("controlnet_blocks.0-4").total.linear == 5 * 4096 * 3072 * 3072
    assert tree.find("controlnet_single_blocks.0-9").total.linear == 10 * 4096 * 3072 * 3072
    plain = {**json.loads((CONFIGS / "flux-controlnet-union" / "config.json").read_text()), "num_mode": None}
    without = estimate_configs(None, {"controlnet": plain}, Settings(max_sequence_length=101)).component("controlnet")
    # the mode token costs what one more text token costs everywhere but context_embedder
    assert net.macs_per_run - without.macs_per_run == -(1 * 4096 * 3072)


def test_xlabs_controlnet_reads_pixels():
    r = _controlnet_pipeline("flux-controlnet-xlabs", height=768, width=1344)
    assert "vae.encode" not in runs_by_call(r)
    assert r.component("controlnet").shape == {"latent_height": 96, "latent_width": 168, "text_len": 512,
                                               "height": 768, "width": 1344}
    hint = r.component("controlnet").tree.find("input_hint_block")
    # conv_in 3→16 at 768×1344, then 16→16 pairs down to 96×168, conv_out 16→16
    assert hint.find("conv_in").total.conv == 768 * 1344 * 16 * 3 * 9
    assert hint.find("conv_out").total.conv == 96 * 168 * 16 * 16 * 9


@pytest.mark.parametrize("net", ["flux-controlnet-union", "flux-controlnet-xlabs"])
def test_controlnet_law_equals_estimate(net):
    sympy = pytest.importorskip("sympy")  # noqa: F841
    from flopcalc.flops.symbolic import symbolic_estimate

    law = symbolic_estimate(str(CONFIGS / net))
    for h, w, steps, t in ((512, 768, 20, 77), (1024, 1344, 28, 512), (256, 2048, 3, 1)):
        exact = flopcalc.estimate(str(CONFIGS / net), height=h, width=w, steps=steps, max_sequence_length=t).flops
        assert law.at(H=h, W=w, S=steps, B=1, P=1, L=t) == exact


def test_controlnet_img2img_and_inpaint():
    r = _controlnet_pipeline("flux-controlnet-union", "FluxControlNetImg2ImgPipeline", num_images_per_prompt=2,
                             negative_prompt=True)
    s = r.settings
    assert (s.steps, s.guidance_scale, s.strength, s.true_cfg_scale) == (28, 7.0, 0.6, None)
    # 17 kept steps (28 − int(11.2)); 2 control images + 1 input image encoded; no negative pass
    assert runs_by_call(r) == {"text_encoder.forward": 1, "text_encoder_2.forward": 1, "vae.encode": 3,
                        "controlnet.forward": 17 * 2, "transformer.forward": 17 * 2, "vae.decode": 2}
    assert any("takes no negative prompt" in n for n in r.notes)
    inpaint = _controlnet_pipeline("flux-controlnet-xlabs", "FluxControlNetInpaintPipeline", strength=1.0)
    # the XLabs net reads pixels: only the image and the masked image are encoded
    assert runs_by_call(inpaint) == {"text_encoder.forward": 1, "text_encoder_2.forward": 1, "vae.encode": 2,
                              "controlnet.forward": 28, "transformer.forward": 28, "vae.decode": 1}
    with pytest.raises(OptionError, match="--true-cfg-scale does not apply to FluxControlNetInpaintPipeline"):
        _controlnet_pipeline("flux-controlnet-union", "FluxControlNetInpaintPipeline", true_cfg_scale=2.0)
