"""Training FLOPs of Qwen-Image's and Z-Image's transformers (``flopcalc train``): full fine-tuning and LoRA,
exact against FlopCounterMode counting forward + backward of the real module on the meta device.

The cards' fixtures (``validation/fixtures/training/qwen-image``, ``z-image-turbo``) are checked by
tests/test_training.py and tests/test_training_lora.py; here: what is particular to each family (Qwen-Image's last
block's text stream, which the output never reads, gets no backward), their default LoRA targets, and live
randomized configs measured now (``FLOPCALC_SEED=N`` replays one).
"""

from __future__ import annotations

import json

import pytest

from flopcalc.flops.estimate import estimate
from flopcalc.training.backward import graph_of
from flopcalc.training.estimate import train

QWEN = "QwenImageTransformer2DModel"
ZIMAGE = "ZImageTransformer2DModel"


def _tree(model: str, h: int, w: int):
    return estimate(model, height=h, width=w, steps=1, resolution_binning=False).component("transformer").tree


def test_the_last_blocks_text_stream_gets_no_backward_in_full_fine_tuning():
    """transformer_qwenimage.py:982 reads hidden_states only: the last block's to_add_out and txt_mlp (T tokens)
    compute neither weight nor input gradients; every other block's do."""
    est = train("qwen-image", height=512, width=512, frozen_encoders="cached")
    tree = _tree("qwen-image", 512, 512)
    last = tree.find("transformer_blocks.59")
    dead = sum(last.find(p).cost.linear for p in ("attn.to_add_out", "txt_mlp.net.0.proj", "txt_mlp.net.2"))
    assert est.backward.unused == 2 * dead == 2 * 512 * 3072 * (3072 + 2 * 4 * 3072)
    assert est.backward.weight_grad == est.trained.forward_macs - tree.total.attention - dead
    assert est.to_dict()["train"]["backward"]["unused_grad_flops"] == 2 * est.backward.unused


def test_default_lora_targets_are_the_diffusers_scripts_and_adapt_every_blocks_image_attention():
    flow = graph_of(QWEN).lora
    assert flow.default_targets == ("to_k", "to_q", "to_v", "to_out.0")
    assert "train_dreambooth_lora_qwen_image.py" in flow.targets_source
    est = train("qwen-image", height=512, width=512, trainable="lora:16", frozen_encoders="cached")
    assert est.lora.layers == 60 * 4
    assert est.lora.trainable_params == 60 * 4 * 16 * (3072 + 3072)


def test_adapters_on_the_last_text_mlp_are_not_trained():
    """peft adds them (their forward counts), but the loss does not depend on them: no gradient."""
    last_only = train("qwen-image", height=512, width=512, trainable="lora:8", lora_targets="txt_mlp.net.2")
    with_attn = train("qwen-image", height=512, width=512, trainable="lora:8", lora_targets="txt_mlp.net.2,to_q")
    assert last_only.lora.layers == 60
    per_layer = 512 * 8 * (4 * 3072 + 3072)  # t r (d_in + d_out)
    assert last_only.lora.adapter_forward == 60 * per_layer
    assert last_only.lora.adapter_weight_grad == 59 * per_layer
    assert with_attn.lora.adapter_weight_grad > last_only.lora.adapter_weight_grad


def test_z_image_default_lora_targets_adapt_every_blocks_attention_refiners_included():
    flow = graph_of(ZIMAGE).lora
    assert flow.default_targets == ("to_k", "to_q", "to_v", "to_out.0")
    assert "train_dreambooth_lora_z_image.py" in flow.targets_source
    est = train("z-image-turbo", height=512, width=512, trainable="lora:16", frozen_encoders="cached")
    assert est.lora.layers == (2 + 2 + 30) * 4
    assert est.lora.trainable_params == (2 + 2 + 30) * 4 * 16 * (3840 + 3840)
    full = train("z-image-turbo", height=512, width=512, frozen_encoders="cached")
    assert full.backward.unused == 0  # FinalLayer projects every token: no branch the output ignores
    # the patch embedder reads the latents: no input gradient; the caption embedder reads a trained RMSNorm: one
    tree = _tree("z-image-turbo", 512, 512)
    assert full.backward.no_input_grad == tree.find("all_x_embedder.2-1").cost.linear + tree.find(
        "t_embedder.mlp.0").cost.linear


