"""Live re-measurement of LTX-2's classes: ``LTX2VideoTransformer3DModel`` (one forward, and one whole denoising
step at the pipeline's defaults: CFG, STG, modality isolation), ``LTX2TextConnectors``, ``AutoencoderKLLTX2Video``
(decode, encode), ``AutoencoderKLLTX2Audio`` (decode, encode), ``LTX2Vocoder`` and ``Gemma3ForConditionalGeneration``,
built on the meta device from randomized small configs (every structural key the assemblers read) and counted
now, against flopcalc's plan under ``LTX2Pipeline``.

The seed is printed; ``FLOPCALC_SEED=N`` replays it. Bar: ``torch`` convention exact (total and every measured
module), parameters exact, ``thop`` convention exact.
"""

from __future__ import annotations

import random

import pytest
from live_support import SEED, check_plan, measure, write_config  # noqa: E402  (skips without torch)

from flopcalc.engine.pipelines import Settings
from flopcalc.engine.registry import RunShape, assemble
from flopcalc.flops.estimate import estimate_configs

pytestmark = pytest.mark.live

INDEX = {"_class_name": "LTX2Pipeline"}
#: The guidance scales that make one plain forward per step (no CFG, STG or modality isolation).
PLAIN = {"guidance_scale": 1.0, "audio_guidance_scale": 1.0, "stg_scale": 0.0, "audio_stg_scale": 0.0,
         "modality_scale": 1.0, "audio_modality_scale": 1.0}


def _index(name: str) -> dict:
    return {**INDEX, name: ["x", "y"]}


# --------------------------------------------------------------------------- transformer


def _random_transformer(rng: random.Random) -> dict:
    heads, audio_heads = rng.randint(1, 2), rng.randint(1, 2)
    head_dim, audio_head_dim = rng.choice([8, 16]), rng.choice([4, 8])
    projected = rng.random() < 0.6
    mod = rng.random() < 0.4
    cfg = {
        "_class_name": "LTX2VideoTransformer3DModel", "in_channels": rng.choice([4, 8]),
        "out_channels": rng.choice([None, 8]), "patch_size": rng.choice([1, 2]), "patch_size_t": 1,
        "num_attention_heads": heads, "attention_head_dim": head_dim, "audio_num_attention_heads": audio_heads,
        "audio_attention_head_dim": audio_head_dim, "audio_in_channels": rng.choice([4, 8]),
        "audio_out_channels": rng.choice([None, 4]), "num_layers": rng.randint(0, 3),
        "activation_fn": rng.choice(["gelu-approximate", "gelu", "geglu", "swiglu", "linear-silu"]),
        "gated_attn": rng.random() < 0.5, "audio_gated_attn": rng.random() < 0.5, "cross_attn_mod": mod,
        "audio_cross_attn_mod": mod and rng.random() < 0.5, "use_prompt_adaln_single": rng.random() < 0.7,
        "use_prompt_embeddings": projected, "caption_channels": rng.choice([12, 16]),
        "attention_bias": rng.random() < 0.5, "attention_out_bias": rng.random() < 0.5,
        "norm_elementwise_affine": rng.random() < 0.5, "ff_bias": rng.random() < 0.5,
        "audio_ff_bias": rng.random() < 0.5, "perturbed_attn": rng.random() < 0.5,
        "use_keyframes_abs_pos_embedding": rng.random() < 0.3,
        "rope_type": "split" if heads == audio_heads and rng.random() < 0.5 else "interleaved",
    }
    # the audio prompt width is the cross-modal rotary tables' too (cross_attn_rope): the audio stream's inner width;
    # the video prompt width is the stream's when caption_projection feeds it or the prompt modulation scales it,
    # else the connectors' (any width)
    cfg["audio_cross_attention_dim"] = audio_heads * audio_head_dim
    cfg["cross_attention_dim"] = heads * head_dim if projected or mod else rng.choice([8, 24])
    return cfg


def _step_matches(comp, fx: dict, where: str) -> None:
    """A transformer row of pieces (one step's calls) against the measured step: total, every module (thop is
    checked on the single forward)."""
    pieces = comp.tree.children if comp.tree.formula == "pieces" else (comp.tree,)

    def total(path: str) -> int:
        nodes = [(p.count, p if path == "Global" else p.find(path)) for p in pieces]
        return sum(n * node.per_item.macs() for n, node in nodes if node is not None)

    for path, flops in fx["torch"]["by_module"].items():
        assert 2 * total(path) == flops, f"{path}: {where}"
    assert comp.params == fx["params"], where


