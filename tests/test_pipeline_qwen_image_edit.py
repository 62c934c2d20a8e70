"""QwenImageEditPipeline / QwenImageEditPlusPipeline (diffusers ``pipelines/qwenimage/pipeline_qwenimage_edit*.py``):
the condition images through Qwen2.5-VL's vision tower into the prompt, the reference latents appended to the
transformer's image tokens. No torch needed."""

from __future__ import annotations

import pytest

import flopcalc
from flopcalc.flops.estimate import estimate_configs
from flopcalc.engine.errors import FlopcalcError, OptionError
from flopcalc.formulas.qwen2_5_vision import segment_lengths, window_sides
from flopcalc.engine.pipelines import Settings
from flopcalc.engine.pipelines.qwen_image_edit import (calculate_dimensions, condition_image, picture_wrapper_tokens,
                                                       smart_resize)

from card_support import Card, runs_by_call

CARD = Card("qwen-image-edit")


def _estimate(pipeline: str, **settings):
    return estimate_configs({**CARD.index(), "_class_name": pipeline}, CARD.components(), Settings.make(**settings))


def test_edit_defaults():
    r = flopcalc.estimate("qwen-image-edit")
    s = r.settings
    assert r.pipeline == "QwenImageEditPipeline"
    assert (s.height, s.width, s.steps, s.true_cfg_scale, s.max_sequence_length) == (1024, 1024, 50, 4.0, 512)
    assert r.passes == 1  # true CFG needs a negative prompt
    assert runs_by_call(r) == {"text_encoder.forward": 1, "transformer.forward": 50, "vae.encode": 1, "vae.decode": 1}
    # 1024² → smart_resize 1036² → 74×74 patches, 37×37 = 1369 merged tokens; 64 dropped + 1369 + 512 kept
    assert r.component("text_encoder").shape == {"seq_len": 64 + 1369 + 512, "height": 1036, "width": 1036,
                                                 "frames": 1}
    assert r.component("transformer").shape == {"latent_height": 128, "latent_width": 128, "text_len": 1369 + 512,
                                                "reference_tokens": 64 * 64}
    assert r.component("vae", "encode").shape == {"height": 1024, "width": 1024}


def test_edit_true_cfg_encodes_the_negative_prompt_with_the_image():
    r = flopcalc.estimate("qwen-image-edit", negative_prompt=True, batch_size=2)
    assert r.passes == 2
    assert runs_by_call(r) == {"text_encoder.forward": 4, "transformer.forward": 200, "vae.encode": 2, "vae.decode": 2}


