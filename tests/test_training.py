"""Training FLOPs: exact against FlopCounterMode counting forward + backward on the meta device.

The fixtures in ``validation/fixtures/training`` are written by ``validation/build_training_fixtures.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flopcalc.flops.estimate import estimate
from flopcalc.training.backward import backward, graph_of
from flopcalc.training.factors import FUSED_ATTENTION_BACKWARD
from flopcalc.cli.main import main
from flopcalc.engine.errors import FlopcalcError
from flopcalc.training.estimate import train

REPO = Path(__file__).resolve().parent.parent
#: full fine-tuning's fixtures (the LoRA ones: tests/test_training_lora.py)
FIXTURES = sorted(p for p in (Path(__file__).resolve().parent.parent / "validation" / "fixtures" / "training").glob(
    "*/*.json") if "-lora" not in p.name)


def _load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def test_fixtures_cover_the_families_at_two_sizes_each_with_and_without_checkpointing():
    """And the fused attention kernel for the DiT families."""
    seen: dict[tuple[str, str], set] = {}
    for path in FIXTURES:
        fx = _load(path)
        seen.setdefault((fx["case"], fx["mode"]), set()).add((fx["settings"]["height"], fx["settings"]["width"]))
    cases = {case for case, _ in seen}
    assert {"flux-dev", "sd3-medium", "sd1.5", "sdxl-base", "wan2.1-t2v-1.3b", "pixart-alpha-1024", "ltx-video",
            "cogvideox-2b", "dit-xl-2-512-transformer"} <= cases
    assert all(len(sizes) >= 2 for sizes in seen.values())
    assert {case for case, mode in seen if mode == "fused_attention"} >= {"flux-dev", "sd3-medium", "wan2.1-t2v-1.3b",
                                                                          "pixart-alpha-1024", "cogvideox-2b",
                                                                          "qwen-image", "z-image-turbo"}


def measured_component(fx: dict):
    """The report's component for a training fixture, at its size, frames and text length."""
    s = fx["settings"]
    bare = fx["case"] == Path(fx["config_dir"]).name  # a bare config (DiT), not a card: its folder, one component
    report = estimate(str(REPO / fx["config_dir"]) if bare else fx["case"], height=s["height"], width=s["width"],
                      steps=1, num_frames=s.get("num_frames"), resolution_binning=False,
                      max_sequence_length=s["text_len"] if fx["case"] in (
                          "flux-dev", "wan2.1-t2v-1.3b", "ltx-video", "cogvideox-2b") else None)
    comp = report.components[0] if bare else report.component(fx["component"])
    assert comp.shape["text_len"] == s.get("text_len", 0)  # no text: 0 tokens
    return comp


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_backward_is_exact_against_the_measured_forward_and_backward(path):
    fx = _load(path)
    comp = measured_component(fx)
    assert 2 * comp.macs_per_run == fx["forward"]["flops"]
    graph = graph_of(fx["built_class"])
    checkpointing = fx["mode"] == "checkpointing"
    back = backward(comp.tree, graph, checkpointing=checkpointing)
    if fx["mode"] == "fused_attention":  # the fused kernel: its backward counted 2.5 × its forward
        assert 2 * back.fused_attention_macs() == fx["backward"]["flops"]
        assert 2 * back.attention_grad * FUSED_ATTENTION_BACKWARD / 2 == fx["backward"]["by_op"][
            "aten._scaled_dot_product_efficient_attention_backward"]
        return
    assert 2 * back.macs == fx["backward"]["flops"]
    assert 2 * (back.macs - back.recompute + back.no_input_grad + back.unused) == 2 * fx["forward"]["flops"]
    # per op: the attention backward is the measured backward bmm
    assert 2 * back.attention_grad == fx["backward"]["by_op"].get("aten.bmm", 0) - (
        2 * _attention_recompute(comp.tree, graph) if checkpointing else 0)


def _attention_recompute(tree, graph) -> int:
    """Attention MACs inside the checkpointed modules (their bmm run again in the backward)."""
    from flopcalc.engine.gradients import items_matched as _items_matched

    wrapped = [tuple(c.pattern.split(".")) for c in graph.checkpointed]
    total = 0

    def visit(node, parts, k):
        nonlocal total
        items = max(_items_matched(parts, node, p) for p in wrapped)
        if items:
            total += k * items * node.per_item.attention
            return
        for child in node.children:
            visit(child, parts + (child.name,), k * node.count)

    visit(tree, (), 1)
    return total


def test_flux_ratio_is_not_three():
    fx = _load(next(p for p in FIXTURES if p.name == "transformer-full-512x512.json" and p.parent.name == "flux-dev"))
    est = train("flux-dev", height=512, width=512)
    assert est.trained.flops == fx["total_flops"]
    assert est.trained.flops / est.trained_forward_flops == pytest.approx(2.9994, abs=1e-4)


