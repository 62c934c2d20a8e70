"""The HTML report's memory and training sections for one model: weights per component (bytes, exact),
activation peaks (estimated) and FLOPs per training sample (forward + backward of the denoiser, frozen encoders online), each with what
it counts. A model whose denoiser's backward is not validated gets a note instead of the training table."""

from __future__ import annotations

import html
from typing import Any

from flopcalc.errors import FlopcalcError


def sections(model: str, **settings: Any) -> str:
    """``<h3>`` sections for ``model`` at the report's ``settings`` (height, width, num_frames,
    max_sequence_length are used; others do not change weights or a training sample)."""
    keep = {k: settings[k] for k in ("height", "width", "num_frames", "max_sequence_length") if settings.get(k)}
    return _memory(model, keep) + _training(model, keep)


def _memory(model: str, settings: dict[str, Any]) -> str:
    from flopcalc.html_report import _table
    from flopcalc.memory_estimate import memory
    from flopcalc.memory_report import gib

    est = memory(model, **settings)
    rows = [("component", "class", "dtype", "params", "kept fp32", "buffer bytes", "weights GiB")]
    for c in est.components:
        rows.append((c.component if c.runs else f"{c.component} (not run)", c.class_name, c.dtype, f"{c.params:,}", f"{c.params_fp32:,}" if c.params_fp32 else "",
                     f"{c.buffer_bytes:,}" if c.buffer_bytes else "", gib(c.bytes)))
    rows.append(("total", "", "", "", "", "", gib(est.weights_bytes)))
    largest = max(est.components, key=lambda c: c.bytes)
    module = max(est.components, key=lambda c: c.largest_module_bytes)
    acts = ""
    if est.activations:
        arows = [("call", "latent positions", "fused attention GiB", "math attention GiB", "± LOO")]
        for a in est.activations:
            err = max(p.loo_max_rel_error for p in (a.fused, a.math) if p is not None)
            arows.append((f"{a.component}.{a.call}", f"{a.fused.n:,}", gib(a.bytes("fused")),
                          gib(a.bytes("math")) if a.math else "-", f"{100 * err:.1f}%"))
        acts = ("<p>Activation peaks (estimate: fitted on peaks measured on the real modules, batch 1, bf16):</p>"
                + _table(arows, numeric=(1, 2, 3, 4)))
    notes = "".join(f'<p class="note">note: {html.escape(n)}</p>' for n in est.notes)
    return ("<h3>Memory: weights (bf16) and activation peaks</h3>" + _table(rows, numeric=(3, 4, 5, 6)) + acts
            + f'<p class="note">Peak without offload: {"at least " if est.uncounted else ""}{gib(est.peak_bytes)} GiB '
              f'(weights {gib(est.weights_bytes)} '
              f"GiB + the largest activation peak, fused attention); with model CPU offload the largest component, "
              f"{html.escape(largest.component)}, holds {gib(largest.bytes)} GiB of weights; with sequential CPU "
              f"offload the buffers ({gib(est.buffer_bytes)} GiB) and one module at a time, the largest in "
              f"{html.escape(module.component)} ({gib(module.largest_module_bytes)} GiB). Weights exact "
              "(parameters at the loaded dtype, float32-kept modules, buffers); activations estimated.</p>" + notes)


def _training(model: str, settings: dict[str, Any]) -> str:
    from flopcalc.html_report import _table
    from flopcalc.training import train

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
    return ("<h3>Training: FLOPs per sample (full fine-tuning of the denoiser)</h3>" + _table(rows, numeric=(2, 3, 4))
            + f'<p class="note">{html.escape(est.trained.component)} (forward + backward) / forward = '
              f"{est.trained.flops / fwd:.5f} (rules of thumb: 3 × and 4 × forward); with a fused SDPA kernel "
              f"(attention backward 2.5 × forward): {est.fused_attention_flops_per_sample / 1e12:,.3f} TFLOPs/sample. "
              "Backward derived module by module (weight and input gradients, none for layers fed by model inputs, "
              "attention 2 ×), exact against FlopCounterMode on the real module.</p>" + _lora(model, settings, est))


#: The rank the report's LoRA line shows (``flopcalc train --trainable lora:RANK`` takes any).
REPORT_LORA_RANK = 16


def _lora(model: str, settings: dict[str, Any], full: Any) -> str:
    """A LoRA run beside full fine-tuning, where the denoiser's LoRA dataflow is declared."""
    from flopcalc.backprop import graph_of
    from flopcalc.training import train

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
