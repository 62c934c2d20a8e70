"""Live training measurement of FLUX.2 and Chroma: random small ``Flux2Transformer2DModel`` and
``ChromaTransformer2DModel`` configs, full fine-tuning (with or without gradient checkpointing) and peft LoRA adapters
on random targets and ranks, counted now by FlopCounterMode (forward + backward on the meta device,
``validation/measure_training.py``) against ``flopcalc train``'s backward. Bar: exact."""

from __future__ import annotations

import json

import pytest

from live_support import SEED, random_size, write_config  # noqa: E402
from test_live_training_lora import _check as _check_lora  # noqa: E402
from flopcalc.flops.estimate import estimate_configs  # noqa: E402
from flopcalc.training.backward import backward, graph_of  # noqa: E402
from flopcalc.training.factors import MATH_ATTENTION_BACKWARD
from flopcalc.engine.errors import FlopcalcError  # noqa: E402
from flopcalc.engine.pipelines import Settings  # noqa: E402
from flopcalc.training.estimate import lora_training  # noqa: E402

pytest.importorskip("peft")
from measure_training import measure_training  # noqa: E402

pytestmark = pytest.mark.live

#: Names peft matches in Flux2Transformer2DModel (not the bare ``attn.to_out``: it also names the double blocks'
#: ``to_out`` ModuleList, which peft cannot wrap).
FLUX2_NAMES = ("to_q", "to_k", "to_v", "to_out.0", "add_q_proj", "add_k_proj", "add_v_proj", "to_add_out",
               "ff.linear_in", "ff.linear_out", "ff_context.linear_in", "linear_out", "to_qkv_mlp_proj", "proj_out",
               "x_embedder", "context_embedder")
#: Names peft matches in ChromaTransformer2DModel.
CHROMA_NAMES = ("to_q", "to_k", "to_v", "attn.to_out.0", "add_q_proj", "add_k_proj", "add_v_proj", "to_add_out",
                "ff.net.0.proj", "ff.net.2", "ff_context.net.2", "proj_mlp", "proj_out", "x_embedder",
                "context_embedder")


