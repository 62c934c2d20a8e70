"""Live re-measurement of the Qwen-Image edit path: Qwen2.5-VL with condition images (its vision tower,
then the language model on text + image tokens) and ``QwenImageTransformer2DModel`` with reference
latents appended, planned by ``QwenImageEditPipeline`` / ``QwenImageEditPlusPipeline`` and measured on
the meta device now (random sizes, image counts and vision configs: depth, width, heads, MLP width,
window size, full-attention blocks). The two helps the input builder gives the stock forward on meta are
checked against a CPU run of a small random model. The resize rules are diffusers' and transformers' own
functions. The seed is printed; ``FLOPCALC_SEED=N`` replays it.
"""

from __future__ import annotations

import json
import math
import random

import pytest

from live_support import (  # noqa: E402  (skips without torch)
    REPO,
    SEED,
    assert_matches_measurement,
    measure,
    write_config as _write,
)
from flopcalc.flops.estimate import estimate_configs  # noqa: E402
from flopcalc.engine.pipelines import Settings  # noqa: E402
from flopcalc.engine.pipelines.qwen_image_edit import (  # noqa: E402
    CONDITION_IMAGE_SIZE,
    PROCESSOR_MAX_PIXELS,
    PROCESSOR_MIN_PIXELS,
    TARGET_AREA,
    calculate_dimensions,
    condition_image,
    smart_resize,
)

pytestmark = pytest.mark.live

CARD = REPO / "model_cards/qwen-image-edit"
INDEX = json.loads((CARD / "model_index.json").read_text())
PLUS = {**INDEX, "_class_name": "QwenImageEditPlusPipeline"}


def _text_encoder(folder, index: dict, settings: Settings, images: int, area: int, height: int, width: int,
                  thop: bool = False) -> None:
    cfg = json.loads((folder / "config.json").read_text())
    comp = estimate_configs(index, {"text_encoder": cfg}, settings).component("text_encoder")
    fx = measure.measure_component(folder, settings={"seq_len": comp.shape["seq_len"], "height": height,
                                                     "width": width, "images": images, "condition_area": area},
                                   with_thop=thop)
    assert_matches_measurement(comp, fx, f"seed {SEED}, {folder.name} {height}x{width} × {images}: {cfg}", thop=thop)


