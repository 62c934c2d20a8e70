"""Kandinsky 2.1 (diffusers ``pipelines/kandinsky``), as diffusers 0.42.1 runs it: the measured fixtures (the card's
MultilingualCLIP, prior and decoder UNet; the diffusers tests' tiny decoders) against flopcalc, the seven plans'
defaults, sizes and refusals, and the plans against the real ``__call__`` on CPU (prior, the three decoders, the
combined text-to-image pipeline)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import flopcalc
from card_support import runs_by_call
from fixture_support import assert_fixture_exact, fixtures_of
from flopcalc.engine.errors import OptionError, ResolutionError
from flopcalc.engine.pipelines import Settings
from flopcalc.flops.estimate import estimate_configs

REPO = Path(__file__).resolve().parent.parent
CARD = REPO / "model_cards" / "kandinsky-2.1"
TINY = REPO / "validation" / "configs" / "kandinsky-2.1-tiny"
INPAINT = REPO / "validation" / "configs" / "kandinsky-2.1-inpaint-tiny"


def _configs(folder: Path, *names: str) -> dict[str, dict]:
    return {p.parent.name: json.loads(p.read_text()) for p in sorted(folder.glob("*/config.json"))
            if not names or p.parent.name in names}


@pytest.mark.parametrize("path", fixtures_of("kandinsky-2.1", "kandinsky-2.1-tiny", "kandinsky-2.1-inpaint-tiny"),
                         ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_fixture_is_exact(path):
    assert_fixture_exact(path)


def test_combined_defaults_prior_then_text_and_decoder():
    """The prior (25 steps × 2 on 1 embedding, CLIP text on the prompt and "", the zero-image embedding), then the
    decoder: MultilingualCLIP on the prompt and the negative prompt, 100 UNet steps × 2 on the 64² latent (10 image
    vectors + 77 text states), one MoVQ decode."""
    r = flopcalc.estimate("kandinsky-2.1")
    s = r.settings
    assert (r.pipeline, s.height, s.steps, s.guidance_scale, r.passes) == ("KandinskyCombinedPipeline", 512, 100, 4.0, 2)
    assert runs_by_call(r) == {"prior_text_encoder.forward": 2, "prior_prior.forward": 50,
                               "prior_image_encoder.forward": 1, "text_encoder.forward": 2, "unet.forward": 200,
                               "movq.decode": 1}
    assert r.component("unet").shape == {"latent_height": 64, "latent_width": 64, "text_len": 77}
    assert r.component("text_encoder").shape == {"seq_len": 77}
    r = flopcalc.estimate("kandinsky-2.1", strength=0.3, steps=20)
    assert r.pipeline == "KandinskyImg2ImgCombinedPipeline" and r.settings.guidance_scale == 4.0
    assert runs_by_call(r)["unet.forward"] == 6 * 2 and runs_by_call(r)["movq.encode"] == 1


def test_decoders_alone_and_their_defaults():
    comps = _configs(CARD, "unet", "movq", "text_encoder")
    r = estimate_configs({"_class_name": "KandinskyPipeline"}, comps, Settings(height=700, width=512))
    assert (r.settings.height, r.settings.width) == (704, 512) and any("rounds the size up" in n for n in r.notes)
    r = estimate_configs({"_class_name": "KandinskyImg2ImgPipeline"}, comps, Settings())
    assert (r.settings.strength, r.settings.guidance_scale) == (0.3, 7.0)
    assert runs_by_call(r) == {"text_encoder.forward": 2, "unet.forward": 60, "movq.encode": 1, "movq.decode": 1}
    with pytest.raises(ResolutionError, match="multiple of 64"):
        estimate_configs({"_class_name": "KandinskyImg2ImgPipeline"}, comps, Settings(height=520, width=520))
    with pytest.raises(OptionError, match="non-square"):
        estimate_configs({"_class_name": "KandinskyImg2ImgPipeline"}, comps, Settings(height=512, width=768))
    r = flopcalc.estimate(str(INPAINT), height=64, width=64)
    assert r.pipeline == "KandinskyInpaintPipeline"
    assert runs_by_call(r) == {"text_encoder.forward": 2, "unet.forward": 200, "movq.encode": 1, "movq.decode": 1}
    with pytest.raises(OptionError, match="--strength does not apply"):
        flopcalc.estimate(str(INPAINT), strength=0.5)
    prior = _configs(CARD, "prior_prior", "prior_text_encoder", "prior_image_encoder")
    prior = {k.removeprefix("prior_"): v for k, v in prior.items()}
    r = estimate_configs({"_class_name": "KandinskyPriorPipeline"}, prior, Settings(negative_prompt=True))
    assert runs_by_call(r) == {"text_encoder.forward": 4, "prior.forward": 25 * 2 * 2}
    with pytest.raises(OptionError, match="no Emb2Emb prior"):
        estimate_configs({"_class_name": "KandinskyPriorPipeline"}, prior, Settings(strength=0.5))
    assert estimate_configs(None, _configs(INPAINT, "unet"), Settings()).pipeline.startswith("KandinskyInpaintPipeline")
    assert estimate_configs(None, _configs(TINY, "unet"), Settings()).pipeline.startswith("KandinskyPipeline")


# --------------------------------------------------------------------------- the real __call__


def _prior_models():
    from diffusers import PriorTransformer
    from transformers import CLIPTextConfig, CLIPTextModelWithProjection, CLIPVisionConfig, CLIPVisionModelWithProjection

    text = CLIPTextConfig(bos_token_id=0, eos_token_id=2, hidden_size=32, projection_dim=32, intermediate_size=37,
                          layer_norm_eps=1e-05, num_attention_heads=4, num_hidden_layers=5, pad_token_id=1,
                          vocab_size=1000)
    vision = CLIPVisionConfig(hidden_size=32, image_size=224, projection_dim=32, intermediate_size=37,
                              num_attention_heads=4, num_channels=3, num_hidden_layers=5, patch_size=14)
    models = {"prior": PriorTransformer(num_attention_heads=2, attention_head_dim=12, embedding_dim=32, num_layers=1),
              "text_encoder": CLIPTextModelWithProjection(text), "image_encoder": CLIPVisionModelWithProjection(vision)}
    configs = {"prior": {**dict(models["prior"].config), "_class_name": "PriorTransformer"},
               "text_encoder": {**text.to_dict(), "architectures": ["CLIPTextModelWithProjection"]},
               "image_encoder": {**vision.to_dict(), "architectures": ["CLIPVisionModelWithProjection"]}}
    return {k: m.eval() for k, m in models.items()}, configs


def _decoder_models(folder: Path):
    from diffusers import UNet2DConditionModel, VQModel
    from diffusers.pipelines.kandinsky.text_encoder import MCLIPConfig, MultilingualCLIP

    configs = _configs(folder, "unet", "movq", "text_encoder")
    te = {k: v for k, v in configs["text_encoder"].items() if k not in ("architectures", "model_type")}
    text = MultilingualCLIP(MCLIPConfig(transformerDimSize=te.pop("transformerDimensions"),
                                        imageDimSize=te.pop("numDims"), **te))
    return {"unet": UNet2DConditionModel.from_config(configs["unet"]).eval(),
            "movq": VQModel.from_config(configs["movq"]).eval(), "text_encoder": text.eval()}, configs


@pytest.mark.parametrize("name", ["KandinskyPriorPipeline", "KandinskyPipeline", "KandinskyImg2ImgPipeline",
                                  "KandinskyInpaintPipeline", "KandinskyCombinedPipeline"])
def test_the_plan_mirrors_the_real_call(name, rng):
    import numpy as np
    import torch
    from PIL import Image
    import diffusers
    from transformers import CLIPImageProcessor
    from live_support import SEED
    from classic_call_support import Recorder, Tokenizer, planned_runs

    torch.manual_seed(0)
    rec = Recorder()
    gen = torch.Generator().manual_seed(SEED % 2**31)
    # UnCLIPScheduler needs 2 steps at least
    batch, guidance, steps = rng.randint(1, 2), rng.choice([1.0, 4.0]), rng.randint(2, 3)
    h, w = 32 * rng.randint(1, 2), 32 * rng.randint(1, 2)
    if name in ("KandinskyImg2ImgPipeline", "KandinskyInpaintPipeline"):  # square: see the plan's refusal
        w = h
    if name == "KandinskyInpaintPipeline":  # one image and mask (the real call takes as many as prompts)
        batch = 1
    configs, call = {}, dict(output_type="np", generator=gen)
    prior_kwargs = {}
    if name in ("KandinskyPriorPipeline", "KandinskyCombinedPipeline"):
        prior, prior_configs = _prior_models()
        prefix = "prior_" if name == "KandinskyCombinedPipeline" else ""
        for key, model in prior.items():
            rec.hook(model, prefix + key)
        configs.update({prefix + k: v for k, v in prior_configs.items()})
        prior_kwargs = dict(prior=prior["prior"], text_encoder=prior["text_encoder"],
                            image_encoder=prior["image_encoder"], tokenizer=Tokenizer(),
                            scheduler=diffusers.UnCLIPScheduler(), image_processor=CLIPImageProcessor())
    if name != "KandinskyPriorPipeline":
        models, decoder_configs = _decoder_models(INPAINT if "Inpaint" in name else TINY)
        configs.update(decoder_configs)
        rec.hook(models["unet"], "unet")
        rec.hook(models["text_encoder"], "text_encoder")
        rec.wrap(models["movq"], "encode", "movq.encode")
        rec.wrap(models["movq"], "decode", "movq.decode")
        decoder_kwargs = dict(tokenizer=Tokenizer(), scheduler=diffusers.DDIMScheduler(), **models)
    settings = dict(steps=steps, guidance_scale=guidance, batch_size=batch)
    if name == "KandinskyPriorPipeline":
        pipe = diffusers.KandinskyPriorPipeline(**prior_kwargs)
        call.update(num_inference_steps=steps, guidance_scale=guidance, output_type="pt")
    elif name == "KandinskyCombinedPipeline":
        pipe = diffusers.KandinskyCombinedPipeline(
            **decoder_kwargs, **{f"prior_{k}": v for k, v in prior_kwargs.items()})
        call.update(num_inference_steps=steps, guidance_scale=guidance, height=h, width=w,
                    prior_num_inference_steps=25)
        settings.update(height=h, width=w)
    else:
        pipe = getattr(diffusers, name)(**decoder_kwargs)
        embeds = torch.zeros(batch, 32)
        call.update(image_embeds=embeds, negative_image_embeds=embeds, num_inference_steps=steps,
                    guidance_scale=guidance, height=h, width=w)
        settings.update(height=h, width=w)
        if name != "KandinskyPipeline":  # one image per prompt
            call["image"] = [Image.fromarray(np.zeros((h, w, 3), dtype=np.uint8))] * batch
        if name == "KandinskyImg2ImgPipeline":
            settings["strength"] = call["strength"] = rng.choice([0.5, 1.0])
        if name == "KandinskyInpaintPipeline":
            call["image"] = call["image"][0]
            call["mask_image"] = np.zeros((h, w), dtype=np.float32)
    pipe.set_progress_bar_config(disable=True)
    with torch.no_grad():
        pipe(prompt=["a prompt"] * batch, **call)
    report = estimate_configs({"_class_name": name}, configs, Settings(**settings))
    planned = planned_runs(report)
    where = f"seed {SEED}: {name} {settings}"
    assert planned == dict(rec.calls), where
    if name != "KandinskyPriorPipeline":
        run = report.component("unet").shape
        assert {s[1:3] for s in rec.shapes["unet"]} == {(run["latent_height"], run["latent_width"])}, where
        assert rec.shapes["text_encoder"] == {(77,)}, where
