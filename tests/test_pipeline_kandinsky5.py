"""Kandinsky 5 pipeline semantics (diffusers ``pipelines/kandinsky5``): ``Kandinsky5T2VPipeline``,
``Kandinsky5I2VPipeline``, ``Kandinsky5T2IPipeline`` and ``Kandinsky5I2IPipeline`` — defaults, guidance, the frame and
size rules (the image pipelines' resolution list), the image encodes, the refusals; the cards' fixtures against the
estimate; and each plan against the real ``__call__`` run on tiny random components on CPU (which component runs how
often, on what shape)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

import flopcalc
from card_support import FIXTURES, runs_by_call
from flopcalc.engine.errors import FlopcalcError, OptionError, ResolutionError
from flopcalc.engine.pipelines import Settings
from flopcalc.engine.pipelines.kandinsky5 import RESOLUTIONS
from flopcalc.engine.pipelines.qwen_image_edit import smart_resize
from flopcalc.flops.estimate import estimate_configs

T2V, I2V, T2I, I2I = ("kandinsky-5-t2v-lite", "kandinsky-5-i2v-pro", "kandinsky-5-t2i-lite", "kandinsky-5-i2i-lite")


# --------------------------------------------------------------------------- defaults, guidance, sizes


def test_video_defaults_are_the_signature_s():
    for card, pipeline, encode in ((T2V, "Kandinsky5T2VPipeline", {}), (I2V, "Kandinsky5I2VPipeline", {"vae.encode": 1})):
        r = flopcalc.estimate(card)
        s = r.settings
        assert (s.height, s.width, s.num_frames, s.steps, s.guidance_scale, s.max_sequence_length) == \
            (512, 768, 121, 50, 5.0, 512)
        assert r.pipeline == pipeline and r.passes == 2
        assert runs_by_call(r) == {"text_encoder.forward": 2, "text_encoder_2.forward": 2, "transformer.forward": 100,
                                   "vae.decode": 1, **encode}
        assert r.component("text_encoder").shape == {"seq_len": 128 + 512}  # the template's 128 tokens dropped after
        assert r.component("text_encoder_2").shape == {"seq_len": 77}
        assert r.component("transformer").shape == {"latent_frames": 31, "latent_height": 64, "latent_width": 96,
                                                     "text_len": 512}
        assert r.component("vae", "decode").shape["latent_frames"] == 31
    enc = flopcalc.estimate(I2V).component("vae", "encode")
    assert (enc.shape["height"], enc.shape["width"], enc.shape["frames"], enc.runs) == (512, 768, 1, 1)


def test_guidance_batch_steps_text_length():
    r = flopcalc.estimate(T2V, guidance_scale=1.0)
    assert r.passes == 1 and runs_by_call(r)["transformer.forward"] == 50 and runs_by_call(r)["text_encoder.forward"] == 1
    r = flopcalc.estimate(I2V, batch_size=2, num_images_per_prompt=3, steps=4, max_sequence_length=64, num_frames=25)
    calls = runs_by_call(r)
    # the text encoders run per prompt and guidance row; the transformer per output video; the image encode once
    assert calls == {"text_encoder.forward": 4, "text_encoder_2.forward": 4, "transformer.forward": 4 * 2 * 6,
                     "vae.encode": 1, "vae.decode": 6}
    assert r.component("text_encoder").shape == {"seq_len": 128 + 64}
    assert r.component("transformer").shape["latent_frames"] == 7


def test_video_refusals_name_the_nearest_valid_values():
    with pytest.raises(ResolutionError, match="117 or 121"):
        flopcalc.estimate(T2V, num_frames=120)
    with pytest.raises(FlopcalcError, match="16"):
        flopcalc.estimate(T2V, height=520)
    # one latent frame: the real image-to-video call completes only with output_type="latent" (no decode)
    r = flopcalc.estimate(I2V, num_frames=1)
    assert "vae.decode" not in runs_by_call(r) and any("output_type='latent'" in n for n in r.notes)
    with pytest.raises(OptionError, match="at most 1024"):
        flopcalc.estimate(T2V, max_sequence_length=2000)
    for card in (T2V, I2V, T2I, I2I):
        with pytest.raises(OptionError, match="strength"):
            flopcalc.estimate(card, strength=0.5)


def _no_law(card: str) -> None:
    """The plan refuses the symbolic law (the size snaps to a list)."""
    pytest.importorskip("sympy")
    from flopcalc.flops.symbolic import symbolic_estimate

    with pytest.raises(FlopcalcError, match="no closed-form law"):
        symbolic_estimate(card)


def test_image_defaults_and_resolution_snapping():
    r = flopcalc.estimate(T2I)
    s = r.settings
    assert (s.height, s.width, s.num_frames, s.steps, s.guidance_scale, s.max_sequence_length) == \
        (1024, 1024, None, 50, 3.5, 512)
    assert runs_by_call(r) == {"text_encoder.forward": 2, "text_encoder_2.forward": 2, "transformer.forward": 100,
                               "vae.decode": 1}
    assert r.component("text_encoder").shape == {"seq_len": 40 + 512}
    assert r.component("transformer").shape == {"latent_height": 128, "latent_width": 128, "text_len": 512}
    for (w, h) in RESOLUTIONS:  # a listed size is kept
        assert (flopcalc.estimate(T2I, height=h, width=w).settings.height,
                flopcalc.estimate(T2I, height=h, width=w).settings.width) == (h, w)
    r = flopcalc.estimate(T2I, height=720, width=1280)  # 16:9 → the nearest ratio listed, 768×1280 (5:3)
    assert (r.settings.height, r.settings.width) == (768, 1280)
    assert any("768×1280" in n for n in r.notes)
    _no_law(T2I)


def test_image_to_image_encodes_the_image_with_the_prompt_and_as_channels():
    r = flopcalc.estimate(I2I)
    s = r.settings
    assert (s.height, s.width, s.steps, s.guidance_scale, s.max_sequence_length) == (1024, 1024, 50, 3.5, 1024)
    assert runs_by_call(r) == {"text_encoder.forward": 2, "text_encoder_2.forward": 2, "vae.encode": 1,
                               "transformer.forward": 100, "vae.decode": 1}
    # the image halved (512²) and smart-resized by the processor (504²): 18² = 324 merged vision tokens in the sequence
    assert r.component("text_encoder").shape == {"seq_len": 54 + 1024, "height": 504, "width": 504, "frames": 1}
    assert r.component("vae", "encode").shape == {"height": 1024, "width": 1024}
    assert r.component("transformer").shape == {"latent_height": 128, "latent_width": 128, "text_len": 1024}
    r = flopcalc.estimate(I2I, height=720, width=1280)  # the output snaps; the prompt's image is the input's half
    assert (r.settings.height, r.settings.width) == (768, 1280)
    te = r.component("text_encoder").shape
    assert (te["height"], te["width"]) == smart_resize(360, 640) == (364, 644)
    assert r.component("vae", "encode").shape == {"height": 768, "width": 1280}


def test_image_to_image_refusals():
    with pytest.raises(OptionError, match="one image per call"):
        flopcalc.estimate(I2I, batch_size=2)
    with pytest.raises(OptionError, match="vision tokens do not fit"):
        flopcalc.estimate(I2I, max_sequence_length=300)  # 324 vision tokens
    _no_law(I2I)
    t2i = json.loads((Path(flopcalc.__file__).parent.parent / "model_cards" / T2I / "transformer/config.json")
                     .read_text())
    with pytest.raises(FlopcalcError, match="visual_cond"):
        estimate_configs({"_class_name": "Kandinsky5I2IPipeline", "transformer": ["x", "y"]}, {"transformer": t2i},
                         Settings())


def test_bare_transformer_runs_under_the_video_pipeline():
    cfg = json.loads((Path(flopcalc.__file__).parent.parent / "model_cards" / T2V / "transformer/config.json")
                     .read_text())
    r = estimate_configs(None, {"transformer": cfg}, Settings())
    assert r.pipeline.startswith("Kandinsky5T2VPipeline") and runs_by_call(r) == {"transformer.forward": 100}


# --------------------------------------------------------------------------- fixtures


CASES = {f"{card}{suffix}": card for card in (T2V, I2V, T2I, I2I) for suffix in ("", "-text")}


@pytest.mark.parametrize("path", [p for case in CASES for p in sorted((FIXTURES / case).glob("*.json"))],
                         ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_fixture_equals_the_estimate(path: Path):
    fx = json.loads(path.read_text())
    s = fx["settings"]
    r = flopcalc.estimate(CASES[path.parent.name], **{k: s[k] for k in ("height", "width", "num_frames") if k in s})
    comp = next(c for c in r.components if c.class_name == fx["class_name"] and c.call == fx["call"]
                and c.component == fx["component"])
    for key in ("seq_len", "text_len"):
        if key in s:
            assert comp.shape[key] == s[key]
    assert 2 * comp.macs_per_run == fx["torch"]["flops"]
    for module, flops in fx["torch"]["by_module"].items():
        node = comp.tree if module == "Global" else comp.tree.find(module)
        assert 2 * node.per_item.macs() == flops, module
    assert comp.params == fx["params"]
    assert comp.tree.per_item.macs("thop") == fx["thop"]["macs"]


# --------------------------------------------------------------------------- the real __call__


class _Batch(dict):
    __getattr__ = dict.__getitem__

    def to(self, *args, **kwargs):
        return self


IMAGE_TOKEN, VISION_START = 999, 997


class _Processor:
    """The Qwen2.5-VL processor's part the pipelines use: a prompt (and negative prompt) filling the sequence — the
    first, untruncated call short, the truncated one exactly ``max_length`` tokens, as a prompt at the limit gives —
    and with images, the real image processor's ``pixel_values`` / ``image_grid_thw`` and as many image tokens as
    the processor merges."""

    image_token_id = IMAGE_TOKEN

    def __init__(self):
        from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

        self.images = Qwen2VLImageProcessorPil()

    def __call__(self, text, images=None, videos=None, max_length=None, truncation=None, return_tensors=None,
                 padding=None):
        import torch

        length = max_length if truncation else 8
        ids = torch.ones(len(text), length, dtype=torch.long)
        out = _Batch(input_ids=ids, attention_mask=torch.ones_like(ids))
        if images is not None:
            pixels = self.images(images=images, return_tensors="pt")
            t, h, w = pixels["image_grid_thw"][0].tolist()
            merged = t * h * w // 4
            if truncation:
                ids[:, 2] = VISION_START
                ids[:, 3:3 + merged] = IMAGE_TOKEN
            out.update(pixel_values=pixels["pixel_values"], image_grid_thw=pixels["image_grid_thw"])
        return out


class _ClipTokenizer:
    def __call__(self, prompt, max_length=None, **kwargs):
        import torch

        ids = torch.ones(len(prompt), max_length, dtype=torch.long)
        return _Batch(input_ids=ids, attention_mask=torch.ones_like(ids))


def _tiny(video: bool, visual_cond: bool = False):
    """Tiny random Kandinsky 5 components (Qwen2.5-VL with a vision tower, CLIP, the transformer, the HunyuanVideo VAE
    for video or the FLUX-style ``AutoencoderKL`` for images, both 8× in space) and their configs."""
    from diffusers import AutoencoderKL, AutoencoderKLHunyuanVideo, FlowMatchEulerDiscreteScheduler
    from diffusers import Kandinsky5Transformer3DModel
    from transformers import CLIPTextConfig, CLIPTextModel, Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    qwen = Qwen2_5_VLConfig(
        text_config={"hidden_size": 16, "num_attention_heads": 2, "num_key_value_heads": 1, "intermediate_size": 24,
                     "num_hidden_layers": 1, "vocab_size": 1000,
                     "rope_scaling": {"type": "mrope", "mrope_section": [2, 1, 1]}},
        vision_config={"depth": 1, "hidden_size": 16, "num_heads": 2, "intermediate_size": 24, "out_hidden_size": 16,
                       "fullatt_block_indexes": [0]},
        image_token_id=IMAGE_TOKEN, video_token_id=998, vision_start_token_id=VISION_START)
    clip = CLIPTextConfig(hidden_size=8, intermediate_size=16, num_hidden_layers=1, num_attention_heads=2,
                          vocab_size=1000, max_position_embeddings=77)
    if video:
        vae = AutoencoderKLHunyuanVideo(latent_channels=4, block_out_channels=(4, 4, 4, 4), layers_per_block=1,
                                        norm_num_groups=2)
    else:
        vae = AutoencoderKL(latent_channels=4, block_out_channels=(1, 1, 1, 1), layers_per_block=1, norm_num_groups=1,
                            down_block_types=("DownEncoderBlock2D",) * 4, up_block_types=("UpDecoderBlock2D",) * 4,
                            mid_block_add_attention=False)
    models = {
        "text_encoder": Qwen2_5_VLForConditionalGeneration(qwen),
        "text_encoder_2": CLIPTextModel(clip),
        "transformer": Kandinsky5Transformer3DModel(
            in_visual_dim=4, out_visual_dim=4, in_text_dim=16, in_text_dim2=8, time_dim=8, model_dim=12, ff_dim=16,
            num_text_blocks=1, num_visual_blocks=1, axes_dims=(2, 2, 2), visual_cond=visual_cond),
        "vae": vae,
    }
    for model in models.values():
        model.eval()
    configs = {name: json.loads(json.dumps({**m.config, "_class_name": type(m).__name__}))  # tuples → lists
               for name, m in models.items() if "text" not in name}
    configs["text_encoder"] = {**qwen.to_dict(), "architectures": ["Qwen2_5_VLForConditionalGeneration"]}
    configs["text_encoder_2"] = {**clip.to_dict(), "architectures": ["CLIPTextModel"]}
    return models, configs, FlowMatchEulerDiscreteScheduler()


def _run(pipeline_class, models, scheduler, **call):
    """The real call with every component call recorded: ``{key: rows}`` and ``{key: shapes}``."""
    import torch

    calls: Counter = Counter()
    shapes: dict = {}

    def hook(name):
        def record(module, args, kwargs):
            first = args[0] if args else next(v for v in kwargs.values() if isinstance(v, torch.Tensor))
            calls[name] += first.shape[0]
            shape = tuple(first.shape[1:])
            if name == "transformer":
                shape = (shape, kwargs["encoder_hidden_states"].shape[1])
            elif name == "text_encoder" and kwargs.get("image_grid_thw") is not None:
                shape = (shape, tuple(kwargs["image_grid_thw"][0].tolist()))
            shapes.setdefault(name, set()).add(shape)
        return record

    for name in ("text_encoder", "text_encoder_2", "transformer"):
        models[name].register_forward_pre_hook(hook(name), with_kwargs=True)
    for call_name in ("encode", "decode"):
        method = getattr(models["vae"], call_name)

        def counted(z, *args, _method=method, _key=f"vae.{call_name}", **kwargs):
            calls[_key] += z.shape[0]
            shapes.setdefault(_key, set()).add(tuple(z.shape[2:]))
            return _method(z, *args, **kwargs)

        setattr(models["vae"], call_name, counted)
    pipe = pipeline_class(scheduler=scheduler, tokenizer=_Processor(), tokenizer_2=_ClipTokenizer(), **models)
    pipe.set_progress_bar_config(disable=True)
    with torch.no_grad():
        pipe(**{"output_type": "np", **call}, generator=torch.Generator().manual_seed(0))
    return calls, shapes


def _planned(report) -> Counter:
    return Counter({(c.component if c.call == "forward" else f"{c.component}.{c.call}"): c.runs
                    for c in report.components})


def test_video_plans_mirror_the_real_calls(rng):
    pytest.importorskip("torch")
    from diffusers import Kandinsky5I2VPipeline, Kandinsky5T2VPipeline
    from PIL import Image

    for pipeline_class in (Kandinsky5T2VPipeline, Kandinsky5I2VPipeline):
        image = pipeline_class is Kandinsky5I2VPipeline
        models, configs, scheduler = _tiny(video=True, visual_cond=image and rng.random() < 0.5)
        h, w = 16 * rng.randint(1, 3), 16 * rng.randint(1, 3)
        frames, steps, length = 4 * rng.randint(0, 2) + 1, rng.randint(1, 2), rng.randint(4, 16)
        guidance = rng.choice([1.0, 5.0])
        batch, videos = (1, rng.randint(1, 2)) if image else rng.choice([(1, 1), (2, 1), (1, 2)])
        call = {"image": Image.new("RGB", (w + 8, h))} if image else {}
        if image and frames == 1:  # the decode fails on one latent frame (the plan says so and plans none)
            call["output_type"] = "latent"
        calls, shapes = _run(pipeline_class, models, scheduler, prompt=["a prompt"] * batch, height=h, width=w,
                             num_frames=frames, num_inference_steps=steps, max_sequence_length=length,
                             guidance_scale=guidance, num_videos_per_prompt=videos, **call)
        index = {"_class_name": pipeline_class.__name__, **{name: ["x", "y"] for name in configs}}
        report = estimate_configs(index, configs, Settings.make(
            height=h, width=w, num_frames=frames, steps=steps, max_sequence_length=length, guidance_scale=guidance,
            batch_size=batch, num_images_per_prompt=videos))
        where = f"{pipeline_class.__name__} {h}×{w}, {frames} frames, {steps} steps, L {length}, {batch}×{videos}"
        assert _planned(report) == calls, where
        lat = ((frames - 1) // 4 + 1, h // 8, w // 8)
        assert shapes["text_encoder"] == {(128 + length,)} and shapes["text_encoder_2"] == {(77,)}, where
        channels = 9 if models["transformer"].visual_cond else 4
        assert shapes["transformer"] == {((*lat, channels), length)}, where
        assert shapes.get("vae.decode", {lat}) == {lat}, where
        if image:
            assert shapes["vae.encode"] == {(1, h, w)}, where


def test_image_plans_mirror_the_real_calls(rng):
    """The image pipelines run at a listed resolution whatever the size asked (here a small transformer and VAE at
    one of them, one step)."""
    pytest.importorskip("torch")
    from diffusers import Kandinsky5I2IPipeline, Kandinsky5T2IPipeline
    from PIL import Image

    for pipeline_class in (Kandinsky5T2IPipeline, Kandinsky5I2IPipeline):
        edit = pipeline_class is Kandinsky5I2IPipeline
        models, configs, scheduler = _tiny(video=False, visual_cond=edit)
        asked = rng.choice([(1024, 1024), (720, 1280), (1152, 896), (700, 1500)])  # (height, width)
        guidance = rng.choice([1.0, 3.5])
        length = rng.randint(360, 420) if edit else rng.randint(4, 16)
        call = {"image": Image.new("RGB", asked[::-1])} if edit else {"height": asked[0], "width": asked[1]}
        calls, shapes = _run(pipeline_class, models, scheduler, prompt="a prompt", num_inference_steps=1,
                             max_sequence_length=length, guidance_scale=guidance, **call)
        index = {"_class_name": pipeline_class.__name__, **{name: ["x", "y"] for name in configs}}
        report = estimate_configs(index, configs, Settings.make(height=asked[0], width=asked[1], steps=1,
                                                                max_sequence_length=length, guidance_scale=guidance))
        where = f"{pipeline_class.__name__} {asked}, L {length}, guidance {guidance}"
        assert _planned(report) == calls, where
        h, w = report.settings.height, report.settings.width
        assert (w, h) in RESOLUTIONS, where
        channels = 9 if edit else 4
        assert shapes["transformer"] == {((1, h // 8, w // 8, channels), length)}, where
        assert shapes["vae.decode"] == {(h // 8, w // 8)}, where
        if edit:
            te = report.component("text_encoder").shape
            cond = smart_resize(asked[0] // 2, asked[1] // 2)
            assert (te["height"], te["width"]) == cond, where
            assert shapes["text_encoder"] == {((54 + length,), (1, cond[0] // 14, cond[1] // 14))}, where
            assert shapes["vae.encode"] == {(h, w)}, where
        else:
            assert shapes["text_encoder"] == {(40 + length,)}, where
