"""OmniGenPipeline semantics (diffusers 0.42.1 ``pipelines/omnigen``): defaults, guidance rows, the condition
tokens, input images (editing), refusals; the card's fixtures against flopcalc; and the plan against the real
``OmniGenPipeline.__call__`` run on CPU with tiny random components (a stand-in tokenizer, and a stand-in for
torchvision's four transforms the processor builds, torchvision not being installed)."""

from __future__ import annotations

import pytest

import flopcalc
from conftest import SEED
from call_support import Recorder, assert_fixture, card_fixtures, read
from card_support import Card, runs_by_call
from flopcalc.engine.errors import ConfigError, OptionError, ResolutionError
from flopcalc.engine.pipelines import Settings
from flopcalc.engine.pipelines.omnigen import DEFAULT_PROMPT_TOKENS, input_image_size
from flopcalc.flops.estimate import estimate_configs

CARD = Card("omnigen-v1")
#: An AutoencoderKL config built for these tests (the card has none): four levels, ×8.
VAE = {"_class_name": "AutoencoderKL", "in_channels": 3, "out_channels": 3, "latent_channels": 4,
       "block_out_channels": [8, 8, 8, 8], "layers_per_block": 1, "norm_num_groups": 4,
       "down_block_types": ["DownEncoderBlock2D"] * 4, "up_block_types": ["UpDecoderBlock2D"] * 4}


def _plan(settings: Settings, *, vae: bool = False, **overrides):
    components = {"transformer": {**CARD.config("transformer"), **overrides}}
    if vae:
        components["vae"] = dict(VAE)
    return estimate_configs(CARD.index(), components, settings)


@pytest.mark.parametrize("path", card_fixtures("omnigen-v1"), ids=lambda p: p.stem)
def test_fixtures_are_exact(path):
    fixture = read(path)
    s = fixture["settings"]
    assert_fixture(flopcalc.estimate("omnigen-v1", height=s["height"], width=s["width"]), fixture)


def test_defaults_two_rows_every_step_no_vae_config():
    r = flopcalc.estimate("omnigen-v1")
    s = r.settings
    assert (r.pipeline, s.height, s.width, s.steps, s.guidance_scale) == ("OmniGenPipeline", 1024, 1024, 50, 2.5)
    assert r.passes == 2 and runs_by_call(r) == {"transformer.forward": 100}
    assert r.component("transformer").shape == {"latent_height": 128, "latent_width": 128,
                                                "text_len": DEFAULT_PROMPT_TOKENS}
    assert any("vae" in n and "not counted" in n for n in r.notes)
    assert any("assumed" in n and "--prompt-tokens" in n for n in r.notes)


def test_guidance_scale_never_changes_the_rows():
    """``__call__`` always batches the prompt and negative rows (``num_cfg + 1``), whatever the scale."""
    assert flopcalc.estimate("omnigen-v1", guidance_scale=1.0).flops == flopcalc.estimate("omnigen-v1").flops


def test_prompt_tokens_set_the_condition_length():
    r = flopcalc.estimate("omnigen-v1", prompt_tokens=77, height=512, width=512)
    assert r.component("transformer").shape["text_len"] == 77
    assert not any("assumed" in n for n in r.notes)


def test_batch_images_and_decode_with_a_vae():
    r = _plan(Settings(batch_size=2, num_images_per_prompt=3, steps=4), vae=True)
    assert runs_by_call(r) == {"transformer.forward": 4 * 2 * 6, "vae.decode": 6}


