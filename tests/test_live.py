"""Live re-measurement: when torch, diffusers and transformers are importable, build the real
modules on the meta device and count them now, so stale fixtures cannot hide a mismatch.

Two kinds of runs, all from one seed (printed; set ``FLOPCALC_SEED`` to replay):

* the bundled cards' heaviest components at a random valid resolution and text length;
* randomized configs of every registered architecture (layer counts, widths, heads, patch size,
  q/k norms, dual-attention layers, VAE block widths, gated/ungated MLPs, ...), which is how we
  know the formulas follow the config and not the three checkpoints we ship.

Bar: ``torch`` convention exact, parameters exact, ``thop`` convention exact.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from live_support import (  # noqa: E402  (skips without torch)
    REPO,
    SEED,
    check_plan,
    write_config as _write,
)
from flopcalc.engine.pipelines import Settings  # noqa: E402

pytestmark = pytest.mark.live



def _check(config_dir: Path, name: str, settings: Settings, measure_settings: dict, call: str = "forward",
           with_thop: bool = True) -> None:
    check_plan(config_dir, name, settings, measure_settings, call=call, thop=with_thop)



def _size(rng: random.Random, multiple: int, lo: int, hi: int) -> int:
    return multiple * rng.randint(lo // multiple, hi // multiple)


# --------------------------------------------------------------------------- bundled cards


def test_flux_transformer_at_random_size(rng):
    h, w, t = _size(rng, 16, 256, 1536), _size(rng, 16, 256, 1536), rng.randint(1, 512)
    _check(REPO / "model_cards/flux-dev/transformer", "transformer", Settings(height=h, width=w, max_sequence_length=t),
           {"height": h, "width": w, "text_len": t}, with_thop=False)


def test_sd35_large_transformer_at_random_size(rng):
    h, w, t = _size(rng, 16, 256, 1536), _size(rng, 16, 256, 1536), rng.randint(1, 256)
    _check(REPO / "model_cards/sd3.5-large/transformer", "transformer",
           Settings(height=h, width=w, max_sequence_length=t), {"height": h, "width": w, "text_len": 77 + t},
           with_thop=False)


def test_vae_decode_and_encode_at_random_size(rng):
    h, w = _size(rng, 8, 64, 1024), _size(rng, 8, 64, 1024)
    folder = REPO / "model_cards/sd3-medium/vae"
    _check(folder, "vae", Settings(height=h, width=w), {"height": h, "width": w}, call="decode")
    _check(folder, "vae", Settings(height=h, width=w, strength=1.0), {"height": h, "width": w}, call="encode")


# --------------------------------------------------------------------------- randomized configs


def test_random_flux_configs(rng, tmp_path):
    for i in range(3):
        head_dim = rng.choice([16, 32])
        cfg = {
            "_class_name": "FluxTransformer2DModel",
            "num_attention_heads": rng.randint(1, 4),
            "attention_head_dim": head_dim,
            "num_layers": rng.randint(0, 2),
            "num_single_layers": rng.randint(0, 2),
            "in_channels": 4 * rng.choice([4, 16]),
            "joint_attention_dim": rng.choice([24, 40]),
            "pooled_projection_dim": rng.choice([8, 24]),
            "guidance_embeds": rng.random() < 0.5,
            "axes_dims_rope": [head_dim // 4, 3 * head_dim // 8, 3 * head_dim // 8],
        }
        h, w, t = _size(rng, 16, 32, 256), _size(rng, 16, 32, 256), rng.randint(1, 40)
        _check(_write(tmp_path, f"flux{i}", cfg), "transformer", Settings(height=h, width=w, max_sequence_length=t),
               {"height": h, "width": w, "text_len": t})


def test_random_sd3_configs(rng, tmp_path):
    for i in range(4):
        heads, head_dim, layers = rng.randint(1, 4), rng.choice([8, 16]), rng.randint(1, 4)
        patch = rng.choice([1, 2])
        cfg = {
            "_class_name": "SD3Transformer2DModel",
            "num_attention_heads": heads,
            "attention_head_dim": head_dim,
            "caption_projection_dim": heads * head_dim,
            "num_layers": layers,
            "patch_size": patch,
            "in_channels": rng.choice([4, 16]),
            "out_channels": rng.choice([4, 16]),
            "joint_attention_dim": rng.choice([24, 40]),
            "pooled_projection_dim": rng.choice([8, 24]),
            "pos_embed_max_size": 64,
            "sample_size": 32,
            "qk_norm": rng.choice([None, "rms_norm", "layer_norm"]),
            "dual_attention_layers": sorted(rng.sample(range(layers), rng.randint(0, layers))),
        }
        h, w, t = _size(rng, 16, 32, 256), _size(rng, 16, 32, 256), rng.randint(1, 30)
        _check(_write(tmp_path, f"sd3{i}", cfg), "transformer", Settings(height=h, width=w, max_sequence_length=t),
               {"height": h, "width": w, "text_len": 77 + t})


def test_random_autoencoder_kl_configs(rng, tmp_path):
    for i in range(3):
        levels = rng.randint(1, 4)
        channels = [32 * rng.randint(1, 3) for _ in range(levels)]
        cfg = {
            "_class_name": "AutoencoderKL",
            "block_out_channels": channels,
            "down_block_types": ["DownEncoderBlock2D"] * levels,
            "up_block_types": ["UpDecoderBlock2D"] * levels,
            "layers_per_block": rng.randint(1, 2),
            "latent_channels": rng.choice([4, 16]),
            "mid_block_add_attention": rng.random() < 0.7,
            "use_quant_conv": rng.random() < 0.5,
            "use_post_quant_conv": rng.random() < 0.5,
            "sample_size": 64,
        }
        f = 2 ** (levels - 1)
        h, w = _size(rng, f, 16, 96), _size(rng, f, 16, 96)
        folder = _write(tmp_path, f"vae{i}", cfg)
        _check(folder, "vae", Settings(height=h, width=w), {"height": h, "width": w}, call="decode")
        _check(folder, "vae", Settings(height=h, width=w, strength=1.0), {"height": h, "width": w}, call="encode")


def test_random_clip_configs(rng, tmp_path):
    for i, arch in enumerate(["CLIPTextModel", "CLIPTextModelWithProjection"] * 2):
        heads = rng.randint(1, 4)
        cfg = {
            "architectures": [arch],
            "model_type": "clip_text_model",
            "hidden_size": heads * rng.choice([8, 16]),
            "num_attention_heads": heads,
            "intermediate_size": rng.choice([24, 64]),
            "num_hidden_layers": rng.randint(1, 3),
            "projection_dim": rng.choice([8, 40]),
            "max_position_embeddings": 77,
            "vocab_size": 1000,
            "hidden_act": rng.choice(["quick_gelu", "gelu"]),
        }
        seq = rng.randint(1, 77)
        _check(_write(tmp_path, f"clip{i}", cfg), "text_encoder", Settings(max_sequence_length=seq), {"seq_len": seq})


def test_random_t5_configs(rng, tmp_path):
    for i in range(3):
        cfg = {
            "architectures": ["T5EncoderModel"],
            "model_type": "t5",
            "d_model": rng.choice([16, 32]),
            "d_kv": rng.choice([8, 12]),
            "num_heads": rng.randint(1, 4),
            "d_ff": rng.choice([24, 64]),
            "num_layers": rng.randint(1, 3),
            "feed_forward_proj": rng.choice(["relu", "gated-gelu"]),
            "vocab_size": 500,
            "relative_attention_num_buckets": rng.choice([8, 32]),
        }
        seq = rng.randint(1, 64)
        _check(_write(tmp_path, f"t5{i}", cfg), "text_encoder", Settings(max_sequence_length=seq), {"seq_len": seq})


def test_random_cross_attention_blocks(rng):
    """The cross-attention transformer block against diffusers' ``BasicTransformerBlock`` itself."""
    import torch
    from diffusers.models.attention import BasicTransformerBlock
    from torch.utils.flop_counter import FlopCounterMode

    from flopcalc.formulas.cross_attention_block import cross_attention_block

    for _ in range(4):
        heads, head_dim = rng.randint(1, 4), rng.choice([8, 16])
        dim = heads * head_dim * rng.choice([1, 2])
        context_dim = rng.choice([None, 24, 40])
        act = rng.choice(["geglu", "gelu", "gelu-approximate"])
        bias, inner = rng.random() < 0.5, rng.choice([None, 48])
        n, m = rng.randint(1, 64), rng.randint(1, 20)
        with torch.device("meta"):
            block = BasicTransformerBlock(dim, heads, head_dim, cross_attention_dim=context_dim, activation_fn=act,
                                          attention_bias=bias, ff_inner_dim=inner)
            x = torch.empty(1, n, dim)
            ctx = torch.empty(1, m, context_dim) if context_dim else None
            with FlopCounterMode(display=False) as counter:
                block(x, encoder_hidden_states=ctx)
        ours = cross_attention_block(dim=dim, heads=heads, head_dim=head_dim, tokens=n, context_tokens=m,
                                     context_dim=context_dim, activation=act, attention_bias=bias,
                                     ff_inner_dim=inner).total
        where = f"seed {SEED}: dim {dim} heads {heads}×{head_dim} ctx {context_dim} {act} bias {bias} n {n} m {m}"
        assert 2 * ours.macs("torch") == counter.get_total_flops(), where
        assert ours.params == sum(p.numel() for p in block.parameters()), where


