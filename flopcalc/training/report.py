"""Rendering a :class:`~flopcalc.training.estimate.TrainingEstimate`: a table for people, JSON and CSV for programs."""

from __future__ import annotations

import csv
import io
from flopcalc.render.text_tables import FORMATS, render_as, ruled_table  # noqa: F401  (FORMATS: what --format takes)
from flopcalc.training.estimate import TrainingEstimate
from flopcalc.training.memory_report import fit_lines, memory_lines, run_lines

def render_training(est: TrainingEstimate, fmt: str = "table") -> str:
    return render_as(est, fmt, _table, _csv)


def _t(flops: int | float) -> str:
    return f"{flops / 1e12:,.3f}"


def _table(est: TrainingEstimate) -> str:
    s = est.settings
    size = f"{s['height']}×{s['width']}" + (f" × {s['num_frames']} frames" if s.get("num_frames") else "")
    lines = [
        f"{est.model} · {est.pipeline} · training ("
        + (f"{est.trainable} trained in full" if est.lora is None else f"{est.trained.component} frozen, LoRA rank "
           f"{est.lora.rank} adapters trained")
        + (", gradient checkpointing" if est.gradient_checkpointing else "") + ")",
        f"{size} · text {s.get('text_len')} tokens · frozen encoders {est.frozen_encoders} · "
        f"batch {est.batch_size} per GPU × {est.num_gpus} GPU(s)",
        "",
    ]
    rows = [("component", "class", "treatment", "fwd TFLOPs", "bwd TFLOPs", "TFLOPs/sample")]
    for c in est.components:
        cls = c.class_name + (f".{c.call}" if c.call != "forward" else "")
        rows.append((c.component, cls, c.treatment, _t(2 * c.forward_macs), _t(2 * c.backward_macs), _t(c.flops)))
    rows.append(("total", "", "", "", "", _t(est.flops_per_sample)))
    lines += ruled_table(rows, 3)
    fwd = est.trained_forward_flops
    lines += ["", f"per step: {_t(est.flops_per_step)} TFLOPs ({est.batch_size} sample(s) × {est.num_gpus} GPU(s))"
              if est.sp_degree == 1 else f"per step: {_t(est.flops_per_step)} TFLOPs ({est.batch_size} sample(s) × "
              f"{est.num_gpus // est.sp_degree} data-parallel group(s) of {est.sp_degree} GPUs)"]
    lines += _backward_lines(est) if est.lora is None else _lora_lines(est)
    lines.append(f"{est.trained.component} (forward + backward) / forward = {est.trained.flops / fwd:.5f}; "
                 f"rules of thumb: 3 × forward = {_t(3 * fwd)}, 4 × forward = {_t(4 * fwd)} TFLOPs")
    lines.append(f"with a fused SDPA kernel (attention backward 2.5 × forward, as torch counts it"
                 f"{'' if est.lora is None else ', wherever Q, K or V requires grad'}): "
                 f"{_t(est.fused_attention_flops_per_sample)} TFLOPs/sample")
    if est.mfu is not None:
        lines.append(f"MFU: {100 * est.mfu:.1f}% ({_t(est.model_flops_per_step)} model TFLOPs in {est.step_time:g} s on "
                     f"{est.num_gpus} × {est.gpu_name}, dense {est.precision} peak {est.peak_flops / 1e12:g} TFLOP/s)")
        if est.backward.recompute:
            lines.append(f"HFU: {100 * est.hfu:.1f}% (with the {_t(est.flops_per_step - est.model_flops_per_step)} "
                         "TFLOPs gradient checkpointing runs again)")
    lines.append("counted (torch convention): FLOPs = 2 × multiply-accumulates of matmuls, convolutions and attention, "
                 "exactly as FlopCounterMode counts forward + backward on the real module.")
    for note in est.notes:
        lines.append(f"note: {note}")
    if est.memory is not None:
        lines += memory_lines(est)
    if est.run is not None:
        lines += run_lines(est)
    if est.fit is not None:
        lines += fit_lines(est)
    return "\n".join(lines) + "\n"


def _backward_lines(est: TrainingEstimate) -> list[str]:
    b = est.backward
    return [f"{est.trained.component} backward = weight grads {_t(2 * b.weight_grad)} + input grads "
            f"{_t(2 * b.input_grad)} + attention {_t(2 * b.attention_grad)} (2 × its forward bmm)"
            + (f" + recompute {_t(2 * b.recompute)}" if b.recompute else "")
            + f" TFLOPs; no input gradient for layers fed by model inputs ({_t(2 * b.no_input_grad)} TFLOPs skipped)"]


def _lora_lines(est: TrainingEstimate) -> list[str]:
    b, lo = est.backward, est.lora
    assert lo is not None
    return [
        f"LoRA rank {lo.rank} on {lo.layers} layers ({', '.join(lo.targets)}): {lo.trainable_params:,} trainable "
        f"parameters of {est.params:,} ({100 * lo.trainable_params / est.params:.3f}%); the adapters' forward "
        f"{_t(2 * lo.adapter_forward)} TFLOPs",
        f"{est.trained.component} backward = adapter weight grads {_t(2 * b.weight_grad)} + input grads "
        f"{_t(2 * b.input_grad)} (frozen layers {_t(2 * lo.base_input_grad)}, adapters {_t(2 * lo.adapter_input_grad)})"
        f" + attention {_t(2 * b.attention_grad)} (dQ, dK, dV only where they require grad)"
        + (f" + recompute {_t(2 * b.recompute)} (adapters included)" if b.recompute else "")
        + f" TFLOPs; no weight gradient for frozen layers, no input gradient before the first adapter or on "
          f"conditioning paths ({_t(2 * b.no_input_grad)} TFLOPs skipped)",
    ]


def _csv(est: TrainingEstimate) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["component", "class_name", "call", "role", "treatment", "forward_flops", "backward_flops", "flops"])
    for c in est.components:
        w.writerow([c.component, c.class_name, c.call, c.role, c.treatment, 2 * c.forward_macs, 2 * c.backward_macs,
                    c.flops])
    w.writerow(["total", "", "", "", "", "", "", est.flops_per_sample])
    return buf.getvalue()
