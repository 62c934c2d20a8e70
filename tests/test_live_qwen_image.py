"""Live re-measurement of the Qwen-Image family: ``QwenImageTransformer2DModel`` and
``AutoencoderKLQwenImage`` built on the meta device and counted now, on the card at a random size
and on randomized configs (every structural key the assemblers read), plus the causal-VAE block
formulas on multi-frame videos (the chunked path the Wan VAE shares).

The seed is printed; ``FLOPCALC_SEED=N`` replays it. Bar: ``torch`` convention exact,
parameters exact, ``thop`` convention exact.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from live_support import (  # noqa: E402  (skips without torch)
    REPO,
    SEED,
    check_plan,
    measure,
    write_config as _write,
)
from flopcalc.engine.cost import Node  # noqa: E402
from flopcalc.formulas.causal_vae import (  # noqa: E402
    causal_conv3d,
    causal_decoder,
    causal_encoder,
    decode_chunks,
    encode_chunks,
    encoded_frames,
)
from flopcalc.engine.pipelines import Settings  # noqa: E402

pytestmark = pytest.mark.live

CARD = REPO / "model_cards/qwen-image"
INDEX = json.loads((CARD / "model_index.json").read_text())


def _check(config_dir: Path, name: str, settings: Settings, measure_settings: dict, call: str = "forward",
           with_thop: bool = True) -> None:
    """flopcalc's plan for ``name`` under ``QwenImagePipeline`` against a fresh measurement."""
    check_plan(config_dir, name, settings, measure_settings, index=INDEX, call=call, thop=with_thop)