def test_random_unet_configs(rng, tmp_path):
    for i in range(4):
        nb = rng.randint(2, 3)
        channels = [32 * rng.randint(1, 3) for _ in range(nb)]
        text_time = rng.random() < 0.5
        cfg = {
            "_class_name": "UNet2DConditionModel",
            "block_out_channels": channels,
            "down_block_types": [rng.choice(["CrossAttnDownBlock2D", "DownBlock2D"]) for _ in range(nb)],
            "up_block_types": [rng.choice(["CrossAttnUpBlock2D", "UpBlock2D"]) for _ in range(nb)],
            "mid_block_type": rng.choice(["UNetMidBlock2DCrossAttn", "UNetMidBlock2D"]),
            "layers_per_block": rng.choice([1, 2, [rng.randint(1, 2) for _ in range(nb)]]),
            "transformer_layers_per_block": rng.choice([1, [rng.randint(1, 2) for _ in range(nb)]]),
            "attention_head_dim": [rng.choice([1, 2, 4]) for _ in range(nb)],
            "cross_attention_dim": rng.choice([24, 40]),
            "use_linear_projection": rng.random() < 0.5,
            "resnet_time_scale_shift": rng.choice(["default", "scale_shift"]),
            "downsample_padding": rng.choice([0, 1]),
            "time_embedding_dim": rng.choice([None, 48]),
            "in_channels": 4,
            "out_channels": rng.choice([4, 8]),
            "sample_size": 16,
        }
        if text_time:
            cfg.update(addition_embed_type="text_time", addition_time_embed_dim=8,
                       projection_class_embeddings_input_dim=16 + 6 * 8)
        h, w = _size(rng, 8, 64, 200), _size(rng, 8, 64, 200)
        _check(_write(tmp_path, f"unet{i}", cfg), "unet", Settings(height=h, width=w),
               {"height": h, "width": w, "text_len": 77})


