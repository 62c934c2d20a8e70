"""Live LoRA training measurement: random small FLUX transformers with peft adapters on random targets, ranks and
sizes, with and without gradient checkpointing, counted now by FlopCounterMode (forward + backward on the meta
device, ``validation/measure_training.py``) against ``flopcalc train``'s LoRA backward. Bar: exact."""

from __future__ import annotations

import json

import pytest

from live_support import SEED, random_size, write_config  # noqa: E402
from test_live_flux_variants import _random_config  # noqa: E402
from flopcalc.flops.estimate import estimate_configs  # noqa: E402
from flopcalc.training.backward import graph_of  # noqa: E402
from flopcalc.engine.errors import FlopcalcError  # noqa: E402
from flopcalc.engine.pipelines import Settings  # noqa: E402
from flopcalc.training.estimate import lora_training  # noqa: E402

pytest.importorskip("peft")
from measure_training import measure_training  # noqa: E402

pytestmark = pytest.mark.live

#: Names peft matches in FluxTransformer2DModel (a layer's name or a dotted suffix of it).
NAMES = ("to_q", "to_k", "to_v", "attn.to_out.0", "add_q_proj", "add_k_proj", "add_v_proj", "to_add_out",
         "ff.net.0.proj", "ff.net.2", "ff_context.net.0.proj", "ff_context.net.2", "proj_mlp", "proj_out",
         "x_embedder", "context_embedder")


def _check(rng, folder, cfg: dict, component: str, pipeline: str, settings: Settings, measured: dict,
           names: tuple[str, ...]) -> None:
    """``flopcalc train``'s LoRA step of the component in ``folder`` against a fresh measurement, with random
    targets among ``names``, a random rank, plain, with gradient checkpointing or with the fused attention kernel."""
    targets = tuple(rng.sample(names, rng.randint(1, min(5, len(names)))))
    rank, mode = rng.randint(1, 8), rng.choice(("lora", "lora_checkpointing", "lora_fused_attention"))
    comp = estimate_configs({"_class_name": pipeline}, {component: cfg}, settings, convention="torch").component(component)
    measure = lambda: measure_training(folder, measured, mode=mode, class_name=cfg["_class_name"],  # noqa: E731
                                       lora={"rank": rank, "targets": list(targets)})
    try:
        back, lora = lora_training(comp.tree, graph_of(cfg["_class_name"]), rank, targets, mode == "lora_checkpointing")
    except FlopcalcError as exc:  # adapters the output does not depend on: torch has nothing to differentiate
        if "trains nothing" not in str(exc):
            raise
        with pytest.raises(AssertionError, match="no output carries a gradient"):
            measure()
        return
    fx = measure()
    where = f"seed {SEED}: {measured}, rank {rank}, targets {targets}, {mode}: {json.dumps(cfg)}"
    assert 2 * (comp.macs_per_run + lora.adapter_forward) == fx["forward"]["flops"], where
    assert 2 * (back.fused_attention_macs() if mode == "lora_fused_attention" else back.macs) == \
        fx["backward"]["flops"], where
    assert lora.trainable_params == fx["trainable_params"] and lora.layers == fx["lora"]["layers"], where


def test_random_flux_lora_runs_are_exact(rng, tmp_path):
    for i in range(3):
        cfg = {**_random_config(rng, 64), "num_layers": rng.randint(1, 2)}
        h, w, t = random_size(rng, 16, 32, 256), random_size(rng, 16, 32, 256), rng.randint(1, 40)
        names = NAMES if cfg["num_single_layers"] else tuple(n for n in NAMES if n != "proj_mlp")
        _check(rng, write_config(tmp_path, f"flux{i}", cfg), cfg, "transformer", "FluxPipeline",
               Settings(height=h, width=w, max_sequence_length=t), {"height": h, "width": w, "text_len": t}, names)


def test_random_unet_lora_runs_are_exact(rng, tmp_path):
    """Random block layouts (cross-attention or plain blocks, 1-2 resnets and transformer layers per block, the
    mid block with or without attention, SDXL's added time/text embedding) and random linear targets."""
    for i in range(3):
        nb = rng.randint(2, 3)
        cfg = {
            "_class_name": "UNet2DConditionModel",
            "block_out_channels": [32 * rng.randint(1, 2) for _ in range(nb)],
            "down_block_types": ["CrossAttnDownBlock2D"] + [rng.choice(["CrossAttnDownBlock2D", "DownBlock2D"])
                                                            for _ in range(nb - 1)],
            "up_block_types": [rng.choice(["CrossAttnUpBlock2D", "UpBlock2D"]) for _ in range(nb)],
            "mid_block_type": rng.choice(["UNetMidBlock2DCrossAttn", "UNetMidBlock2D"]),
            "layers_per_block": rng.randint(1, 2),
            "transformer_layers_per_block": rng.choice([1, [rng.randint(1, 2) for _ in range(nb)]]),
            "attention_head_dim": [rng.choice([2, 4]) for _ in range(nb)],
            "cross_attention_dim": rng.choice([24, 40]),
            "use_linear_projection": rng.random() < 0.5,
            "in_channels": 4, "out_channels": 4, "sample_size": 16,
        }
        if rng.random() < 0.5:
            cfg.update(addition_embed_type="text_time", addition_time_embed_dim=8,
                       projection_class_embeddings_input_dim=16 + 6 * 8)
        names = ("to_q", "to_k", "to_v", "to_out.0", "attn1.to_q", "attn2.to_k", "attn2.to_v", "ff.net.0.proj",
                 "ff.net.2") + (("proj_in", "proj_out") if cfg["use_linear_projection"] else ())
        h, w = random_size(rng, 8, 64, 160), random_size(rng, 8, 64, 160)
        _check(rng, write_config(tmp_path, f"unet{i}", cfg), cfg, "unet",
               "StableDiffusionXLPipeline" if "addition_embed_type" in cfg else "StableDiffusionPipeline",
               Settings(height=h, width=w), {"height": h, "width": w, "text_len": 77}, names)


