"""The HTML page's memory section of one model: weights per component (bytes, exact) and activation peaks
(estimated), each with what it counts."""

from __future__ import annotations

import html
from typing import Any

from flopcalc.gpu_memory.estimate import memory
from flopcalc.gpu_memory.report import gib
from flopcalc.render.html_tables import html_table


def section(model: str, **settings: Any) -> str:
    """The ``<h3>`` memory section of ``model`` at ``settings`` (its size: height, width, num_frames,
    max_sequence_length)."""
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
                + html_table(arows, numeric=(1, 2, 3, 4)))
    notes = "".join(f'<p class="note">note: {html.escape(n)}</p>' for n in est.notes)
    return ("<h3>Memory: weights (bf16) and activation peaks</h3>" + html_table(rows, numeric=(3, 4, 5, 6)) + acts
            + f'<p class="note">Peak without offload: {"at least " if est.uncounted else ""}'
              f'{gib(est.peak_allocated_bytes)} GiB of live tensors (weights {gib(est.weights_bytes)} '
              f"GiB + the largest activation peak, fused attention), {gib(est.peak_bytes)} GiB reserved by PyTorch's "
              f"caching allocator at {html.escape(est.peak_at)} (no GPU named: without the CUDA context); with model CPU offload the largest component, "
              f"{html.escape(largest.component)}, holds {gib(largest.bytes)} GiB of weights; with sequential CPU "
              f"offload the buffers ({gib(est.buffer_bytes)} GiB) and one module at a time, the largest in "
              f"{html.escape(module.component)} ({gib(module.largest_module_bytes)} GiB). Weights exact "
              "(parameters at the loaded dtype, float32-kept modules, buffers); activations estimated.</p>" + notes)
