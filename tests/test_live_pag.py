"""Live re-measurement of perturbed-attention guidance (PAG) against flopcalc.

Randomized configs of every denoiser class the PAG pipelines run (``UNet2DConditionModel`` with and
without SDXL's text-time embedding, ``SD3Transformer2DModel`` with q/k norms and MMDiT-X blocks,
PixArt, ``HunyuanDiT2DModel``, ``SanaTransformer2DModel`` with q/k norms), random sizes, random
``pag_applied_layers`` (layer ids drawn from prefixes of the real module names, so some match many
layers through diffusers' regular-expression search and some match none) and the batch with
classifier-free guidance (3 rows) or without (2 rows): diffusers' own ``PAGMixin`` installs the
processors on the real module built on meta (:mod:`flopcalc.engine.measure.perturbed`), FlopCounterMode counts
the batched call, and flopcalc's plan of the PAG pipeline (original rows + perturbed row, one report row
of two pieces) equals it in total, for every module path, in parameters and under thop. A layer id that
matches nothing is refused by both; a PAG layer on an MMDiT-X ``attn2`` fails in diffusers and is refused
by flopcalc. The seed is printed; ``FLOPCALC_SEED=N`` replays it.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from live_support import SEED, assert_runs_match, measure, random_size, write_config  # noqa: E402  (skips without torch)
from test_live_sd_addons import _encoder_config  # noqa: E402  (the UNet-encoder keys, at random small sizes)
from flopcalc.flops.estimate import estimate_configs  # noqa: E402
from flopcalc.engine.errors import OptionError  # noqa: E402
from flopcalc.engine.measure.perturbed import perturb  # noqa: E402
from flopcalc.engine.pipelines import Settings  # noqa: E402

pytestmark = pytest.mark.live


def _layer_ids(rng: random.Random, model, component_is_unet: bool) -> list[str]:
    """1-3 ids cut from the real self-attention module names: a dotted prefix or suffix of one, so
    that the regular-expression search of diffusers matches one layer, a group, or (rarely) none."""
    from diffusers.models.attention_processor import Attention

    names = [n for n, m in model.named_modules() if isinstance(m, Attention) and not m.is_cross_attention]
    ids = []
    for _ in range(rng.randint(1, 3)):
        parts = rng.choice(names).split(".")
        cut = rng.randint(1, len(parts))
        ids.append(".".join(parts[:cut] if rng.random() < 0.7 else parts[-cut:]))
    if component_is_unet and rng.random() < 0.3:
        ids.append(rng.choice(["mid", "down", "up", "down_blocks.9"]))
    return ids


def _check(folder: Path, component: str, pipeline: str, settings: dict, measure_settings: dict, rng: random.Random,
           unbatched: tuple[str, ...] = (), module_depth: int = 3) -> None:
    import json

    cfg = json.loads((folder / "config.json").read_text())
    model = measure.build_model(folder)
    layers = _layer_ids(rng, model, component == "unet")
    rows = rng.choice([2, 3])
    where = f"seed {SEED}, {pipeline} rows {rows} layers {layers} {measure_settings}: {cfg}"
    inputs, _ = measure.build_inputs(model, measure_settings)
    s = Settings.make(guidance_scale=5.0 if rows == 3 else 1.0, pag_applied_layers=tuple(layers), **settings)
    try:
        inputs = perturb(model, rows, inputs, unbatched=unbatched, layers=layers)
    except ValueError as exc:  # diffusers: "Cannot find PAG layer to set attention processor for: ..."
        assert "Cannot find PAG layer" in str(exc), where
        with pytest.raises(OptionError, match="matches no self-attention layer"):
            estimate_configs({"_class_name": pipeline}, {component: cfg}, s)
        return
    try:
        fx = measure.measure_model(model, inputs, module_depth=module_depth)
    except AttributeError as exc:  # the joint PAG processors on an MMDiT-X attn2 (no encoder_hidden_states)
        assert "NoneType" in str(exc), where
        with pytest.raises(OptionError, match="attn2 of MMDiT-X"):
            estimate_configs({"_class_name": pipeline}, {component: cfg}, s)
        return
    comp = estimate_configs({"_class_name": pipeline}, {component: cfg}, s).component(component)
    assert comp.tree.formula == "pieces" and [p.count for p in comp.tree.children] == [rows - 1, 1], where
    assert_runs_match([(p.count, p) for p in comp.tree.children], comp.params, fx, where)


def test_random_unet_configs(rng, tmp_path):
    for i in range(4):
        nb = rng.randint(2, 3)
        text_time = rng.random() < 0.5
        cfg = {"_class_name": "UNet2DConditionModel", **_encoder_config(rng, nb, text_time),
               "up_block_types": [rng.choice(["CrossAttnUpBlock2D", "UpBlock2D"]) for _ in range(nb)],
               "layers_per_block": rng.choice([1, 2]), "in_channels": 4, "out_channels": 4, "sample_size": 16}
        cfg["down_block_types"][0] = "CrossAttnDownBlock2D"  # at least one self-attention layer to perturb
        h, w = random_size(rng, 8, 64, 160), random_size(rng, 8, 64, 160)
        pipeline = "StableDiffusionXLPAGPipeline" if text_time else "StableDiffusionPAGPipeline"
        _check(write_config(tmp_path, f"unet{i}", cfg), "unet", pipeline, {"height": h, "width": w},
               {"height": h, "width": w, "text_len": 77}, rng, module_depth=5)


def test_random_sd3_configs(rng, tmp_path):
    for i in range(4):
        heads, head_dim, layers = rng.randint(1, 3), rng.choice([8, 16]), rng.randint(2, 12)
        cfg = {
            "_class_name": "SD3Transformer2DModel", "num_attention_heads": heads, "attention_head_dim": head_dim,
            "caption_projection_dim": heads * head_dim, "num_layers": layers, "patch_size": 2, "in_channels": 16,
            "out_channels": 16, "joint_attention_dim": 24, "pooled_projection_dim": 8, "pos_embed_max_size": 64,
            "sample_size": 32, "qk_norm": rng.choice([None, "rms_norm", "layer_norm"]),
            "dual_attention_layers": sorted(rng.sample(range(layers), rng.randint(0, 2))),
        }
        h, w, t = random_size(rng, 16, 32, 192), random_size(rng, 16, 32, 192), rng.randint(1, 20)
        _check(write_config(tmp_path, f"sd3{i}", cfg), "transformer", "StableDiffusion3PAGPipeline",
               {"height": h, "width": w, "max_sequence_length": t}, {"height": h, "width": w, "text_len": 77 + t}, rng)


def test_random_pixart_configs(rng, tmp_path):
    for i in range(3):
        heads, head_dim = rng.randint(1, 3), rng.choice([12, 24])
        cfg = {
            "_class_name": "Transformer2DModel", "norm_type": "ada_norm_single", "num_attention_heads": heads,
            "attention_head_dim": head_dim, "num_layers": rng.randint(1, 12), "caption_channels": 16,
            "cross_attention_dim": heads * head_dim, "sample_size": rng.choice([64, 128]), "patch_size": 2,
            "in_channels": 4, "out_channels": 8, "attention_bias": rng.random() < 0.5,
            "norm_elementwise_affine": False, "activation_fn": "gelu-approximate",
        }
        h, w, t = random_size(rng, 16, 64, 256), random_size(rng, 16, 64, 256), rng.randint(1, 40)
        _check(write_config(tmp_path, f"pixart{i}", cfg), "transformer", "PixArtSigmaPAGPipeline",
               {"height": h, "width": w, "max_sequence_length": t, "resolution_binning": False},
               {"height": h, "width": w, "text_len": t}, rng)


def test_random_hunyuan_dit_configs(rng, tmp_path):
    for i in range(3):
        heads, head_dim = rng.randint(1, 3), rng.choice([8, 16])
        cfg = {
            "_class_name": "HunyuanDiT2DModel", "num_attention_heads": heads, "attention_head_dim": head_dim,
            "hidden_size": heads * head_dim, "num_layers": rng.choice([2, 4, 12]), "patch_size": 2, "in_channels": 4,
            "learn_sigma": True, "mlp_ratio": 4.0, "activation_fn": "gelu-approximate", "cross_attention_dim": 24,
            "cross_attention_dim_t5": 16, "pooled_projection_dim": 8, "text_len": rng.randint(1, 10),
            "text_len_t5": rng.randint(1, 10), "use_style_cond_and_image_meta_size": False, "sample_size": 32,
            "norm_type": "layer_norm",
        }
        h, w = random_size(rng, 16, 32, 192), random_size(rng, 16, 32, 192)
        _check(write_config(tmp_path, f"hunyuan{i}", cfg), "transformer", "HunyuanDiTPAGPipeline",
               {"height": h, "width": w, "resolution_binning": False},
               {"height": h, "width": w, "text_len": cfg["text_len"] + cfg["text_len_t5"]}, rng,
               unbatched=("image_rotary_emb",))


def test_random_sana_configs(rng, tmp_path):
    for i in range(3):
        heads, head_dim = rng.randint(1, 3), rng.choice([8, 16])
        dim = heads * head_dim
        cfg = {
            "_class_name": "SanaTransformer2DModel", "in_channels": 4, "out_channels": None,
            "num_attention_heads": heads, "attention_head_dim": head_dim, "num_layers": rng.randint(1, 12),
            "num_cross_attention_heads": heads, "cross_attention_head_dim": head_dim, "cross_attention_dim": dim,
            "caption_channels": 24, "mlp_ratio": 2.5, "attention_bias": rng.random() < 0.5, "sample_size": 8,
            "patch_size": 1, "norm_elementwise_affine": False,
            "qk_norm": rng.choice([None, "rms_norm_across_heads", "layer_norm_across_heads"]),
        }
        h, w, t = random_size(rng, 32, 32, 256), random_size(rng, 32, 32, 256), rng.randint(1, 24)
        _check(write_config(tmp_path, f"sana{i}", cfg), "transformer", "SanaPAGPipeline",
               {"height": h, "width": w, "max_sequence_length": t, "resolution_binning": False},
               {"height": h, "width": w, "text_len": t}, rng)