def test_edit_size_rules():
    # the input image is assumed at the asked size: 768×1344 is its own calculate_dimensions
    r = flopcalc.estimate("qwen-image-edit", height=768, width=1344)
    assert r.component("text_encoder").shape["height"] == 756 and r.component("text_encoder").shape["width"] == 1344
    assert r.component("transformer").shape["reference_tokens"] == 48 * 84
    # an asked size is floored to 16; the reference follows the aspect ratio at 1024²
    r = flopcalc.estimate("qwen-image-edit", height=500, width=1000)
    assert (r.settings.height, r.settings.width) == (496, 992)
    ref_w, ref_h = calculate_dimensions(1024 * 1024, 1000 / 500)
    assert r.component("vae", "encode").shape == {"height": ref_h, "width": ref_w}
    assert r.component("transformer").shape["reference_tokens"] == (ref_h // 16) * (ref_w // 16)


def test_vision_tower_runs_with_the_image_and_not_without():
    edit = flopcalc.estimate("qwen-image-edit").component("text_encoder").tree
    text = flopcalc.estimate("qwen-image").component("text_encoder").tree
    assert edit.find("model.visual").per_item.macs("torch") > 0
    assert text.find("model.visual").per_item.macs("torch") == 0
    assert edit.find("model.visual").per_item.params == text.find("model.visual").per_item.params


def test_plus_images_at_384_squared_area():
    r = _estimate("QwenImageEditPlusPipeline", input_images=3)
    assert r.pipeline == "QwenImageEditPlusPipeline"
    h, w = condition_image(1024, 1024, 384 * 384)
    assert (h, w) == (392, 392)  # 384 → round(13.7)·28
    tokens = (h // 28) * (w // 28)
    # each image's "Picture i: <|vision_start|>" ... "<|vision_end|>" wrapper: 7 more tokens (pictures 1-9)
    assert r.component("text_encoder").shape == {"seq_len": 64 + 3 * (tokens + 7) + 512, "height": 392,
                                                 "width": 392, "frames": 3}
    assert r.component("transformer").shape["text_len"] == 3 * (tokens + 7) + 512
    assert r.component("transformer").shape["reference_tokens"] == 3 * 64 * 64
    assert runs_by_call(r)["vae.encode"] == 3


def test_plus_refuses_several_prompts_and_edit_refuses_input_images():
    with pytest.raises(FlopcalcError, match="batch_size=1"):
        _estimate("QwenImageEditPlusPipeline", batch_size=2)
    with pytest.raises(OptionError, match="--input-images does not apply to QwenImageEditPipeline"):
        flopcalc.estimate("qwen-image-edit", input_images=2)
    with pytest.raises(OptionError, match="--strength does not apply"):
        flopcalc.estimate("qwen-image-edit", strength=0.5)
    with pytest.raises(FlopcalcError, match="cannot be greater than 1024"):
        flopcalc.estimate("qwen-image-edit", max_sequence_length=2000)


def test_no_symbolic_law():
    from flopcalc.flops.symbolic import symbolic_estimate

    with pytest.raises(FlopcalcError, match="no closed-form law"):
        symbolic_estimate("qwen-image-edit")


def test_smart_resize_bounds():
    assert smart_resize(1024, 1024) == (1036, 1036)
    assert smart_resize(10, 10) == (56, 56)  # min_pixels 3136
    h, w = smart_resize(8000, 8000)  # max_pixels 12845056
    assert h * w <= 12845056 and h % 28 == 0 and w % 28 == 0


def test_vision_windows():
    """Windows of 4×4 merged units (112 / 2 / 14) on the merged grid, remainders last; full attention per image."""
    assert window_sides(37, 4) == [4] * 9 + [1]
    assert window_sides(8, 4) == [4, 4]
    lengths = segment_lengths(1, 74, 74, merge=2, window=4)
    assert sum(lengths) == 74 * 74 and len(lengths) == 100 and max(lengths) == 64 and min(lengths) == 4
    assert segment_lengths(1, 74, 74, merge=2, window=None) == [74 * 74]


def test_vision_block_attention_closed_form():
    """A windowed block: 2·c·Σ L² attention MACs; full attention: 2·c·(g_h g_w)²."""
    from flopcalc.formulas.qwen2_5_vision import vision_block

    c, n = 1280, 74 * 74
    windows = segment_lengths(1, 74, 74, merge=2, window=4)
    windowed = vision_block(tokens=n, dim=c, heads=16, d_ff=3420, segments=windows).find("attn").cost.attention
    full = vision_block(tokens=n, dim=c, heads=16, d_ff=3420, segments=[n]).find("attn").cost.attention
    assert windowed == 2 * c * sum(x * x for x in windows)
    assert full == 2 * c * n * n


def test_edit_inpaint_strength_and_two_encodes():
    r = _estimate("QwenImageEditInpaintPipeline")
    assert r.pipeline == "QwenImageEditInpaintPipeline" and r.settings.strength == 0.6
    # get_timesteps: 50 − int(50 − 30) = 30 steps; the image and the masked image encoded
    assert runs_by_call(r) == {"text_encoder.forward": 1, "transformer.forward": 30, "vae.encode": 2, "vae.decode": 1}
    assert r.component("transformer").shape["reference_tokens"] == 64 * 64
    assert r.component("text_encoder").shape["seq_len"] == 64 + 1369 + 512


def test_edit_inpaint_output_is_the_images_calculated_size():
    """``height = calculated_height``: the asked size is the image's, the output its 1024²-area size."""
    r = _estimate("QwenImageEditInpaintPipeline", height=500, width=1000, strength=0.9)
    ref_w, ref_h = calculate_dimensions(1024 * 1024, 1000 / 500)
    assert (r.settings.height, r.settings.width) == (ref_h // 16 * 16, ref_w // 16 * 16)
    assert r.component("vae", "encode").shape == {"height": ref_h, "width": ref_w}
    assert runs_by_call(r)["transformer.forward"] == 45


def test_2509_card_runs_edit_plus():
    r = flopcalc.estimate("qwen-image-edit-2509", input_images=2, height=768, width=1344)
    assert r.pipeline == "QwenImageEditPlusPipeline"
    assert r.component("text_encoder").shape == {"seq_len": 64 + 2 * (180 + 7) + 512, "height": 280,
                                                 "width": 504, "frames": 2}
    assert r.component("transformer").shape["reference_tokens"] == 2 * 48 * 84
    assert runs_by_call(r) == {"text_encoder.forward": 1, "transformer.forward": 50, "vae.encode": 2, "vae.decode": 1}


def test_plus_picture_wrappers_one_token_per_digit():
    """``Picture i: `` + the two vision special tokens: 7 tokens for i < 10, 8 for 10-99 (Qwen2's pre-tokenizer
    splits numbers into digits); Edit's fixed template wrapper adds nothing beside max_sequence_length."""
    assert [picture_wrapper_tokens(n) for n in (0, 1, 2, 9, 10, 11)] == [0, 7, 14, 63, 71, 79]
    edit = _estimate("QwenImageEditPipeline")
    h, w = condition_image(1024, 1024, 1024 * 1024)
    assert edit.component("text_encoder").shape["seq_len"] == 64 + (h // 28) * (w // 28) + 512