def test_random_wan_lora_runs_are_exact(rng, tmp_path):
    """Random WanTransformer3DModel configs (patch sizes, q/k norms, the cross-attention norm) and targets."""
    for i in range(2):
        heads, head_dim = rng.randint(1, 4), rng.choice([8, 16])
        cfg = {
            "_class_name": "WanTransformer3DModel",
            "patch_size": [rng.choice([1, 2]), rng.choice([1, 2]), rng.choice([1, 2])],
            "num_attention_heads": heads, "attention_head_dim": head_dim, "in_channels": 16, "out_channels": 16,
            "text_dim": rng.choice([24, 40]), "freq_dim": 32, "ffn_dim": rng.choice([32, 56]),
            "num_layers": rng.randint(1, 2), "cross_attn_norm": rng.random() < 0.5,
            "qk_norm": rng.choice(["rms_norm_across_heads", None]), "rope_max_seq_len": 64,
        }
        h, w, t = random_size(rng, 16, 16, 128), random_size(rng, 16, 16, 128), rng.randint(1, 40)
        f = 4 * rng.randint(cfg["patch_size"][0] - 1, 3) + 1
        names = ("to_q", "to_k", "to_v", "to_out.0", "attn1.to_q", "attn2.to_k", "attn2.to_v", "ffn.net.0.proj",
                 "ffn.net.2", "proj_out", "text_embedder.linear_1")
        _check(rng, write_config(tmp_path, f"wan{i}", cfg), cfg, "transformer", "WanPipeline",
               Settings(height=h, width=w, num_frames=f, max_sequence_length=t),
               {"height": h, "width": w, "num_frames": f, "text_len": t}, names)


def test_random_pixart_lora_runs_are_exact(rng, tmp_path):
    """Random PixArtTransformer2DModel configs (AdaLN-single blocks with gated self-attention, ungated
    cross-attention) and targets."""
    for i in range(2):
        heads, head_dim = rng.randint(1, 4), rng.choice([12, 24])
        cfg = {
            "_class_name": "PixArtTransformer2DModel", "num_attention_heads": heads, "attention_head_dim": head_dim,
            "num_layers": rng.randint(1, 2), "caption_channels": rng.choice([16, 40]),
            "cross_attention_dim": heads * head_dim, "sample_size": 64, "patch_size": 2, "in_channels": 4,
            "out_channels": rng.choice([4, 8]), "attention_bias": rng.random() < 0.5,
            "norm_elementwise_affine": rng.random() < 0.5, "activation_fn": "gelu-approximate",
        }
        h, w, t = random_size(rng, 16, 64, 192), random_size(rng, 16, 64, 192), rng.randint(1, 40)
        names = ("to_q", "to_k", "to_v", "to_out.0", "attn1.to_v", "attn2.to_q", "attn2.to_k", "ff.net.0.proj",
                 "ff.net.2", "proj_out", "caption_projection.linear_2")
        _check(rng, write_config(tmp_path, f"pixart{i}", cfg), cfg, "transformer", "PixArtAlphaPipeline",
               Settings(height=h, width=w, max_sequence_length=t, resolution_binning=False),
               {"height": h, "width": w, "text_len": t}, names)


def test_random_ltx_lora_runs_are_exact(rng, tmp_path):
    """Random LTXVideoTransformer3DModel configs (patches, activations, biases, norms) and targets."""
    for i in range(2):
        heads, head_dim = rng.randint(1, 4), rng.choice([8, 16])
        patch, patch_t = rng.choice([1, 2]), rng.choice([1, 2])
        cfg = {
            "_class_name": "LTXVideoTransformer3DModel", "num_attention_heads": heads, "attention_head_dim": head_dim,
            "cross_attention_dim": heads * head_dim, "num_layers": rng.randint(1, 2), "in_channels": 8,
            "out_channels": 8, "patch_size": patch, "patch_size_t": patch_t, "caption_channels": rng.choice([12, 24]),
            "activation_fn": rng.choice(["gelu-approximate", "geglu", "swiglu"]),
            "attention_bias": rng.random() < 0.5, "attention_out_bias": rng.random() < 0.5,
            "norm_elementwise_affine": rng.random() < 0.5,
        }
        h, w = random_size(rng, 32 * patch, 32, 192), random_size(rng, 32 * patch, 32, 192)
        f, t = 8 * patch_t * rng.randint(0, 1) + 1 + 8 * (patch_t - 1), rng.randint(1, 40)
        names = ("to_q", "to_k", "to_v", "to_out.0", "attn1.to_k", "attn2.to_q", "attn2.to_v", "ff.net.0.proj",
                 "ff.net.2", "proj_in", "proj_out", "caption_projection.linear_1")
        _check(rng, write_config(tmp_path, f"ltx{i}", cfg), cfg, "transformer", "LTXPipeline",
               Settings(height=h, width=w, num_frames=f, max_sequence_length=t),
               {"height": h, "width": w, "num_frames": f, "text_len": t}, names)
