"""Rendering a :class:`~flopcalc.memory.MemoryEstimate`: a table for people, JSON and CSV for programs."""

from __future__ import annotations

import csv
import io
import json

from flopcalc.memory import MemoryEstimate

FORMATS = ("table", "json", "csv")


def render_memory(est: MemoryEstimate, fmt: str = "table") -> str:
    if fmt == "json":
        return json.dumps(est.to_dict(), indent=2) + "\n"
    if fmt == "csv":
        return _csv(est)
    if fmt == "table":
        return _table(est)
    raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")


def gib(n: int) -> str:
    return f"{n / 2**30:,.2f}"


def _table(est: MemoryEstimate) -> str:
    rows = [("component", "class", "dtype", "params", "kept fp32", "buffer bytes", "weights GiB")]
    for c in est.components:
        rows.append((c.component, c.class_name, c.dtype, f"{c.params:,}", f"{c.params_fp32:,}" if c.params_fp32 else "",
                     f"{c.buffer_bytes:,}" if c.buffer_bytes else "", gib(c.bytes)))
    rows.append(("total", "", "", f"{sum(c.params for c in est.components):,}", "", "", gib(est.weights_bytes)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [f"{est.model} · {est.pipeline} · weights in memory", ""]
    for i, r in enumerate(rows):
        if i == 1 or i == len(rows) - 1:
            lines.append("-" * (sum(widths) + 2 * (len(widths) - 1)))
        lines.append("  ".join(v.rjust(w) if j >= 3 else v.ljust(w) for j, (v, w) in enumerate(zip(r, widths))).rstrip())
    mode = {"none": "no offload (pipe.to('cuda')): every component resident",
            "model": "model CPU offload: one component at a time, the largest is " + ", ".join(est.resident_components)}
    lines += ["", f"resident at the peak: {gib(est.resident_bytes)} GiB ({mode[est.offload]})"]
    if est.gpu_key is not None:
        if est.fits:
            lines.append(f"{est.gpu_name} ({gib(est.gpu_memory_bytes)} GiB): the weights fit, headroom "
                         f"{gib(est.headroom_bytes)} GiB for activations, CUDA context and allocator")
        else:
            lines.append(f"{est.gpu_name} ({gib(est.gpu_memory_bytes)} GiB): the weights do NOT fit, short by "
                         f"{gib(-est.headroom_bytes)} GiB")
    lines.append("counted: parameters at the loaded dtype (modules the class keeps in float32 at float32) and "
                 "buffers, as from_pretrained(torch_dtype=...) loads them; activations are not counted.")
    return "\n".join(lines) + "\n"


def _csv(est: MemoryEstimate) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["component", "class_name", "dtype", "params", "params_kept_fp32", "param_bytes", "buffer_bytes",
                "bytes", "resident"])
    resident = set(est.resident_components)
    for c in est.components:
        w.writerow([c.component, c.class_name, c.dtype, c.params, c.params_fp32, c.param_bytes, c.buffer_bytes,
                    c.bytes, c.component in resident])
    w.writerow(["total", "", "", sum(c.params for c in est.components), "", "", "", est.weights_bytes, ""])
    return buf.getvalue()
