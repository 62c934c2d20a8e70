"""The real ``HiDreamImagePipeline.__call__`` (diffusers 0.42.1) run on CPU with tiny random components, against
flopcalc's plan for the same configs: which component runs how often, on what shape (the size it rescales to,
the latent, the CLIP / T5 / Llama token counts, the doubled batch under guidance), at a random requested size,
steps, guidance and ``max_sequence_length``. The tokenizers are stand-ins that pad to the length asked for (the
counts depend on that length only); no Hub access.

The seed is printed; ``FLOPCALC_SEED=N`` replays it.
"""

from __future__ import annotations

from collections import Counter

import pytest

from live_support import SEED, random_size  # noqa: E402  (skips without torch)
from flopcalc.flops.estimate import estimate_configs  # noqa: E402
from flopcalc.engine.pipelines import Settings  # noqa: E402

pytestmark = pytest.mark.live


class _Batch(dict):
    __getattr__ = dict.__getitem__


class _Tokenizer:
    """Pads every prompt to ``max_length`` (``padding="max_length"``); ``padding="longest"`` gives 3 tokens, so
    nothing is reported truncated."""

    model_max_length = 100_000
    eos_token = "</s>"
    pad_token = None

    def __call__(self, prompt, padding=None, max_length=None, return_tensors=None, **kwargs):
        import torch

        prompts = [prompt] if isinstance(prompt, str) else prompt
        length = max_length if padding == "max_length" else 3
        return _Batch(input_ids=torch.ones(len(prompts), length, dtype=torch.long),
                      attention_mask=torch.ones(len(prompts), length, dtype=torch.long))

    def batch_decode(self, ids):  # pragma: no cover - never reached (nothing is truncated)
        return [""] * len(ids)


def _components():
    from diffusers import AutoencoderKL, FlowMatchEulerDiscreteScheduler, HiDreamImageTransformer2DModel
    from transformers import (CLIPTextConfig, CLIPTextModelWithProjection, LlamaConfig, LlamaForCausalLM, T5Config,
                              T5EncoderModel)

    clip = dict(hidden_size=16, intermediate_size=32, num_attention_heads=2, num_hidden_layers=1, vocab_size=50,
                max_position_embeddings=256)
    configs = {
        "text_encoder": CLIPTextConfig(**clip, projection_dim=8),
        "text_encoder_2": CLIPTextConfig(**clip, projection_dim=12),
        "text_encoder_3": T5Config(d_model=16, d_ff=32, d_kv=8, num_heads=2, num_layers=1, vocab_size=50),
        "text_encoder_4": LlamaConfig(hidden_size=16, intermediate_size=32, num_attention_heads=2,
                                      num_key_value_heads=1, num_hidden_layers=2, vocab_size=50),
    }
    models = {"text_encoder": CLIPTextModelWithProjection(configs["text_encoder"]),
              "text_encoder_2": CLIPTextModelWithProjection(configs["text_encoder_2"]),
              "text_encoder_3": T5EncoderModel(configs["text_encoder_3"]),
              "text_encoder_4": LlamaForCausalLM(configs["text_encoder_4"])}
    models["transformer"] = HiDreamImageTransformer2DModel(
        patch_size=2, in_channels=4, num_layers=1, num_single_layers=1, attention_head_dim=16, num_attention_heads=1,
        caption_channels=[16, 16], text_emb_dim=20, num_routed_experts=2, num_activated_experts=1,
        axes_dims_rope=[8, 4, 4], max_resolution=[128, 128], llama_layers=[0, 1])
    models["vae"] = AutoencoderKL(in_channels=3, out_channels=3, latent_channels=4, block_out_channels=[8, 8, 8, 8],
                                  down_block_types=["DownEncoderBlock2D"] * 4, up_block_types=["UpDecoderBlock2D"] * 4,
                                  layers_per_block=1, norm_num_groups=4, scaling_factor=0.3611, shift_factor=0.1159)
    for model in models.values():
        model.eval()  # as from_pretrained leaves them (a training transformer unpatchifies otherwise)
    dicts = {name: {**cfg.to_dict(), "architectures": [type(models[name]).__name__]} for name, cfg in configs.items()}
    dicts["transformer"] = {**models["transformer"].config, "_class_name": "HiDreamImageTransformer2DModel"}
    dicts["vae"] = {**models["vae"].config, "_class_name": "AutoencoderKL"}
    return models, dicts, FlowMatchEulerDiscreteScheduler()


def test_the_plan_mirrors_the_real_call(rng):
    import torch
    from diffusers import HiDreamImagePipeline

    models, configs, scheduler = _components()
    calls: Counter = Counter()
    shapes: dict[str, set] = {}

    def hook(name):
        def record(module, args, kwargs):
            first = args[0] if args else next(iter(kwargs.values()))
            batch = first.shape[0]
            calls[name] += batch
            shapes.setdefault(name, set()).add(tuple(first.shape[1:]))
        return record

    for name in ("text_encoder", "text_encoder_2", "text_encoder_3", "text_encoder_4", "transformer"):
        models[name].register_forward_pre_hook(hook(name), with_kwargs=True)
    decode = models["vae"].decode

    def counted_decode(z, *args, **kwargs):
        calls["vae.decode"] += z.shape[0]
        shapes.setdefault("vae.decode", set()).add(tuple(z.shape[2:]))
        return decode(z, *args, **kwargs)

    models["vae"].decode = counted_decode
    pipe = HiDreamImagePipeline(scheduler=scheduler, tokenizer=_Tokenizer(), tokenizer_2=_Tokenizer(),
                                tokenizer_3=_Tokenizer(), tokenizer_4=_Tokenizer(), **models)

    h, w = random_size(rng, 8, 256, 2048), random_size(rng, 8, 256, 2048)
    steps, guidance = rng.randint(1, 2), rng.choice([0.0, 1.0, 3.5])
    length = rng.choice([16, 40, 230])
    with torch.no_grad():
        pipe("a prompt", height=h, width=w, num_inference_steps=steps, guidance_scale=guidance,
             max_sequence_length=length, output_type="np", generator=torch.Generator().manual_seed(SEED % 2**31))

    index = {"_class_name": "HiDreamImagePipeline", **{name: ["x", "y"] for name in configs}}
    report = estimate_configs(index, configs, Settings(height=h, width=w, steps=steps, guidance_scale=guidance,
                                                        max_sequence_length=length))
    where = f"seed {SEED}: {h}×{w}, {steps} steps, guidance {guidance}, max_sequence_length {length}"
    planned = {f"{c.component}.{c.call}" if c.call != "forward" else c.component: c.runs for c in report.components}
    assert planned == dict(calls), where
    s = report.settings
    lat = (s.height // 8, s.width // 8)
    assert shapes["vae.decode"] == {lat}, where
    assert shapes["transformer"] == {(4, *lat)}, where
    clip = min(length, 218)
    assert shapes["text_encoder"] == shapes["text_encoder_2"] == {(clip,)}, where
    assert shapes["text_encoder_3"] == shapes["text_encoder_4"] == {(length,)}, where
    assert report.component("text_encoder").shape == {"seq_len": clip}
    run = report.component("transformer").shape
    assert (run["latent_height"], run["latent_width"], run["text_len"], run["text_len_2"]) == (*lat, length, length)
