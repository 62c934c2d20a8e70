"""IP-Adapter on the SD / SDXL pipelines (``--ip-adapter``), against diffusers 0.42.1: ``encode_image`` runs the
image encoder once (a plain adapter's negative is ``zeros_like``), every UNet call (steps × guidance passes ×
prompts × images) carries the adapter, the variants built on the two plans (img2img, PAG, ControlNet) inherit it,
the layouts fit only their UNet and image encoder, and pipelines without ``ip_adapter_image`` refuse it."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest

import flopcalc
from flopcalc.engine.errors import OptionError
from flopcalc.engine.pipelines.ip_adapter import LAYOUTS, layout_for

REPO = Path(__file__).resolve().parent.parent
SD15 = str(REPO / "validation/configs/sd1.5-ip-adapter")
SDXL = str(REPO / "validation/configs/sdxl-base-ip-adapter")


def _fixture(case: str, name: str) -> dict:
    return json.loads((REPO / "validation/fixtures" / case / name).read_text())


@pytest.mark.parametrize("folder, layout, case, size", [(SD15, "sd15", "sd1.5-ip-adapter", 512),
                                                        (SDXL, "sdxl", "sdxl-base-ip-adapter", 1024)])
def test_defaults_passes_and_image_encoder_once(folder, layout, case, size):
    r = flopcalc.estimate(folder, ip_adapter=layout, batch_size=2, num_images_per_prompt=3)
    encoder, unet = r.component("image_encoder"), r.component("unet")
    # encode_image(image, device, 1, output_hidden_states=False): one call, the negative is zeros
    assert encoder.runs == 1 and encoder.shape == {"height": 224, "width": 224}
    assert unet.runs == 50 * 2 * 2 * 3  # 50 steps × [uncond, cond] × 2 prompts × 3 images: one embedding per row
    assert unet.shape["ip_image_embed_dim"] == LAYOUTS[layout].image_embed_dim
    assert (r.settings.height, r.settings.width) == (size, size)
    # the per-call counts are the measured ones (validation/fixtures/<case>)
    assert 2 * encoder.macs_per_run == _fixture(case, "image_encoder-224x224.json")["torch"]["flops"]
    assert 2 * unet.macs_per_run == _fixture(case, f"unet-{size}x{size}.json")["torch"]["flops"]
    without = flopcalc.estimate(folder, batch_size=2, num_images_per_prompt=3)
    assert [c.component for c in without.components] == ["unet"] and without.component("unet").runs == unet.runs
    assert any("runs only with an image prompt" in n for n in without.notes)
    assert unet.params > without.component("unet").params  # to_k_ip / to_v_ip and the image projection


def test_no_guidance_one_pass():
    r = flopcalc.estimate(SD15, ip_adapter="sd15", guidance_scale=1.0, steps=20)
    assert r.component("unet").runs == 20 and r.component("image_encoder").runs == 1


def test_card_without_image_encoder_is_noted():
    r = flopcalc.estimate("sd1.5", ip_adapter="sd15")
    assert "image_encoder" not in [c.component for c in r.components]
    assert any(n.startswith("image_encoder is absent") for n in r.notes)
    assert r.component("unet").shape["ip_image_embed_dim"] == 1024


@pytest.mark.parametrize("pipeline, card, strength, steps", [
    ("StableDiffusionImg2ImgPipeline", "sd1.5", 0.8, 40),
    ("StableDiffusionXLImg2ImgPipeline", "sdxl-base", 0.3, 15),
    ("StableDiffusionPAGPipeline", "sd1.5", None, 50),
    ("StableDiffusionControlNetPipeline", "sd1.5", None, 50),
    ("StableDiffusionXLInpaintPipeline", "sdxl-base", 0.9999, 49),
])
def test_variants_inherit_the_adapter(pipeline, card, strength, steps):
    from flopcalc.flops.estimate import estimate_configs
    from flopcalc.engine.pipelines import Settings

    folder = REPO / "model_cards" / card
    index = {**json.loads((folder / "model_index.json").read_text()), "_class_name": pipeline}
    unet = json.loads((folder / "unet" / "config.json").read_text())
    if pipeline == "StableDiffusionXLInpaintPipeline":
        unet = {**unet, "in_channels": 9}
    layout = "sd15" if card == "sd1.5" else "sdxl"
    r = estimate_configs(index, {"unet": unet}, Settings.make(ip_adapter=(layout,)))
    rows = [c for c in r.components if c.component == "unet"]
    assert rows and all("ip_image_embed_dim" in c.shape for c in rows)
    assert r.settings.strength == strength
    if "PAG" in pipeline:  # one row per step: the [uncond, cond] pieces and the perturbed row, all with the adapter
        assert [c.runs for c in rows] == [steps] and [p.count for p in rows[0].tree.children] == [2, 1]
    else:
        assert sum(c.runs for c in rows) == steps * 2
    for c in rows:  # every piece of the UNet row (PAG's perturbed row too) has the adapter's image projection
        for piece in (c.tree.children if c.tree.formula == "pieces" else (c.tree,)):
            assert piece.find("encoder_hid_proj.image_projection_layers.0.image_embeds") is not None


def test_layout_must_fit_the_unet_and_encoder():
    with pytest.raises(OptionError, match="cross_attention_dim 2048"):
        flopcalc.estimate(SD15, ip_adapter="sdxl")
    with pytest.raises(OptionError, match="cross_attention_dim 768"):
        flopcalc.estimate("sdxl-base", ip_adapter="sd15")
    with pytest.raises(OptionError, match="1024-wide image embeddings.*gives 1280"):
        flopcalc.estimate(SDXL, ip_adapter="sdxl_vit_h")
    r = flopcalc.estimate("sdxl-base", ip_adapter="sdxl_vit_h")
    assert r.component("unet").shape["ip_image_embed_dim"] == 1024
    assert layout_for(1280, 2048) == "sdxl" and layout_for(1024, 768) == "sd15"


def test_refusals():
    with pytest.raises(OptionError, match="unknown layout 'sd15_faceid'"):
        flopcalc.estimate("sd1.5", ip_adapter="sd15_faceid")
    with pytest.raises(OptionError, match="one IP-Adapter at a time"):
        flopcalc.estimate("sd1.5", ip_adapter=["sd15", "sd15"])
    with pytest.raises(OptionError, match="does not apply to FluxPipeline"):
        flopcalc.estimate("flux-dev", ip_adapter="sd15")
    from flopcalc.flops.estimate import estimate_configs
    from flopcalc.engine.pipelines import Settings

    unet = json.loads((REPO / "model_cards/sd1.5/unet/config.json").read_text())
    with pytest.raises(OptionError, match="does not apply to StableDiffusionAdapterPipeline: its __call__ takes no"):
        estimate_configs({"_class_name": "StableDiffusionAdapterPipeline"}, {"unet": unet},
                         Settings.make(ip_adapter=("sd15",)))


def test_mirrors_diffusers_sources():
    """The plan's premises, read from the installed diffusers: a plain adapter's negative embedding is zeros (no
    second encode), its projection makes 4 tokens, and the SD adapter pipeline takes no ip_adapter_image."""
    pytest.importorskip("diffusers")
    from diffusers import StableDiffusionAdapterPipeline, StableDiffusionPipeline, StableDiffusionXLPipeline
    from diffusers.loaders import unet as loader

    for cls in (StableDiffusionPipeline, StableDiffusionXLPipeline):
        src = inspect.getsource(cls.encode_image)
        assert "uncond_image_embeds = torch.zeros_like(image_embeds)" in src
        assert "ip_adapter_image" in inspect.signature(cls.__call__).parameters
    assert "ip_adapter_image" not in inspect.signature(StableDiffusionAdapterPipeline.__call__).parameters
    src = inspect.getsource(loader.UNet2DConditionLoadersMixin._convert_ip_adapter_image_proj_to_diffusers)
    assert "num_image_text_embeds = 4" in src and "num_image_text_embeds = state_dict[\"latents\"].shape[1]" in src


@pytest.mark.parametrize("guidance, passes", [(7.5, 2), (1.0, 1)])
def test_plus_adapter_encodes_the_zero_image_too(guidance, passes):
    r = flopcalc.estimate(SD15, ip_adapter="sd15_plus", guidance_scale=guidance, steps=10)
    encoder, unet = r.component("image_encoder"), r.component("unet")
    assert encoder.runs == 2  # encode_image(output_hidden_states=True): the image and torch.zeros_like(image)
    assert unet.runs == 10 * passes
    assert unet.shape["ip_resampler"] == (257, 16, 768, 12) and unet.shape["ip_image_embed_dim"] == 1280
    assert 2 * unet.macs_per_run == _fixture("sd1.5-ip-adapter-plus", "unet-512x512.json")["torch"]["flops"]
    xl = flopcalc.estimate("sdxl-base", ip_adapter="sdxl_plus_vit_h").component("unet")
    assert xl.shape["ip_resampler"] == (257, 16, 1280, 20)
    assert 2 * xl.macs_per_run == _fixture("sdxl-base-ip-adapter-plus", "unet-1024x1024.json")["torch"]["flops"]
    with pytest.raises(OptionError, match="reads 1280-wide image embeddings.*gives 1664 \\(hidden_size\\)"):
        flopcalc.estimate(SDXL, ip_adapter="sdxl_plus_vit_h")
    assert layout_for(1280, 768, 768) == "sd15_plus" and layout_for(1280, 2048, 1280) == "sdxl_plus_vit_h"


def test_plus_premises_in_diffusers():
    pytest.importorskip("diffusers")
    from diffusers import StableDiffusionPipeline
    from diffusers.models.embeddings import IPAdapterPlusImageProjection

    src = inspect.getsource(StableDiffusionPipeline.encode_image)
    assert "torch.zeros_like(image), output_hidden_states=True" in src
    defaults = inspect.signature(IPAdapterPlusImageProjection.__init__).parameters
    assert defaults["depth"].default == 4 and defaults["dim_head"].default == 64
