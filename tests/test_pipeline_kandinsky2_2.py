"""Kandinsky 2.2 pipeline semantics, as diffusers' ``pipelines/kandinsky2_2`` runs them (no torch needed):
the prior (``KandinskyV22PriorPipeline``, ``KandinskyV22PriorEmb2EmbPipeline``), the decoders
(``KandinskyV22Pipeline``, ``KandinskyV22Img2ImgPipeline``, ``KandinskyV22InpaintPipeline``,
``KandinskyV22ControlnetPipeline``, ``KandinskyV22ControlnetImg2ImgPipeline``) and the combined pipelines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import flopcalc
from flopcalc.flops.estimate import estimate_configs
from flopcalc.engine.errors import OptionError, ResolutionError
from flopcalc.engine.pipelines import Settings
from card_support import runs_by_call

REPO = Path(__file__).resolve().parent.parent
CARD = REPO / "model_cards" / "kandinsky-2.2"
PRIOR = REPO / "validation" / "configs" / "kandinsky-2.2-prior"
CONTROLNET = REPO / "validation" / "configs" / "kandinsky-2.2-controlnet-tiny"
INPAINT = REPO / "validation" / "configs" / "kandinsky-2.2-inpaint-tiny"


def _configs(folder: Path, names: tuple[str, ...]) -> dict[str, dict]:
    return {n: json.loads((folder / n / "config.json").read_text()) for n in names if (folder / n).is_dir()}


def _decoder(name: str) -> tuple[dict, dict]:
    """The card's decoder components under the index of ``name`` (the decoder repo's own pipelines)."""
    return {"_class_name": name}, _configs(CARD, ("unet", "movq"))


def test_combined_defaults_prior_then_decoder():
    """KandinskyV22CombinedPipeline.__call__: the prior at 25 steps × CFG on 1 embedding, the text encoder
    on the prompt and the empty unconditional prompt, the zero-image embedding (no negative prompt), then
    the decoder at 512², 100 steps × CFG, one MoVQ decode."""
    r = flopcalc.estimate("kandinsky-2.2")
    s = r.settings
    assert r.pipeline == "KandinskyV22CombinedPipeline" and r.passes == 2
    assert (s.height, s.width, s.steps, s.guidance_scale) == (512, 512, 100, 4.0)
    assert runs_by_call(r) == {"prior_text_encoder.forward": 2, "prior_prior.forward": 50, "prior_image_encoder.forward": 1,
                        "unet.forward": 200, "movq.decode": 1}
    assert r.component("unet").shape == {"latent_height": 64, "latent_width": 64, "text_len": 32}
    assert r.component("prior_prior").shape == {"seq_len": 77}
    assert r.component("prior_image_encoder").shape == {"height": 224, "width": 224}
    assert any("prior runs at its defaults" in n for n in r.notes)


def test_ml_energy_v2_settings_25_decoder_steps():
    """ML.ENERGY v2 ran AutoPipelineForText2Image (this combined pipeline) at 25 steps: the decoder's; the
    prior keeps its own 25."""
    r = flopcalc.estimate("kandinsky-2.2", steps=25, batch_size=4)
    assert runs_by_call(r) == {"prior_text_encoder.forward": 8, "prior_prior.forward": 200, "prior_image_encoder.forward": 1,
                        "unet.forward": 200, "movq.decode": 4}


def test_negative_prompt_joins_the_prior_batch_and_no_zero_image():
    """``prompt = prompt + negative_prompt``: the prior runs on both; get_zero_embed is not called; the
    decoder still makes one image per prompt."""
    r = flopcalc.estimate("kandinsky-2.2", negative_prompt=True, num_images_per_prompt=2)
    assert runs_by_call(r) == {"prior_text_encoder.forward": 4, "prior_prior.forward": 25 * 2 * 4,
                        "unet.forward": 100 * 2 * 2, "movq.decode": 2}


def test_size_rounds_up_to_64_and_guidance_one_is_one_pass():
    r = flopcalc.estimate("kandinsky-2.2", height=700, width=1000, guidance_scale=1.0)
    assert (r.settings.height, r.settings.width) == (704, 1024)
    assert r.component("unet").shape["latent_height"] == 88 and r.passes == 1
    assert runs_by_call(r)["unet.forward"] == 100 and runs_by_call(r)["prior_prior.forward"] == 50  # the prior keeps its CFG
    assert any("rounds the size up" in n for n in r.notes)


def test_img2img_combined_floors_the_steps_and_encodes_once():
    r = flopcalc.estimate("kandinsky-2.2", strength=0.3, steps=25)
    assert r.pipeline == "KandinskyV22Img2ImgCombinedPipeline"
    assert runs_by_call(r)["unet.forward"] == int(25 * 0.3) * 2 and runs_by_call(r)["movq.encode"] == 1
    default = estimate_configs({"_class_name": "KandinskyV22Img2ImgCombinedPipeline"},
                               _configs(CARD, ("unet", "movq", "prior_prior", "prior_text_encoder",
                                               "prior_image_encoder")), Settings())
    assert default.settings.strength == 0.3 and runs_by_call(default)["unet.forward"] == 30 * 2
    with pytest.raises(ResolutionError, match="multiple of 64"):
        flopcalc.estimate("kandinsky-2.2", strength=0.5, height=700, width=512)


def test_inpaint_combined_encodes_the_masked_image():
    r = estimate_configs({"_class_name": "KandinskyV22InpaintCombinedPipeline"},
                         _configs(CARD, ("unet", "movq", "prior_prior", "prior_text_encoder", "prior_image_encoder")),
                         Settings(height=768, width=768))
    assert runs_by_call(r) == {"prior_text_encoder.forward": 2, "prior_prior.forward": 50, "prior_image_encoder.forward": 1,
                        "unet.forward": 200, "movq.encode": 1, "movq.decode": 1}
    with pytest.raises(OptionError, match="--strength does not apply"):
        estimate_configs({"_class_name": "KandinskyV22InpaintCombinedPipeline"}, _configs(CARD, ("unet",)),
                         Settings(strength=0.5))


def test_decoder_pipelines_alone():
    index, comps = _decoder("KandinskyV22Pipeline")
    r = estimate_configs(index, comps, Settings())
    assert runs_by_call(r) == {"unet.forward": 200, "movq.decode": 1}
    assert any("come from KandinskyV22PriorPipeline" in n for n in r.notes)
    index, comps = _decoder("KandinskyV22Img2ImgPipeline")
    r = estimate_configs(index, comps, Settings(steps=50, batch_size=2))
    assert runs_by_call(r) == {"unet.forward": 15 * 2 * 2, "movq.encode": 2, "movq.decode": 2}


def test_prior_pipeline_and_emb2emb():
    r = flopcalc.estimate(str(PRIOR))
    assert r.pipeline == "KandinskyV22PriorPipeline"
    assert runs_by_call(r) == {"text_encoder.forward": 2, "prior.forward": 50, "image_encoder.forward": 1}
    e = flopcalc.estimate(str(PRIOR), strength=0.3)
    assert e.pipeline == "KandinskyV22PriorEmb2EmbPipeline"
    assert runs_by_call(e) == {"text_encoder.forward": 2, "prior.forward": 7 * 2, "image_encoder.forward": 2}
    n = flopcalc.estimate(str(PRIOR), negative_prompt=True, guidance_scale=1.0)
    assert runs_by_call(n) == {"text_encoder.forward": 2, "prior.forward": 25 * 2}


def test_inpaint_runs_every_step_on_the_nine_channel_unet():
    r = flopcalc.estimate(str(INPAINT))
    assert r.pipeline == "KandinskyV22InpaintPipeline"
    assert runs_by_call(r) == {"unet.forward": 200}
    assert r.component("unet").shape == {"latent_height": 64, "latent_width": 64, "text_len": 32}
    with pytest.raises(OptionError):
        flopcalc.estimate(str(INPAINT), strength=0.5)
    with pytest.raises(ResolutionError):
        flopcalc.estimate(str(INPAINT), height=520, width=512)


def test_controlnet_counts_the_hint_block_every_step():
    r = flopcalc.estimate(str(CONTROLNET), height=512, width=768)
    assert r.pipeline == "KandinskyV22ControlnetPipeline"
    assert runs_by_call(r) == {"unet.forward": 200, "movq.decode": 1}
    hint = r.component("unet").tree.find("add_embedding.input_hint_block")
    assert hint is not None and hint.per_item.macs("torch") > 0
    i2i = flopcalc.estimate(str(CONTROLNET), strength=0.5, height=512, width=512)
    assert i2i.pipeline == "KandinskyV22ControlnetImg2ImgPipeline"
    assert runs_by_call(i2i) == {"unet.forward": 100, "movq.encode": 1, "movq.decode": 1}


def test_decoder_unet_is_not_planned_as_stable_diffusion():
    r = estimate_configs(None, _configs(CARD, ("unet",)), Settings())
    assert r.pipeline.startswith("KandinskyV22Pipeline")
    r = estimate_configs(None, _configs(INPAINT, ("unet",)), Settings())
    assert r.pipeline.startswith("KandinskyV22InpaintPipeline")


def test_training_counts_the_image_embedding_unet_and_refuses_what_its_graph_does_not_describe(tmp_path):
    """The decoder UNet's forward + backward is measured (validation/fixtures/training/kandinsky-2.2) without
    checkpointing; UNetMidBlock2DSimpleCrossAttn checkpoints none of its resnets and image_hint feeds conv_in
    through trained convolutions: both refused rather than counted wrong."""
    from flopcalc.engine.errors import FlopcalcError
    from flopcalc.training.estimate import train

    folder = tmp_path / "decoder"
    (folder / "unet").mkdir(parents=True)
    (folder / "unet" / "config.json").write_text((CARD / "unet" / "config.json").read_text())
    (folder / "model_index.json").write_text(json.dumps({"_class_name": "KandinskyV22Pipeline",
                                                         "unet": ["diffusers", "UNet2DConditionModel"]}))
    assert train(str(folder), height=256, width=256).trained.backward_macs > 0
    with pytest.raises(FlopcalcError, match="UNetMidBlock2DSimpleCrossAttn"):
        train(str(folder), height=256, width=256, gradient_checkpointing=True)
    with pytest.raises(FlopcalcError, match="image_hint"):
        train(str(CONTROLNET), height=256, width=256)
