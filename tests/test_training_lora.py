"""LoRA training FLOPs (``flopcalc train --trainable lora:RANK``): exact against FlopCounterMode counting forward +
backward of the real module with peft adapters on the meta device.

The fixtures (modes ``lora`` / ``lora_checkpointing`` / ``lora_fused_attention``) are written by
``validation/build_training_fixtures.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flopcalc.flops.estimate import estimate
from flopcalc.training.backward import backward, graph_of, lora_supported
from flopcalc.training.factors import MATH_ATTENTION_BACKWARD
from flopcalc.cli.main import main
from flopcalc.engine.errors import FlopcalcError
from flopcalc.training.lora import MAX_RANK
from flopcalc.training.estimate import lora_training, train
from test_training import measured_component

FIXTURES = sorted(p for p in (Path(__file__).resolve().parent.parent / "validation" / "fixtures" / "training").glob(
    "*/*.json") if "-lora" in p.name)


def _load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def test_lora_fixtures_cover_default_targets_two_ranks_two_sizes_with_checkpointing_and_a_partial_set():
    seen: dict[tuple[str, str, str], set] = {}
    for path in FIXTURES:
        fx = _load(path)
        seen.setdefault((fx["case"], fx["mode"], fx["lora"]["name"]), set()).add(
            (fx["lora"]["rank"], fx["settings"]["height"], fx["settings"]["width"]))
    for case in ("flux-dev", "sd3-medium", "sd1.5", "sdxl-base", "cogvideox-2b"):
        for mode in ("lora", "lora_checkpointing"):
            runs = seen[(case, mode, "default")]
            assert len({(h, w) for _, h, w in runs}) >= 2
            assert case == "sdxl-base" or len({r for r, _, _ in runs}) >= 2
    for partial in [("flux-dev", "lora", "q-v"), ("flux-dev", "lora_checkpointing", "proj-mlp"),
                    ("sd3-medium", "lora", "add-qkv"), ("sd1.5", "lora", "v-ff"),
                    ("cogvideox-2b", "lora_checkpointing", "ff-in"), ("wan2.1-t2v-1.3b", "lora", "qkvo"),
                    ("wan2.1-t2v-1.3b", "lora_checkpointing", "qkvo"), ("pixart-alpha-1024", "lora", "qkvo"),
                    ("pixart-alpha-1024", "lora_checkpointing", "qkvo"), ("ltx-video", "lora", "qkvo"),
                    ("ltx-video", "lora_checkpointing", "qkvo")]:
        assert len({(h, w) for _, h, w in seen[partial]}) >= 2
    # the fused kernel's backward: with every attention's Q, K, V requiring grad, and with some attentions needing none
    # (the first blocks under ff-w2, SD1.5's cross-attention before to_v) or only some of their operands (q-v)
    fused = {(case, name) for case, mode, name in seen if mode == "lora_fused_attention"}
    assert {("flux-dev", "default"), ("flux-dev", "q-v"), ("sd1.5", "v-ff"), ("z-image-turbo", "ff-w2"),
            ("wan2.1-t2v-1.3b", "qkvo"), ("qwen-image", "text-stream")} <= fused


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_lora_step_is_exact_against_the_measured_forward_and_backward(path):
    fx = _load(path)
    lo = fx["lora"]
    comp = measured_component(fx)
    graph = graph_of(fx["built_class"])
    if lo["name"] == "default":
        assert list(graph.lora.default_targets) == lo["targets"]
    back, lora = lora_training(comp.tree, graph, lo["rank"], tuple(lo["targets"]),
                               fx["mode"] == "lora_checkpointing")
    assert 2 * (comp.macs_per_run + lora.adapter_forward) == fx["forward"]["flops"]
    fused = fx["mode"] == "lora_fused_attention"  # the fused kernel: all of dQ, dK, dV where any is required
    assert 2 * (back.fused_attention_macs() if fused else back.macs) == fx["backward"]["flops"]
    assert lora.trainable_params == fx["trainable_params"]
    assert lora.layers == lo["layers"]
    # a frozen bias-free linear reading a slice of a longer sequence (FLUX.2's to_out.0 / to_add_out after the joint
    # attention's split) runs as bmm (torch's matmul folds a non-contiguous 3-D input into mm only when the weight
    # requires grad): compare the attention's bmm where the forward's bmm is the attention alone
    attention = backward(comp.tree, graph).attention_grad // MATH_ATTENTION_BACKWARD
    if fx["mode"] == "lora" and fx["forward"]["by_op"].get("aten.bmm", 0) == 2 * attention:
        # the attention backward: the measured backward bmm (dQ/dK/dA/dV where required)
        assert 2 * back.attention_grad == fx["backward"]["by_op"].get("aten.bmm", 0)


def test_train_api_json_and_the_rules_of_thumb():
    est = train("flux-dev", height=512, width=512, trainable="lora:16", frozen_encoders="cached")
    full = train("flux-dev", height=512, width=512, frozen_encoders="cached")
    d = est.to_dict()["train"]
    assert d["trainable"] == "lora:16"
    assert d["lora"]["rank"] == 16 and d["lora"]["targets"] == list(graph_of("FluxTransformer2DModel").lora.default_targets)
    assert d["lora"]["trainable_params"] == est.trainable_params < est.params == full.params == full.trainable_params
    assert d["lora"]["layers"] == 19 * 12 + 38 * 3  # dual blocks: all 12 targets; single blocks: attn.to_q/k/v
    assert d["rules_of_thumb"]["3x_forward"] == 3 * est.trained_forward_flops
    assert est.trained_forward_flops == full.trained_forward_flops + 2 * est.lora.adapter_forward
    assert est.flops_per_sample < full.flops_per_sample  # no weight gradients of the frozen layers
    # the fused kernel computes dQ, dK and dV of every attention: 2.5 × its forward, not the math path's 2 ×, and not
    # only the operands that require grad (the first block's dK under to_q, to_v, measured in the fixtures)
    assert d["flops_per_sample_fused_attention"] == est.fused_attention_flops_per_sample == est.flops_per_sample + 2 * (
        est.backward.fused_attention_macs() - est.backward.macs) > est.flops_per_sample


def test_fewer_targets_need_fewer_gradients_and_checkpointing_recomputes_the_adapters():
    qv = train("flux-dev", height=512, width=512, trainable="lora:8", lora_targets=("to_q", "to_v"))
    every = train("flux-dev", height=512, width=512, trainable="lora:8")
    assert qv.lora.targets == ("to_q", "to_v") and qv.lora.layers == 2 * (19 + 38)
    assert qv.backward.attention_grad < every.backward.attention_grad  # the first block's dK is not computed
    ckpt = train("flux-dev", height=512, width=512, trainable="lora:8", gradient_checkpointing=True)
    assert ckpt.backward.recompute == ckpt.trained.forward_macs - (  # everything but the embedders and the head
        sum(ckpt_node.total.macs("torch") for ckpt_node in _outside_blocks("flux-dev")))


def _outside_blocks(model: str):
    tree = estimate(model, height=512, width=512, steps=1).component("transformer").tree
    return [c for c in tree.children if c.name not in ("transformer_blocks", "single_transformer_blocks")]


def test_cli_shows_lora_and_json(capsys):
    assert main(["train", "flux-dev", "--height", "512", "--width", "512", "--trainable", "lora:4",
                 "--lora-targets", "attn.to_q,attn.to_v", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["train"]["trainable"] == "lora:4" and out["train"]["lora"]["targets"] == ["attn.to_q", "attn.to_v"]
    assert main(["train", "flux-dev", "--trainable", "lora:16", "--gradient-checkpointing"]) == 0
    text = capsys.readouterr().out
    assert "LoRA rank 16 on 342 layers" in text and "trainable parameters of 11,901,408,320" in text
    assert "recompute" in text and "3 × forward" in text


@pytest.mark.parametrize("args, match", [
    (["--trainable", "lora:0"], "RANK must be an integer from 1"),
    (["--trainable", "lora:abc"], "RANK must be an integer"),
    (["--trainable", f"lora:{MAX_RANK + 1}"], f"from 1 to {MAX_RANK}"),
    (["--trainable", "lora"], "denoiser or lora:RANK"),
    (["--trainable", "lora:4", "--lora-targets", "to_nowhere"], "matches nothing"),
    (["--trainable", "lora:4", "--lora-targets", "norm1.linear"], "not modelled"),
    (["--trainable", "lora:4", "--lora-targets", "attn"], "not modelled"),
    (["--trainable", "lora:4", "--lora-targets", "transformer_blocks.3.attn.to_q"], "block index"),
    (["--trainable", "lora:4", "--lora-targets", "to_q;import os"], "expected a module name"),
    (["--lora-targets", "to_q"], "goes with --trainable lora:RANK"),
])
def test_bad_lora_input_is_a_one_line_error(capsys, args, match):
    assert main(["train", "flux-dev", "--height", "512", "--width", "512", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert match in err and "\n" not in err


def test_html_report_shows_a_lora_run_beside_full_fine_tuning():
    from flopcalc.training.html import REPORT_LORA_RANK
    from flopcalc.training.html import section as sections

    est = train("sd1.5", height=512, width=512, trainable=f"lora:{REPORT_LORA_RANK}")
    html = sections("sd1.5", height=512, width=512)
    assert f"LoRA rank {REPORT_LORA_RANK}" in html and f"{est.lora.trainable_params:,} trainable parameters" in html
    assert f"{est.flops_per_sample / 1e12:,.3f} TFLOPs/sample" in html
    assert "LoRA" not in sections("wan2.1-t2v-1.3b", height=480, width=832)  # no default targets to show


def test_unet_cross_attention_text_states_need_no_gradient():
    """Adapters on attn2.to_k read the 77 × 768 CLIP states: their weights train, lora_B's input gradient is
    computed, lora_A's (into the text states) is not."""
    est = train("sd1.5", height=512, width=512, trainable="lora:4", lora_targets=("attn2.to_k",))
    assert est.lora.layers == 16
    assert est.lora.adapter_input_grad == est.lora.adapter_forward - est.lora.layers * 77 * 768 * 4


