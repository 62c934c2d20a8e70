"""Training FLOPs of HunyuanVideo's transformer (full fine-tuning, gradient checkpointing, LoRA): the fixtures
(``validation/fixtures/training/hunyuanvideo``, checked exactly by the parametrized tests of ``test_training.py`` and
``test_training_lora.py``) cover two sizes at each of two frame counts, and random small configs are measured live
(forward + backward of the real module on the meta device, peft adapters for LoRA). Bar: exact."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flopcalc.engine.errors import FlopcalcError
from flopcalc.training.estimate import train

FIXTURES = Path(__file__).resolve().parent.parent / "validation" / "fixtures" / "training"


def _fixtures(case: str) -> list[dict]:
    return [json.loads(p.read_text(encoding="utf-8")) for p in sorted((FIXTURES / case).glob("*.json"))]


def test_hunyuanvideo_fixtures_cover_two_sizes_at_two_frame_counts_and_lora_at_two_ranks():
    seen: dict[tuple, set] = {}
    for fx in _fixtures("hunyuanvideo"):
        lo = fx.get("lora") or {}
        key = (fx["mode"], lo.get("name"), fx["settings"]["num_frames"])
        seen.setdefault(key, set()).add((lo.get("rank"), fx["settings"]["height"], fx["settings"]["width"]))
    for mode in ("full", "checkpointing"):
        assert all(len(seen[(mode, None, f)]) >= 2 for f in (9, 33))
    for mode in ("lora", "lora_checkpointing"):
        runs = seen[(mode, "qkvo", 33)]
        assert len({r for r, _, _ in runs}) >= 2 and len({(h, w) for _, h, w in runs}) >= 2
        assert len(seen[(mode, "proj-mlp", 9)]) >= 2


def test_hunyuanvideo_lora_needs_named_targets_and_adapts_the_token_refiner_too():
    with pytest.raises(FlopcalcError, match="name them with --lora-targets"):
        train("hunyuanvideo", height=288, width=288, num_frames=9, trainable="lora:16")
    est = train("hunyuanvideo", height=256, width=256, num_frames=9, trainable="lora:4", lora_targets="attn.to_q")
    assert est.lora.layers == 2 + 20 + 40  # refiner, dual- and single-stream blocks


def test_hunyuanvideo_lora_on_a_conditioning_layer_is_refused():
    with pytest.raises(FlopcalcError, match="not modelled"):
        train("hunyuanvideo", height=256, width=256, num_frames=9, trainable="lora:4", lora_targets="norm1.linear")


def test_hunyuanvideo_token_replace_blocks_and_no_single_stream_blocks_are_refused(tmp_path):
    with pytest.raises(FlopcalcError, match="token_replace"):
        train("hunyuanvideo-i2v", height=256, width=256, num_frames=9)
    cfg = json.loads((FIXTURES.parents[2] / "model_cards/hunyuanvideo/transformer/config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**cfg, "num_layers": 2, "num_single_layers": 0}))
    with pytest.raises(FlopcalcError, match="num_single_layers 0"):
        train(str(tmp_path), height=256, width=256, num_frames=9, trainable="lora:4", lora_targets="to_q")


def test_wan_i2v_fixtures_cover_full_checkpointing_and_lora_on_the_image_attention():
    seen: dict[tuple, set] = {}
    for fx in _fixtures("wan2.1-i2v-14b-480p"):
        lo = fx.get("lora") or {}
        seen.setdefault((fx["mode"], lo.get("name")), set()).add(
            (lo.get("rank"), fx["settings"]["height"], fx["settings"]["width"]))
        assert fx["settings"]["image_tokens"] == 257
    assert all(len(seen[(m, None)]) >= 2 for m in ("full", "checkpointing"))
    for mode in ("lora", "lora_checkpointing"):
        assert len({r for r, _, _ in seen[(mode, "qkvo")]}) >= 2 and len(seen[(mode, "add-kv")]) >= 2


def test_wan_i2v_added_kv_adapters_read_the_clip_tokens_which_need_no_gradient():
    """add_k_proj / add_v_proj read the embedded CLIP tokens: their adapters train, but no input gradient flows
    into the frozen image embedder, and the first block's queries need none either."""
    est = train("wan2.1-i2v-14b-480p", height=512, width=512, num_frames=17, trainable="lora:8",
                lora_targets="add_k_proj,add_v_proj", frozen_encoders="cached")
    assert est.lora.layers == 2 * 40
    assert est.lora.adapter_input_grad == est.lora.adapter_forward - 2 * 40 * 257 * 5120 * 8
    assert {c.component for c in est.components} == {"text_encoder", "image_encoder", "vae", "transformer"}