def test_z_image_with_unused_patch_entries_is_refused():
    """peft would adapt the ``linear`` of an all_final_layer entry the call never runs (parameters, no work)."""
    from flopcalc.flops.estimate import estimate_configs
    from flopcalc.engine.errors import FlopcalcError
    from flopcalc.engine.pipelines import Settings
    from flopcalc.training.estimate import lora_training

    cfg = {"_class_name": ZIMAGE, "all_patch_size": [1, 2], "all_f_patch_size": [1, 1], "in_channels": 16, "dim": 48,
           "n_layers": 1, "n_refiner_layers": 1, "n_heads": 3, "n_kv_heads": 3, "qk_norm": True, "cap_feat_dim": 40,
           "axes_dims": [4, 6, 6]}
    tree = estimate_configs({"_class_name": "ZImagePipeline"}, {"transformer": cfg}, Settings(height=64, width=64),
                            convention="torch").component("transformer").tree
    with pytest.raises(FlopcalcError, match="2 patch pairs; training is validated with the pipeline's"):
        lora_training(tree, graph_of(ZIMAGE), 4, ("linear",), False)


def test_adapters_the_output_does_not_depend_on_are_refused(tmp_path):
    """A one-block Qwen-Image transformer: its text stream's to_add_out feeds nothing (the output is the image
    stream's), so LoRA there trains nothing: torch's backward has no gradient to follow, and flopcalc gives no number.
    With a second block the same adapters feed the next block's joint attention and are counted."""
    from flopcalc.flops.estimate import estimate_configs
    from flopcalc.engine.errors import FlopcalcError
    from flopcalc.engine.pipelines import Settings
    from flopcalc.training.estimate import lora_training

    cfg = {"_class_name": QWEN, "attention_head_dim": 16, "num_attention_heads": 2, "num_layers": 1, "patch_size": 2,
           "in_channels": 16, "out_channels": 4, "joint_attention_dim": 24, "axes_dims_rope": [4, 6, 6],
           "guidance_embeds": False}

    def tree(config: dict):
        return estimate_configs({"_class_name": "QwenImagePipeline"}, {"transformer": config},
                                Settings(height=64, width=64, max_sequence_length=7),
                                convention="torch").component("transformer").tree

    with pytest.raises(FlopcalcError, match="LoRA on to_add_out trains nothing in this QwenImageTransformer2DModel"):
        lora_training(tree(cfg), graph_of(QWEN), 4, ("to_add_out",), False)
    _, lora = lora_training(tree({**cfg, "num_layers": 2}), graph_of(QWEN), 4, ("to_add_out",), False)
    assert lora.adapter_weight_grad > 0
    pytest.importorskip("peft")
    from live_support import write_config
    from measure_training import measure_training

    with pytest.raises(AssertionError, match="no output carries a gradient"):
        measure_training(write_config(tmp_path, "one", cfg), {"height": 64, "width": 64, "text_len": 7}, mode="lora",
                         class_name=QWEN, lora={"rank": 4, "targets": ["to_add_out"]})


# --------------------------------------------------------------------------- live, randomized configs


