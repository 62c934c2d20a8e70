"""QwenImageInpaintPipeline (diffusers ``pipelines/qwenimage/pipeline_qwenimage_inpaint.py``): the
text-to-image run with strength 0.6 and two VAE encodes per input image (the image and the masked image).
No torch needed."""

from __future__ import annotations

from flopcalc.flops.estimate import estimate_configs
from flopcalc.engine.pipelines import Settings
from flopcalc.engine.sources import resolve
from card_support import runs_by_call


def _plan(settings: Settings):
    source = resolve("qwen-image")
    return estimate_configs({**source.model_index, "_class_name": "QwenImageInpaintPipeline"}, source.components,
                            settings)


def test_defaults():
    r = _plan(Settings())
    assert r.pipeline == "QwenImageInpaintPipeline" and r.settings.strength == 0.6
    # get_timesteps: init 50 · 0.6 = 30, t_start int(20) → 30 steps; no negative prompt: one pass
    assert runs_by_call(r) == {"text_encoder.forward": 1, "transformer.forward": 30, "vae.encode": 2, "vae.decode": 1}
    assert r.component("vae", "encode").shape == {"height": 1024, "width": 1024}


def test_true_cfg_batch_and_strength():
    r = _plan(Settings(negative_prompt=True, batch_size=2, num_images_per_prompt=3, strength=0.33))
    # init 16.5, t_start int(33.5) = 33 → 17 steps × 2 passes × 6 images; 2 images + 2 masked images encoded
    assert runs_by_call(r) == {"text_encoder.forward": 4, "transformer.forward": 17 * 2 * 6, "vae.encode": 4,
                        "vae.decode": 6}


def test_encode_and_transformer_are_the_text_to_image_calls():
    inpaint = _plan(Settings(height=768, width=1344))
    img2img = estimate_configs({**resolve("qwen-image").model_index, "_class_name": "QwenImageImg2ImgPipeline"},
                               resolve("qwen-image").components, Settings(height=768, width=1344))
    for call in ("forward", "encode", "decode"):
        comp = "vae" if call != "forward" else "transformer"
        assert inpaint.component(comp, call).macs_per_run == img2img.component(comp, call).macs_per_run
