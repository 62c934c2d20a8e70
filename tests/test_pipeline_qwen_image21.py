"""QwenImage21Pipeline semantics (diffusers 0.42.1 ``pipelines/qwenimage21``) on the qwen-image-2.1 card (RECONSTRUCTED
configs: the class defaults; the text encoder missing): defaults, the prompt and template tokens, true CFG, the
key/value cache (a full first step, then the target tokens alone), ``sample_sigmas``, refusals; the fixtures against
flopcalc; and the plan against the real ``QwenImage21Pipeline.__call__`` run on CPU with tiny random components (a
stand-in processor whose tokens are the template's and the prompt's words), counted by FlopCounterMode."""

from __future__ import annotations

import pytest
from call_support import REPO, assert_fixture, card_fixtures, read
from card_support import runs_by_call
from conftest import SEED

import flopcalc
from flopcalc.engine.errors import ConfigError, OptionError, ResolutionError
from flopcalc.engine.pipelines import Settings
from flopcalc.flops.estimate import estimate_configs

CARD = REPO / "model_cards/qwen-image-2.1"


def _configs() -> tuple[dict, dict]:
    return read(CARD / "model_index.json"), {n: read(CARD / n / "config.json") for n in ("transformer", "vae")}


def _pieces(report) -> dict[str, tuple[int, int]]:
    """The transformer row's pieces: ``{kv_cache mode: (runs, torch MACs of one run)}``."""
    comp = report.component("transformer")
    tree = comp.tree
    if tree.formula != "pieces":
        return {"full": (comp.runs, comp.macs_per_run)}
    return {("extract" if i == 0 else "cached"): (comp.runs * p.count, p.per_item.macs("torch"))
            for i, p in enumerate(tree.children)}