def _random_vl(rng: random.Random) -> dict:
    heads, head_dim = rng.randint(1, 3), rng.choice([8, 16])
    v_heads = rng.choice([1, 2, 4])
    depth = rng.randint(1, 4)
    vision = {
        "depth": depth, "hidden_size": v_heads * rng.choice([8, 16]), "num_heads": v_heads,
        "intermediate_size": rng.choice([24, 40]), "patch_size": 14, "temporal_patch_size": 2,
        "spatial_merge_size": 2, "in_channels": 3, "out_hidden_size": heads * head_dim,
        "window_size": rng.choice([56, 112, 168]),
        "fullatt_block_indexes": sorted(rng.sample(range(depth), rng.randint(0, depth))),
    }
    text = {"model_type": "qwen2_5_vl_text", "hidden_size": heads * head_dim, "num_attention_heads": heads,
            "num_key_value_heads": 1, "intermediate_size": rng.choice([32, 48]), "num_hidden_layers": rng.randint(0, 2),
            "vocab_size": 1000, "max_position_embeddings": 8192,
            "rope_scaling": {"type": "mrope", "mrope_section": [head_dim // 4, head_dim // 8, head_dim // 8]}}
    return {"architectures": ["Qwen2_5_VLForConditionalGeneration"], "model_type": "qwen2_5_vl",
            "image_token_id": 999, "video_token_id": 998, "vision_start_token_id": 997,
            "vision_config": vision, "text_config": text}


def _size(rng: random.Random, lo: int, hi: int) -> int:
    return 16 * rng.randint(lo // 16, hi // 16)


def test_random_vision_configs_with_images(rng, tmp_path):
    """Edit (one image at 1024²-area) and Edit Plus (1–3 images at 384²-area) on random towers and sizes."""
    for i in range(3):
        folder = _write(tmp_path, f"vl{i}", _random_vl(rng))
        h, w = _size(rng, 256, 1024), _size(rng, 256, 1024)
        msl = rng.randint(1, 64)
        if i % 2:
            images = rng.randint(1, 3)
            _text_encoder(folder, PLUS, Settings.make(height=h, width=w, max_sequence_length=msl, input_images=images),
                          images, CONDITION_IMAGE_SIZE, h, w)
        else:
            _text_encoder(folder, INDEX, Settings(height=h, width=w, max_sequence_length=msl), 1, TARGET_AREA, h, w,
                          thop=True)


def test_card_text_encoder_plus_two_images(rng):
    h, w = _size(rng, 512, 1536), _size(rng, 512, 1536)
    _text_encoder(CARD / "text_encoder", PLUS, Settings.make(height=h, width=w, input_images=2), 2, CONDITION_IMAGE_SIZE,
                  h, w)


def test_card_transformer_with_references(rng):
    """The output latent's tokens followed by the reference latents' (Edit: one; Edit Plus: 1–3)."""
    h, w = _size(rng, 256, 1280), _size(rng, 256, 1280)
    images = rng.randint(1, 3)
    cfg = json.loads((CARD / "transformer/config.json").read_text())
    comp = estimate_configs(PLUS, {"transformer": cfg}, Settings.make(height=h, width=w, input_images=images,
                                                                 max_sequence_length=rng.randint(1, 300))
                            ).component("transformer")
    ref_w, ref_h = calculate_dimensions(TARGET_AREA, w / h)
    fx = measure.measure_component(CARD / "transformer", settings={
        "height": h // 16 * 16, "width": w // 16 * 16, "text_len": comp.shape["text_len"],
        "reference_height": ref_h, "reference_width": ref_w, "references": images}, with_thop=False)
    assert_matches_measurement(comp, fx, f"seed {SEED}, transformer {h}x{w} + {images} reference(s)", thop=False)


def test_meta_helps_match_a_cpu_run(tmp_path):
    """The stock forward with pixel_values on CPU counts what the helped meta call counts."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode
    from transformers import AutoConfig, Qwen2_5_VLForConditionalGeneration

    rng = random.Random(SEED)
    folder = _write(tmp_path, "vl", _random_vl(rng))
    h, w = condition_image(336, 448, 336 * 448)  # 320×448 (calculate_dimensions rounds 10.5 to 10)
    meta = measure.measure_component(folder, settings={"seq_len": 20 + (h // 28) * (w // 28), "height": 336,
                                                       "width": 448, "condition_area": 336 * 448}, with_thop=False)
    grid = meta["inputs"]["pixel_values"][0]
    assert grid == (h // 14) * (w // 14)
    torch.manual_seed(0)
    model = Qwen2_5_VLForConditionalGeneration(AutoConfig.from_pretrained(folder)).eval()
    seq = meta["inputs"]["input_ids"][1]
    ids = torch.randint(0, 900, (1, seq))
    ids[0, 10:10 + grid // 4] = 999
    counter = FlopCounterMode(display=False, custom_mapping=measure._custom_mapping())
    with counter, torch.no_grad():
        model(input_ids=ids, pixel_values=torch.randn(*meta["inputs"]["pixel_values"]),
              image_grid_thw=torch.tensor([[1, h // 14, w // 14]]))
    assert counter.get_total_flops() == meta["torch"]["flops"]


def test_resize_rules_are_diffusers_and_transformers():
    from diffusers.pipelines.qwenimage import pipeline_qwenimage_edit as edit
    from diffusers.pipelines.qwenimage import pipeline_qwenimage_edit_plus as plus
    # the PIL backend module (the torchvision one needs torchvision); the same smart_resize
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import smart_resize as hf_smart_resize

    assert (plus.CONDITION_IMAGE_SIZE, plus.VAE_IMAGE_SIZE) == (CONDITION_IMAGE_SIZE, TARGET_AREA)
    rng = random.Random(SEED)
    for _ in range(200):
        h, w = rng.randint(64, 4096), rng.randint(64, 4096)
        ratio = w / h
        assert calculate_dimensions(TARGET_AREA, ratio) == edit.calculate_dimensions(TARGET_AREA, ratio)[:2]
        assert calculate_dimensions(CONDITION_IMAGE_SIZE, ratio) == plus.calculate_dimensions(CONDITION_IMAGE_SIZE,
                                                                                                ratio)
        assert smart_resize(h, w) == hf_smart_resize(h, w, 28, PROCESSOR_MIN_PIXELS, PROCESSOR_MAX_PIXELS)
    assert math.isclose(PROCESSOR_MAX_PIXELS, 12845056)


def test_layered_transformer_and_rgba_vae(rng):
    """QwenImageLayeredPipeline: layers + 1 stacked latents, the input image's latent and additional_t_cond in the
    transformer; the 4-channel VAE encoding the image and decoding each layer (random layers and sizes)."""
    folder = REPO / "validation/configs/qwen-image-layered"
    index = json.loads((folder / "model_index.json").read_text())
    layers = rng.randint(1, 6)
    h, w = _size(rng, 256, 1280), _size(rng, 256, 1280)
    components = {name: json.loads((folder / name / "config.json").read_text()) for name in ("transformer", "vae")}
    report = estimate_configs(index, components, Settings.make(height=h, width=w, layers=layers,
                                                          max_sequence_length=rng.randint(1, 300)))
    comp = report.component("transformer")
    out_h, out_w = report.settings.height, report.settings.width  # the calculated size: the image's too
    fx = measure.measure_component(folder / "transformer", settings={
        "height": out_h, "width": out_w, "text_len": comp.shape["text_len"], "frames": layers + 1,
        "reference_height": report.component("vae", "encode").shape["height"],
        "reference_width": report.component("vae", "encode").shape["width"]}, with_thop=False)
    assert_matches_measurement(comp, fx, f"seed {SEED}, layered {h}x{w}, {layers} layers", thop=False)
    for call in ("encode", "decode"):
        vae = report.component("vae", call)
        fx = measure.measure_component(folder / "vae", settings={"height": out_h, "width": out_w}, call=call)
        assert_matches_measurement(vae, fx, f"seed {SEED}, layered VAE {call} {out_h}x{out_w}")
