"""Latte (diffusers ``LattePipeline``) on the configs built for it (validation/configs/latte-1: no Latte config was
found, so there is no card): defaults, the prompt's own tokens (mask_feature), per-frame decodes, refusals, the law,
the fixtures; and the plan against the real ``__call__`` on tiny random components (skipped without torch)."""

from __future__ import annotations

import pytest

from flopcalc.engine.errors import OptionError, ResolutionError
from flopcalc.engine.pipelines import Settings, plan
from flopcalc.flops.estimate import estimate_configs
from flopcalc.engine.sources import resolve
from fixture_support import REPO, assert_fixture, fixtures

FOLDER = str(REPO / "validation" / "configs" / "latte-1")


def _report(settings: Settings, **overrides):
    source = resolve(FOLDER)
    components = {k: {**v, **overrides.get(k, {})} for k, v in source.components.items()}
    return estimate_configs(dict(source.model_index), components, settings)


def test_defaults_and_prompt_tokens():
    r = _report(Settings())
    s = r.settings
    assert (r.pipeline, s.height, s.width, s.num_frames, s.steps, s.guidance_scale, r.passes) == \
        ("LattePipeline", 512, 512, 16, 50, 7.5, 2)
    runs = {(c.component, c.call): (c.runs, c.shape) for c in r.components}
    assert runs[("text_encoder", "forward")] == (2, {"seq_len": 120})
    assert runs[("transformer", "forward")] == (100, {"latent_height": 64, "latent_width": 64, "text_len": 120,
                                                      "latent_frames": 16})
    assert runs[("vae", "decode")] == (16, {"latent_height": 64, "latent_width": 64})
    # one video: the transformer sees the prompt's own 20 tokens; T5 still runs on 120
    short = _report(Settings(max_sequence_length=20, steps=2))
    assert short.component("transformer").shape["text_len"] == 20
    assert short.component("text_encoder").shape["seq_len"] == 120
    # two videos: all 120 (masked) tokens are kept
    both = _report(Settings(max_sequence_length=20, batch_size=2, steps=2))
    assert both.component("transformer").shape["text_len"] == 120 and both.component("transformer").runs == 8
    assert both.component("vae", "decode").runs == 32
    tree = r.component("transformer").tree
    d, n = 1152, 32 * 32
    assert tree.find("transformer_blocks.0.attn1.to_q").total.macs("torch") == 16 * n * d * d  # every frame
    assert tree.find("temporal_transformer_blocks.0.attn1.to_q").total.macs("torch") == n * 16 * d * d
    assert tree.find("transformer_blocks.0.attn2.to_k").total.macs("torch") == 16 * 120 * d * d  # text per frame


def test_refusals():
    with pytest.raises(ResolutionError, match="video_length 16"):
        _report(Settings(num_frames=8))
    with pytest.raises(OptionError, match="at most the 120 tokens"):
        _report(Settings(max_sequence_length=200))
    with pytest.raises(OptionError, match="--strength does not apply"):
        _report(Settings(strength=0.5))


def test_law():
    pytest.importorskip("sympy")
    from flopcalc.flops.symbolic import symbolic_estimate

    law = symbolic_estimate(FOLDER)
    for h, w, steps, guidance, batch in ((256, 384, 7, 7.5, 1), (512, 256, 3, 1.0, 2)):
        exact = _report(Settings(height=h, width=w, steps=steps, guidance_scale=guidance, batch_size=batch))
        assert law.at(H=h, W=w, S=steps, P=exact.passes, B=batch) == exact.flops


@pytest.mark.parametrize("path", fixtures("latte-1"), ids=lambda p: p.stem)
def test_fixture(path):
    assert_fixture(path)


# --------------------------------------------------------------------------- the real __call__


def test_plan_is_the_real_call(rng):
    vcs = pytest.importorskip("video_call_support")
    import torch
    from diffusers import AutoencoderKL, DDIMScheduler, LattePipeline, LatteTransformer3DModel
    from transformers import T5Config, T5EncoderModel

    class Tokenizer(vcs.Tokenizer):
        """Pads to ``max_length`` with a mask of the prompt's ``longest`` tokens (what mask_feature keeps)."""

        def __call__(self, prompt=None, padding=None, max_length=None, **kwargs):
            batch = super().__call__(prompt, padding=padding, max_length=max_length, **kwargs)
            batch["attention_mask"][:, self.longest:] = 0
            return batch

    torch.manual_seed(vcs.SEED % 2**31)
    frames = rng.choice([1, 3])
    models = {
        "text_encoder": T5EncoderModel(T5Config(d_model=16, d_ff=32, d_kv=8, num_heads=2, num_layers=1, vocab_size=50)),
        "transformer": LatteTransformer3DModel(
            num_attention_heads=2, attention_head_dim=8, in_channels=4, out_channels=8, num_layers=1,
            cross_attention_dim=16, attention_bias=True, sample_size=8, patch_size=2, activation_fn="gelu-approximate",
            num_embeds_ada_norm=1000, norm_type="ada_norm_single", norm_elementwise_affine=False, norm_eps=1e-6,
            caption_channels=16, video_length=3),
        "vae": AutoencoderKL(block_out_channels=(8, 8), down_block_types=("DownEncoderBlock2D",) * 2,
                             up_block_types=("UpDecoderBlock2D",) * 2, latent_channels=4, norm_num_groups=8,
                             layers_per_block=1),
    }
    for m in models.values():
        m.eval()
    configs = {name: vcs.config_dict(m) for name, m in models.items()}
    rec = vcs.Recorder()
    rec.forward("text_encoder", models["text_encoder"])
    rec.forward("transformer", models["transformer"], key="hidden_states")
    rec.method("vae.decode", models["vae"], "decode")
    pipe = LattePipeline(tokenizer=Tokenizer(longest=5), scheduler=DDIMScheduler(), **models)
    h, w = rng.choice([(16, 24), (16, 16)])
    guidance, batch, per_prompt = rng.choice([1.0, 4.0]), rng.randint(1, 2), rng.randint(1, 2)
    with torch.no_grad():
        pipe(prompt=["a prompt"] * batch, height=h, width=w, video_length=frames, num_inference_steps=2,
             guidance_scale=guidance, num_images_per_prompt=per_prompt, output_type="pt", clean_caption=False,
             generator=torch.Generator().manual_seed(vcs.SEED % 2**31))
    settings = Settings(height=h, width=w, num_frames=frames, steps=2, guidance_scale=guidance, batch_size=batch,
                        num_images_per_prompt=per_prompt, max_sequence_length=5)
    index = {"_class_name": "LattePipeline", **{name: ["x", "y"] for name in configs}}
    where = f"seed {vcs.SEED}: {h}×{w}, {frames} frames, guidance {guidance}, batch {batch}×{per_prompt}"
    assert vcs.plan_runs(index, configs, settings) == dict(rec.calls), where
    (run,) = [r for r in plan(index, configs, settings).runs if r.component == "transformer"]
    assert {c["encoder_hidden_states"][1] for c in rec.inputs["transformer"]} == {run.shape.text_len}, where
    assert rec.shapes["transformer"] == {(4, frames, h // 2, w // 2)}, where
