"""Cosmos 1.0 pipelines (diffusers ``pipelines/cosmos/``): ``CosmosTextToWorldPipeline`` and
``CosmosVideoToWorldPipeline`` on the bundled cards (configs reconstructed from diffusers' conversion script):
defaults, the tokenizer's frame arithmetic, refusals, the laws, the fixtures; and each plan against the real
``__call__`` on tiny random components (skipped without torch)."""

from __future__ import annotations

import pytest

import flopcalc
from flopcalc.engine.errors import ConfigError, OptionError, ResolutionError
from flopcalc.engine.pipelines import Settings
from flopcalc.flops.estimate import estimate_configs
from flopcalc.engine.sources import resolve
from card_support import runs_by_call
from fixture_support import assert_fixture, fixtures

T2W, V2W = "cosmos-1.0-diffusion-7b-text2world", "cosmos-1.0-diffusion-7b-video2world"


def _plan(card: str, settings: Settings, *, index: dict | None = None, **overrides):
    source = resolve(card)
    components = {k: {**v, **overrides.get(k, {})} for k, v in source.components.items()}
    return estimate_configs({**source.model_index, **(index or {})}, components, settings)


def test_defaults():
    r = flopcalc.estimate(T2W)
    s = r.settings
    # pipeline_cosmos_text2world.py:404-421
    assert (r.pipeline, s.height, s.width, s.num_frames, s.steps, s.guidance_scale, s.max_sequence_length, r.passes) \
        == ("CosmosTextToWorldPipeline", 704, 1280, 121, 36, 7.0, 512, 2)
    assert runs_by_call(r) == {"text_encoder.forward": 2, "transformer.forward": 72, "vae.decode": 1}
    assert r.component("transformer").shape == {"latent_height": 88, "latent_width": 160, "text_len": 512,
                                                "latent_frames": 16}
    assert r.component("vae", "decode").shape == {"latent_height": 88, "latent_width": 160, "latent_frames": 16}
    assert any("CosmosSafetyChecker" in n for n in r.notes)
    v = flopcalc.estimate(V2W, batch_size=2, num_images_per_prompt=2, guidance_scale=1.0)
    assert v.pipeline == "CosmosVideoToWorldPipeline" and v.passes == 1
    assert runs_by_call(v) == {"text_encoder.forward": 2, "vae.encode": 1, "transformer.forward": 36 * 4,
                               "vae.decode": 4}
    assert v.component("vae", "encode").shape == {"height": 704, "width": 1280, "frames": 121}


def test_tokenizer_frames():
    """8k + 1 frames: k + 1 latent frames, decoded back to 8k + 1 (2T − 1 after the temporal up-sampler, ×4 − 3 by
    the Haar unpatching); the encoder's Haar levels and temporal down-sampler give the same k + 1."""
    from flopcalc.engine.architectures.autoencoder_kl_cosmos import encoded_sizes
    from flopcalc.engine.config import Config
    from flopcalc.formulas.cosmos_vae import cosmos_decoder

    vae = resolve(V2W).components["vae"]
    config = Config("vae", vae, {})
    assert [encoded_sizes(config, f, 64, 96)[0] for f in (1, 9, 25, 121, 10, 16)] == [1, 2, 4, 16, 2, 3]
    assert encoded_sizes(config, 121, 704, 1280)[1:] == (88, 160)
    common = dict(latent=16, out_channels=3, widths=vae["encoder_block_out_channels"], layers=2, attention_at=[32],
                  resolution=1024, patch=4, haar=True, spatial_layers=1, temporal_layers=1, height=8, width=8)
    assert [cosmos_decoder(frames=t, **common)[1] for t in (1, 2, 16)] == [1, 9, 121]


def test_refusals():
    with pytest.raises(OptionError, match="--strength does not apply"):
        flopcalc.estimate(T2W, strength=0.5)
    with pytest.raises(ResolutionError, match="cover 16 latent frames"):
        flopcalc.estimate(T2W, num_frames=129)
    # latents_mean null: no normalization, any length
    assert _plan(T2W, Settings(num_frames=129, steps=1), vae={"latents_mean": None, "latents_std": None}
                 ).component("vae", "decode").shape["latent_frames"] == 17
    with pytest.raises(ConfigError, match="do not split into its 16 latent channels"):
        _plan(T2W, Settings(), vae={"latents_mean": [0.0] * 20, "latents_std": [1.0] * 20})
    with pytest.raises(ResolutionError, match="encodes 16 frames into 3 latent frames"):
        flopcalc.estimate(V2W, num_frames=16)
    with pytest.raises(ConfigError, match="runs under CosmosVideoToWorldPipeline"):
        _plan(V2W, Settings(), index={"_class_name": "CosmosTextToWorldPipeline"})
    with pytest.raises(ConfigError, match="runs under CosmosTextToWorldPipeline"):
        _plan(T2W, Settings(), index={"_class_name": "CosmosVideoToWorldPipeline"})
    from flopcalc.engine.architectures.autoencoder_kl_cosmos import encoded_sizes
    from flopcalc.engine.config import Config

    with pytest.raises(ResolutionError, match="odd height of 9"):  # 36 / 4 (Haar): the real encode fails
        encoded_sizes(Config("vae", resolve(V2W).components["vae"], {}), 9, 36, 64)
    with pytest.raises(ResolutionError, match="latent of 1×16×16"):  # patch 1, 4 blocks: 2 of the 5 down-samplers
        _plan(V2W, Settings(height=64, width=64, num_frames=1),
              vae={"patch_size": 1, "spatial_compression_ratio": 32, "encoder_block_out_channels": [8, 8, 8, 8]})
    with pytest.raises(ConfigError, match="not a power of two"):
        _plan(T2W, Settings(), vae={"patch_size": 3})