def _size(rng: random.Random, multiple: int, lo: int, hi: int) -> int:
    return multiple * rng.randint(max(1, lo // multiple), hi // multiple)


# --------------------------------------------------------------------------- the card


def test_card_transformer_at_random_size(rng):
    h, w, t = _size(rng, 16, 256, 1536), _size(rng, 16, 256, 1536), rng.randint(1, 1024)
    _check(CARD / "transformer", "transformer", Settings(height=h, width=w, max_sequence_length=t),
           {"height": h, "width": w, "text_len": t}, with_thop=False)


def test_card_vae_decode_and_encode_at_random_size(rng):
    h, w = _size(rng, 16, 64, 1024), _size(rng, 16, 64, 1024)
    _check(CARD / "vae", "vae", Settings(height=h, width=w), {"height": h, "width": w}, call="decode")
    _check(CARD / "vae", "vae", Settings(height=h, width=w, strength=1.0), {"height": h, "width": w}, call="encode")


# --------------------------------------------------------------------------- randomized configs


def test_random_qwen_image_transformer_configs(rng, tmp_path):
    for i in range(4):
        heads, head_dim = rng.randint(1, 4), rng.choice([16, 32])
        cfg = {
            "_class_name": "QwenImageTransformer2DModel",
            "num_attention_heads": heads,
            "attention_head_dim": head_dim,
            "num_layers": rng.randint(0, 3),
            "patch_size": rng.choice([1, 2]),
            "in_channels": 4 * rng.choice([4, 16]),
            "out_channels": rng.choice([None, 4, 16]),
            "joint_attention_dim": rng.choice([24, 40]),
            "axes_dims_rope": [head_dim // 4, 3 * head_dim // 8, 3 * head_dim // 8],
            "guidance_embeds": False,
            "zero_cond_t": rng.random() < 0.5,
            "use_additional_t_cond": rng.random() < 0.5,
            "use_layer3d_rope": rng.random() < 0.5,
        }
        h, w, t = _size(rng, 16, 32, 256), _size(rng, 16, 32, 256), rng.randint(1, 40)
        _check(_write(tmp_path, f"qwen{i}", cfg), "transformer", Settings(height=h, width=w, max_sequence_length=t),
               {"height": h, "width": w, "text_len": t})


def _random_vae_config(rng: random.Random, *, max_temporal: int = 3) -> dict:
    levels = rng.randint(1, 4)
    temporal = [rng.random() < 0.5 for _ in range(levels - 1)]
    while sum(temporal) > max_temporal:
        temporal[temporal.index(True)] = False
    return {
        "_class_name": "AutoencoderKLQwenImage",
        "base_dim": rng.choice([8, 16, 24]),
        "z_dim": rng.choice([4, 16]),
        "dim_mult": [rng.randint(1, 4) for _ in range(levels)],
        "num_res_blocks": rng.randint(1, 2),
        "attn_scales": sorted(rng.sample([1.0, 0.5, 0.25], rng.randint(0, 2))),
        "temperal_downsample": temporal,
        "input_channels": rng.choice([3, 4]),
    }


def test_random_qwen_image_vae_configs(rng, tmp_path):
    for i in range(4):
        cfg = _random_vae_config(rng)
        f = 2 ** len(cfg["temperal_downsample"])
        h, w = _size(rng, 2 * f, 16, 96), _size(rng, 2 * f, 16, 96)
        folder = _write(tmp_path, f"vae{i}", cfg)
        _check(folder, "vae", Settings(height=h, width=w), {"height": h, "width": w}, call="decode")
        if not _encoder_has_attention(cfg):
            _check(folder, "vae", Settings(height=h, width=w, strength=1.0), {"height": h, "width": w}, call="encode")


def _encoder_has_attention(cfg: dict) -> bool:
    """``attn_scales`` places ``QwenImageAttentionBlock``s in the encoder's ``down_blocks``, which
    ``QwenImageEncoder3d.forward`` then calls with the feature cache: diffusers 0.42.1 raises
    ``TypeError`` (``forward() takes 2 positional arguments``), so encoding cannot be measured. Their
    parameters still count (checked through ``decode``, whose component parameters cover both calls)."""
    return any(0.5 ** i in cfg["attn_scales"] for i in range(len(cfg["dim_mult"])))


# --------------------------------------------------------------------------- videos: the chunked causal path


def _assert_matches(tree: Node, fx: dict, where: str) -> None:
    assert 2 * tree.total.macs("torch") == fx["torch"]["flops"], where
    for path, flops in fx["torch"]["by_module"].items():
        node = tree if path == "Global" else tree.find(path)
        assert (0 if node is None else 2 * node.per_item.macs("torch")) == flops, f"{where}: {path}"
    assert tree.total.macs("thop") == fx["thop"]["macs"], where


def test_causal_vae_formulas_on_videos(rng, tmp_path):
    """``_decode`` runs the decoder once per latent frame and ``_encode`` the encoder on the first
    frame and then chunks of 4: the block formulas, given the frames of each chunk, sum the chunks
    as FlopCounterMode does (temporal ``time_conv``s run from the second chunk on). At most two
    temporal downsamplers: a 4-frame chunk can halve only twice."""
    for i, cfg in enumerate([json.loads((CARD / "vae/config.json").read_text())] + [_random_vae_config(rng, max_temporal=2)]):
        model = measure.build_model(_write(tmp_path, f"video{i}", cfg))
        levels, temporal = len(cfg["dim_mult"]), cfg["temperal_downsample"]
        kw = {"base_dim": cfg["base_dim"], "dim_mult": cfg["dim_mult"], "num_res_blocks": cfg["num_res_blocks"]}
        z, c = cfg["z_dim"], cfg.get("input_channels", 3)
        f = 2 ** (levels - 1)
        h, w, t = rng.randint(1, 4), rng.randint(1, 4), rng.randint(1, 4)
        fx = measure.measure_model(model, {"z": measure.TensorSpec((1, z, t, h, w))}, call="decode")
        tree = Node("vae", children=(
            Node("post_quant_conv", causal_conv3d(z, z, (1, 1, 1), t * h * w)),
            causal_decoder(z_dim=z, temperal_upsample=temporal[::-1], out_channels=c, height=h, width=w,
                           frames=decode_chunks(t), **kw),
        ))
        _assert_matches(tree, fx, f"seed {SEED}, decode {cfg} on {t} latent frames of {h}x{w}")

        if _encoder_has_attention(cfg):
            continue
        frames = rng.choice([1, 5, 6, 9])
        fx = measure.measure_model(model, {"x": measure.TensorSpec((1, c, frames, h * f, w * f))}, call="encode")
        chunks = encode_chunks(frames)
        latent = encoded_frames(chunks, temporal, levels)
        tree = Node("vae", children=(
            causal_encoder(z_channels=2 * z, attn_scales=cfg["attn_scales"], temperal_downsample=temporal,
                           in_channels=c, height=h * f, width=w * f, frames=chunks, **kw),
            Node("quant_conv", causal_conv3d(2 * z, 2 * z, (1, 1, 1), sum(latent) * h * w)),
        ))
        _assert_matches(tree, fx, f"seed {SEED}, encode {cfg} on {frames} frames of {h * f}x{w * f}")