def test_a_wrapped_module_before_the_first_adapter_is_not_recomputed():
    from flopcalc.engine.gradients import Checkpointed
    from flopcalc.training.lora import adapters, lora_backward

    tree = estimate("sd1.5", height=512, width=512, steps=1).component("unet").tree
    flow = graph_of("UNet2DConditionModel").lora
    chosen = adapters(tree, flow, flow.default_targets)
    first, second = (lora_backward(tree, flow, chosen, 4, (Checkpointed(f"down_blocks.0.resnets.{i}", ("conv2",)),))
                     for i in (0, 1))
    assert first.recompute == 0  # conv_in and resnets.0 run before attentions.0's adapters
    resnet = tree.find("down_blocks.0.resnets.1")
    assert second.recompute == resnet.per_item.macs("torch") - resnet.find("conv2").per_item.macs("torch")


@pytest.mark.parametrize("kwargs, match", [
    (dict(trainable=16), "denoiser or lora:RANK"),
    (dict(trainable="lora:8", lora_targets=()), "at least one layer"),
    (dict(trainable="lora:8", lora_targets=("to_q", 3)), "expected a module name"),
    (dict(trainable="lora:8", lora_targets=("conv1",)), "matches nothing"),
])
def test_bad_api_input_is_a_flopcalc_error(kwargs, match):
    with pytest.raises(FlopcalcError, match=match):
        train("flux-dev", height=512, width=512, **kwargs)