def _qwen_config(rng) -> dict:
    heads, head_dim = rng.randint(1, 3), rng.choice([16, 32])
    return {
        "_class_name": QWEN, "num_attention_heads": heads, "attention_head_dim": head_dim,
        "num_layers": rng.randint(1, 3), "patch_size": 2, "in_channels": 4 * rng.choice([4, 16]),
        "out_channels": rng.choice([None, 4, 16]), "joint_attention_dim": rng.choice([24, 40]),
        "axes_dims_rope": [head_dim // 4, 3 * head_dim // 8, 3 * head_dim // 8], "guidance_embeds": False,
        "zero_cond_t": rng.random() < 0.5, "use_additional_t_cond": rng.random() < 0.5,
    }


def _z_image_config(rng) -> dict:
    heads, head_dim = rng.randint(1, 3), rng.choice([16, 32])
    return {
        "_class_name": ZIMAGE, "all_patch_size": [2], "all_f_patch_size": [1],
        "in_channels": rng.choice([4, 16]), "dim": heads * head_dim, "n_layers": rng.randint(1, 2),
        "n_refiner_layers": rng.randint(0, 2), "n_heads": heads, "n_kv_heads": heads, "qk_norm": rng.random() < 0.5,
        "cap_feat_dim": rng.choice([24, 40]), "axes_dims": [head_dim // 4, 3 * head_dim // 8, 3 * head_dim // 8],
        "axes_lens": [1024, 512, 512],
    }


QWEN_NAMES = ("to_q", "to_k", "to_v", "to_out.0", "add_q_proj", "add_k_proj", "add_v_proj", "to_add_out",
              "img_mlp.net.0.proj", "img_mlp.net.2", "txt_mlp.net.0.proj", "txt_mlp.net.2", "img_in", "txt_in",
              "proj_out")
Z_IMAGE_NAMES = ("to_q", "to_k", "to_v", "to_out.0", "attention.to_q", "feed_forward.w1", "feed_forward.w2",
                 "feed_forward.w3", "cap_embedder.1", "linear")


@pytest.mark.live
@pytest.mark.parametrize("class_name, pipeline, make, names, multiple", [
    (QWEN, "QwenImagePipeline", _qwen_config, QWEN_NAMES, 16),
    (ZIMAGE, "ZImagePipeline", _z_image_config, Z_IMAGE_NAMES, 16),
])
def test_random_training_runs_are_exact(rng, tmp_path, class_name, pipeline, make, names, multiple):
    """Random small configs, full fine-tuning (with or without gradient checkpointing) or LoRA on random targets,
    ranks and modes, against FlopCounterMode counting forward + backward now."""
    pytest.importorskip("peft")
    from live_support import SEED, random_size, write_config
    from measure_training import measure_training
    from test_live_training_lora import _check as _check_lora

    from flopcalc.flops.estimate import estimate_configs
    from flopcalc.training.backward import backward
    from flopcalc.engine.pipelines import Settings

    for i in range(4):
        cfg = make(rng)
        h, w, t = random_size(rng, multiple, 32, 192), random_size(rng, multiple, 32, 192), rng.randint(1, 70)
        folder = write_config(tmp_path, f"model{i}", cfg)
        settings = Settings(height=h, width=w, max_sequence_length=t)
        measured = {"height": h, "width": w, "text_len": t}
        if i % 2 == 1:  # LoRA: random targets, rank and mode (plain, checkpointing, fused attention)
            _check_lora(rng, folder, cfg, "transformer", pipeline, settings, measured, names)
            continue
        comp = estimate_configs({"_class_name": pipeline}, {"transformer": cfg}, settings,
                                convention="torch").component("transformer")
        checkpointing = rng.random() < 0.5
        where = f"seed {SEED}: {measured}, checkpointing {checkpointing}, {json.dumps(cfg)}"
        back = backward(comp.tree, graph_of(class_name), checkpointing=checkpointing)
        fx = measure_training(folder, measured, mode="checkpointing" if checkpointing else "full",
                              class_name=class_name)
        assert 2 * comp.macs_per_run == fx["forward"]["flops"], where
        assert 2 * back.macs == fx["backward"]["flops"], where
        assert comp.tree.total.params == fx["trainable_params"], where