@pytest.mark.parametrize("path", card_fixtures("qwen-image-2.1"), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_fixtures_are_exact(path):
    """The full forward (use_kv_cache 0: every step runs the whole sequence) and the decode, as measured."""
    fixture = read(path)
    s = fixture["settings"]
    assert_fixture(flopcalc.estimate("qwen-image-2.1", height=s["height"], width=s["width"], use_kv_cache=0), fixture)


def test_defaults_cache_and_text():
    r = flopcalc.estimate("qwen-image-2.1")
    s = r.settings
    assert (r.pipeline, s.height, s.width, s.steps, s.true_cfg_scale) == ("QwenImage21Pipeline", 1024, 1024, 40, 1.0)
    assert r.passes == 1
    assert runs_by_call(r) == {"transformer.forward": 1, "vae.decode": 1}
    pieces = _pieces(r)
    assert [runs for runs, _ in pieces.values()] == [1, 39]
    assert r.component("transformer").shape["text_len"] == 136  # 128 assumed prompt tokens + 8 template tokens
    assert any("text_encoder" in n and "not counted" in n for n in r.notes)
    # the first step is the fixture's full forward; a cached step runs the 4096 latent tokens alone
    full = read(REPO / "validation/fixtures/qwen-image-2.1/transformer-1024x1024.json")["torch"]["flops"]
    assert 2 * pieces["extract"][1] == full
    assert pieces["cached"][1] < pieces["extract"][1]
    off = flopcalc.estimate("qwen-image-2.1", use_kv_cache=0)
    assert _pieces(off) == {"full": (40, pieces["extract"][1])}
    assert r.macs < off.macs


def test_options():
    cfg = flopcalc.estimate("qwen-image-2.1", true_cfg_scale=4.0, negative_prompt=True, steps=8, prompt_tokens=20,
                            num_images_per_prompt=2, height=512, width=768)
    assert cfg.passes == 2
    assert [runs for runs, _ in _pieces(cfg).values()] == [4, 28]  # (1 and 7 steps) × 2 passes × 2 images
    assert cfg.component("transformer").shape == {"latent_height": 32, "latent_width": 48, "text_len": 28}
    assert runs_by_call(cfg)["vae.decode"] == 2
    one = flopcalc.estimate("qwen-image-2.1", true_cfg_scale=4.0, steps=1)  # no negative prompt: one pass
    assert one.passes == 1 and [runs for runs, _ in _pieces(one).values()] == [1]  # step 0 only
    assert any("no effect without a negative prompt" in n for n in one.notes)
    index, components = _configs()
    sigmas = estimate_configs({**index, "sample_sigmas": [1.0, 0.75, 0.5, 0.25]}, components, Settings())
    assert sigmas.settings.steps == 4 and any("sample_sigmas" in n for n in sigmas.notes)
    plain = {**components, "transformer": {**components["transformer"], "causal_condition": False}}
    uncached = estimate_configs(index, plain, Settings(steps=3))
    assert _pieces(uncached)["full"][0] == 3 and any("causal_condition is false" in n for n in uncached.notes)


def test_refusals():
    with pytest.raises(OptionError, match="--strength does not apply to QwenImage21Pipeline"):
        flopcalc.estimate("qwen-image-2.1", strength=0.5)
    with pytest.raises(OptionError, match="--guidance-scale does not apply"):
        flopcalc.estimate("qwen-image-2.1", guidance_scale=4.0)
    with pytest.raises(OptionError, match="unpadded and untruncated"):
        flopcalc.estimate("qwen-image-2.1", max_sequence_length=256)
    with pytest.raises(ResolutionError, match="multiple of 32"):
        flopcalc.estimate("qwen-image-2.1", height=1008)
    index, components = _configs()
    with pytest.raises(ConfigError, match="patch_size 2"):
        estimate_configs(index, {**components, "transformer": {**components["transformer"], "patch_size": 2}},
                         Settings())
    with pytest.raises(ConfigError, match="must sum to attention_head_dim 128"):
        estimate_configs(index, {**components, "transformer": {**components["transformer"],
                                                               "axes_dims_rope": [16, 56, 40]}}, Settings())
    with pytest.raises(ConfigError, match="sample_sigmas must be a non-empty list"):
        estimate_configs({**index, "sample_sigmas": []}, components, Settings())
    with pytest.raises(ConfigError, match="QwenImage21AvgDown3D, factor 1"):  # the real class refuses it when built
        estimate_configs(index, {**components, "vae": {**components["vae"], "dim_mult": [1, 2, 4, 8, 16]}}, Settings())
    with pytest.raises(ConfigError, match="mlp_ratio"):
        estimate_configs(index, {**components, "transformer": {**components["transformer"], "mlp_ratio": 0}},
                         Settings())


@pytest.mark.live
def test_the_plan_mirrors_the_real_call(rng):
    """The real ``__call__`` at a random size, steps, guidance, cache setting and prompt length, its FLOPs counted by
    FlopCounterMode per component, against the plan for the same configs."""
    pytest.importorskip("diffusers")
    import torch
    from diffusers import (
        AutoencoderKLQwenImage21,
        FlowMatchEulerDiscreteScheduler,
        QwenImage21Pipeline,
        QwenImage21Transformer2DModel,
    )
    from torch.utils.flop_counter import FlopCounterMode
    from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration

    from flopcalc.engine.measure.harness import _custom_mapping

    class Batch(dict):
        def __getattr__(self, name):
            try:
                return self[name]
            except KeyError:
                raise AttributeError(name) from None

        def to(self, device):
            return self

    class Tokenizer:
        def encode(self, text):
            return [7]  # <|image_pad|>: never in a text prompt's ids

    class Processor:
        """One token per word of the rendered template: the system turn is 14 words (as the real tokenizer's 14
        tokens) and the user turn around the prompt 8 (as its 8 tokens)."""
        tokenizer = Tokenizer()
        system = " ".join(["s"] * 14)

        def apply_chat_template(self, message, tokenize=True, return_dict=False):
            return [[1] * 14]

        def __call__(self, text, padding=True, padding_side="left", return_tensors="pt"):
            lengths = [14 + 8 + len(t.split("user\n", 1)[1].split("<|im_end|>")[0].split()) for t in text]
            longest = max(lengths)
            ids = torch.ones(len(text), longest, dtype=torch.long)
            mask = torch.stack([torch.cat([torch.zeros(longest - n, dtype=torch.long),
                                           torch.ones(n, dtype=torch.long)]) for n in lengths])
            return Batch(input_ids=ids, attention_mask=mask)

    text_cfg = {"hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 2, "num_attention_heads": 2,
                "num_key_value_heads": 1, "head_dim": 8, "vocab_size": 64}
    vision_cfg = {"depth": 1, "hidden_size": 16, "intermediate_size": 16, "num_heads": 2, "out_hidden_size": 16,
                  "deepstack_visual_indexes": [0], "num_position_embeddings": 16}
    encoder = Qwen3VLForConditionalGeneration(Qwen3VLConfig(text_config=text_cfg, vision_config=vision_cfg)).eval()
    tcfg = {"num_layers": 2, "attention_head_dim": 16, "num_attention_heads": 2, "context_in_dim": 16,
            "in_channels": 8, "out_channels": 8, "mlp_ratio": 2, "axes_dims_rope": [4, 6, 6],
            "causal_condition": rng.random() < 0.8}
    transformer = QwenImage21Transformer2DModel(**tcfg).eval()
    vcfg = {"base_dim": 4, "decoder_base_dim": 6, "z_dim": 8, "dim_mult": [1, 1, 1, 1, 1], "num_res_blocks": 1,
            "temperal_downsample": [False, True, True, True], "latents_mean": [0.0] * 8, "latents_std": [1.0] * 8}
    vae = AutoencoderKLQwenImage21(**vcfg).eval()
    pipe = QwenImage21Pipeline(scheduler=FlowMatchEulerDiscreteScheduler(), vae=vae, text_encoder=encoder,
                               processor=Processor(), transformer=transformer)
    h, w = 32 * rng.randint(1, 4), 32 * rng.randint(1, 4)
    steps, cfg, cache = rng.randint(1, 3), rng.choice([1.0, 4.0]), rng.choice([True, False])
    words = rng.randint(1, 12)
    counter = FlopCounterMode(display=False, custom_mapping=_custom_mapping())
    with torch.no_grad(), counter:
        pipe(" ".join(["w"] * words), negative_prompt=" ".join(["n"] * words), true_cfg_scale=cfg, height=h, width=w,
             num_inference_steps=steps, use_kv_cache=cache, output_type="np",
             generator=torch.Generator().manual_seed(SEED % 2**31))
    counts = counter.get_flop_counts()
    measured = {name: sum(counts[key].values()) for name, key in (
        ("text_encoder", "Qwen3VLForConditionalGeneration"), ("transformer", "QwenImage21Transformer2DModel"))}
    # decode is not forward: the tracker names the VAE's top-level modules by their classes (post_quant_conv is the
    # only top-level QwenImage21CausalConv3d a decode runs)
    measured["vae"] = sum(sum(counts.get(key, {}).values())
                          for key in ("QwenImage21CausalConv3d", "QwenImage21Decoder3d"))

    index = {"_class_name": "QwenImage21Pipeline",
             "text_encoder": ["transformers", "Qwen3VLForConditionalGeneration"],
             "transformer": ["diffusers", "QwenImage21Transformer2DModel"],
             "vae": ["diffusers", "AutoencoderKLQwenImage21"]}
    configs = {"text_encoder": {"architectures": ["Qwen3VLForConditionalGeneration"], "model_type": "qwen3_vl",
                                "text_config": text_cfg, "vision_config": vision_cfg},
               "transformer": {"_class_name": "QwenImage21Transformer2DModel", **tcfg},
               "vae": {"_class_name": "AutoencoderKLQwenImage21", **vcfg}}
    report = estimate_configs(index, configs, Settings(height=h, width=w, steps=steps, true_cfg_scale=cfg,
                                                       negative_prompt=True).with_options(
        prompt_tokens=words, use_kv_cache=int(cache)), convention="torch")
    where = (f"seed {SEED}: {h}×{w}, {steps} steps, true_cfg_scale {cfg}, use_kv_cache {cache}, causal_condition "
             f"{tcfg['causal_condition']}, {words} prompt words")
    planned = {c.component: 2 * c.macs_per_run * c.runs for c in report.components}
    assert planned == measured, where
    assert report.passes == (2 if cfg > 1 else 1), where


@pytest.mark.parametrize("cached", [False, True])
def test_the_block_is_its_stated_closed_form(cached):
    """formulas/qwen_image21.py: 4Qd² + 3Q·m·d² + 2·h·d_h·P per block, P = T² + N(T+N) (full) or N(T+N) (cached),
    Q = T + N or N; evaluated on symbols by the code that counts the model."""
    sp = pytest.importorskip("sympy")
    from flopcalc.formulas.qwen_image21 import qwen_image21_block

    h, dh, m, t, n = sp.symbols("h d_h m T N", positive=True, integer=True)
    d = h * dh
    block = qwen_image21_block(dim=d, heads=h, head_dim=dh, mlp_ratio=m, text_tokens=t, image_tokens=n,
                               cached=cached)
    q = n if cached else t + n
    pairs = n * (t + n) + (0 if cached else t * t)
    assert sp.expand(block.total.macs("torch") - (4 * q * d**2 + 3 * q * m * d**2 + 2 * h * dh * pairs)) == 0
