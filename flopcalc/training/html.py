"""The HTML page's training section of one model: FLOPs per training sample (forward + backward of the
denoiser, frozen encoders online), with what it counts."""

from __future__ import annotations

import html
from typing import Any

from flopcalc.engine.errors import FlopcalcError
from flopcalc.render.html_tables import html_table
from flopcalc.training.backward import graph_of
from flopcalc.training.estimate import train


def section(model: str, **settings: Any) -> str:
    """The ``<h3>`` training section of ``model`` at ``settings`` (its size): FLOPs per sample of full fine-tuning
    and, where the denoiser's LoRA dataflow is declared, of a LoRA run; a note where the backward is not
    validated."""
    try:
        est = train(model, **settings)
    except FlopcalcError as exc:
        return f'<h3>Training</h3><p class="note">{html.escape(str(exc))}</p>'
    rows = [("component", "treatment", "forward TFLOPs", "backward TFLOPs", "TFLOPs/sample")]
    for c in est.components:
        rows.append((c.component + (f".{c.call}" if c.call != "forward" else ""), c.treatment,
                     f"{2 * c.forward_macs / 1e12:,.3f}", f"{2 * c.backward_macs / 1e12:,.3f}", f"{c.flops / 1e12:,.3f}"))
    rows.append(("total", "", "", "", f"{est.flops_per_sample / 1e12:,.3f}"))
    fwd = est.trained_forward_flops
    return ("<h3>Training: FLOPs per sample (full fine-tuning of the denoiser)</h3>" + html_table(rows, numeric=(2, 3, 4))
            + f'<p class="note">{html.escape(est.trained.component)} (forward + backward) / forward = '
              f"{est.trained.flops / fwd:.5f} (rules of thumb: 3 × and 4 × forward); with a fused SDPA kernel "
              f"(attention backward 2.5 × forward): {est.fused_attention_flops_per_sample / 1e12:,.3f} TFLOPs/sample. "
              "Backward derived module by module (weight and input gradients, none for layers fed by model inputs, "
              "attention 2 ×), exact against FlopCounterMode on the real module.</p>" + _lora(model, settings, est)
            + memory_table(est))


def memory_table(est: Any) -> str:
    """The step's memory on one GPU (:mod:`flopcalc.training.memory`): AdamW, fp32 master weights, encoders online."""
    m = est.memory
    if m is None:
        return ""
    gib = 2 ** 30

    def cell(value: int | None) -> str:
        return "not measured" if value is None else f"{value / gib:,.2f}"

    rows = [("category (one GPU, AdamW, fp32 master weights)", "GiB"), ("weights", cell(m.weights_bytes)),
            ("gradients", cell(m.gradients_bytes)), ("optimizer states", cell(m.optimizer_bytes)),
            ("activations saved for backward", cell(m.activations_bytes)),
            (f"peak allocated ({m.phase})", cell(m.peak_allocated_bytes)),
            ("peak reserved (the allocator's segments)", cell(m.reserve.reserved_peak_bytes))]
    note = "" if m.known else " Activations of this denoiser are not measured: the peaks are lower bounds."
    return ("<h3>Training: memory of a step</h3>" + html_table(rows, numeric=(1,))
            + '<p class="note">Weights, gradients and optimizer states exact per tensor; activations from the measured '
              "laws (<code>flopcalc train --gpu G --fit</code> for sharding, 8-bit optimizers, checkpointing)."
            + html.escape(note) + "</p>")


#: The rank the report's LoRA line shows (``flopcalc train --trainable lora:RANK`` takes any).
REPORT_LORA_RANK = 16


def _lora(model: str, settings: dict[str, Any], full: Any) -> str:
    """A LoRA run beside full fine-tuning, where the denoiser's LoRA dataflow is declared."""
    flow = graph_of(full.trained.class_name).lora
    if flow is None or not flow.default_targets:
        return ""
    try:
        est = train(model, trainable=f"lora:{REPORT_LORA_RANK}", **settings)
    except FlopcalcError as exc:  # a config of the class the LoRA dataflow does not describe
        return '<p class="note">LoRA: ' + html.escape(str(exc)) + "</p>"
    lo = est.lora
    return (f'<p class="note">LoRA rank {lo.rank} on the diffusers training script\'s targets '
            f"({html.escape(', '.join(lo.targets))}: {lo.layers} layers, {lo.trainable_params:,} trainable parameters "
            f"of {est.params:,}): {est.flops_per_sample / 1e12:,.3f} TFLOPs/sample, of which "
            f"{html.escape(est.trained.component)} forward {2 * est.trained.forward_macs / 1e12:,.3f} and backward "
            f"{2 * est.trained.backward_macs / 1e12:,.3f} (no weight gradients of the frozen layers, no input gradients "
            "before the first adapter or on conditioning paths; <code>flopcalc train --trainable lora:RANK</code>); "
            f"with a fused SDPA kernel {est.fused_attention_flops_per_sample / 1e12:,.3f} TFLOPs/sample.</p>")