def test_sample_adds_frozen_forwards_unless_cached_and_step_scales_with_batch_and_gpus():
    online = train("sd3-medium", height=512, width=512, batch_size=4, num_gpus=8)
    cached = train("sd3-medium", height=512, width=512, frozen_encoders="cached")
    report = estimate("sd3-medium", height=512, width=512, steps=1, strength=1.0)
    frozen = sum(c.macs_per_run for c in report.components if c.role in ("text_encoder", "vae_encoder"))
    assert online.flops_per_sample == cached.flops_per_sample + 2 * frozen
    assert cached.flops_per_sample == cached.trained.flops
    assert online.flops_per_step == 32 * online.flops_per_sample
    assert {c.component for c in online.components} == {"text_encoder", "text_encoder_2", "text_encoder_3",
                                                        "transformer", "vae"}


def test_mfu_against_the_gpu_tables_dense_peak():
    from flopcalc.hardware.gpus import gpu

    est = train("flux-dev", height=512, width=512, batch_size=2, num_gpus=4, step_time=1.5, gpu="h100-sxm")
    assert est.mfu == est.flops_per_step / (1.5 * 4 * gpu("h100-sxm").peak_flops["bf16"]) == est.hfu
    assert est.to_dict()["mfu"] == est.mfu
    assert train("flux-dev", height=512, width=512).mfu is None


def test_mfu_counts_the_model_not_the_recompute_and_hfu_does():
    """MFU as PaLM defines it: the model's FLOPs, which gradient checkpointing does not change; HFU counts the
    forward checkpointing runs again. The same measured step reads the same MFU with and without it."""
    plain = train("flux-dev", height=512, width=512, step_time=1.0, gpu="h100-sxm")
    ckpt = train("flux-dev", height=512, width=512, step_time=1.0, gpu="h100-sxm", gradient_checkpointing=True)
    assert ckpt.backward.recompute > 0
    assert ckpt.model_flops_per_step == plain.model_flops_per_step == plain.flops_per_step
    assert ckpt.mfu == plain.mfu and ckpt.hfu == ckpt.flops_per_step / ckpt.peak_flops > ckpt.mfu
    assert ckpt.to_dict()["hfu"] == ckpt.hfu


def test_a_step_faster_than_the_dense_peak_is_refused():
    with pytest.raises(FlopcalcError, match="faster than physically possible"):
        train("flux-dev", step_time=0.01, gpu="h100-sxm")
    train("flux-dev", step_time=0.25, gpu="h100-sxm")  # 93% of the peak: allowed


def test_fused_attention_variant_counts_the_attention_backward_at_two_and_a_half():
    est = train("flux-dev", height=512, width=512, frozen_encoders="cached")
    attention_forward = est.backward.attention_grad // 2
    assert est.fused_attention_flops_per_sample - est.flops_per_sample == int(
        2 * attention_forward * (FUSED_ATTENTION_BACKWARD - 2))


@pytest.mark.parametrize("kwargs, match", [
    (dict(step_time=1.0), "both --step-time and --gpu"),
    (dict(step_time=-1.0, gpu="h100-sxm"), "positive"),
    (dict(step_time=1.0, gpu="not-a-gpu"), "unknown GPU"),
    (dict(trainable="qlora:16"), "denoiser or lora:RANK"),
    (dict(frozen_encoders="sometimes"), "online, cached"),
    (dict(num_gpus=0), "--num-gpus must be a positive integer"),
    (dict(num_gpus=10**11, step_time=1.0, gpu="h100-sxm"), "budget of 1048576 GPUs"),
    (dict(batch_size=10**8), "--batch-size 100000000 is beyond"),
    (dict(batch_size=True), "--batch-size must be a positive integer"),
])
def test_bad_options_are_one_line_errors(kwargs, match):
    with pytest.raises(FlopcalcError, match=match):
        train("flux-dev", height=512, width=512, **kwargs)


def test_unvalidated_denoiser_is_refused():
    with pytest.raises(FlopcalcError, match="not validated for"):
        train("sana-600m-512")


def test_cli_json_and_errors(capsys):
    assert main(["train", "flux-dev", "--height", "512", "--width", "512", "--step-time", "1", "--gpu", "h100-sxm",
                 "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    est = train("flux-dev", height=512, width=512, step_time=1.0, gpu="h100-sxm")
    assert out["train"]["flops_per_sample"] == est.flops_per_sample
    assert out["mfu"] == pytest.approx(est.mfu)
    assert main(["train", "sd1.5", "--gradient-checkpointing", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["train"]["backward"]["recompute_flops"] > 0
    assert main(["train", "flux-dev", "--format", "csv", "--frozen-encoders", "cached"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("total,")
