"""Rendering a :class:`~flopcalc.gpu_memory.estimate.MemoryEstimate`: a table for people, JSON and CSV for programs."""

from __future__ import annotations

import csv
import io

from flopcalc.gpu_memory.estimate import MemoryEstimate
from flopcalc.gpu_memory.quantized import FORMATS
from flopcalc.render.text_tables import columns, render_as, ruled_table


def render_memory(est: MemoryEstimate, fmt: str = "table") -> str:
    return render_as(est, fmt, _table, _csv)


def gib(n: int) -> str:
    return f"{n / 2**30:,.2f}"


def _table(est: MemoryEstimate) -> str:
    rows = [("component", "class", "dtype", "params", "kept fp32", "quantized", "buffer bytes", "weights GiB")]
    for c in est.components:
        rows.append((c.component if c.runs else f"{c.component} (not run)", c.class_name, c.dtype, f"{c.params:,}", f"{c.params_fp32:,}" if c.params_fp32 else "",
                     f"{c.quantized_params:,}" if c.quantized_params else "",
                     f"{c.buffer_bytes:,}" if c.buffer_bytes else "", gib(c.bytes)))
    rows.append(("total", "", "", f"{sum(c.params for c in est.components):,}", "", "", "", gib(est.weights_bytes)))
    lines = [f"{est.model} · {est.pipeline} · weights in memory", "", *ruled_table(rows, 3)]
    if est.activations:
        lines += ["", f"activation peaks (estimate, per forward of {est.settings['batch_size']} sample(s); "
                      "fitted on measured peaks, ± the fit's leave-one-out error):"]
        arows = [("call", "latent positions", "fused attention GiB", "math attention GiB", "± LOO")]
        for a in est.activations:
            err = max(p.loo_max_rel_error for p in (a.fused, a.math) if p is not None)
            arows.append((f"{a.component}.{a.call}", f"{a.fused.n:,}", gib(a.bytes("fused")),
                          gib(a.bytes("math")) if a.math else "-", f"{100 * err:.1f}%"))
        lines += columns(arows, right=(1, 2, 3, 4))
    held = ", ".join(est.resident_components)
    largest = max(est.components, key=lambda c: c.largest_module_bytes, default=None)
    streams = " with CUDA streams (the next group prefetched)" if est.stream else ""
    mode = {"none": "no offload (pipe.to('cuda')): every component resident" + (
                f", less the denoiser's last {est.block_swap} blocks swapped in from the host" if est.block_swap else ""),
            "model": "model CPU offload: one component at a time, the largest is " + held,
            "group-block": f"block-level group offload{streams}, {est.blocks_per_group} block(s) per group; the "
                           f"largest is in {held}",
            "group-leaf": f"leaf-level group offload{streams}; the largest leaf is in {held}",
            "sequential": "sequential CPU offload: every buffer, plus one module at a time; the largest is in "
                          f"{held}, {largest.largest_module_params:,} parameters" if largest else ""}
    # a listed component without its config.json is not weighed: every total is then a lower bound
    least = "at least " if est.uncounted else ""
    unweighed = f"; not weighed (no config.json): {', '.join(est.uncounted)}" if est.uncounted else ""
    lines += ["", f"weights resident: {least}{gib(est.resident_bytes)} GiB ({mode[est.offload]}{unweighed})",
              f"peak of live tensors (peak_allocated_bytes), {est.attention} attention: "
              f"{least}{gib(est.peak_allocated_bytes)} GiB",
              _reserve_line(est, least)]
    if est.unestimated:
        lines.append(f"activations not estimated (not in the peak): {', '.join(est.unestimated)}")
    if est.host_bytes or est.transfer_bytes:
        lines.append(f"host memory for the offloaded weights: {gib(est.host_bytes)} GiB; weights moved to the GPU "
                     f"per generation: {gib(est.transfer_bytes)} GiB")
    if est.gpu_key is not None:
        if est.fits:
            lines.append(f"{est.gpu_name} ({gib(est.gpu_memory_bytes)} GiB): "
                         f"{'fits without ' + ', '.join(est.uncounted) if est.uncounted else 'fits'}, "
                         f"headroom {gib(est.headroom_bytes)} GiB (by peak_bytes)")
        elif est.fits is None:
            lines.append(f"{est.gpu_name} ({gib(est.gpu_memory_bytes)} GiB): {est.verdict} (by peak_bytes)")
        else:
            lines.append(f"{est.gpu_name} ({gib(est.gpu_memory_bytes)} GiB): does NOT fit, short by "
                         f"{gib(-est.headroom_bytes)} GiB by peak_bytes (`flopcalc memory ... --fit` lists settings that fit)")
    if est.gpu_key is not None and est.vae_tile is not None:
        lines.append(est.vae_tile.text)
    lines.append("counted: parameters at the loaded dtype (modules the class keeps in float32 at float32) and "
                 "buffers, exact, as from_pretrained(torch_dtype=...) loads them; activation peaks estimated "
                 "(method: `flopcalc.gpu_memory.activations`).")
    for fmt in sorted({c.dtype for c in est.components} & set(FORMATS)):
        lines.append(f"{fmt}: the nn.Linear weights the quantizer converts as {FORMATS[fmt].layout} "
                     f"({FORMATS[fmt].source}); the rest in bf16.")
    for note in est.notes:
        lines.append(f"note: {note}")
    return "\n".join(lines) + "\n"


def _reserve_line(est: MemoryEstimate, least: str) -> str:
    r = est.reserve
    parts = f"allocator +{gib(r.allocator_bytes)}, cuBLAS workspaces +{gib(r.workspace_bytes)}"
    if est.gpu_key is not None:
        parts += f", CUDA context +{gib(r.context_bytes)}"
    low, high = r.peak_range
    return (f"peak reserved + CUDA context (peak_bytes, what an out-of-memory error is decided by): {least}"
            f"{gib(r.peak_bytes)} GiB ({gib(low)}–{gib(high)}) at {est.peak_at} ({parts})"
            + (f"; {r.note}" if r.note else ""))


def _csv(est: MemoryEstimate) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["component", "class_name", "dtype", "params", "params_kept_fp32", "quantized_params", "param_bytes",
                "buffer_bytes", "bytes", "largest_module_bytes", "resident", "peak_allocated_bytes", "peak_bytes"])
    resident = set(est.resident_components)
    for c in est.components:
        w.writerow([c.component, c.class_name, c.dtype, c.params, c.params_fp32, c.quantized_params, c.param_bytes,
                    c.buffer_bytes, c.bytes, c.largest_module_bytes, c.component in resident, "", ""])
    w.writerow(["total", "", "", sum(c.params for c in est.components), "", "", "", "", est.weights_bytes, "", "",
                est.peak_allocated_bytes, est.peak_bytes])
    return buf.getvalue()