def test_families_without_a_declared_flow_refuse_lora_naming_the_supported_ones():
    """Every denoiser whose full fine-tuning is validated declares its LoRA dataflow; a graph without one is refused."""
    from flopcalc.engine.gradients import GradientGraph

    assert {"FluxTransformer2DModel", "UNet2DConditionModel", "SD3Transformer2DModel", "CogVideoXTransformer3DModel",
            "WanTransformer3DModel", "PixArtTransformer2DModel", "LTXVideoTransformer3DModel"} <= set(lora_supported())
    tree = estimate("flux-dev", height=512, width=512, steps=1).component("transformer").tree
    with pytest.raises(FlopcalcError, match="LoRA training FLOPs are not modelled for SomeDiT; "
                                            "modelled denoisers: .*FluxTransformer2DModel"):
        lora_training(tree, GradientGraph("SomeDiT", (), (), "nowhere"), 16, None, False)
    with pytest.raises(FlopcalcError, match="training FLOPs are not validated for SanaTransformer2DModel"):
        train("sana-600m-512", trainable="lora:16")


def test_a_family_without_a_diffusers_lora_script_needs_named_targets():
    with pytest.raises(FlopcalcError, match="name them with --lora-targets"):
        train("wan2.1-t2v-1.3b", trainable="lora:16")
    assert train("wan2.1-t2v-1.3b", trainable="lora:16", lora_targets="to_q,to_v").lora.layers == 2 * 2 * 30