def test_input_images_add_the_image_guidance_row_and_their_tokens():
    r = _plan(Settings(height=512, width=768, steps=3).with_options(input_images=2, prompt_tokens=40), vae=True)
    assert r.passes == 3
    tokens = 2 * (512 // 16) * (768 // 16)
    assert Recorder().planned_calls(r) == {"vae.encode": 4, "transformer": 9, "vae.decode": 1}
    pieces = r.component("transformer").tree.children
    assert sorted((p.count, p.name) for p in pieces)[0][0] == 1
    assert r.component("vae", "encode").shape == {"height": 512, "width": 768}
    # every row has the same length; the two rows holding the images also patch-embed them (input_image_proj:
    # tokens × d × C × p² MACs), the negative row does not
    with_images = _plan(Settings(height=512, width=768, steps=3).with_options(input_images=2, prompt_tokens=40))
    plain = _plan(Settings(height=512, width=768, steps=3).with_options(prompt_tokens=40 + tokens))
    row, conv = plain.component("transformer").macs_per_run, tokens * 3072 * 4 * 2 * 2
    assert with_images.component("transformer").macs == 3 * (2 * (row + conv) + row)
    assert any(f"{tokens} image tokens" in n for n in with_images.notes)


def test_input_image_crop():
    """``crop_image``: halved while the short side is ≥ 2048, long side scaled to 1024, multiples of 16."""
    assert input_image_size(512, 768) == (512, 768)
    assert input_image_size(1024, 1536) == (672, 1024)  # 1536 → 1024, 1024·(2/3) = 682.7 → 683 → 672
    assert input_image_size(4096, 4096) == (1024, 1024)
    assert input_image_size(1000, 1000) == (992, 992)


def test_refusals():
    with pytest.raises(OptionError, match="--strength does not apply to OmniGenPipeline"):
        flopcalc.estimate("omnigen-v1", strength=0.5)
    with pytest.raises(OptionError, match="--true-cfg-scale does not apply"):
        flopcalc.estimate("omnigen-v1", true_cfg_scale=4.0)
    with pytest.raises(OptionError, match="--max-sequence-length does not apply"):
        flopcalc.estimate("omnigen-v1", max_sequence_length=64)
    with pytest.raises(ResolutionError, match="multiple of 16"):
        flopcalc.estimate("omnigen-v1", height=1000)
    with pytest.raises(ResolutionError, match="pos_embed_max_size 192"):
        flopcalc.estimate("omnigen-v1", height=3088, width=512)
    assert flopcalc.estimate("omnigen-v1", height=3072, width=512).flops > 0


def test_config_refusals():
    with pytest.raises(ConfigError, match="num_key_value_heads must equal"):
        _plan(Settings(), num_key_value_heads=8)
    with pytest.raises(ConfigError, match="must divide by num_attention_heads"):
        _plan(Settings(), num_attention_heads=7)
    with pytest.raises(ConfigError, match="'rope_scaling' is None; expected an object"):
        _plan(Settings(), rope_scaling=None)
    with pytest.raises(ConfigError, match="rope_scaling must give short_factor and long_factor"):
        _plan(Settings(), rope_scaling={"long_factor": [1.0] * 48})
    with pytest.raises(ConfigError, match="pad_token_id"):
        _plan(Settings(), pad_token_id=40000)
    with pytest.raises(ConfigError, match="rope_scaling.short_factor has 3 entries"):
        _plan(Settings(), rope_scaling={"short_factor": [1.0] * 3, "long_factor": [1.0] * 48, "type": "su"})


def test_transformer_alone_runs_under_its_pipeline():
    r = estimate_configs(None, {"transformer": CARD.config("transformer")}, Settings(height=512, width=512))
    assert r.pipeline == "OmniGenPipeline (denoiser only)" and r.component("transformer").runs == 100


# --------------------------------------------------------------------------- the real __call__


def _stand_ins(monkeypatch):
    """torchvision's Compose / Lambda / ToTensor / Normalize as the processor uses them, and a tokenizer that
    gives a BOS and one id per whitespace-separated word."""
    import numpy as np
    import torch
    import diffusers.pipelines.omnigen.pipeline_omnigen as pipeline_module
    import diffusers.pipelines.omnigen.processor_omnigen as processor_module

    class transforms:  # noqa: N801 - the module name the processor reads
        class Compose:
            def __init__(self, fns):
                self.fns = fns

            def __call__(self, x):
                for fn in self.fns:
                    x = fn(x)
                return x

        class Lambda:
            def __init__(self, fn):
                self.fn = fn

            def __call__(self, x):
                return self.fn(x)

        class ToTensor:
            def __call__(self, image):
                return torch.from_numpy(np.asarray(image, dtype=np.float32) / 255).permute(2, 0, 1)

        class Normalize:
            def __init__(self, mean, std, inplace=False):
                self.mean, self.std = torch.tensor(mean)[:, None, None], torch.tensor(std)[:, None, None]

            def __call__(self, x):
                return (x - self.mean) / self.std

    monkeypatch.setattr(processor_module, "transforms", transforms, raising=False)
    monkeypatch.setattr(pipeline_module, "OmniGenMultiModalProcessor", processor_module.OmniGenMultiModalProcessor,
                        raising=False)

    class Ids:
        def __init__(self, ids):
            self.input_ids = ids

    class Tokenizer:
        model_max_length = 100_000

        def __call__(self, text):
            return Ids([1] + [5] * len(text.split()))

    return Tokenizer()


@pytest.mark.live
@pytest.mark.parametrize("images", [0, 1])
def test_the_plan_mirrors_the_real_call(monkeypatch, rng, images):
    pytest.importorskip("diffusers")
    import numpy as np
    import torch
    from diffusers import AutoencoderKL, FlowMatchEulerDiscreteScheduler, OmniGenPipeline, OmniGenTransformer2DModel
    from PIL import Image

    tokenizer = _stand_ins(monkeypatch)
    config = dict(hidden_size=32, num_attention_heads=2, num_key_value_heads=2, intermediate_size=48, num_layers=1,
                  vocab_size=64, pad_token_id=2, in_channels=4, patch_size=2, pos_embed_max_size=64,
                  rope_scaling={"long_factor": [1.0] * 8, "short_factor": [1.0] * 8, "type": "su"})
    transformer = OmniGenTransformer2DModel(**config).eval()
    vae = AutoencoderKL(**{k: v for k, v in VAE.items() if k != "_class_name"}).eval()
    pipe = OmniGenPipeline(transformer=transformer, vae=vae, tokenizer=tokenizer,
                           scheduler=FlowMatchEulerDiscreteScheduler(invert_sigmas=True, num_train_timesteps=1))
    rec = Recorder()
    rec.hook(transformer, "transformer", "hidden_states",
             extra=lambda kw: (kw["input_ids"].shape[1], len(kw["input_img_latents"])))
    rec.wrap(vae, "decode", "vae.decode")
    rec.wrap(vae, "encode", "vae.encode")
    h, w = 16 * rng.randint(2, 6), 16 * rng.randint(2, 6)
    steps, per_prompt = rng.randint(1, 2), rng.randint(1, 2)
    words = " ".join(["word"] * rng.randint(70, 90))  # longer than the negative row: the prompt row is the longest
    kwargs = {}
    if images:
        kwargs["input_images"] = [Image.fromarray(np.zeros((h, w, 3), dtype=np.uint8))]
        words += " <img><|image_1|></img>"
    with torch.no_grad():
        pipe(words, height=h, width=w, num_inference_steps=steps, num_images_per_prompt=per_prompt,
             output_type="np", **kwargs)
    ((_, lat_h, lat_w, length, _),) = {s for s in rec.shapes["transformer"]}
    image_tokens = images * (h // 16) * (w // 16)
    options = {"prompt_tokens": length - image_tokens, **({"input_images": images} if images else {})}
    report = estimate_configs({"_class_name": "OmniGenPipeline"},
                              {"transformer": {**config, "_class_name": "OmniGenTransformer2DModel"}, "vae": VAE},
                              Settings(height=h, width=w, steps=steps, num_images_per_prompt=per_prompt)
                              .with_options(**options))
    where = f"seed {SEED}: {h}×{w}, {steps} steps, {per_prompt} per prompt, {images} image(s)"
    assert rec.planned_calls(report) == dict(rec.calls), where
    assert (lat_h, lat_w) == (h // 8, w // 8)
    assert {s[-1] for s in rec.shapes["transformer"]} == {2 * images * per_prompt}  # the latents handed in
    assert rec.shapes["vae.decode"] == {(4, h // 8, w // 8)}
    if images:
        assert rec.shapes["vae.encode"] == {(3, h, w)}
        shape = report.component("transformer").shape
        assert (shape["text_len"], shape["reference_tokens"]) == (length - image_tokens, image_tokens)