@pytest.mark.parametrize("card", [T2W, V2W])
def test_law(card):
    """The law (stated for num_frames ≡ 1 mod 8, sizes multiples of 16) against the numeric estimate elsewhere."""
    pytest.importorskip("sympy")
    from flopcalc.flops.symbolic import symbolic_estimate

    law = symbolic_estimate(card)
    for h, w, f, steps, guidance in ((480, 848, 25, 7, 7.0), (256, 384, 9, 3, 1.0)):
        exact = flopcalc.estimate(card, height=h, width=w, num_frames=f, steps=steps, guidance_scale=guidance)
        assert law.at(H=h, W=w, F=f, S=steps, P=exact.passes, B=1, L=512) == exact.flops


@pytest.mark.parametrize("path", fixtures(T2W) + fixtures(V2W), ids=lambda p: f"{p.parent.name[22:]}-{p.stem}")
def test_fixture(path):
    assert_fixture(path)


# --------------------------------------------------------------------------- the real __call__


class _SafetyChecker:
    def to(self, *args, **kwargs):
        return self

    def check_text_safety(self, prompt):
        return True

    def check_video_safety(self, video):
        return video


@pytest.mark.parametrize("kind", ["text2world", "video2world"])
def test_plan_is_the_real_call(rng, kind):
    vcs = pytest.importorskip("video_call_support")
    import PIL.Image
    import torch
    from diffusers import (
        AutoencoderKLCosmos, CosmosTextToWorldPipeline, CosmosTransformer3DModel, CosmosVideoToWorldPipeline,
        EDMEulerScheduler,
    )
    from transformers import T5Config, T5EncoderModel

    from flopcalc.engine.measure.inputs.cosmos import _ensure_transforms

    _ensure_transforms()  # the padding-mask resize, without torchvision
    torch.manual_seed(vcs.SEED % 2**31)
    video = kind == "video2world"
    stats = rng.choice([None, "default"])
    models = {
        "text_encoder": T5EncoderModel(T5Config(d_model=16, d_ff=32, d_kv=8, num_heads=2, num_layers=1,
                                                vocab_size=50)),
        "transformer": CosmosTransformer3DModel(
            in_channels=4 + video, out_channels=4, num_attention_heads=2, attention_head_dim=12, num_layers=1,
            mlp_ratio=2.0, text_embed_dim=16, adaln_lora_dim=8, max_size=[8, 32, 32], patch_size=[1, 2, 2],
            rope_scale=[2.0, 1.0, 1.0], concat_padding_mask=True, extra_pos_embed_type="learnable"),
        "vae": AutoencoderKLCosmos(latent_channels=4, encoder_block_out_channels=(8, 8, 8, 8),
                                   decode_block_out_channels=(8, 8, 8, 8), attention_resolutions=(8,), resolution=64,
                                   num_layers=1, **({} if stats else {"latents_mean": None, "latents_std": None})),
    }
    for m in models.values():
        m.eval()
    configs = {name: vcs.config_dict(m) for name, m in models.items()}
    rec = vcs.Recorder()
    rec.forward("text_encoder", models["text_encoder"])
    rec.forward("transformer", models["transformer"], key="hidden_states")
    rec.method("vae.decode", models["vae"], "decode")
    rec.method("vae.encode", models["vae"], "encode")
    scheduler = EDMEulerScheduler(sigma_min=0.002, sigma_max=80, sigma_data=0.5, sigma_schedule="karras",
                                  num_train_timesteps=1000, prediction_type="epsilon", rho=7.0,
                                  final_sigmas_type="sigma_min")
    cls = CosmosVideoToWorldPipeline if video else CosmosTextToWorldPipeline
    pipe = cls(tokenizer=vcs.Tokenizer(), scheduler=scheduler, safety_checker=_SafetyChecker(), **models)
    h, w = rng.choice([(32, 48), (48, 32), (32, 32)])
    frames, guidance, batch, per_prompt = rng.choice([1, 9, 17]), rng.choice([1.0, 4.0]), rng.randint(1, 2), \
        rng.randint(1, 2)
    extra = {"image": PIL.Image.new("RGB", (w, h))} if video else {}
    with torch.no_grad():
        pipe(prompt=["a prompt"] * batch, height=h, width=w, num_frames=frames, num_inference_steps=2,
             guidance_scale=guidance, num_videos_per_prompt=per_prompt, max_sequence_length=6, output_type="pt",
             generator=torch.Generator().manual_seed(vcs.SEED % 2**31), **extra)
    settings = Settings(height=h, width=w, num_frames=frames, steps=2, guidance_scale=guidance,
                        max_sequence_length=6, batch_size=batch, num_images_per_prompt=per_prompt)
    index = {"_class_name": cls.__name__, **{name: ["x", "y"] for name in configs}}
    where = f"seed {vcs.SEED}: {kind} {h}×{w}, {frames} frames, guidance {guidance}, batch {batch}×{per_prompt}"
    assert vcs.plan_runs(index, configs, settings) == dict(rec.calls), where
    t = (frames - 1) // 8 + 1
    assert rec.shapes["transformer"] == {(4, t, h // 8, w // 8)}, where
    assert rec.shapes["vae.decode"] == {(4, t, h // 8, w // 8)}, where
    if video:
        assert rec.shapes["vae.encode"] == {(3, frames, h, w)}, where