def _flux2_config(rng) -> dict:
    heads, head_dim = rng.randint(1, 3), rng.choice([16, 32])
    return {
        "_class_name": "Flux2Transformer2DModel", "num_attention_heads": heads, "attention_head_dim": head_dim,
        "num_layers": rng.randint(1, 2), "num_single_layers": rng.randint(1, 2),
        "mlp_ratio": rng.choice([1.0, 2.5, 3.0]), "patch_size": rng.choice([1, 2]),
        "in_channels": 4 * rng.choice([4, 8]),
        "out_channels": rng.choice([None, 16]), "joint_attention_dim": rng.choice([24, 48]),
        "timestep_guidance_channels": rng.choice([16, 32]), "axes_dims_rope": [head_dim // 4] * 4,
        "guidance_embeds": rng.random() < 0.5,
    }


def _chroma_config(rng) -> dict:
    heads, head_dim = rng.randint(1, 3), rng.choice([16, 32])
    return {
        "_class_name": "ChromaTransformer2DModel", "num_attention_heads": heads, "attention_head_dim": head_dim,
        "num_layers": rng.randint(1, 2), "num_single_layers": rng.randint(0, 2), "patch_size": rng.choice([1, 2]),
        "in_channels": 4 * rng.choice([4, 16]), "out_channels": rng.choice([None, 16]),
        "joint_attention_dim": rng.choice([24, 40]),
        "axes_dims_rope": [head_dim // 4, 3 * head_dim // 8, 3 * head_dim // 8],
        "approximator_num_channels": 4 * rng.randint(1, 8), "approximator_hidden_dim": rng.choice([8, 24]),
        "approximator_layers": rng.randint(1, 2),
    }


def _check_full(rng, folder, cfg: dict, pipeline: str, settings: Settings, measured: dict) -> None:
    """Full fine-tuning of the transformer in ``folder``, with or without gradient checkpointing, against a fresh
    measurement: forward, backward and the attention's backward bmm (no checkpointing: nothing run again)."""
    checkpointing = rng.random() < 0.5
    comp = estimate_configs({"_class_name": pipeline}, {"transformer": cfg}, settings,
                            convention="torch").component("transformer")
    back = backward(comp.tree, graph_of(cfg["_class_name"]), checkpointing=checkpointing)
    fx = measure_training(folder, measured, mode="checkpointing" if checkpointing else "full",
                          class_name=cfg["_class_name"])
    where = f"seed {SEED}: {measured}, checkpointing {checkpointing}: {json.dumps(cfg)}"
    assert 2 * comp.macs_per_run == fx["forward"]["flops"], where
    assert 2 * back.macs == fx["backward"]["flops"], where
    if not checkpointing:
        assert 2 * back.attention_grad == fx["backward"]["by_op"].get("aten.bmm", 0), where


def _random_runs(rng, tmp_path, make_config, pipeline: str, names_of) -> None:
    """Three random configs of one class: a full fine-tuning run and a LoRA run (targets among ``names_of(cfg)``)."""
    for i in range(3):
        cfg = make_config(rng)
        h, w, t = random_size(rng, 16, 32, 192), random_size(rng, 16, 32, 192), rng.randint(1, 40)
        folder = write_config(tmp_path, f"{pipeline}{i}", cfg)
        settings = Settings(height=h, width=w, max_sequence_length=t)
        measured = {"height": h, "width": w, "text_len": t}
        _check_full(rng, folder, cfg, pipeline, settings, measured)
        _check_lora(rng, folder, cfg, "transformer", pipeline, settings, measured, names_of(cfg))


def test_random_flux2_training_runs_are_exact(rng, tmp_path):
    _random_runs(rng, tmp_path, _flux2_config, "Flux2Pipeline", lambda cfg: FLUX2_NAMES)


def test_random_chroma_training_runs_are_exact(rng, tmp_path):
    """Also without single-stream blocks (the text stream is still joined and sliced off: it gets a gradient)."""
    _random_runs(rng, tmp_path, _chroma_config, "ChromaPipeline", lambda cfg: CHROMA_NAMES if cfg["num_single_layers"]
                 else tuple(n for n in CHROMA_NAMES if n != "proj_mlp"))


def test_flux2_without_single_or_double_blocks_is_refused():
    """Its shared modulation for the missing blocks feeds nothing, and autograd skips that backward (measured on
    num_single_layers 0: the backward was short by exactly single_stream_modulation's)."""
    for counts in ({"num_layers": 0}, {"num_single_layers": 0}):
        cfg = {"_class_name": "Flux2Transformer2DModel", "num_attention_heads": 2, "attention_head_dim": 16,
               "num_layers": 1, "num_single_layers": 1, "in_channels": 16, "joint_attention_dim": 24,
               "timestep_guidance_channels": 16, "axes_dims_rope": [4, 4, 4, 4], **counts}
        comp = estimate_configs({"_class_name": "Flux2Pipeline"}, {"transformer": cfg}, Settings(height=64, width=64),
                                convention="torch").component("transformer")
        with pytest.raises(FlopcalcError, match="feeds nothing"):
            backward(comp.tree, graph_of("Flux2Transformer2DModel"))


def _tiny_flux2(tmp_path, num_layers: int, height: int, width: int):
    """A two-head FLUX.2 transformer with ``num_layers`` double blocks and one single block: its config folder and
    its component at ``height`` × ``width`` with 7 text tokens."""
    cfg = {"_class_name": "Flux2Transformer2DModel", "num_attention_heads": 2, "attention_head_dim": 16,
           "num_layers": num_layers, "num_single_layers": 1, "in_channels": 16, "joint_attention_dim": 24,
           "timestep_guidance_channels": 16, "axes_dims_rope": [4, 4, 4, 4]}
    settings = Settings(height=height, width=width, max_sequence_length=7)
    comp = estimate_configs({"_class_name": "Flux2Pipeline"}, {"transformer": cfg}, settings,
                            convention="torch").component("transformer")
    return write_config(tmp_path, "flux2", cfg), comp


def test_flux2_lora_bmm_beyond_the_attention_is_its_frozen_sliced_output_projections(tmp_path):
    """FLUX.2 under LoRA: the double blocks' frozen, bias-free ``to_out.0`` and ``to_add_out`` read slices of the
    joint attention's output, which torch's matmul runs as bmm (it folds a non-contiguous 3-D input into mm only when
    the weight requires grad). The forward's bmm beyond the attention is exactly those layers' MACs (this is why
    tests/test_training_lora.py compares the attention's backward bmm only where the forward's bmm is the attention)."""
    folder, comp = _tiny_flux2(tmp_path, num_layers=2, height=64, width=96)
    graph = graph_of("Flux2Transformer2DModel")
    lora_training(comp.tree, graph, 4, ("to_q",), False)  # the targets exist
    fx = measure_training(folder, {"height": 64, "width": 96, "text_len": 7}, mode="lora",
                          class_name="Flux2Transformer2DModel", lora={"rank": 4, "targets": ["to_q"]})
    attention = backward(comp.tree, graph).attention_grad // MATH_ATTENTION_BACKWARD
    sliced = sum(comp.tree.find(f"transformer_blocks.{i}.attn.{p}").total.macs("torch")
                 for i in range(2) for p in ("to_out.0", "to_add_out"))
    assert fx["forward"]["by_op"]["aten.bmm"] == 2 * (attention + sliced)


def test_a_target_that_also_names_a_module_list_is_refused_as_peft_refuses_it(tmp_path):
    """``attn.to_out`` names the single blocks' ``to_out`` (a Linear) and the double blocks' ``to_out`` ModuleList:
    peft raises on the list, so flopcalc gives no number either."""
    folder, comp = _tiny_flux2(tmp_path, num_layers=1, height=64, width=64)
    with pytest.raises(FlopcalcError, match="also names transformer_blocks.0.attn.to_out"):
        lora_training(comp.tree, graph_of("Flux2Transformer2DModel"), 4, ("attn.to_out",), False)
    with pytest.raises(ValueError, match="is not supported"):
        measure_training(folder, {"height": 64, "width": 64, "text_len": 7}, mode="lora",
                         class_name="Flux2Transformer2DModel", lora={"rank": 4, "targets": ["attn.to_out"]})