# --------------------------------------------------------------------------- live: random configs, measured now

live = pytest.mark.live


def _random_hunyuan_video(rng) -> dict:
    heads, head_dim = rng.randint(1, 3), rng.choice([16, 32])
    t_axis = rng.choice([4, 8])
    return {
        "_class_name": "HunyuanVideoTransformer3DModel", "in_channels": rng.choice([4, 8]), "out_channels": 4,
        "num_attention_heads": heads, "attention_head_dim": head_dim, "num_layers": rng.randint(1, 2),
        "num_single_layers": rng.randint(1, 2), "num_refiner_layers": rng.randint(1, 2),
        "mlp_ratio": rng.choice([4.0, 2.5]), "patch_size": rng.choice([1, 2]), "patch_size_t": rng.choice([1, 2]),
        "qk_norm": rng.choice(["rms_norm", None]), "guidance_embeds": rng.random() < 0.5,
        "text_embed_dim": rng.choice([24, 40]), "pooled_projection_dim": 8,
        "rope_axes_dim": [t_axis, (head_dim - t_axis) // 2, (head_dim - t_axis) // 2],
        "image_condition_type": rng.choice([None, "latent_concat"]),
    }


def _video_size(rng, cfg: dict) -> tuple[int, int, int, int]:
    from live_support import random_size

    pt = cfg["patch_size_t"]  # HunyuanVideoPipeline takes sizes in multiples of 16; >= patch_size_t latent frames
    frames = 4 * pt * rng.randint(1, 3) - 3
    return random_size(rng, 16, 16, 64), random_size(rng, 16, 16, 64), frames, rng.randint(1, 24)


@live
def test_random_hunyuan_video_full_fine_tuning_is_exact(rng, tmp_path):
    """Every parameter trained, with and without gradient checkpointing."""
    from live_support import SEED, write_config
    from flopcalc.flops.estimate import estimate_configs
    from flopcalc.training.backward import backward, graph_of
    from flopcalc.engine.pipelines import Settings

    pytest.importorskip("torch")
    from measure_training import measure_training

    for i in range(2):
        cfg = _random_hunyuan_video(rng)
        h, w, f, t = _video_size(rng, cfg)
        checkpointing = rng.random() < 0.5
        comp = estimate_configs({"_class_name": "HunyuanVideoPipeline"}, {"transformer": cfg},
                                Settings(height=h, width=w, num_frames=f, max_sequence_length=t),
                                convention="torch").component("transformer")
        back = backward(comp.tree, graph_of(cfg["_class_name"]), checkpointing=checkpointing)
        fx = measure_training(write_config(tmp_path, f"hv{i}", cfg),
                              {"height": h, "width": w, "num_frames": f, "text_len": t},
                              mode="checkpointing" if checkpointing else "full", class_name=cfg["_class_name"])
        where = f"seed {SEED}: {h}x{w}, {f} frames, {t} tokens, checkpointing {checkpointing}: {json.dumps(cfg)}"
        assert 2 * comp.macs_per_run == fx["forward"]["flops"], where
        assert 2 * back.macs == fx["backward"]["flops"], where


@live
def test_random_hunyuan_video_lora_runs_are_exact(rng, tmp_path):
    pytest.importorskip("peft")
    from live_support import write_config
    from test_live_training_lora import _check
    from flopcalc.engine.pipelines import Settings

    names = ("to_q", "to_k", "to_v", "to_out.0", "add_q_proj", "add_k_proj", "add_v_proj", "to_add_out",
             "ff.net.0.proj", "ff.net.2", "ff_context.net.0.proj", "ff_context.net.2", "proj_in")
    for i in range(3):
        cfg = _random_hunyuan_video(rng)
        h, w, f, t = _video_size(rng, cfg)
        usable = names + ("proj_mlp", "proj_out")
        _check(rng, write_config(tmp_path, f"hv{i}", cfg), cfg, "transformer", "HunyuanVideoPipeline",
               Settings(height=h, width=w, num_frames=f, max_sequence_length=t),
               {"height": h, "width": w, "num_frames": f, "text_len": t}, usable)


@live
def test_random_wan_i2v_lora_runs_are_exact(rng, tmp_path):
    """Random WanTransformer3DModel image-to-video configs (CLIP image embedder, added k/v in every attn2) under the
    card's image encoder (257 tokens) and random targets, the added k/v and the image embedder's feed-forward among
    them, with and without gradient checkpointing."""
    pytest.importorskip("peft")
    from live_support import REPO, SEED, random_size, write_config
    from flopcalc.flops.estimate import estimate_configs
    from flopcalc.training.backward import graph_of
    from flopcalc.engine.pipelines import Settings
    from flopcalc.training.estimate import lora_training
    from measure_training import measure_training

    card = REPO / "model_cards" / "wan2.1-i2v-14b-480p"
    index = json.loads((card / "model_index.json").read_text())
    image = json.loads((card / "image_encoder" / "config.json").read_text())
    names = ("to_q", "to_k", "to_v", "to_out.0", "add_k_proj", "add_v_proj", "attn2.to_q", "ffn.net.0.proj",
             "image_embedder.ff.net.0.proj", "image_embedder.ff.net.2", "text_embedder.linear_2")
    for i in range(2):
        heads, head_dim = rng.randint(1, 3), rng.choice([8, 16])
        cfg = {
            "_class_name": "WanTransformer3DModel", "patch_size": [1, 2, 2], "num_attention_heads": heads,
            "attention_head_dim": head_dim, "in_channels": 36, "out_channels": 16, "text_dim": 24, "freq_dim": 32,
            "ffn_dim": 32, "num_layers": rng.randint(1, 2), "cross_attn_norm": True,
            "qk_norm": "rms_norm_across_heads", "rope_max_seq_len": 64, "image_dim": image["hidden_size"],
            "added_kv_proj_dim": heads * head_dim,
        }
        h, w, f = random_size(rng, 16, 16, 64), random_size(rng, 16, 16, 64), 4 * rng.randint(0, 2) + 1
        targets = tuple(rng.sample(names, rng.randint(1, 4)))
        rank, checkpointing = rng.randint(1, 8), rng.random() < 0.5
        comp = estimate_configs(index, {"transformer": cfg, "image_encoder": image},
                                Settings(height=h, width=w, num_frames=f), convention="torch").component("transformer")
        back, lora = lora_training(comp.tree, graph_of(cfg["_class_name"]), rank, targets, checkpointing)
        fx = measure_training(write_config(tmp_path, f"wan{i}", cfg),
                              {"height": h, "width": w, "num_frames": f, "text_len": 512, "image_tokens": 257},
                              mode="lora_checkpointing" if checkpointing else "lora", class_name=cfg["_class_name"],
                              lora={"rank": rank, "targets": list(targets)})
        where = f"seed {SEED}: {h}x{w}x{f}, rank {rank}, {targets}, checkpointing {checkpointing}: {json.dumps(cfg)}"
        assert 2 * (comp.macs_per_run + lora.adapter_forward) == fx["forward"]["flops"], where
        assert 2 * back.macs == fx["backward"]["flops"], where
        assert lora.trainable_params == fx["trainable_params"] and lora.layers == fx["lora"]["layers"], where