def test_random_transformer_forward_and_step(rng, tmp_path):
    for i in range(2):
        cfg = _random_transformer(rng)
        p = cfg["patch_size"]
        h, w = 32 * p * rng.randint(1, 2), 32 * p * rng.randint(1, 3)
        frames, text = 8 * rng.randint(0, 2) + 1, rng.randint(1, 12)
        folder = write_config(tmp_path, f"t{i}", cfg)
        size = {"height": h, "width": w, "num_frames": frames}
        check_plan(folder, "transformer", Settings.make(**size, max_sequence_length=text, **PLAIN),
                   {**size, "text_len": text}, index=_index("transformer"))
        if frames > 1:  # LTX2ConditionPipeline: a 9-frame video at latent index 1, appended; one timestep per token
            plan = Settings.make(**size, max_sequence_length=text, ltx2_conditions=[(9, 1)], **PLAIN)
            lh, lw = h // 32 // p, w // 32 // p
            # trim_conditioning_sequence: the 9 frames cut to those after pixel frame 1, rounded down to 8k + 1
            kept = (min(9, frames - 1) - 1) // 8 * 8 + 1
            check_plan(folder, "transformer", plan,
                       {**size, "text_len": text, "extra_tokens": ((kept - 1) // 8 + 1) * lh * lw},
                       index={**_index("transformer"), "_class_name": "LTX2ConditionPipeline"})
        block = rng.randint(0, 3)  # the STG block (perhaps past the last: then no block is perturbed)
        report = estimate_configs(_index("transformer"), {"transformer": cfg},
                                  Settings.make(**size, max_sequence_length=text, stg_blocks=[str(block)]))
        fx = measure.measure_component(folder, settings={**size, "text_len": text, "step": 1, "stg_block": block},
                                       with_thop=False)
        _step_matches(report.component("transformer"), fx, f"seed {SEED}, step, STG block {block}: {cfg}")


# --------------------------------------------------------------------------- connectors


def test_random_connectors(rng, tmp_path):
    for i in range(3):
        registers = rng.choice([None, 4, 8])
        width = {s: (rng.randint(1, 2), rng.choice([4, 8])) for s in ("video", "audio")}
        per_modality = rng.random() < 0.5
        caption = rng.choice([8, 16]) if per_modality else 16
        if not per_modality:  # each connector runs on text_proj_in's caption_channels-wide output
            width = {s: (2, 8) for s in width}
        cfg = {"_class_name": "LTX2TextConnectors", "caption_channels": caption, "text_proj_in_factor": rng.randint(1, 3),
               "per_modality_projections": per_modality, "proj_bias": rng.random() < 0.5,
               "video_hidden_dim": width["video"][0] * width["video"][1],
               "audio_hidden_dim": width["audio"][0] * width["audio"][1],
               **{f"{s}_connector_num_attention_heads": width[s][0] for s in width},
               **{f"{s}_connector_attention_head_dim": width[s][1] for s in width},
               **{f"{s}_connector_num_layers": rng.randint(0, 2) for s in width},
               **{f"{s}_connector_num_learnable_registers": registers for s in width},
               **{f"{s}_gated_attn": rng.random() < 0.5 for s in width}}
        length = (registers or 1) * rng.randint(1, 4)
        check_plan(write_config(tmp_path, f"c{i}", cfg), "connectors", Settings(max_sequence_length=length),
                   {"seq_len": length}, index=_index("connectors"))


# --------------------------------------------------------------------------- video VAE


def _random_vae(rng: random.Random) -> dict:
    """An LTX-2 video VAE: encoder levels of any downsample kind (each doubling the width, or keeping it for
    ``conv`` or no downsampler), a decoder with ``upsample_factor`` 2 and doubling widths (each up block keeps its width) or factor 1
    and equal widths (a width change would put a ``conv_in`` residual block first, which the real up block feeds
    the raw timestep and whose noise scales have the wrong width), any upsample kind; explicit compression ratios
    (the encoder's real ones)."""
    levels = rng.randint(1, 3)
    kinds = [rng.choice(["conv", "spatial", "temporal", "spatiotemporal"]) for _ in range(levels)]
    scaling = [rng.random() < 0.8 for _ in range(levels)]
    widths, w = [], 8
    for kind, on in zip(kinds, scaling):  # only a space-to-depth downsampler changes the width
        w = 2 * w if on and kind != "conv" else w
        widths.append(w)
    spatial, temporal = 4, 1
    for kind, on in zip(kinds, scaling):
        if on:
            spatial *= 1 if kind == "temporal" else 2
            temporal *= 1 if kind == "spatial" else 2
    d_levels = rng.randint(1, 3)
    factor = rng.choice([1, 2])
    base = rng.choice([8, 16])
    return {"_class_name": "AutoencoderKLLTX2Video", "latent_channels": 8, "in_channels": 3,
            "out_channels": rng.choice([3, 4]), "patch_size": 4, "block_out_channels": widths,
            "down_block_types": ["LTX2VideoDownBlock3D"] * levels, "downsample_type": kinds,
            "spatio_temporal_scaling": scaling, "layers_per_block": [rng.randint(0, 2) for _ in range(levels + 1)],
            "decoder_block_out_channels": [base * (2 ** i if factor == 2 else 1) for i in range(d_levels)],
            "decoder_layers_per_block": [rng.randint(0, 2) for _ in range(d_levels + 1)],
            # with factor 2 the upsamplers halve the width: every level scales
            "decoder_spatio_temporal_scaling": [factor == 2 or rng.random() < 0.7 for _ in range(d_levels)],
            "upsample_type": [rng.choice(["spatial", "temporal", "spatiotemporal"]) for _ in range(d_levels)],
            "upsample_factor": [factor] * d_levels, "upsample_residual": [rng.random() < 0.5] * d_levels,
            "decoder_inject_noise": [rng.random() < 0.3 for _ in range(d_levels + 1)],
            "timestep_conditioning": rng.random() < 0.5, "encoder_causal": rng.random() < 0.5,
            "decoder_causal": rng.random() < 0.5, "decoder_spatial_padding_mode": rng.choice(["zeros", "reflect"]),
            "spatial_compression_ratio": spatial, "temporal_compression_ratio": temporal}


def test_random_video_vae(rng, tmp_path):
    for i in range(3):
        cfg = _random_vae(rng)
        spatial, temporal = cfg["spatial_compression_ratio"], cfg["temporal_compression_ratio"]
        multiple = max(spatial, 32) * 2  # a latent of at least 2 (reflect padding)
        h, w, f = multiple * rng.randint(1, 2), multiple * rng.randint(1, 2), temporal * rng.randint(0, 2) + 1
        folder = write_config(tmp_path, f"v{i}", cfg)
        size = {"height": h, "width": w, "num_frames": f}
        check_plan(folder, "vae", Settings(**size), size, index=_index("vae"), call="decode")
        # the encode (the image-to-video pipelines' conditions) of an f-frame video
        _tree_matches(assemble(cfg, RunShape(height=h, width=w, frames=f), component="vae", call="encode"),
                      measure.measure_component(folder, settings=size, call="encode"), f"seed {SEED}, encode {size}: {cfg}")


def _tree_matches(tree, fx: dict, where: str) -> None:
    """An assembled call against a fresh measurement: total, every module, thop."""
    assert 2 * tree.total.macs() == fx["torch"]["flops"], where
    for path, flops in fx["torch"]["by_module"].items():
        node = tree if path == "Global" else tree.find(path)
        assert 2 * node.total.macs() == flops, f"{path}: {where}"
    assert tree.total.macs("thop") == fx["thop"]["macs"], where


# --------------------------------------------------------------------------- audio VAE and vocoder


def test_random_audio_vae(rng, tmp_path):
    for i in range(3):
        axis = rng.choice(["none", "width", "height", "width-compatibility"])
        levels = rng.randint(1, 3)
        norm = rng.choice(["pixel", "group"]) if axis == "none" else "pixel"
        base = 32 if norm == "group" else rng.choice([8, 16])
        cfg = {"_class_name": "AutoencoderKLLTX2Audio", "base_channels": base, "ch_mult": [1, 2, 4][:levels],
               "num_res_blocks": rng.randint(1, 2), "latent_channels": rng.choice([2, 4]), "in_channels": 2,
               "output_channels": rng.choice([1, 2]), "norm_type": norm, "causality_axis": axis,
               "mid_block_add_attention": rng.random() < 0.5, "resolution": 64,
               "attn_resolutions": rng.choice([None, [64], [32, 16]]), "mel_bins": rng.choice([16, 32]),
               "double_z": rng.random() < 0.5}
        folder = write_config(tmp_path, f"a{i}", cfg)
        frames = 8 * rng.randint(1, 4) + 1
        report = estimate_configs(_index("audio_vae"), {"audio_vae": cfg}, Settings(num_frames=frames))
        latent = report.component("audio_vae", "decode").shape["seq_len"]
        check_plan(folder, "audio_vae", Settings(num_frames=frames), {"seq_len": latent, "num_frames": frames},
                   index=_index("audio_vae"), call="decode")
        mel = rng.randint(8, 40)
        _tree_matches(assemble(cfg, RunShape(seq_len=mel), component="audio_vae", call="encode"),
                      measure.measure_component(folder, settings={"seq_len": mel}, call="encode"),
                      f"seed {SEED}, encode {mel}: {cfg}")


def test_random_vocoder(rng, tmp_path):
    for i in range(3):
        stages = rng.randint(1, 3)
        factors = [rng.randint(2, 5) for _ in range(stages)]
        kernels = [f + rng.randint(0, 5) for f in factors]  # (k − s) odd too: the padding floors
        resnets = rng.randint(1, 2)
        cfg = {"_class_name": "LTX2Vocoder", "in_channels": 2 * rng.choice([4, 8]), "hidden_channels": 8 * 2 ** stages,
               "out_channels": rng.choice([1, 2]), "upsample_factors": factors, "upsample_kernel_sizes": kernels,
               "resnet_kernel_sizes": [rng.choice([3, 5, 7]) for _ in range(resnets)],
               "resnet_dilations": [[1, rng.choice([2, 3])] for _ in range(resnets)],
               "final_bias": rng.random() < 0.5}
        frames = 8 * rng.randint(1, 4) + 1
        report = estimate_configs(_index("vocoder"), {"vocoder": cfg}, Settings(num_frames=frames))
        mel = report.component("vocoder").shape["seq_len"]
        check_plan(write_config(tmp_path, f"o{i}", cfg), "vocoder", Settings(num_frames=frames),
                   {"seq_len": mel, "num_frames": frames}, index=_index("vocoder"))


# --------------------------------------------------------------------------- Gemma-3


def test_random_gemma3(rng, tmp_path):
    for i in range(2):
        heads = rng.choice([2, 4])
        layers = rng.randint(1, 4)
        text = {"hidden_size": rng.choice([16, 24]), "intermediate_size": rng.choice([32, 48]),
                "num_hidden_layers": layers, "num_attention_heads": heads, "num_key_value_heads": rng.choice([1, heads]),
                "head_dim": rng.choice([4, 8]), "vocab_size": rng.choice([64, 100]), "sliding_window": 4,
                "layer_types": [rng.choice(["sliding_attention", "full_attention"]) for _ in range(layers)],
                "model_type": "gemma3_text"}
        vision = {"model_type": "siglip_vision_model", "hidden_size": 16, "intermediate_size": 32,
                  "num_hidden_layers": 1, "num_attention_heads": 2, "image_size": 28, "patch_size": 14,
                  "vision_use_head": rng.random() < 0.5}
        cfg = {"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3", "text_config": text,
               "vision_config": vision, "mm_tokens_per_image": 4, "tie_word_embeddings": rng.random() < 0.7,
               "dtype": rng.choice(["bfloat16", "float32"])}
        length = rng.randint(1, 24)
        check_plan(write_config(tmp_path, f"g{i}", cfg), "text_encoder", Settings(max_sequence_length=length),
                   {"seq_len": length})


# --------------------------------------------------------------------------- latent upsampler


def test_random_latent_upsampler(rng, tmp_path):
    for i in range(3):
        kind = rng.choice(["rational", "spatial", "temporal", "both"])
        cfg = {"_class_name": "LTX2LatentUpsamplerModel", "in_channels": rng.choice([4, 8]),
               "mid_channels": 32 * rng.randint(1, 2), "num_blocks_per_stage": rng.randint(0, 2),
               "dims": 2 if kind in ("rational", "spatial") and rng.random() < 0.3 else 3,
               "spatial_upsample": kind != "temporal", "temporal_upsample": kind in ("temporal", "both"),
               "use_rational_resampler": kind == "rational",
               "rational_spatial_scale": rng.choice([0.75, 1.5, 2.0, 4.0])}
        # latent sides of 2 or more (a 0.75 resampler of a 1 × 1 latent leaves GroupNorm one value per group)
        h, w, f = 32 * rng.randint(2, 3), 32 * rng.randint(2, 3), 8 * rng.randint(0, 2) + 1
        index = {**INDEX, "_class_name": "LTX2LatentUpsamplePipeline", "latent_upsampler": ["x", "y"]}
        size = {"height": h, "width": w, "num_frames": f}
        check_plan(write_config(tmp_path, f"u{i}", cfg), "latent_upsampler", Settings(**size), size, index=index)