def test_random_pixart_and_dit_configs(rng, tmp_path):
    for i in range(3):
        heads, head_dim = rng.randint(1, 4), rng.choice([12, 24])
        cfg = {
            "_class_name": "Transformer2DModel",  # the legacy name, remapped by norm_type
            "norm_type": "ada_norm_single",
            "num_attention_heads": heads,
            "attention_head_dim": head_dim,
            "num_layers": rng.randint(1, 3),
            "caption_channels": rng.choice([16, 40]),
            "cross_attention_dim": heads * head_dim,
            "sample_size": rng.choice([64, 128]),
            "patch_size": 2,
            "in_channels": 4,
            "out_channels": rng.choice([4, 8]),
            "attention_bias": rng.random() < 0.5,
            "norm_elementwise_affine": rng.random() < 0.5,
            "activation_fn": "gelu-approximate",
        }
        h, w, t = _size(rng, 16, 64, 256), _size(rng, 16, 64, 256), rng.randint(1, 40)
        _check(_write(tmp_path, f"pixart{i}", cfg), "transformer",
               Settings(height=h, width=w, max_sequence_length=t, resolution_binning=False),
               {"height": h, "width": w, "text_len": t})
    for i in range(2):
        heads, head_dim = rng.randint(1, 4), rng.choice([12, 24])
        cfg = {
            "_class_name": "Transformer2DModel",
            "norm_type": "ada_norm_zero",
            "num_attention_heads": heads,
            "attention_head_dim": head_dim,
            "num_layers": rng.randint(1, 3),
            "num_embeds_ada_norm": rng.choice([10, 1000]),
            "sample_size": 16,
            "patch_size": 2,
            "in_channels": 4,
            "out_channels": rng.choice([4, 8]),
            "activation_fn": "gelu-approximate",
        }
        side = _size(rng, 16, 64, 256)
        _check(_write(tmp_path, f"dit{i}", cfg), "transformer", Settings(height=side, width=side),
               {"height": side, "width": side})
